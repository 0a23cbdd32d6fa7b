"""Asking the model about one unit, and many units on worker threads.

`answer_unit` sends one request (the SDK retries 429 / 5xx), reads the reply
strictly and says what happened, without touching the store; `run_threads`
runs it on `concurrency` threads, each recording its outcomes on its own
store connection, and reports progress from the calling thread.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import replace
from typing import Any

from labels.llm.plan import Unit
from labels.llm.pricing import cost_usd
from labels.llm.progress import RunAborted, Tally
from labels.llm.providers import READ_ERRORS, CallFailed, Provider, Reply
from labels.llm.record import CallRecord, Outcome, RunContext, acting_store, record_outcome
from labels.llm.tasks import Answer, ReplyUnreadable, Task, read_json_object

RETRIED_STATUSES = (408, 409, 429)


def call_record(provider: Provider, unit: Unit, reply: Reply, batch: bool = False) -> CallRecord:
    return CallRecord(
        "ok", unit.body, unit.request_hash, response=reply.response,
        raw_text=provider.clean(reply.raw_text), attempts=1 + reply.retries,
        input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
        cost_usd=cost_usd(provider.spec.provider, provider.spec.model, reply.input_tokens,
                          reply.output_tokens, batch=batch),
        latency_ms=None if reply.latency_ms is None else round(reply.latency_ms, 2),
    )


def read_reply(task: Task, call: CallRecord, reply: Reply) -> tuple[str, Answer | None]:
    """Read a reply strictly and mark its call; returns (what it was, the answer):
    ("answered", answer), call ok | ("unreadable", None), call parse_failed |
    ("cut_off", None), call error: the output hit the limit, do not ask again
    with the same body | ("refused", cannot-assess answer), call error.
    The reply is read as the model wrote it; what is stored of it (the parsed
    JSON, the answer's texts, errors quoting it) is redacted."""
    if reply.cut_off:
        call.status, call.error = "error", (
            f"the reply was cut off at the output limit ({task.max_output_tokens} tokens, "
            f"stop reason {reply.stop_reason}): not asked again with the same limit; "
            "left unanswered for a run with a larger output limit")
        return "cut_off", None
    if reply.refusal is not None:
        refusal = reply.redacted(reply.refusal)
        call.status, call.error = "error", f"the model refused: {refusal}"[:2000]
        return "refused", refused_answer(refusal)
    try:
        obj = read_json_object(reply.output)
        answer = task.read(obj)
        parsed = reply.redacted(obj)  # ValueError for JSON nested deeper than any answer
        answer = replace(answer, rationale=reply.redacted(answer.rationale),
                         extra=reply.redacted(answer.extra))
    except ReplyUnreadable as exc:
        call.status, call.error = "parse_failed", reply.redacted(str(exc))
        return "unreadable", None
    except READ_ERRORS as exc:  # a value the task's reader did not foresee
        call.status, call.error = "parse_failed", reply.redacted(
            f"unreadable reply ({type(exc).__name__}: {exc})")
        return "unreadable", None
    call.status, call.parsed = "ok", parsed
    return "answered", answer


def unreadable_answer(raw_text: str | None, attempts: int) -> Answer:
    return Answer("cannot_assess", None, None, {
        "failure": "unreadable reply", "raw_text": (raw_text or "")[:4000], "attempts": attempts})


def refused_answer(refusal: str) -> Answer:
    return Answer("cannot_assess", None, None, {"failure": "refused", "refusal": refusal[:4000]})


def answer_unit(provider: Provider, task: Task, unit: Unit, reply_attempts: int = 3) -> Outcome:
    """Ask the model about one unit; no store access (the caller records the outcome).
    Never raises: anything unforeseen fails this unit (its calls kept), not the run."""
    outcome = Outcome(unit.work)
    try:
        _ask(provider, task, unit, max(reply_attempts, 1), outcome)
    except Exception as exc:  # noqa: BLE001 - one bad reply must not stop the workers
        message = provider.clean(f"unexpected {type(exc).__name__} reading the reply: {exc}")
        for call in outcome.calls:
            if call.status == "ok" and call.parsed is None:  # never a cache entry
                call.status, call.error = "error", message
        outcome.answer, outcome.kind, outcome.message = None, "error", message
    return outcome


def _ask(provider: Provider, task: Task, unit: Unit, attempts: int, outcome: Outcome) -> None:
    unreadable: str | None = None
    for _ in range(attempts):
        try:
            reply = provider.send(unit.body, task)
        except CallFailed as exc:
            retried = exc.status is None or exc.status in RETRIED_STATUSES or exc.status >= 500
            calls = 1 + exc.retries if exc.raw_text is not None else (
                1 + provider.max_retries if retried else 1)
            outcome.calls.append(CallRecord("error", unit.body, unit.request_hash,
                                            raw_text=exc.raw_text, error=str(exc), attempts=calls))
            outcome.message = str(exc)
            if exc.fatal:
                outcome.kind = "fatal"
                return
            if exc.raw_text is None:
                outcome.kind = "error"
                return
            unreadable = None
            continue
        call = call_record(provider, unit, reply)
        outcome.calls.append(call)
        kind, answer = read_reply(task, call, reply)
        if kind == "answered":
            outcome.answer, outcome.kind, outcome.message = answer, "answered", None
            return
        if kind == "cut_off":  # the same body would be cut again: left for a larger budget
            outcome.kind, outcome.message, outcome.hold = "error", call.error, unit.request_hash
            return
        if kind == "refused":
            outcome.answer, outcome.kind, outcome.message = answer, "refused", call.error
            return
        unreadable, outcome.message = call.raw_text, call.error
    if unreadable is not None:
        outcome.answer = unreadable_answer(unreadable, len(outcome.calls))
        outcome.kind, outcome.hold = "failed", unit.request_hash
    else:
        outcome.kind = "error"


_EXIT = object()


def run_threads(store_path: str, ctx: RunContext, task: Task, provider: Provider,
                units: list[Unit], concurrency: int, tally: Tally, reply_attempts: int) -> None:
    todo: queue.SimpleQueue[Unit] = queue.SimpleQueue()
    for unit in units:
        todo.put(unit)
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        try:
            with acting_store(store_path, ctx.session) as store:
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
                tally.beat()
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
