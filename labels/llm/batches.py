"""Provider batch APIs: submit, wait, collect, and resume an uncollected batch.

What a batch holds (custom ids and request hashes) is noted on its run
before it is submitted, and its id as soon as the provider gives it (retried
while the database is locked; if it still cannot be noted, the error names
the batch so it can be collected). A run that stops while waiting leaves the
batch uncollected: `collect_batch` (runner) collects it, and a later run of
the same rater and prompt collects it (or leaves to it the (item, question)
pairs it holds, whatever their output limit) instead of paying again.

One collector at a time: a batch is claimed (`claim_batch`) once it has
ended, and the loser of a race (a waiting run and `carelens collect`) does
nothing and says so. Results already on record for the batch (a collector
stopped before closing it) are not recorded again. Whoever waits for a batch
leaves a heartbeat on it, so `uncollected_batches` tells a batch a live run is
waiting for from one left by a stopped run.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from labels.llm.asking import call_record, read_reply, run_threads
from labels.llm.plan import Unit, plan_run
from labels.llm.progress import RunAborted, Tally
from labels.llm.prompts import PromptError
from labels.llm.providers import CallFailed, Provider
from labels.llm.record import (
    CallRecord,
    Outcome,
    RunContext,
    batch_recorded,
    claim_batch,
    close_batch,
    forget_batch,
    heartbeat,
    is_alive,
    note_batch,
    note_batch_id,
    note_waiter,
    open_batches,
    record_batch_part,
    release_batch,
    run_is_alive,
)
from labels.llm.tasks import Task
from store import Store, utcnow

NOTE_ATTEMPTS = 5
"""Tries at noting a submitted batch's id (the database may be locked for a while)."""


def _collect_later(run_id: int) -> str:
    return f"collect it later with `carelens collect --run {run_id}` (or run the same again)"


def submit_batch(store: Store, ctx: RunContext, provider: Provider, units: list[Unit]) -> str:
    """Note what the batch will hold on the run, submit it, note its id."""
    note_batch(store, ctx.run_id, {
        "provider": ctx.spec.provider, "base_url": provider.recorded_base_url,
        "requests": len(units), "custom_ids": {u.custom_id: u.request_hash for u in units},
        "submitting_at": utcnow()})
    try:
        batch_id = provider.submit_batch([(u.custom_id, u.body) for u in units])
    except (CallFailed, NotImplementedError) as exc:
        forget_batch(store, ctx.run_id, "not submitted")
        raise RunAborted(f"run stopped: {exc}") from None
    error: sqlite3.Error | None = None
    for attempt in range(NOTE_ATTEMPTS):
        try:
            note_batch_id(store, ctx.run_id, batch_id)
            return batch_id
        except sqlite3.Error as exc:
            error = exc
            if attempt + 1 < NOTE_ATTEMPTS:
                time.sleep(0.5 * 2 ** attempt)
    raise RunAborted(
        f"batch {batch_id} was submitted ({len(units)} requests, paid for) but its id could"
        f" not be noted on run {ctx.run_id} ({error}): collect it with `carelens collect"
        f" --run {ctx.run_id} --batch-id {batch_id}`; until then the requests it holds are"
        " not sent again")


def _wait_for_batch(store: Store, provider: Provider, ctx: RunContext, batch_id: str,
                    tally: Tally, poll_interval: float, max_wait: float, by_run: int) -> str:
    """Poll until the batch has ended; its final status. A heartbeat on the batch
    says that a live run waits for it."""
    token = uuid.uuid4().hex
    waited = 0.0
    try:
        while True:
            try:
                done, status = provider.batch_status(batch_id)
            except CallFailed as exc:
                raise RunAborted(f"could not check batch {batch_id}: {exc}; "
                                 + _collect_later(ctx.run_id)) from None
            tally.report(f"waiting for batch ({status})", force=True)
            if done:
                return status
            if waited >= max_wait:
                raise RunAborted(f"batch {batch_id} is still {status} after {waited:.0f} s; "
                                 + _collect_later(ctx.run_id))
            note_waiter(store, ctx.run_id, heartbeat(poll_interval, token=token, run=by_run))
            time.sleep(poll_interval)
            waited += poll_interval
    finally:
        note_waiter(store, ctx.run_id, None, token)


