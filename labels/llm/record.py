"""Every call on record, cached by request hash, and answers as annotations.

Writes, each exactly one `BEGIN IMMEDIATE` transaction on the caller's own
store (one store per thread):
- `start_run`: the machine rater (created once) and one `llm_runs` row;
- `note_batch`, `close_batch`, `finish_run`: what the run submitted, collected
  and how it ended, in that row's `params` (`batch`, `finished`);
- `record_outcome`: the calls made for one (item, question) and the
  annotation they produced, together, so that an interrupted run leaves each
  item either fully recorded or not at all;
- `record_outcomes`: the same for a small batch of outcomes (cache hits and
  batch results).

The cache key is the sha256 of the canonical request (provider, model, the
exact JSON body, and for compatible servers the base URL). A cache hit is a
`llm_calls` row with `cached = 1`, `cost_usd = 0`, and `request` pointing at
the call it reused; no key or header is ever part of a stored request.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from labels.llm.prompts import PromptTemplate
from labels.llm.spec import ModelSpec
from labels.llm.tasks import Answer, Work, in_chunks
from store import Store, to_json, utcnow
from store.records import AnnotationRecord, RaterRecord
from store.writer import RecordWriter


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_hash(spec: ModelSpec, body: dict[str, Any], base_url: str | None = None) -> str:
    """The cache key of a request. The base URL counts only for compatible
    servers (where it decides which model answers)."""
    key = {"provider": spec.provider, "model": spec.model, "body": body}
    if spec.provider == "compatible":
        key["base_url"] = base_url
    return hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()


def rater_name(spec: ModelSpec, prompt: PromptTemplate) -> str:
    """A machine rater's name: provider:model@prompt_version."""
    return f"{spec.name}@{prompt.version}"


@dataclass
class CallRecord:
    """One row of llm_calls, before it is written."""

    status: str
    """ok | parse_failed | error"""
    request: dict[str, Any]
    request_hash: str
    response: dict[str, Any] | None = None
    raw_text: str | None = None
    parsed: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 1
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    cached: bool = False


@dataclass
class Outcome:
    """What happened to one (item, question): the calls and the answer, if any."""

    work: Work
    calls: list[CallRecord] = field(default_factory=list)
    answer: Answer | None = None
    kind: str = "answered"
    """answered | failed (unreadable, recorded as cannot assess) | refused (recorded as
    cannot assess) | error (nothing recorded but the calls: a later run asks again,
    e.g. a reply cut off at the output limit) | fatal | cached | skipped"""
    message: str | None = None


@dataclass(frozen=True)
class RunContext:
    """What every write of one run needs to know."""

    run_id: int
    rater: str
    rater_id: int
    spec: ModelSpec
    prompt: PromptTemplate
    include_answered: bool = False


def ensure_rater(conn: sqlite3.Connection, name: str, role: str, spec: ModelSpec,
                 prompt: PromptTemplate) -> int:
    """The machine rater's id, creating it once. A rater name always means
    one prompt text: a different text under the same version is refused."""
    row = conn.execute("SELECT id, kind, meta FROM raters WHERE name = ?", (name,)).fetchone()
    if row is not None:
        if row["kind"] != "machine":
            raise ValueError(f"rater {name!r} exists as a {row['kind']} rater")
        known = json.loads(row["meta"] or "{}").get("prompt_hash")
        if known and known != prompt.sha256:
            raise ValueError(
                f"rater {name!r} answered with a different prompt text (sha256 {known[:12]}...); "
                f"the prompt {prompt.source} now has {prompt.sha256[:12]}...: give it a new version")
        return row["id"]
    writer = RecordWriter(conn, source="llm")
    return writer.rater(RaterRecord(
        name=name, kind="machine", role=role, provider=spec.provider, model=spec.model,
        prompt_version=prompt.version,
        meta={"prompt_hash": prompt.sha256, "prompt_source": prompt.source.rsplit("/", 1)[-1]},
    ))


def find_rater_id(store: Store, name: str) -> int | None:
    return store.scalar("SELECT id FROM raters WHERE name = ?", (name,))


def start_run(store: Store, *, task: str, role: str, spec: ModelSpec, prompt: PromptTemplate,
              params: dict[str, Any], n_planned: int, est_cost_usd: float | None,
              actor: str) -> tuple[int, int]:
    """(run id, rater id): one transaction."""
    name = rater_name(spec, prompt)
    with store.transaction() as conn:
        rater_id = ensure_rater(conn, name, role, spec, prompt)
        cur = conn.execute(
            "INSERT INTO llm_runs (task, rater_id, provider, model, prompt_version, prompt_hash,"
            " params, n_planned, est_cost_usd, actor, started_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (task, rater_id, spec.provider, spec.model, prompt.version, prompt.sha256,
             to_json(params), n_planned, est_cost_usd, actor, utcnow()),
        )
        store.audit(actor, "llm_run", "llm_runs", cur.lastrowid, None,
                    {"task": task, "rater": name, "planned": n_planned,
                     "est_cost_usd": est_cost_usd})
        return cur.lastrowid, rater_id


def note_batch(store: Store, run_id: int, batch: dict[str, Any]) -> None:
    """Remember a submitted batch on its run, so it can be collected after an
    interruption: `id`, `provider`, `base_url`, `requests` (how many),
    `custom_ids` ({custom id: request hash}, exactly what was submitted) and
    `submitted_at`; `collected_at` and `status` are added once it is collected."""
    with store.transaction() as conn:
        conn.execute("UPDATE llm_runs SET params = json_set(params, '$.batch', json(?))"
                     " WHERE id = ?", (to_json(batch), run_id))


