"""Provider batch APIs: submit, wait, collect, and resume an uncollected batch.

What a batch holds (custom ids and request hashes) is noted on its run
before waiting. A run that stops while waiting leaves the batch uncollected:
`collect_batch` (runner) collects it, and a later run of the same rater and
prompt collects it instead of submitting the same requests again.
"""

from __future__ import annotations

import json
import time
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
    close_batch,
    note_batch,
    open_batches,
    record_outcomes,
)
from labels.llm.tasks import Task
from store import Store, utcnow


def _collect_later(run_id: int) -> str:
    return f"collect it later with `carelens collect --run {run_id}` (or run the same again)"


def submit_batch(store: Store, ctx: RunContext, provider: Provider, units: list[Unit]) -> str:
    """Submit the units as one batch and note it (with exactly what it holds) on the run."""
    try:
        batch_id = provider.submit_batch([(u.custom_id, u.body) for u in units])
    except CallFailed as exc:
        raise RunAborted(f"run stopped: {exc}") from None
    except NotImplementedError as exc:
        raise RunAborted(f"run stopped: {exc}") from None
    note_batch(store, ctx.run_id, {
        "id": batch_id, "provider": ctx.spec.provider, "base_url": provider.recorded_base_url,
        "requests": len(units), "custom_ids": {u.custom_id: u.request_hash for u in units},
        "submitted_at": utcnow()})
    return batch_id


def _wait_for_batch(provider: Provider, ctx: RunContext, batch_id: str, tally: Tally,
                    poll_interval: float, max_wait: float) -> str:
    """Poll until the batch has ended; its final status."""
    waited = 0.0
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
        time.sleep(poll_interval)
        waited += poll_interval


def collect_into(store: Store, store_path: str, ctx: RunContext, task: Task, provider: Provider,
                 units: list[Unit], batch_id: str, tally: Tally, *, by_run: int,
                 poll_interval: float, max_wait: float, concurrency: int,
                 reply_attempts: int) -> None:
    """Wait for the batch `ctx.run_id` submitted, record its results for `units`
    (what it holds), mark it collected; unreadable lines are asked again directly."""
    status = _wait_for_batch(provider, ctx, batch_id, tally, poll_interval, max_wait)
    if status not in ("completed", "ended", "expired"):
        close_batch(store, ctx.run_id, status, by_run)
        raise RunAborted(f"batch {batch_id} ended as {status}: nothing recorded; run again")
    try:
        results = list(provider.batch_results(batch_id, task))
    except CallFailed as exc:
        raise RunAborted(f"could not read the results of batch {batch_id}: {exc}; "
                         + _collect_later(ctx.run_id)) from None
    by_id = {unit.custom_id: unit for unit in units}
    outcomes, again = [], []
    for custom_id, result in results:
        unit = by_id.pop(custom_id, None)
        if unit is None:
            continue
        outcome = Outcome(unit.work)
        if isinstance(result, str):
            outcome.calls.append(CallRecord("error", unit.body, unit.request_hash, error=result))
            outcome.kind, outcome.message = "error", result
        else:
            call = call_record(provider, unit, result, batch=True)
            outcome.calls.append(call)
            kind, answer = read_reply(task, call, result)
            if kind == "unreadable":
                # Recorded now; asked again directly below, a bounded number of times.
                outcome.kind = "retry"
                again.append(unit)
            elif kind == "cut_off":
                outcome.kind, outcome.message = "error", call.error
            else:
                outcome.answer, outcome.kind = answer, kind
                outcome.message = call.error if kind == "refused" else None
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
    close_batch(store, ctx.run_id, status, by_run)
    if again:
        run_threads(store_path, ctx, task, provider, again, concurrency, tally,
                    max(reply_attempts - 1, 1))


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
    last batch collected). `wait` False (a run that asks directly, not by
    batch): a batch still running is not waited for; the units it holds are
    left unanswered, with a message saying how to collect them, instead of
    being asked (and paid for) a second time."""
    rest = {unit.custom_id: unit for unit in units}
    collected = None
    for run in open_batches(store, ctx.rater_id, ctx.prompt.sha256):
        params = json.loads(run["params"])
        batch = params["batch"]
        submitted = batch.get("custom_ids")
        if (run["task"] != task.name or not isinstance(submitted, dict)
                or batch.get("base_url") != provider.recorded_base_url):
            continue
        held = [cid for cid, unit in rest.items() if submitted.get(cid) == unit.request_hash]
        if not held:
            continue
        try:
            its_units = batch_units(store, run, params, rest, base_url)
        except (ValueError, LookupError, PromptError, RunAborted):
            its_units = [rest[cid] for cid in held]  # the run cannot be planned again
        for cid in held:
            del rest[cid]
        if not wait and not _has_ended(provider, batch["id"]):
            message = (f"held by batch {batch['id']} of run {run['id']}, not ended yet: not asked"
                       f" again; {_collect_later(run['id'])}")
            for unit in its_units:
                tally.add(Outcome(unit.work, kind="error", message=message))
            continue
        tally.report(f"collecting batch {batch['id']} of run {run['id']}", force=True)
        collect_into(store, store_path, replace(ctx, run_id=run["id"], include_answered=bool(
            params.get("include_answered"))), task, provider, its_units, batch["id"], tally,
            by_run=ctx.run_id, **collect)
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
    batch_id: str
    requests: int | None
    submitted_at: str | None

    def text(self) -> str:
        return (f"run {self.run_id} ({self.rater}): batch {self.batch_id} of "
                f"{self.requests if self.requests is not None else '?'} requests, "
                f"submitted {self.submitted_at or 'at an unknown time'}")


def uncollected_batches(store: Store) -> list[OpenBatch]:
    """Batches submitted and never collected (a run stopped while waiting), oldest first."""
    found = []
    for run in open_batches(store):
        batch = json.loads(run["params"])["batch"]
        rater = store.scalar("SELECT name FROM raters WHERE id = ?", (run["rater_id"],))
        found.append(OpenBatch(run["id"], rater or "?", str(batch["id"]), batch.get("requests"),
                               batch.get("submitted_at")))
    return found
