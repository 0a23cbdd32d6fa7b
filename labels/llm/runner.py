"""Running a plan: bounded concurrency, retries, resume, progress, batch APIs.

    summary = run_plan(store_path, plan, concurrency=16, progress=callback)
    summary = run_plan(store_path, plan, use_batch=True)     # OpenAI Batch / Anthropic Message Batches
    summary = collect_batch(store_path, run_id)              # after an interrupted batch run

`run_map`, `run_judge` and `run_extract` are the same function under the
names the command line and the Data screen use.

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
next run tries it again. Authentication, permission and unknown-model errors
stop the run (`RunAborted`).

Resume: a run leaves out (item, question) pairs its rater has answered, so
running the same plan again after an interruption answers only the rest; the
write checks again inside its transaction, so no item is answered twice
even by two runs at once. Identical requests are answered from the cache.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labels.llm.plan import RunPlan, Unit, plan_run
from labels.llm.pricing import cost_usd
from labels.llm.providers import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    CallFailed,
    Provider,
    Reply,
    provider_for,
)
from labels.llm.record import (
    CallRecord,
    Outcome,
    RunContext,
    answered_pairs,
    cached_calls,
    note_batch,
    record_outcome,
    record_outcomes,
    start_run,
)
from labels.llm.tasks import Answer, ReplyUnreadable, Task, read_json_object
from store import Store, utcnow

RETRIED_STATUSES = (408, 409, 429)


@dataclass
class RunProgress:
    """Where a run stands; passed to the progress callback."""

    done: int
    total: int
    answered: int = 0
    failed: int = 0
    """Recorded as cannot assess: every reply unreadable."""
    errors: int = 0
    """Not answered this time (call failed); the next run tries again."""
    cached: int = 0
    skipped: int = 0
    """Already answered by this rater."""
    cost_usd: float = 0.0
    stage: str = ""
    """What the run is doing: 'cache', 'asking the model', 'waiting for batch (in_progress)'."""

    @property
    def fraction(self) -> float:
        return 1.0 if not self.total else min(self.done / self.total, 1.0)

    def text(self) -> str:
        """One line for a terminal bar or under the app's progress bar."""
        parts = [f"{self.done}/{self.total}", f"{self.answered} answered"]
        parts += [f"{n} {what}" for n, what in ((self.cached, "from the cache"),
                  (self.failed, "unreadable"), (self.errors, "failed calls"),
                  (self.skipped, "already answered")) if n]
        return " · ".join(parts) + f" · ${self.cost_usd:.4f}" + (f" · {self.stage}" if self.stage else "")


@dataclass
class RunSummary:
    run_id: int
    rater: str
    planned: int
    answered: int
    failed: int
    errors: int
    cached: int
    skipped: int
    cost_usd: float
    seconds: float
    batch_id: str | None = None
    messages: list[str] = field(default_factory=list)
    """Up to five distinct error messages, for the screen."""

    def text(self) -> str:
        parts = [f"{self.answered} answered", f"{self.cached} from the cache",
                 f"{self.failed} unreadable (recorded as cannot assess)",
                 f"{self.errors} not answered (run again to retry)",
                 f"{self.skipped} already answered"]
        return (f"run {self.run_id} as {self.rater}: " + ", ".join(parts)
                + f"; cost ${self.cost_usd:.4f}; {self.seconds:.1f} s")


class RunAborted(RuntimeError):
    """The run stopped early (bad key, unknown model, failed batch). What was
    recorded stays recorded; `summary` says how far it got."""

    def __init__(self, message: str, summary: RunSummary | None = None):
        super().__init__(message)
        self.summary = summary


Progress = Callable[[RunProgress], None]


class _Tally:
    """Counts kept by the calling thread."""

    def __init__(self, total: int, progress: Progress | None):
        self.state = RunProgress(0, total)
        self.progress = progress
        self.messages: list[str] = []
        self._last = 0.0

    def add(self, outcome: Outcome) -> None:
        s = self.state
        s.done += 1
        s.cost_usd += sum(c.cost_usd or 0.0 for c in outcome.calls)
        if outcome.kind == "answered":
            s.answered += 1
        elif outcome.kind == "cached":
            s.cached += 1
        elif outcome.kind == "failed":
            s.failed += 1
        elif outcome.kind == "skipped":
            s.skipped += 1
        else:
            s.errors += 1
        if outcome.message and outcome.kind in ("error", "fatal", "failed") \
                and outcome.message not in self.messages and len(self.messages) < 5:
            self.messages.append(outcome.message)

    def report(self, stage: str, force: bool = False) -> None:
        """Call the progress callback, at most ten times a second."""
        self.state.stage = stage
        now = time.monotonic()
        if self.progress and (force or now - self._last >= 0.1 or self.state.done >= self.state.total):
            self._last = now
            self.progress(RunProgress(**self.state.__dict__))

    def summary(self, ctx: RunContext, started: float, batch_id: str | None = None) -> RunSummary:
        s = self.state
        return RunSummary(ctx.run_id, ctx.rater, s.total, s.answered, s.failed, s.errors, s.cached,
                          s.skipped, round(s.cost_usd, 6), round(time.perf_counter() - started, 3),
                          batch_id, list(self.messages))


