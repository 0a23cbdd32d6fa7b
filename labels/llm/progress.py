"""What a run reports: progress while it runs, a summary at the end, RunAborted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from labels.llm.record import Outcome, RunContext


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
    refused: int = 0
    """The model declined: recorded as cannot assess."""
    """What the run is doing: 'cache', 'asking the model', 'waiting for batch (in_progress)'."""

    @property
    def fraction(self) -> float:
        return 1.0 if not self.total else min(self.done / self.total, 1.0)

    def text(self) -> str:
        """One line for a terminal bar or under the app's progress bar."""
        parts = [f"{self.done}/{self.total}", f"{self.answered} answered"]
        parts += [f"{n} {what}" for n, what in ((self.cached, "from the cache"),
                  (self.failed, "unreadable"), (self.refused, "refused"),
                  (self.errors, "failed calls"),
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
    refused: int = 0
    """The model declined to answer: recorded as cannot assess."""

    def text(self) -> str:
        parts = [f"{self.answered} answered", f"{self.cached} from the cache",
                 f"{self.failed} unreadable (recorded as cannot assess)",
                 *([f"{self.refused} refused by the model (recorded as cannot assess)"]
                   if self.refused else []),
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
BEAT_EVERY = 10.0
"""Seconds between a running run's heartbeats (see record.is_alive)."""


class Tally:
    """Counts kept by the calling thread."""

    def __init__(self, total: int, progress: Progress | None):
        self.state = RunProgress(0, total)
        self.progress = progress
        self.messages: list[str] = []
        self._last = 0.0
        self.only: set[tuple[int, int]] | None = None
        """When set, outcomes of other (item, question) pairs are not counted: the
        rest of an earlier run's batch, recorded while collecting it."""
        self.not_again: dict[str, str] = {}
        """Request hashes not to send again in this run, with why (cut off,
        unreadable every time, held by a batch or another run)."""
        self.on_beat: Callable[[], None] | None = None
        """The run's heartbeat, called at most every `BEAT_EVERY` seconds."""
        self._beat = time.monotonic()

    def note(self, message: str) -> None:
        """A message for the summary (at most five, each once)."""
        if message not in self.messages and len(self.messages) < 5:
            self.messages.append(message)

    def beat(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.on_beat is not None and (force or now - self._beat >= BEAT_EVERY):
            self._beat = now
            self.on_beat()

    def add(self, outcome: Outcome) -> None:
        if outcome.hold:
            self.not_again.setdefault(outcome.hold, outcome.message or "not answered")
        if self.only is not None and (outcome.work.item_id, outcome.work.question_id) not in self.only:
            return
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
        elif outcome.kind == "refused":
            s.refused += 1
        else:
            s.errors += 1
        if outcome.message and outcome.kind in ("error", "fatal", "failed", "refused", "skipped"):
            self.note(outcome.message)

    def report(self, stage: str, force: bool = False) -> None:
        """Call the progress callback, at most ten times a second."""
        self.state.stage = stage
        self.beat()
        now = time.monotonic()
        if self.progress and (force or now - self._last >= 0.1 or self.state.done >= self.state.total):
            self._last = now
            self.progress(RunProgress(**self.state.__dict__))

    def summary(self, ctx: RunContext, started: float, batch_id: str | None = None) -> RunSummary:
        s = self.state
        return RunSummary(ctx.run_id, ctx.rater, s.total, s.answered, s.failed, s.errors, s.cached,
                          s.skipped, round(s.cost_usd, 6), round(time.perf_counter() - started, 3),
                          batch_id, list(self.messages), refused=s.refused)
