"""Running a plan: bounded concurrency, retries, resume, progress, batch APIs.

    summary = run_plan(store_path, plan, concurrency=16, progress=callback)
    summary = run_plan(store_path, plan, use_batch=True)     # OpenAI Batch / Anthropic Message Batches
    summary = collect_batch(store_path, run_id)              # after an interrupted batch run
    for batch in uncollected_batches(store): ...             # what is left to collect

`run_map`, `run_judge` and `run_extract` are the same function under the
names the command line and the Data screen use. The parts: `asking` (one
unit, and units on worker threads), `batches` (the provider batch APIs),
`progress` (RunProgress, RunSummary, RunAborted).

Concurrency is threads, not asyncio: the work is waiting on HTTP, the SDKs'
synchronous clients are thread-safe and share one connection pool, the
store is synchronous SQLite that wants one connection per thread, and the
Streamlit app can call a plain function without running an event loop.
`concurrency` worker threads each open their own `Store` on `store_path` and
write each result as one `BEGIN IMMEDIATE` transaction (the calls made and
the annotation together), so a run killed at any moment leaves every item
either fully recorded or not at all. The calling thread only reads the
workers' results and calls `progress`, so a Streamlit progress bar can be
drawn from it.

Retries: the SDKs retry 429, 408/409 and 5xx with exponential backoff and
retry-after, at most `max_retries` times. A reply that is malformed JSON or
does not follow the schema is asked again, at most `reply_attempts` calls in
all; an item whose replies all stay unreadable is recorded as "cannot
assess" with the raw text (never guessed). An item whose call fails
(network, rate limit after the retries) is recorded in llm_calls only, so the
next run tries it again. A reply cut off at the output limit (OpenAI
finish_reason "length", Anthropic stop_reason "max_tokens" or
"model_context_window_exceeded") is not asked again with the same body: the
call is recorded as an error saying so and no annotation is written, so a
run with a larger `max_output_tokens` (`plan_run`) can answer it. A refusal is recorded as the rater's
"cannot assess" with the refusal, not asked again. Authentication, billing,
permission and unknown-model errors, and any error of a batch endpoint, stop
the run (`RunAborted`); how a run ended is kept in `llm_runs.params.finished`.
A reply no reader foresaw fails its item, never the run.

Batches: what a batch run submits (custom ids and request hashes) is noted
on its run before it is submitted, and its id once the provider has it. A
run that stops while waiting leaves the batch to collect:
`collect_batch(store_path, run_id)` (the `carelens collect` command), or
simply the same run again, which collects an uncollected batch of the same
rater and prompt holding its (item, question) pairs instead of paying for
them twice. A run that asks directly (no batch) collects such a batch if it
has ended, and otherwise leaves the requests it holds to it, unanswered,
saying so. A batch that cannot be collected holds only its own requests; the
run goes on with the rest. One collector records a batch: a waiting run and
`collect` racing for it claim it, and the loser does nothing but say so. A
batch the provider no longer has (404 / 410: expired, deleted, another key)
is closed by `collect_batch` or `abandon_batch` (`carelens collect --forget`),
never by a run, and its requests are asked again.

Resume: a run leaves out (item, question) pairs its rater has answered, so
running the same plan again after an interruption answers only the rest; the
write checks again inside its transaction, so no item is answered twice
even by two runs at once. Each request is paid once: a running run claims
the pairs it asks (with a heartbeat), and a second run of the same rater and
prompt leaves them to it, saying so (the claim leaves out pairs answered
meanwhile, read in its own transaction); identical requests are answered from the
cache, and one whose twin was cut off (or unreadable every time) earlier in
the same run is not sent again.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import replace

from labels.llm.asking import RETRIED_STATUSES, answer_unit, read_reply, run_threads
from labels.llm.batches import (
    OpenBatch,
    batch_units,
    collect_into,
    resume_batches,
    submit_batch,
    uncollected_batches,
)
from labels.llm.plan import TASKS, RunPlan, Unit
from labels.llm.progress import BEAT_EVERY, Progress, RunAborted, RunProgress, RunSummary, Tally
from labels.llm.prompts import load_prompt
from labels.llm.providers import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    READ_ERRORS,
    CallFailed,
    provider_for,
    sampling,
)
from labels.llm.record import (
    FORGOTTEN_UNNOTED,
    CallRecord,
    Outcome,
    RunContext,
    abandon_unsubmitted,
    acting_store,
    answered_pairs,
    beat,
    being_submitted,
    cached_calls,
    claim_units,
    finish_run,
    forget_batch,
    heartbeat,
    note_batch_id,
    record_outcomes,
    start_run,
)
from labels.llm.spec import MissingKeyError, parse_model_spec
from labels.llm.tasks import ReplyUnreadable, Task
from store import Store
from store.permits import Permit, checked
from store.sessions import SessionEnded

__all__ = [
    "RETRIED_STATUSES",
    "OpenBatch",
    "Progress",
    "RunAborted",
    "RunProgress",
    "RunSummary",
    "abandon_batch",
    "answer_unit",
    "collect_batch",
    "read_reply",
    "run_extract",
    "run_judge",
    "run_map",
    "run_plan",
    "uncollected_batches",
]


# -- passes ---------------------------------------------------------------------


def _answer_from_cache(store: Store, ctx: RunContext, task: Task, units: list[Unit],
                       tally: Tally) -> list[Unit]:
    """Record every unit whose request was answered before; return the rest."""
    hits = cached_calls(store, [u.request_hash for u in units])
    outcomes, rest = [], []
    for unit in units:
        row = hits.get(unit.request_hash)
        try:
            obj = json.loads(row["parsed"]) if row is not None and row["parsed"] else None
            answer = task.read(obj) if isinstance(obj, dict) else None
        except (ReplyUnreadable, *READ_ERRORS):
            answer = None
        if answer is None:
            rest.append(unit)
            continue
        call = CallRecord("ok", {"cached_from": row["id"]}, unit.request_hash,
                          raw_text=row["raw_text"], parsed=obj, attempts=0, cost_usd=0.0,
                          latency_ms=0.0, cached=True)
        outcomes.append(Outcome(unit.work, [call], answer, "cached"))
    for start in range(0, len(outcomes), 200):
        part = outcomes[start:start + 200]
        for outcome, written in zip(part, record_outcomes(store, ctx, part), strict=True):
            if not written:
                outcome.kind = "skipped"
            tally.add(outcome)
        tally.report("cache")
    return rest


def _split_duplicates(units: list[Unit]) -> tuple[list[Unit], list[Unit]]:
    """(one unit per request hash, the others): identical requests are sent once."""
    seen: set[str] = set()
    first, later = [], []
    for unit in units:
        (later if unit.request_hash in seen else first).append(unit)
        seen.add(unit.request_hash)
    return first, later


def _leave_out_held(store: Store, ctx: RunContext, units: list[Unit], tally: Tally) -> list[Unit]:
    """The units to send now: not those whose identical request was not answered
    earlier in this run (cut off, unreadable every time, held by a batch or
    another run), nor those another live run of this rater and prompt is asking,
    nor those its rater has answered meanwhile (read in the claim's own
    transaction: a run that finished since `_prepare` and the cache looked is
    not paid for again); the rest are claimed for this run."""
    rest = []
    for unit in units:
        why = tally.not_again.get(unit.request_hash)
        if why is None:
            rest.append(unit)
        else:
            tally.add(Outcome(unit.work, kind="error", message=(
                "not sent: an identical request of this run was not answered: " + why)[:2000]))
    if not rest:
        return rest
    held, answered = claim_units(
        store, ctx, {u.custom_id: (u.work.item_id, u.work.question_id) for u in rest})
    for unit in rest:
        if unit.custom_id in answered:  # by a run that finished since `_prepare` looked
            tally.add(Outcome(unit.work, kind="skipped"))
        elif unit.custom_id in held:
            tally.add(Outcome(unit.work, kind="error", hold=unit.request_hash, message=(
                f"being asked by run {held[unit.custom_id]}, still running: not sent again by"
                " this run (run again once it has finished, for what it leaves)")))
    return [u for u in rest if u.custom_id not in held and u.custom_id not in answered]


# -- public -------------------------------------------------------------------------


def _prepare(store: Store, plan: RunPlan, ctx: RunContext, tally: Tally) -> list[Unit]:
    units = list(plan.units)
    if not plan.include_answered:
        done = answered_pairs(store, ctx.rater_id,
                              [(u.work.item_id, u.work.question_id) for u in units])
        for unit in units:
            if (unit.work.item_id, unit.work.question_id) in done:
                tally.add(Outcome(unit.work, kind="skipped"))
        units = [u for u in units if (u.work.item_id, u.work.question_id) not in done]
    return units


def _finish(store: Store, run_id: int, status: str, error: str | None,
            summary: RunSummary, quiet: bool = False) -> None:
    counts = {"answered": summary.answered, "failed": summary.failed, "refused": summary.refused,
              "errors": summary.errors, "cached": summary.cached, "skipped": summary.skipped,
              "cost_usd": summary.cost_usd, "batch_id": summary.batch_id}
    if not quiet:
        finish_run(store, run_id, status, error, counts)
        return
    # On the way out of another error (the session ended, say): that one counts.
    with contextlib.suppress(sqlite3.Error, SessionEnded):
        finish_run(store, run_id, status, error, counts)


def run_plan(store_path: str, plan: RunPlan, concurrency: int = 8,
             progress: Progress | None = None, use_batch: bool = False, *,
             keys: Mapping[str, str] | None = None, base_url: str | None = None,
             max_retries: int = DEFAULT_MAX_RETRIES, reply_attempts: int = 3,
             timeout: float = DEFAULT_TIMEOUT, actor: str = "carelens",
             poll_interval: float = 30.0, max_wait: float = 24 * 3600.0,
             permit: Permit | None = None) -> RunSummary:
    """Run a plan (see the module docstring); returns what happened.

    `keys` maps a provider (or its environment variable's name) to an API key,
    for the app's secrets; otherwise keys come from the environment. A run
    whose every request is cached needs no key at all. `permit`: who runs it
    (`store.permits`: issued by the role matrix for `run_llm`, refused for any
    other action; the run writes in its session); None is the operator at the
    command line."""
    session = checked(permit, "run_llm")
    if not 1 <= concurrency <= 64:
        raise ValueError("concurrency must be between 1 and 64")
    started = time.perf_counter()
    tally = Tally(len(plan.units), progress)
    tally.only = {(u.work.item_id, u.work.question_id) for u in plan.units}
    every = max(BEAT_EVERY, poll_interval) if use_batch else BEAT_EVERY
    params = {**plan.params(), "sampling": sampling(plan.spec.provider, plan.spec.model),
              "prompt_sha256": plan.prompt.sha256,
              "concurrency": concurrency, "use_batch": use_batch,
              "max_retries": max_retries, "reply_attempts": reply_attempts,
              "heartbeat": heartbeat(every)}
    url = base_url or plan.base_url
    # A missing key fails here, before anything is written.
    provider = provider_for(plan.spec, keys, url, max_retries, timeout) if plan.n_to_send else None
    collect = {"poll_interval": poll_interval, "max_wait": max_wait, "concurrency": concurrency,
               "reply_attempts": reply_attempts}
    with acting_store(store_path, session) as store:
        run_id, rater_id = start_run(
            store, task=plan.task.name, role=plan.task.role, spec=plan.spec, prompt=plan.prompt,
            params=params, n_planned=len(plan.units), est_cost_usd=plan.est_cost_usd, actor=actor)
        ctx = RunContext(run_id, plan.rater, rater_id, plan.spec, plan.prompt, plan.include_answered,
                         session)
        tally.on_beat = lambda: beat(store, run_id, every)
        batch_id = None
        try:
            pending = _prepare(store, plan, ctx, tally)
            while pending:
                pending = _answer_from_cache(store, ctx, plan.task, pending, tally)
                if not pending:
                    break
                first, pending = _split_duplicates(pending)
                first = _leave_out_held(store, ctx, first, tally)
                if not first:
                    continue
                provider = provider or provider_for(plan.spec, keys, url, max_retries, timeout)
                if use_batch:
                    first, resumed = resume_batches(store, store_path, ctx, plan.task, provider,
                                                    first, tally, url, **collect)
                    batch_id = resumed or batch_id
                    if first:
                        batch_id = submit_batch(store, ctx, provider, first)
                        collect_into(store, store_path, ctx, plan.task, provider, first,
                                     batch_id, tally, by_run=run_id, **collect)
                else:
                    # What a stopped batch run already paid for is collected, not asked again.
                    first, resumed = resume_batches(store, store_path, ctx, plan.task, provider,
                                                    first, tally, url, wait=False, **collect)
                    batch_id = resumed or batch_id
                    run_threads(store_path, ctx, plan.task, provider, first, concurrency, tally,
                                reply_attempts)
        except RunAborted as exc:
            exc.summary = tally.summary(ctx, started, batch_id)
            _finish(store, run_id, "aborted", str(exc), exc.summary, quiet=True)
            raise
        except BaseException as exc:
            _finish(store, run_id, "stopped", f"stopped by {type(exc).__name__}",
                    tally.summary(ctx, started, batch_id), quiet=True)
            raise
        summary = tally.summary(ctx, started, batch_id)
        _finish(store, run_id, "completed", None, summary)
        tally.report("done", force=True)
        return summary


run_map = run_plan
run_judge = run_plan
run_extract = run_plan


def collect_batch(store_path: str, run_id: int, progress: Progress | None = None, *,
                  keys: Mapping[str, str] | None = None, base_url: str | None = None,
                  poll_interval: float = 30.0, max_wait: float = 24 * 3600.0,
                  concurrency: int = 8, reply_attempts: int = 3,
                  max_retries: int = DEFAULT_MAX_RETRIES,
                  timeout: float = DEFAULT_TIMEOUT, batch_id: str | None = None,
                  permit: Permit | None = None) -> RunSummary:
    """Wait for and record the batch a run submitted before it was interrupted:
    exactly the requests it submitted. `batch_id`: the provider's id of a batch
    whose id the run could not note (its error named it), also of a batch
    forgotten (`abandon_batch`) before its id was noted. Raises LookupError
    when there is none to collect, RunAborted when it cannot be collected (yet),
    or when the provider answers 404 / 410 for it or its results: then it is
    closed, and its requests are asked again by the next run. When another run
    or collector is recording it, nothing is done and the summary says so.
    `permit`: who collects it (`run_plan`'s: the results are paid with the
    server's keys); None is the operator at the command line."""
    session = checked(permit, "run_llm")
    started = time.perf_counter()
    with acting_store(store_path, session) as store:
        run = store.query_one("SELECT * FROM llm_runs WHERE id = ?", (run_id,))
        if run is None:
            raise LookupError(f"no LLM run {run_id}")
        params = json.loads(run["params"])
        batch = params.get("batch")
        if not batch:
            raise LookupError(f"run {run_id} submitted no batch")
        forgotten = not batch.get("id") and batch.get("status") in FORGOTTEN_UNNOTED
        if batch.get("collected_at") and not (forgotten and batch_id is not None):
            raise LookupError(f"the batch of run {run_id} was collected already "
                              f"({batch['collected_at']}, {batch.get('status')})")
        if not batch.get("id"):
            if batch_id is None:
                raise LookupError(
                    f"run {run_id} is submitting its batch now: collect it once it is submitted"
                    if being_submitted(params) else
                    f"run {run_id} stopped while submitting its batch, before noting its id: give"
                    " the id the provider shows for it (`--batch-id ID`), or forget it"
                    " (`--forget`) if it was never submitted")
            if not note_batch_id(store, run_id, batch_id, reopen=True):
                raise LookupError(f"the batch of run {run_id} changed meanwhile: look again")
            batch = {**batch, "id": batch_id}
        elif batch_id is not None and batch_id != batch["id"]:
            raise LookupError(f"run {run_id} submitted batch {batch['id']}, not {batch_id}")
        url = base_url or batch.get("base_url")
        units = batch_units(store, run, params, {}, url)
        spec = parse_model_spec(f"{run['provider']}:{run['model']}")
        rater = store.scalar("SELECT name FROM raters WHERE id = ?", (run["rater_id"],))
        ctx = RunContext(run_id, rater, run["rater_id"], spec, load_prompt(run["task"], params["prompt"]),
                         bool(params.get("include_answered")), session)
        tally = Tally(len(units), progress)
        provider = provider_for(spec, keys, url, max_retries, timeout)
        task = TASKS[run["task"]]
        if params.get("max_output_tokens"):  # the limit the batch was sent with
            task = replace(task, max_output_tokens=params["max_output_tokens"])
        try:
            collected = collect_into(
                store, store_path, ctx, task, provider, units, batch["id"], tally, by_run=run_id,
                poll_interval=poll_interval, max_wait=max_wait, concurrency=concurrency,
                reply_attempts=reply_attempts, close_gone=True)
        except RunAborted as exc:
            exc.summary = tally.summary(ctx, started, batch["id"])
            raise
        summary = tally.summary(ctx, started, batch["id"])
        if collected:
            _finish(store, run_id, "collected", None, summary)
        tally.report("done", force=True)
        return summary


def abandon_batch(store_path: str, run_id: int, *, keys: Mapping[str, str] | None = None,
                  base_url: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                  timeout: float = DEFAULT_TIMEOUT, permit: Permit | None = None) -> None:
    """Forget a run's batch, so that its requests are no longer left to it: one
    the run noted but never submitted (no id was ever noted, the run is not
    submitting it now, and the provider shows none), or one the provider can
    no longer give back (it answers 404 / 410 for the batch or its results;
    asked with `keys`). Raises LookupError for any other batch. `permit`: as
    `collect_batch`'s."""
    session = checked(permit, "run_llm")
    with acting_store(store_path, session) as store:
        why = abandon_unsubmitted(store, run_id)  # checked and forgotten in one transaction
        if why is None:
            return
        run = store.query_one("SELECT * FROM llm_runs WHERE id = ?", (run_id,))
        batch = json.loads(run["params"]).get("batch") if run is not None else None
        if not isinstance(batch, dict) or not batch.get("id") or batch.get("collected_at"):
            raise LookupError(why)
        batch_id = batch["id"]
        try:
            spec = parse_model_spec(f"{run['provider']}:{run['model']}")
            provider = provider_for(spec, keys, base_url or batch.get("base_url"), max_retries,
                                    timeout)
            gone = provider.batch_gone(batch_id, TASKS[run["task"]])
        except (CallFailed, MissingKeyError, ValueError) as exc:
            raise LookupError(
                f"run {run_id} submitted batch {batch_id}: it is forgotten only once the provider"
                f" says it no longer has it, and it cannot say now ({exc})") from None
        if gone is None:
            raise LookupError(f"run {run_id} submitted batch {batch_id}, which the provider still"
                              f" has: collect it (`carelens collect --run {run_id}`)")
        if not forget_batch(store, run_id, f"gone: {gone}"[:500]):
            raise LookupError(f"run {run_id} has no batch left to collect")
