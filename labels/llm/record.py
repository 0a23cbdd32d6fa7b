"""Every call on record, cached by request hash, and answers as annotations.

Writes, each exactly one `BEGIN IMMEDIATE` transaction on the caller's own
store (one store per thread):
- `start_run`: the machine rater (created once) and one `llm_runs` row;
- `note_batch` (before submitting: what the batch will hold), `note_batch_id`
  (once the provider has accepted it), `claim_batch` / `release_batch` (one
  collector at a time), `close_batch`, `finish_run`: what the run submitted,
  who collects it, and how it ended, in that row's `params` (`batch`, `finished`);
- `beat` and `claim_units`: a running run's heartbeat (`params.heartbeat`) and
  the (item, question) pairs it is asking (`params.claimed`), so that a second
  run of the same rater and prompt leaves them to it instead of paying twice
  (and leaves out pairs answered meanwhile, read in the same transaction);
  `note_submitter`: the heartbeat kept while a batch is submitted;
- `forget_batch`, `abandon_unsubmitted`: a batch closed without results
  (never submitted, or gone from the provider), checked in the same
  transaction; `note_batch_id` writes only into a batch still open;
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
import os
import socket
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    hold: str | None = None
    """A request hash not to send again in this run: its reply was cut off or
    unreadable every time, or a batch or another run holds it."""


@dataclass(frozen=True)
class RunContext:
    """What every write of one run needs to know."""

    run_id: int
    rater: str
    rater_id: int
    spec: ModelSpec
    prompt: PromptTemplate
    include_answered: bool = False
    session: int | None = None
    """The sign-in the run acts in (its permit's, `store.permits`): every store the
    run opens writes only while it is in force. None: the operator's run."""


def acting_store(path: str, session: int | None) -> Store:
    """A store on `path` for a run's writes, acting in `session` (`store.sessions`)."""
    store = Store(path)
    store.session_id = session
    return store


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
    """Remember a batch on its run before it is submitted, so that it is never
    paid for without a trace: `provider`, `base_url`, `requests` (how many),
    `custom_ids` ({custom id: request hash}, exactly what is submitted) and
    `submitting_at`; `id` and `submitted_at` are added once the provider has it
    (`note_batch_id`), `collected_at` and `status` once it is collected."""
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
    submitted (or was being submitted: no `id` yet) and never collected, oldest
    first; optionally of one rater and prompt."""
    sql = ("SELECT id, task, rater_id, provider, model, prompt_hash, params FROM llm_runs"
           " WHERE json_type(params, '$.batch') = 'object'"
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


# -- who is alive -----------------------------------------------------------------

HOST = socket.gethostname()
STALE_AFTER = 120.0
"""Seconds without a heartbeat after which a run (or a batch collector) counts as gone."""


def heartbeat(every: float = 10.0, **extra: Any) -> dict[str, Any]:
    """A heartbeat to store: when, which process on which machine, how often it beats."""
    return {"at": utcnow(), "pid": os.getpid(), "host": HOST, "every": every, **extra}


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def is_alive(beat: Any) -> bool:
    """Whether the heartbeat's owner still runs: a process of this machine that
    has gone is gone at once; otherwise the heartbeat must be recent."""
    if not isinstance(beat, dict) or not isinstance(beat.get("at"), str):
        return False
    if beat.get("host") == HOST and not _pid_alive(beat.get("pid")):
        return False
    try:
        age = (datetime.now(UTC) - datetime.fromisoformat(beat["at"])).total_seconds()
    except (TypeError, ValueError):
        return False
    every = beat.get("every") if isinstance(beat.get("every"), (int, float)) else 10.0
    return age < max(STALE_AFTER, 3 * every)


def run_is_alive(params: dict[str, Any]) -> bool:
    """A run still under way: not finished, and its heartbeat alive."""
    return not params.get("finished") and is_alive(params.get("heartbeat"))


def beat(store: Store, run_id: int, every: float = 10.0) -> None:
    """Refresh a running run's heartbeat (never fails the run)."""
    try:
        with store.transaction() as conn:
            conn.execute("UPDATE llm_runs SET params = json_set(params, '$.heartbeat', json(?))"
                         " WHERE id = ?", (to_json(heartbeat(every)), run_id))
    except sqlite3.Error:
        pass


def _answered_in(conn: sqlite3.Connection, rater_id: int,
                 pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Inside a transaction: which of `pairs` the rater has answered."""
    done: set[tuple[int, int]] = set()
    for chunk in in_chunks(sorted({item for item, _ in pairs})):
        rows = conn.execute(
            "SELECT DISTINCT item_id, question_id FROM annotations WHERE rater_id = ? AND"
            f" target = '' AND item_id IN ({','.join('?' * len(chunk))})",
            [rater_id, *chunk]).fetchall()
        done |= {(row[0], row[1]) for row in rows}
    return done & pairs


def claim_units(store: Store, ctx: RunContext,
                pairs: dict[str, tuple[int, int]]) -> tuple[dict[str, int], set[str]]:
    """Claim (item, question) pairs (`pairs`: {batch custom id: (item id, question
    id)}) for this run, in one transaction; returns (those another live run of
    the same rater and prompt has claimed ({custom id: its run}), which this run
    leaves to it; those the rater has answered meanwhile, unless the run
    includes answered pairs). Answers and claims are read in the same
    transaction, so a run that finished since this run looked at its answers
    and the cache is never paid for again."""
    wanted = set(pairs)
    with store.transaction() as conn:
        answered: set[str] = set()
        if not ctx.include_answered:
            done = _answered_in(conn, ctx.rater_id, set(pairs.values()))
            answered = {cid for cid, pair in pairs.items() if pair in done}
            wanted -= answered
        held: dict[str, int] = {}
        rows = conn.execute(
            "SELECT id, params FROM llm_runs WHERE rater_id = ? AND prompt_hash = ? AND id != ?"
            " AND json_extract(params, '$.finished') IS NULL"
            " AND json_extract(params, '$.claimed') IS NOT NULL",
            (ctx.rater_id, ctx.prompt.sha256, ctx.run_id)).fetchall()
        for row in rows:
            params = json.loads(row["params"])
            if not run_is_alive(params):
                continue
            for cid in set(params.get("claimed") or ()) & wanted:
                held.setdefault(cid, row["id"])
        mine = json.loads(conn.execute(
            "SELECT coalesce(json_extract(params, '$.claimed'), '[]') FROM llm_runs WHERE id = ?",
            (ctx.run_id,)).fetchone()[0])
        mine = sorted(set(mine) | (wanted - set(held)))
        conn.execute("UPDATE llm_runs SET params = json_set(params, '$.claimed', json(?))"
                     " WHERE id = ?", (to_json(mine), ctx.run_id))
    return held, answered


# -- batches -------------------------------------------------------------------------


FORGOTTEN_UNNOTED = ("not submitted", "never submitted (abandoned)")
"""How a batch forgotten before its id was noted is closed (`forget_batch`,
`abandon_unsubmitted`); `note_batch_id(reopen=True)` opens it again (it was
submitted after all)."""


def forget_batch(store: Store, run_id: int, why: str) -> bool:
    """A noted batch that is not to be collected (never submitted, or gone from
    the provider): closed with `why` as its status. False when it was closed
    already."""
    with store.transaction() as conn:
        cur = conn.execute(
            "UPDATE llm_runs SET params = json_set(params, '$.batch.collected_at', ?,"
            " '$.batch.status', ?) WHERE id = ? AND json_type(params, '$.batch') = 'object'"
            " AND json_extract(params, '$.batch.collected_at') IS NULL", (utcnow(), why, run_id))
        return cur.rowcount == 1


def being_submitted(params: dict[str, Any]) -> bool:
    """A run's batch that has no id yet because its run is submitting it now:
    the run is alive, or the submission's own heartbeat is (a long upload)."""
    if params.get("finished"):
        return False
    batch = params.get("batch") if isinstance(params.get("batch"), dict) else {}
    return is_alive(params.get("heartbeat")) or is_alive(batch.get("submitter"))


def note_submitter(store: Store, run_id: int, submitter: dict[str, Any] | None) -> None:
    """While a batch is submitted: refresh the run's heartbeat (its time) and
    the submission's own (`batch.submitter`); with `submitter` None, remove
    the latter. Never fails the caller."""
    try:
        with store.transaction() as conn:
            if submitter is None:
                conn.execute("UPDATE llm_runs SET params = json_remove(params,"
                             " '$.batch.submitter') WHERE id = ?", (run_id,))
                return
            conn.execute(
                "UPDATE llm_runs SET params = json_set(params, '$.heartbeat.at', ?,"
                " '$.batch.submitter', json(?)) WHERE id = ?"
                " AND json_type(params, '$.heartbeat') = 'object'"
                " AND json_type(params, '$.batch') = 'object'",
                (submitter["at"], to_json(submitter), run_id))
    except sqlite3.Error:
        pass


def abandon_unsubmitted(store: Store, run_id: int) -> str | None:
    """Forget a batch its run noted but never submitted, checking in the same
    transaction that it has no id, is not collected and is not being submitted
    now; None when forgotten, else why not."""
    with store.transaction() as conn:
        row = conn.execute("SELECT params FROM llm_runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return f"no LLM run {run_id}"
        params = json.loads(row[0])
        batch = params.get("batch")
        if not isinstance(batch, dict) or batch.get("collected_at"):
            return f"run {run_id} has no batch left to collect"
        if batch.get("id"):
            return f"run {run_id} submitted batch {batch['id']}: collect it"
        if being_submitted(params):
            return f"run {run_id} is submitting its batch now"
        conn.execute(
            "UPDATE llm_runs SET params = json_set(params, '$.batch.collected_at', ?,"
            " '$.batch.status', ?) WHERE id = ?",
            (utcnow(), FORGOTTEN_UNNOTED[1], run_id))
    return None


def note_waiter(store: Store, run_id: int, waiter: dict[str, Any] | None,
                token: str | None = None) -> None:
    """Who is waiting for a run's batch (a heartbeat), or, with `waiter` None,
    that `token` waits no longer. Never fails the caller."""
    try:
        with store.transaction() as conn:
            if waiter is not None:
                conn.execute("UPDATE llm_runs SET params = json_set(params, '$.batch.waiter',"
                             " json(?)) WHERE id = ?", (to_json(waiter), run_id))
            else:
                conn.execute("UPDATE llm_runs SET params = json_remove(params, '$.batch.waiter')"
                             " WHERE id = ? AND json_extract(params, '$.batch.waiter.token') = ?",
                             (run_id, token))
    except sqlite3.Error:
        pass


def note_batch_id(store: Store, run_id: int, batch_id: str, *, reopen: bool = False) -> bool:
    """The id the provider gave the batch noted (by `note_batch`) on the run;
    False (nothing written) when that batch is no longer open (it was
    forgotten meanwhile) or has another id. `reopen`: also a batch forgotten
    before its id was noted (`collect --batch-id` of a batch forgotten by
    mistake), which is then open again."""
    open_ = "json_extract(params, '$.batch.collected_at') IS NULL"
    args: list[Any] = [batch_id, utcnow(), run_id, batch_id, batch_id]
    if reopen:
        open_ = (f"({open_} OR json_extract(params, '$.batch.status')"
                 f" IN ({','.join('?' * len(FORGOTTEN_UNNOTED))}))")
        args += FORGOTTEN_UNNOTED
    with store.transaction() as conn:
        cur = conn.execute(
            "UPDATE llm_runs SET params = json_remove(json_set(params, '$.batch.id', ?,"
            " '$.batch.submitted_at', ?), '$.batch.collected_at', '$.batch.status')"
            " WHERE id = ? AND json_type(params, '$.batch') = 'object'"
            f" AND coalesce(json_extract(params, '$.batch.id'), ?) = ? AND {open_}", args)
        return cur.rowcount == 1


def claim_batch(store: Store, run_id: int, batch_id: str, by_run: int) -> str | None:
    """Claim a run's batch for collecting, atomically: a token when this caller
    may collect it, None when it was collected already or another live caller
    is collecting it (the loser does nothing)."""
    token = uuid.uuid4().hex
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT json_extract(params, '$.batch.collecting') FROM llm_runs WHERE id = ?"
            " AND json_extract(params, '$.batch.id') = ?"
            " AND json_extract(params, '$.batch.collected_at') IS NULL",
            (run_id, batch_id)).fetchone()
        if row is None or (row[0] is not None and is_alive(json.loads(row[0]))):
            return None
        cur = conn.execute(
            "UPDATE llm_runs SET params = json_set(params, '$.batch.collecting', json(?))"
            " WHERE id = ? AND json_extract(params, '$.batch.collected_at') IS NULL",
            (to_json(heartbeat(60.0, token=token, by_run=by_run)), run_id))
        return token if cur.rowcount == 1 else None


def holds_batch(conn: sqlite3.Connection, run_id: int, token: str) -> bool:
    """Inside a write: whether `token` still holds the run's batch (and refresh it)."""
    cur = conn.execute(
        "UPDATE llm_runs SET params = json_set(params, '$.batch.collecting.at', ?) WHERE id = ?"
        " AND json_extract(params, '$.batch.collecting.token') = ?"
        " AND json_extract(params, '$.batch.collected_at') IS NULL", (utcnow(), run_id, token))
    return cur.rowcount == 1


def release_batch(store: Store, run_id: int, token: str) -> None:
    """Give up a claim (the collector stopped before closing the batch)."""
    try:
        with store.transaction() as conn:
            conn.execute(
                "UPDATE llm_runs SET params = json_remove(params, '$.batch.collecting')"
                " WHERE id = ? AND json_extract(params, '$.batch.collecting.token') = ?",
                (run_id, token))
    except sqlite3.Error:
        pass


def batch_recorded(store: Store, run_id: int,
                   pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which of `pairs` already have a call of the run's open batch on record
    (results recorded by a collector stopped before it closed the batch): calls
    of the run made since the batch was submitted."""
    since = store.scalar("SELECT json_extract(params, '$.batch.submitted_at') FROM llm_runs"
                         " WHERE id = ?", (run_id,))
    rows = store.query(
        "SELECT DISTINCT item_id, question_id FROM llm_calls WHERE run_id = ? AND cached = 0"
        " AND created_at >= ?", (run_id, since or ""))
    return {(row[0], row[1]) for row in rows} & pairs


def record_batch_part(store: Store, ctx: RunContext, outcomes: list[Outcome],
                      token: str | None) -> list[bool] | None:
    """Batch results, one transaction; None (nothing written) when `token` no
    longer holds the batch (another collector took it over)."""
    with store.transaction() as conn:
        if token is not None and not holds_batch(conn, ctx.run_id, token):
            return None
        return [_write(conn, ctx, outcome) for outcome in outcomes]