def collect_into(store: Store, store_path: str, ctx: RunContext, task: Task, provider: Provider,
                 units: list[Unit], batch_id: str, tally: Tally, *, by_run: int,
                 poll_interval: float, max_wait: float, concurrency: int,
                 reply_attempts: int) -> bool:
    """Wait for the batch `ctx.run_id` submitted, claim it, record its results for
    `units` (what it holds; those already on record are not recorded again), mark
    it collected; unreadable lines are asked again directly. When another run or
    collector has it, nothing is done but say so (returns False)."""
    status = _wait_for_batch(store, provider, ctx, batch_id, tally, poll_interval, max_wait,
                             by_run)
    token = claim_batch(store, ctx.run_id, batch_id, by_run)
    if token is None:
        message = (f"batch {batch_id} of run {ctx.run_id} is being collected (or was) by"
                   " another run or `carelens collect`: left to it")
        for unit in units:
            tally.add(Outcome(unit.work, kind="skipped", message=message,
                              hold=unit.request_hash))
        return False
    closed = False
    try:
        if status not in ("completed", "ended", "expired"):
            close_batch(store, ctx.run_id, status, by_run)
            closed = True
            raise RunAborted(f"batch {batch_id} ended as {status}: nothing recorded; run again")
        try:
            results = list(provider.batch_results(batch_id, task))
        except CallFailed as exc:
            raise RunAborted(f"could not read the results of batch {batch_id}: {exc}; "
                             + _collect_later(ctx.run_id)) from None
        again = _record_results(store, ctx, task, provider, units, batch_id, results, tally,
                                token)
        close_batch(store, ctx.run_id, status, by_run)
        closed = True
    finally:
        if not closed:
            release_batch(store, ctx.run_id, token)
    if again:
        run_threads(store_path, ctx, task, provider, again, concurrency, tally,
                    max(reply_attempts - 1, 1))
    return True


def _read_result(task: Task, provider: Provider, unit: Unit,
                 result: Any) -> tuple[Outcome, bool]:
    """One batch line as an outcome; (outcome, to be asked again directly).
    Never raises: a reply no reader foresaw fails its item, not the batch."""
    outcome = Outcome(unit.work)
    if isinstance(result, str):
        outcome.calls.append(CallRecord("error", unit.body, unit.request_hash, error=result))
        outcome.kind, outcome.message = "error", result
        return outcome, False
    call = call_record(provider, unit, result, batch=True)
    outcome.calls.append(call)
    try:
        kind, answer = read_reply(task, call, result)
    except Exception as exc:  # noqa: BLE001 - as answer_unit: the paid batch must be recorded
        message = provider.clean(f"unexpected {type(exc).__name__} reading the reply: {exc}")
        call.status, call.error, call.parsed = "error", message, None
        outcome.kind, outcome.message = "error", message
        return outcome, False
    if kind == "unreadable":
        # Recorded now; asked again directly, a bounded number of times.
        outcome.kind = "retry"
        return outcome, True
    if kind == "cut_off":
        outcome.kind, outcome.message, outcome.hold = "error", call.error, unit.request_hash
    else:
        outcome.answer, outcome.kind = answer, kind
        outcome.message = call.error if kind == "refused" else None
    return outcome, False