# -- one item -----------------------------------------------------------------


def _call_record(provider: Provider, unit: Unit, reply: Reply, batch: bool = False) -> CallRecord:
    return CallRecord(
        "ok", unit.body, unit.request_hash, response=reply.response,
        raw_text=provider.clean(reply.raw_text), attempts=1 + reply.retries,
        input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
        cost_usd=cost_usd(provider.spec.provider, provider.spec.model, reply.input_tokens,
                          reply.output_tokens, batch=batch),
        latency_ms=None if reply.latency_ms is None else round(reply.latency_ms, 2),
    )


def read_reply(task: Task, call: CallRecord, reply: Reply) -> Answer | None:
    """Read a reply strictly; marks the call ok or parse_failed."""
    try:
        obj = read_json_object(reply.output)
        answer = task.read(obj)
    except ReplyUnreadable as exc:
        call.status, call.error = "parse_failed", str(exc)
        return None
    call.status, call.parsed = "ok", obj
    return answer


def unreadable_answer(raw_text: str | None, attempts: int) -> Answer:
    return Answer("cannot_assess", None, None, {
        "failure": "unreadable reply", "raw_text": (raw_text or "")[:4000], "attempts": attempts})


def answer_unit(provider: Provider, task: Task, unit: Unit, reply_attempts: int = 3) -> Outcome:
    """Ask the model about one unit; no store access (the caller records the outcome)."""
    outcome = Outcome(unit.work)
    unreadable: str | None = None
    for _ in range(max(reply_attempts, 1)):
        try:
            reply = provider.send(unit.body, task)
        except CallFailed as exc:
            retried = exc.status is None or exc.status in RETRIED_STATUSES or exc.status >= 500
            attempts = 1 + exc.retries if exc.raw_text is not None else (
                1 + provider.max_retries if retried else 1)
            outcome.calls.append(CallRecord("error", unit.body, unit.request_hash,
                                            raw_text=exc.raw_text, error=str(exc), attempts=attempts))
            outcome.message = str(exc)
            if exc.fatal:
                outcome.kind = "fatal"
                return outcome
            if exc.raw_text is None:
                outcome.kind = "error"
                return outcome
            unreadable = None
            continue
        call = _call_record(provider, unit, reply)
        outcome.calls.append(call)
        answer = read_reply(task, call, reply)
        if answer is not None:
            outcome.answer, outcome.kind, outcome.message = answer, "answered", None
            return outcome
        unreadable, outcome.message = call.raw_text, call.error
    if unreadable is not None:
        outcome.answer = unreadable_answer(unreadable, len(outcome.calls))
        outcome.kind = "failed"
    else:
        outcome.kind = "error"
    return outcome


# -- passes ---------------------------------------------------------------------


def _answer_from_cache(store: Store, ctx: RunContext, task: Task, units: list[Unit],
                       tally: _Tally) -> list[Unit]:
    """Record every unit whose request was answered before; return the rest."""
    hits = cached_calls(store, [u.request_hash for u in units])
    outcomes, rest = [], []
    for unit in units:
        row = hits.get(unit.request_hash)
        try:
            obj = json.loads(row["parsed"]) if row is not None else None
            answer = task.read(obj) if obj is not None else None
        except (ReplyUnreadable, ValueError):
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


_EXIT = object()


