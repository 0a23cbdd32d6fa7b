"""Provider batch APIs: submit, wait, collect, and resume an uncollected batch.

What a batch holds (custom ids and request hashes) is noted on its run
before it is submitted, and its id as soon as the provider gives it (retried
while the database is locked; if it still cannot be noted, or the note was
forgotten meanwhile, the error names the batch so it can be collected). The
request that creates a batch is sent once (the SDKs' retries would create a
second, paid batch). A submission that fails is forgotten only when the
provider refused it (a 4xx other than 408/409/429) or it failed before the
batch could exist (the upload); any other failure (a timeout, a reply lost,
a 5xx) may have created it, so the note stays, without an id, holding its
requests until the batch is collected by id or forgotten. While a batch is
submitted (a large upload takes minutes) a heartbeat is kept on it
(`batch.submitter`), so it is not offered to `collect --forget` meanwhile.

A run that stops while waiting leaves the batch uncollected: `collect_batch`
(runner) collects it, and a later run of the same rater and prompt collects
it (or leaves to it the (item, question) pairs it holds, whatever their
output limit) instead of paying again. A batch a later run cannot collect
(the provider cannot give it back now, or no more) holds only its own pairs,
saying so; the run goes on with the rest. `collect_batch` and
`abandon_batch` close a batch the provider answers 404 / 410 for (expired,
deleted, another key). An OpenAI batch cancelled part way is collected: the
requests it completed are billed.

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
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from labels.llm.asking import call_record, read_reply, run_threads
from labels.llm.plan import Unit, plan_run
from labels.llm.progress import RunAborted, Tally
from labels.llm.prompts import PromptError
from labels.llm.providers import CallFailed, Provider
from labels.llm.record import (
    FORGOTTEN_UNNOTED,
    CallRecord,
    Outcome,
    RunContext,
    acting_store,
    answered_pairs,
    batch_recorded,
    being_submitted,
    claim_batch,
    close_batch,
    forget_batch,
    heartbeat,
    is_alive,
    note_batch,
    note_batch_id,
    note_submitter,
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
SUBMIT_BEAT = 10.0
"""Seconds between heartbeats while a batch is being submitted."""
ENDED = ("completed", "ended", "expired", "cancelled")
"""Final statuses with results to collect (an expired or cancelled OpenAI batch
bills, and gives back, the requests it completed)."""


class BatchFailed(RunAborted):
    """A batch that ended with nothing to collect (failed): closed; the requests
    it held may be asked again."""


def _collect_later(run_id: int) -> str:
    return f"collect it later with `carelens collect --run {run_id}` (or run the same again)"


@contextmanager
def _beating(store: Store, run_id: int, token: str) -> Iterator[None]:
    """Keep the run's heartbeat and its batch's `submitter` fresh (from a thread
    of its own) while the batch is submitted; remove the latter after."""
    stop = threading.Event()

    def beat() -> None:
        try:
            with acting_store(store.path, store.session_id) as own:
                while not stop.wait(SUBMIT_BEAT):
                    note_submitter(own, run_id, heartbeat(SUBMIT_BEAT, token=token))
        except sqlite3.Error:
            pass  # a heartbeat never fails the submission

    thread = threading.Thread(target=beat, name=f"carelens-submit-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        note_submitter(store, run_id, None)


def submit_batch(store: Store, ctx: RunContext, provider: Provider, units: list[Unit]) -> str:
    """Note what the batch will hold on the run, submit it, note its id."""
    token = uuid.uuid4().hex
    note_batch(store, ctx.run_id, {
        "provider": ctx.spec.provider, "base_url": provider.recorded_base_url,
        "requests": len(units), "custom_ids": {u.custom_id: u.request_hash for u in units},
        "submitting_at": utcnow(), "submitter": heartbeat(SUBMIT_BEAT, token=token)})
    try:
        with _beating(store, ctx.run_id, token):
            batch_id = provider.submit_batch([(u.custom_id, u.body) for u in units])
    except NotImplementedError as exc:
        forget_batch(store, ctx.run_id, FORGOTTEN_UNNOTED[0])
        raise RunAborted(f"run stopped: {exc}") from None
    except CallFailed as exc:
        if exc.refused or exc.not_created:  # no batch exists
            forget_batch(store, ctx.run_id, FORGOTTEN_UNNOTED[0])
            raise RunAborted(f"run stopped: {exc}") from None
        raise RunAborted(
            f"run stopped: {exc}. The provider may have created the batch all the same"
            f" ({len(units)} requests, paid for) without its reply reaching this run, so its id"
            f" could not be noted on run {ctx.run_id}: if the provider lists it, collect it with"
            f" `carelens collect --run {ctx.run_id} --batch-id ID`; if it does not, forget it"
            f" with `carelens collect --run {ctx.run_id} --forget`. Until then the requests it"
            " holds are not sent again") from None
    error: sqlite3.Error | None = None
    for attempt in range(NOTE_ATTEMPTS):
        try:
            noted = note_batch_id(store, ctx.run_id, batch_id)
        except sqlite3.Error as exc:
            error = exc
            if attempt + 1 < NOTE_ATTEMPTS:
                time.sleep(0.5 * 2 ** attempt)
            continue
        if noted:
            return batch_id
        raise RunAborted(
            f"batch {batch_id} was submitted ({len(units)} requests, paid for) but the note of"
            f" it on run {ctx.run_id} was forgotten meanwhile (`carelens collect --forget`):"
            f" collect it with `carelens collect --run {ctx.run_id} --batch-id {batch_id}`")
    raise RunAborted(
        f"batch {batch_id} was submitted ({len(units)} requests, paid for) but its id could"
        f" not be noted on run {ctx.run_id} ({error}): collect it with `carelens collect"
        f" --run {ctx.run_id} --batch-id {batch_id}`; until then the requests it holds are"
        " not sent again")


def _gone(store: Store, ctx: RunContext, batch_id: str, exc: CallFailed) -> RunAborted:
    """Close a batch the provider no longer has (404 / 410); the error to raise."""
    forget_batch(store, ctx.run_id, f"gone: {exc}"[:500])
    return RunAborted(
        f"batch {batch_id} of run {ctx.run_id} is gone ({exc}): the provider can no longer give"
        " it back (expired, deleted, or submitted with another key or project). It is closed,"
        " nothing recorded from it; the requests it held are asked again by the next run")


def _wait_for_batch(store: Store, provider: Provider, ctx: RunContext, batch_id: str,
                    tally: Tally, poll_interval: float, max_wait: float, by_run: int,
                    close_gone: bool = False) -> str:
    """Poll until the batch has ended; its final status. A heartbeat on the batch
    says that a live run waits for it. `close_gone`: a batch the provider
    answers 404 / 410 for is closed."""
    token = uuid.uuid4().hex
    waited = 0.0
    try:
        while True:
            try:
                done, status = provider.batch_status(batch_id)
            except CallFailed as exc:
                if close_gone and exc.gone:
                    raise _gone(store, ctx, batch_id, exc) from None
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
                 reply_attempts: int, close_gone: bool = False) -> bool:
    """Wait for the batch `ctx.run_id` submitted, claim it, record its results for
    `units` (what it holds; those already on record are not recorded again), mark
    it collected; unreadable lines are asked again directly. When another run or
    collector has it, nothing is done but say so (returns False). `close_gone`
    (`carelens collect`): a batch the provider answers 404 / 410 for, or whose
    results it answers so for, is closed (RunAborted says so). BatchFailed: it
    ended with nothing to collect."""
    status = _wait_for_batch(store, provider, ctx, batch_id, tally, poll_interval, max_wait,
                             by_run, close_gone)
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
        if status not in ENDED:
            close_batch(store, ctx.run_id, status, by_run)
            closed = True
            raise BatchFailed(f"batch {batch_id} ended as {status}: nothing recorded; run again")
        try:
            results = list(provider.batch_results(batch_id, task))
        except CallFailed as exc:
            if close_gone and exc.gone:
                closed = True
                raise _gone(store, ctx, batch_id, exc) from None
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
    (its run stopped while submitting it). A batch that cannot be collected
    (the provider cannot give it back now, or any more) holds only its own
    units, saying so, and the others go on; one that ended with nothing to
    collect (failed) gives its units back, to be asked now."""
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
                       being_submitted(params) else
                       f"held by a batch run {run['id']} submitted without noting its id (it"
                       " stopped while submitting, or the provider's reply was lost): not asked"
                       f" again; collect it with `carelens collect --run {run['id']} --batch-id"
                       f" ID` (the provider lists it), or `carelens collect --run {run['id']}"
                       " --forget` if it was never submitted") + asked
            for unit in mine.values():
                tally.add(Outcome(unit.work, kind="error", message=message,
                                  hold=unit.request_hash))
            continue
        try:
            if not wait and not _has_ended(provider, batch["id"]):
                message = (f"held by batch {batch['id']} of run {run['id']}, not ended yet: not"
                           f" asked again{asked}; {_collect_later(run['id'])}")
                for unit in mine.values():
                    tally.add(Outcome(unit.work, kind="error", message=message,
                                      hold=unit.request_hash))
                continue
            if _collect_one(store, store_path, ctx, task, provider, run, params, mine, differs,
                            asked, tally, base_url, collect):
                collected = batch["id"]
        except BatchFailed as exc:
            # closed, nothing recorded from it: what it held of this run is asked now
            tally.note(f"{exc}: its requests are asked now")
            rest.update(mine)
        except RunAborted as exc:
            # this batch only: its items are held, the run goes on with the rest
            done = answered_pairs(store, ctx.rater_id, [
                (u.work.item_id, u.work.question_id) for u in mine.values()])
            message = (f"held by batch {batch['id']} of run {run['id']}, which could not be"
                       f" collected now ({exc}): not asked again{asked}; `carelens collect"
                       f" --run {run['id']}` collects it (or closes it, if the provider no"
                       " longer has it)")
            for unit in mine.values():
                if (unit.work.item_id, unit.work.question_id) not in done:
                    tally.add(Outcome(unit.work, kind="error", message=message,
                                      hold=unit.request_hash))
    return list(rest.values()), collected