def _record_results(store: Store, ctx: RunContext, task: Task, provider: Provider,
                    units: list[Unit], batch_id: str, results: list[Any], tally: Tally,
                    token: str) -> list[Unit]:
    """Record a batch's results (not those on record already); the units to ask again."""
    by_id = {unit.custom_id: unit for unit in units}
    recorded = batch_recorded(store, ctx.run_id,
                              {(u.work.item_id, u.work.question_id) for u in units})
    outcomes, again = [], []
    for custom_id, result in results:
        unit = by_id.pop(custom_id, None)
        if unit is None:
            continue
        if (unit.work.item_id, unit.work.question_id) in recorded:
            tally.add(Outcome(unit.work, kind="skipped"))  # recorded by an earlier collect
            continue
        outcome, ask_again = _read_result(task, provider, unit, result)
        if ask_again:
            again.append(unit)
        outcomes.append(outcome)
    for start in range(0, len(outcomes), 100):
        part = outcomes[start:start + 100]
        written_part = record_batch_part(store, ctx, part, token)
        if written_part is None:
            raise RunAborted(f"batch {batch_id} of run {ctx.run_id} was taken over by another"
                             " collector: the rest is left to it")
        for outcome, written in zip(part, written_part, strict=True):
            if outcome.kind == "retry":
                continue
            if not written:
                outcome.kind = "skipped"
            tally.add(outcome)
        tally.report("recording batch results")
    for unit in by_id.values():
        if (unit.work.item_id, unit.work.question_id) not in recorded:
            tally.add(Outcome(unit.work, kind="error", message=f"no result in batch {batch_id}"))
    return again


def batch_units(store: Store, run: Any, params: dict[str, Any], known: dict[str, Unit],
                base_url: str | None) -> list[Unit]:
    """The units a run's batch holds: from `known` where the request is the same,
    else planned again from the run's own filters. Without a record of what was
    submitted (a batch noted by an older version) every unit the run's filters find."""
    submitted = params["batch"].get("custom_ids")
    if not isinstance(submitted, dict):
        submitted = None
    units = [] if submitted is None else [
        known[cid] for cid, digest in submitted.items()
        if cid in known and known[cid].request_hash == digest]
    if submitted is not None and len(units) == len(submitted):
        return units
    plan = plan_run(store, run["task"], f"{run['provider']}:{run['model']}", params["prompt"],
                    None, params.get("filters"), include_answered=True, base_url=base_url,
                    max_output_tokens=params.get("max_output_tokens"))
    if plan.prompt.sha256 != run["prompt_hash"]:
        raise RunAborted(f"the prompt of run {run['id']} has changed since the batch was sent")
    if submitted is None:
        return plan.units
    have = {u.custom_id for u in units}
    return units + [u for u in plan.units
                    if u.custom_id not in have and submitted.get(u.custom_id) == u.request_hash]


def resume_batches(store: Store, store_path: str, ctx: RunContext, task: Task,
                   provider: Provider, units: list[Unit], tally: Tally, base_url: str | None,
                   wait: bool = True, **collect: Any) -> tuple[list[Unit], str | None]:
    """Collect every uncollected batch of this rater and prompt holding some of
    `units` (they were paid for); returns (the units no such batch holds, the
    last batch collected). A batch holds an (item, question) whatever the body
    it was asked with (another output limit): the rater answers it once, as
    the batch asked it. `wait` False (a run that asks directly, not by batch):
    a batch still running is not waited for; the units it holds are left
    unanswered, with a message saying how to collect them, instead of being
    asked (and paid for) a second time. So is a batch whose id was never noted
    (its run stopped while submitting it)."""
    rest = {unit.custom_id: unit for unit in units}
    collected = None
    for run in open_batches(store, ctx.rater_id, ctx.prompt.sha256):
        params = json.loads(run["params"])
        batch = params["batch"]
        submitted = batch.get("custom_ids")
        if (run["id"] == ctx.run_id or run["task"] != task.name or not isinstance(submitted, dict)
                or batch.get("base_url") != provider.recorded_base_url):
            continue
        mine = {cid: rest.pop(cid) for cid in [cid for cid in rest if cid in submitted]}
        if not mine:
            continue
        limit = params.get("max_output_tokens")
        differs = [cid for cid, unit in mine.items() if submitted[cid] != unit.request_hash]
        asked = (f" (asked with an output limit of {limit} tokens; the rater answers each item"
                 " once)" if differs else "")
        if not batch.get("id"):
            message = (f"held by a batch of run {run['id']}, being submitted now" if
                       run_is_alive(params) else
                       f"held by a batch run {run['id']} submitted without noting its id (it"
                       " stopped while submitting): not asked again; collect it with `carelens"
                       f" collect --run {run['id']} --batch-id ID` (the provider lists it), or"
                       f" `carelens collect --run {run['id']} --forget` if it was never"
                       " submitted") + asked
            for unit in mine.values():
                tally.add(Outcome(unit.work, kind="error", message=message,
                                  hold=unit.request_hash))
            continue
        if not wait and not _has_ended(provider, batch["id"]):
            message = (f"held by batch {batch['id']} of run {run['id']}, not ended yet: not asked"
                       f" again{asked}; {_collect_later(run['id'])}")
            for unit in mine.values():
                tally.add(Outcome(unit.work, kind="error", message=message,
                                  hold=unit.request_hash))
            continue
        try:
            its_units = batch_units(store, run, params, mine, base_url)
        except (ValueError, LookupError, PromptError, RunAborted):
            # the run cannot be planned again: what is the same as it submitted
            its_units = [unit for cid, unit in mine.items() if cid not in differs]
        if differs:
            tally.note(f"{len(differs)} held by batch {batch['id']} of run {run['id']}{asked}:"
                       " collected from it, not asked again")
        its_task = replace(task, max_output_tokens=limit) if limit else task
        tally.report(f"collecting batch {batch['id']} of run {run['id']}", force=True)
        if collect_into(store, store_path, replace(ctx, run_id=run["id"], include_answered=bool(
                params.get("include_answered"))), its_task, provider, its_units, batch["id"],
                tally, by_run=ctx.run_id, **collect):
            collected = batch["id"]
    return list(rest.values()), collected