def _run_threads(store_path: str, ctx: RunContext, task: Task, provider: Provider,
                 units: list[Unit], concurrency: int, tally: _Tally, reply_attempts: int) -> None:
    todo: queue.SimpleQueue[Unit] = queue.SimpleQueue()
    for unit in units:
        todo.put(unit)
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        try:
            with Store(store_path) as store:
                while not stop.is_set():
                    try:
                        unit = todo.get_nowait()
                    except queue.Empty:
                        return
                    outcome = answer_unit(provider, task, unit, reply_attempts)
                    if outcome.kind == "fatal":
                        stop.set()
                    if not record_outcome(store, ctx, outcome):
                        outcome.kind = "skipped"
                    events.put(outcome)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            stop.set()
            events.put(exc)
        finally:
            events.put(_EXIT)

    threads = [threading.Thread(target=worker, name=f"carelens-llm-{i}", daemon=True)
               for i in range(min(concurrency, len(units)))]
    for thread in threads:
        thread.start()
    live, fatal, crash = len(threads), None, None
    try:
        while live:
            try:
                event = events.get(timeout=0.25)
            except queue.Empty:
                continue
            if event is _EXIT:
                live -= 1
            elif isinstance(event, BaseException):
                crash = crash or event
            else:
                tally.add(event)
                if event.kind == "fatal":
                    fatal = fatal or event.message
                tally.report("asking the model")
    finally:
        # On any exit (a crash, Ctrl-C, a progress callback that raised) the
        # workers finish the item in hand, record it, and stop.
        stop.set()
        for thread in threads:
            thread.join()
    if crash is not None:
        raise crash
    if fatal:
        raise RunAborted(f"run stopped: {fatal}")


def _collect_batch(store: Store, store_path: str, ctx: RunContext, task: Task, provider: Provider,
                   units: list[Unit], batch_id: str, tally: _Tally, *, poll_interval: float,
                   max_wait: float, concurrency: int, reply_attempts: int) -> None:
    waited = 0.0
    while True:
        done, status = provider.batch_status(batch_id)
        tally.report(f"waiting for batch ({status})", force=True)
        if done:
            break
        if waited >= max_wait:
            raise RunAborted(f"batch {batch_id} is still {status} after {waited:.0f} s; collect it "
                             f"later with collect_batch(store_path, run_id={ctx.run_id})")
        time.sleep(poll_interval)
        waited += poll_interval
    if status not in ("completed", "ended", "expired"):
        raise RunAborted(f"batch {batch_id} ended as {status}: nothing recorded; run again")
    by_id = {unit.custom_id: unit for unit in units}
    outcomes, again = [], []
    for custom_id, result in provider.batch_results(batch_id, task):
        unit = by_id.pop(custom_id, None)
        if unit is None:
            continue
        outcome = Outcome(unit.work)
        if isinstance(result, str):
            outcome.calls.append(CallRecord("error", unit.body, unit.request_hash, error=result))
            outcome.kind, outcome.message = "error", result
        else:
            call = _call_record(provider, unit, result, batch=True)
            outcome.calls.append(call)
            answer = read_reply(task, call, result)
            if answer is None:
                # Recorded now; asked again directly below, a bounded number of times.
                outcome.kind = "retry"
                again.append(unit)
            else:
                outcome.answer, outcome.kind = answer, "answered"
        outcomes.append(outcome)
    for start in range(0, len(outcomes), 100):
        part = outcomes[start:start + 100]
        for outcome, written in zip(part, record_outcomes(store, ctx, part), strict=True):
            if outcome.kind == "retry":
                continue
            if not written:
                outcome.kind = "skipped"
            tally.add(outcome)
        tally.report("recording batch results")
    for _unit in by_id.values():
        tally.add(Outcome(_unit.work, kind="error", message=f"no result in batch {batch_id}"))
    if again:
        _run_threads(store_path, ctx, task, provider, again, concurrency, tally,
                     max(reply_attempts - 1, 1))


# -- public -------------------------------------------------------------------------


def _prepare(store: Store, plan: RunPlan, ctx: RunContext, tally: _Tally) -> list[Unit]:
    units = list(plan.units)
    if not plan.include_answered:
        done = answered_pairs(store, ctx.rater_id,
                              [(u.work.item_id, u.work.question_id) for u in units])
        for unit in units:
            if (unit.work.item_id, unit.work.question_id) in done:
                tally.add(Outcome(unit.work, kind="skipped"))
        units = [u for u in units if (u.work.item_id, u.work.question_id) not in done]
    return units