def close_batch(store: Store, run_id: int, status: str, by_run: int | None = None) -> None:
    """Mark a run's batch collected (or ended with nothing to collect): it is not resumed again."""
    with store.transaction() as conn:
        conn.execute(
            "UPDATE llm_runs SET params = json_set(params, '$.batch.collected_at', ?,"
            " '$.batch.status', ?, '$.batch.collected_by_run', ?) WHERE id = ?",
            (utcnow(), status, by_run if by_run is not None else run_id, run_id))


def open_batches(store: Store, rater_id: int | None = None,
                 prompt_hash: str | None = None) -> list[sqlite3.Row]:
    """Runs (id, task, rater_id, provider, model, prompt_hash, params) whose batch was
    submitted and never collected, oldest first; optionally of one rater and prompt."""
    sql = ("SELECT id, task, rater_id, provider, model, prompt_hash, params FROM llm_runs"
           " WHERE json_extract(params, '$.batch.id') IS NOT NULL"
           " AND json_extract(params, '$.batch.collected_at') IS NULL")
    args: list[Any] = []
    if rater_id is not None:
        sql += " AND rater_id = ?"
        args.append(rater_id)
    if prompt_hash is not None:
        sql += " AND prompt_hash = ?"
        args.append(prompt_hash)
    return store.query(sql + " ORDER BY id", args)


def finish_run(store: Store, run_id: int, status: str, error: str | None,
               counts: dict[str, Any]) -> None:
    """How a run ended, on its row (`params.finished`): status completed | aborted
    (RunAborted: bad key, failed batch, ...) | stopped (interrupted), the error, the counts."""
    finished = {"status": status, "error": error, "at": utcnow(), **counts}
    with store.transaction() as conn:
        conn.execute("UPDATE llm_runs SET params = json_set(params, '$.finished', json(?))"
                     " WHERE id = ?", (to_json(finished), run_id))


def cached_calls(store: Store, hashes: list[str]) -> dict[str, sqlite3.Row]:
    """The earliest successful call for each request hash that has one."""
    found: dict[str, sqlite3.Row] = {}
    for chunk in in_chunks(sorted(set(hashes))):
        rows = store.query(
            "SELECT id, request_hash, raw_text, parsed FROM llm_calls WHERE status = 'ok'"
            f" AND cached = 0 AND request_hash IN ({','.join('?' * len(chunk))}) ORDER BY id",
            chunk,
        )
        for row in rows:
            found.setdefault(row["request_hash"], row)
    return found


def answered_pairs(store: Store, rater_id: int, pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which (item id, question id) pairs the rater has already answered."""
    done: set[tuple[int, int]] = set()
    items = sorted({item for item, _ in pairs})
    for chunk in in_chunks(items):
        rows = store.query(
            "SELECT DISTINCT item_id, question_id FROM annotations WHERE rater_id = ? AND"
            f" target = '' AND item_id IN ({','.join('?' * len(chunk))})", [rater_id, *chunk])
        done |= {(row[0], row[1]) for row in rows}
    return done & set(pairs)


def _insert_call(conn: sqlite3.Connection, ctx: RunContext, work: Work, call: CallRecord) -> int:
    cur = conn.execute(
        "INSERT INTO llm_calls (run_id, request_hash, provider, model, prompt_version, prompt_hash,"
        " item_id, question_id, request, response, raw_text, parsed, status, error, attempts,"
        " input_tokens, output_tokens, cost_usd, latency_ms, cached, created_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (ctx.run_id, call.request_hash, ctx.spec.provider, ctx.spec.model, ctx.prompt.version,
         ctx.prompt.sha256, work.item_id, work.question_id, to_json(call.request),
         None if call.response is None else to_json(call.response), call.raw_text,
         None if call.parsed is None else to_json(call.parsed), call.status, call.error,
         call.attempts, call.input_tokens, call.output_tokens, call.cost_usd, call.latency_ms,
         int(call.cached), utcnow()),
    )
    return cur.lastrowid


def _write(conn: sqlite3.Connection, ctx: RunContext, outcome: Outcome) -> bool:
    """Insert one outcome's calls and annotation; False when the rater had
    already answered (then only the calls are kept: they were made)."""
    call_id = None
    for call in outcome.calls:
        call_id = _insert_call(conn, ctx, outcome.work, call)
    answer = outcome.answer
    if answer is None:
        return True
    work = outcome.work
    if not ctx.include_answered and conn.execute(
        "SELECT 1 FROM annotations WHERE item_id = ? AND question_id = ? AND rater_id = ?"
        " AND target = ''", (work.item_id, work.question_id, ctx.rater_id),
    ).fetchone():
        return False
    extra = {"llm_run_id": ctx.run_id, "llm_call_id": call_id, "prompt_hash": ctx.prompt.sha256,
             **answer.extra}
    RecordWriter(conn, source="llm").annotation(AnnotationRecord(
        item_uid=work.item_uid, question_key=work.question_key, rater=ctx.rater,
        value=answer.value, status=answer.status, rationale=answer.rationale, phase="blind",
        codebook_version=work.codebook_version, extra=extra,
    ))
    return True


def record_outcome(store: Store, ctx: RunContext, outcome: Outcome) -> bool:
    """One outcome, one transaction."""
    with store.transaction() as conn:
        return _write(conn, ctx, outcome)


def record_outcomes(store: Store, ctx: RunContext, outcomes: list[Outcome],
                    chunk: int = 200) -> list[bool]:
    """Several outcomes, one transaction per `chunk` of them."""
    written: list[bool] = []
    for part in in_chunks(outcomes, chunk):
        with store.transaction() as conn:
            written += [_write(conn, ctx, outcome) for outcome in part]
    return written