def _has_ended(provider: Provider, batch_id: str) -> bool:
    """Whether a batch has ended (False too when the provider cannot say now)."""
    try:
        return provider.batch_status(batch_id)[0]
    except CallFailed:
        return False


@dataclass
class OpenBatch:
    """A batch a run submitted and nothing has collected yet."""

    run_id: int
    rater: str
    batch_id: str | None
    """None: the run stopped while submitting it, before its id was noted."""
    requests: int | None
    submitted_at: str | None
    state: str = "stopped"
    """stopped (its run stopped while waiting: collect it) | waiting (a live run
    waits for it and will record it) | collecting (being recorded now) |
    id unknown (its run stopped while submitting it: the id must be given to
    collect it)"""

    @property
    def live(self) -> bool:
        """A live run or collector has it in hand: nothing to do."""
        return self.state in ("waiting", "collecting")

    def text(self) -> str:
        what = {"stopped": "its run stopped while waiting",
                "waiting": "a run is still waiting for it and will record it",
                "collecting": "being recorded now",
                "id unknown": "its run stopped while submitting it and its id was not"
                              f" noted: `carelens collect --run {self.run_id} --batch-id ID`"}
        return (f"run {self.run_id} ({self.rater}): batch {self.batch_id or '(id not noted)'} of "
                f"{self.requests if self.requests is not None else '?'} requests, "
                f"submitted {self.submitted_at or 'at an unknown time'}; {what[self.state]}")


def uncollected_batches(store: Store) -> list[OpenBatch]:
    """Batches submitted and never collected, oldest first, each with its state:
    left by a stopped run (to collect), or in the hands of a live run."""
    found = []
    for run in open_batches(store):
        params = json.loads(run["params"])
        batch = params["batch"]
        rater = store.scalar("SELECT name FROM raters WHERE id = ?", (run["rater_id"],))
        if not batch.get("id"):
            if run_is_alive(params):
                continue  # being submitted: nothing to collect yet
            state = "id unknown"
        elif is_alive(batch.get("collecting")):
            state = "collecting"
        elif is_alive(batch.get("waiter")):
            state = "waiting"
        else:
            state = "stopped"
        found.append(OpenBatch(run["id"], rater or "?", batch.get("id"), batch.get("requests"),
                               batch.get("submitted_at") or batch.get("submitting_at"), state))
    return found