def _collect_one(store: Store, store_path: str, ctx: RunContext, task: Task,
                 provider: Provider, run: Any, params: dict[str, Any], mine: dict[str, Unit],
                 differs: list[str], asked: str, tally: Tally, base_url: str | None,
                 collect: dict[str, Any]) -> bool:
    """Collect one earlier run's batch holding `mine` (resume_batches)."""
    batch = params["batch"]
    limit = params.get("max_output_tokens")
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
    return collect_into(store, store_path, replace(ctx, run_id=run["id"], include_answered=bool(
        params.get("include_answered"))), its_task, provider, its_units, batch["id"], tally,
        by_run=ctx.run_id, **collect)


def _has_ended(provider: Provider, batch_id: str) -> bool:
    """Whether a batch has ended (False too when the provider cannot say now).
    An answer that will not change by waiting (404 / 410: gone; 401 / 403:
    another key) is not "still running": RunAborted, saying so."""
    try:
        return provider.batch_status(batch_id)[0]
    except CallFailed as exc:
        if exc.fatal or exc.refused:
            raise RunAborted(f"could not check batch {batch_id}: {exc}") from None
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
    submitting (a live run is submitting it: no id yet) | id unknown (its run
    stopped while submitting it: the id must be given to collect it)"""

    @property
    def live(self) -> bool:
        """A live run or collector has it in hand: nothing to do."""
        return self.state in ("waiting", "collecting", "submitting")

    def text(self) -> str:
        what = {"stopped": "its run stopped while waiting",
                "waiting": "a run is still waiting for it and will record it",
                "collecting": "being recorded now",
                "submitting": "a run is submitting it now",
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
            state = "submitting" if being_submitted(params) else "id unknown"
        elif is_alive(batch.get("collecting")):
            state = "collecting"
        elif is_alive(batch.get("waiter")) or run_is_alive(params):
            state = "waiting"  # (its own live run waits for it, from its first poll)
        else:
            state = "stopped"
        found.append(OpenBatch(run["id"], rater or "?", batch.get("id"), batch.get("requests"),
                               batch.get("submitted_at") or batch.get("submitting_at"), state))
    return found