def run_plan(store_path: str, plan: RunPlan, concurrency: int = 8,
             progress: Progress | None = None, use_batch: bool = False, *,
             keys: Mapping[str, str] | None = None, base_url: str | None = None,
             max_retries: int = DEFAULT_MAX_RETRIES, reply_attempts: int = 3,
             timeout: float = DEFAULT_TIMEOUT, actor: str = "carelens",
             poll_interval: float = 30.0, max_wait: float = 24 * 3600.0) -> RunSummary:
    """Run a plan (see the module docstring); returns what happened.

    `keys` maps a provider (or its environment variable's name) to an API key,
    for the app's secrets; otherwise keys come from the environment. A run
    whose every request is cached needs no key at all."""
    if not 1 <= concurrency <= 64:
        raise ValueError("concurrency must be between 1 and 64")
    started = time.perf_counter()
    tally = _Tally(len(plan.units), progress)
    params = {**plan.params(), "concurrency": concurrency, "use_batch": use_batch,
              "max_retries": max_retries, "reply_attempts": reply_attempts}
    # A missing key fails here, before anything is written.
    provider = provider_for(plan.spec, keys, base_url or plan.base_url, max_retries,
                            timeout) if plan.n_to_send else None
    with Store(store_path) as store:
        run_id, rater_id = start_run(
            store, task=plan.task.name, role=plan.task.role, spec=plan.spec, prompt=plan.prompt,
            params=params, n_planned=len(plan.units), est_cost_usd=plan.est_cost_usd, actor=actor)
        ctx = RunContext(run_id, plan.rater, rater_id, plan.spec, plan.prompt, plan.include_answered)
        pending = _prepare(store, plan, ctx, tally)
        batch_id = None
        try:
            while pending:
                pending = _answer_from_cache(store, ctx, plan.task, pending, tally)
                if not pending:
                    break
                first, pending = _split_duplicates(pending)
                provider = provider or provider_for(plan.spec, keys, base_url or plan.base_url,
                                                    max_retries, timeout)
                if use_batch:
                    batch_id = provider.submit_batch([(u.custom_id, u.body) for u in first])
                    note_batch(store, run_id, {"id": batch_id, "provider": plan.spec.provider,
                                               "requests": len(first), "submitted_at": utcnow()})
                    _collect_batch(store, store_path, ctx, plan.task, provider, first, batch_id,
                                   tally, poll_interval=poll_interval, max_wait=max_wait,
                                   concurrency=concurrency, reply_attempts=reply_attempts)
                else:
                    _run_threads(store_path, ctx, plan.task, provider, first, concurrency, tally,
                                 reply_attempts)
        except RunAborted as exc:
            exc.summary = tally.summary(ctx, started, batch_id)
            raise
        tally.report("done", force=True)
        return tally.summary(ctx, started, batch_id)


run_map = run_plan
run_judge = run_plan
run_extract = run_plan


def collect_batch(store_path: str, run_id: int, progress: Progress | None = None, *,
                  keys: Mapping[str, str] | None = None, base_url: str | None = None,
                  poll_interval: float = 30.0, max_wait: float = 24 * 3600.0,
                  concurrency: int = 8, reply_attempts: int = 3,
                  max_retries: int = DEFAULT_MAX_RETRIES,
                  timeout: float = DEFAULT_TIMEOUT) -> RunSummary:
    """Wait for and record the batch a run submitted before it was interrupted."""
    started = time.perf_counter()
    with Store(store_path) as store:
        run = store.query_one("SELECT * FROM llm_runs WHERE id = ?", (run_id,))
        if run is None:
            raise LookupError(f"no LLM run {run_id}")
        params = json.loads(run["params"])
        batch = params.get("batch")
        if not batch:
            raise LookupError(f"run {run_id} submitted no batch")
        plan = plan_run(store, run["task"], f"{run['provider']}:{run['model']}", params["prompt"],
                        None, params.get("filters"), include_answered=True, base_url=base_url)
        if plan.prompt.sha256 != run["prompt_hash"]:
            raise RunAborted(f"the prompt of run {run_id} has changed since the batch was sent")
        ctx = RunContext(run_id, plan.rater, run["rater_id"], plan.spec, plan.prompt,
                         bool(params.get("include_answered")))
        tally = _Tally(batch.get("requests", len(plan.units)), progress)
        provider = provider_for(plan.spec, keys, base_url, max_retries, timeout)
        try:
            _collect_batch(store, store_path, ctx, plan.task, provider, plan.units, batch["id"],
                           tally, poll_interval=poll_interval, max_wait=max_wait,
                           concurrency=concurrency, reply_attempts=reply_attempts)
        except RunAborted as exc:
            exc.summary = tally.summary(ctx, started, batch["id"])
            raise
        tally.report("done", force=True)
        return tally.summary(ctx, started, batch["id"])
