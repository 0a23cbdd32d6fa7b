"""The blinding rule, in one place.

A reviewer answers first and sees machine and reference labels afterwards.
Modes (recorded with each annotation so agreement can be split by them):

- ``blind``: machine and reference labels are never shown;
- ``reveal_after_commit`` (default): shown once the reviewer has committed an
  answer to that question of that item;
- ``suggest``: shown up front, for speed runs; answers are recorded with
  phase ``suggested``.

Other reviewers' answers are never shown to a reviewer; only adjudication
sees them.
"""

from __future__ import annotations

BLIND = "blind"
REVEAL_AFTER_COMMIT = "reveal_after_commit"
SUGGEST = "suggest"
MODES = (BLIND, REVEAL_AFTER_COMMIT, SUGGEST)
DEFAULT_MODE = REVEAL_AFTER_COMMIT


def labels_visible(mode: str, has_committed: bool) -> bool:
    """May machine and reference labels be shown to this reviewer now?"""
    if mode == SUGGEST:
        return True
    if mode == BLIND:
        return False
    return has_committed


def phase_for_commit(mode: str, has_seen_labels: bool) -> str:
    """The phase a new answer is recorded under."""
    if mode == SUGGEST:
        return "suggested"
    return "after_reveal" if has_seen_labels else "blind"
