"""The words items and answers are stored under, each defined once.

Every screen, importer, export and rater reads these from here: the kinds of
item, the question a step mark answers and the codes an answer may carry
besides a codebook's labels, and how labels were shown to a reviewer when
they answered.
"""

from __future__ import annotations

ITEM_KINDS = ("prefix", "response", "trajectory", "graded_conversation", "conversation")
"""What a reviewer looks at: a prefix (patient turns so far), a response (one
model's reply to a prefix), a trajectory (an agent run), a graded conversation,
a conversation (a study's own: any chat, from the plain conversation format)."""
LABEL_KINDS = ("prefix", "response", "conversation")
"""Item kinds answered on the Review screen, one label question at a time (the
CARE-Bench escalation labels; a study's own questions of its conversations)."""
RUBRIC_KINDS = ("trajectory", "graded_conversation")
"""Item kinds answered criterion by criterion (gates, must-ask topics, verifier
checks, process and HealthBench rubrics, the CliniCARE verdict)."""

STEP_CODEBOOK = "trajectory-errors"
"""The codebook of what went wrong at one step of an agent run."""
STEP_ERROR_QUESTION = "trajectory.step_error"
"""The question a reviewer answers about one step (codebook trajectory-errors), target `step:<id>`."""
NO_ERROR = "no_error"
"""A step mark that records the step as checked, with nothing wrong."""

CANNOT_ASSESS = "cannot_assess"
"""The status (and, on the screens and in comparisons, the choice) of an answer
that says the item does not give enough to decide."""
MET, NOT_MET = "met", "not_met"
"""A rubric criterion's verdicts."""
STATUSES = ("answered", CANNOT_ASSESS, "skipped")
"""What an annotation is: an answer, "cannot assess", or a pass over the item."""

BLIND = "blind"
"""Blinding: machine and reference labels are never shown."""
REVEAL_AFTER_COMMIT = "reveal_after_commit"
"""Blinding: shown once the reviewer has committed an answer to that question of that item."""
SUGGEST = "suggest"
"""Blinding: shown up front, for speed runs; answers are recorded as 'suggested'."""
BLINDING_MODES = (BLIND, REVEAL_AFTER_COMMIT, SUGGEST)
"""How labels are shown to a reviewer: recorded with each answer (`extra.blinding`)
and set per review round. What each allows is `review.reviewing.blinding`'s rule."""

SCREEN_KEYS = {
    "review": {"0": "cannot assess", "f": "flag", "s": "skip", "z": "change the last answer"},
    "trajectories": {"f": "flag", "m": "save a step's mark", "y": "met", "n": "not met",
                     "u": "cannot assess"},
    "adjudicate": {"a": "ambiguous item", "g": "codebook gap", "h": "reviewer error",
                   "m": "machine error"},
    "browser": {"c": "Streamlit's clear cache", "r": "Streamlit's rerun"},
}
"""The single keys carelens (and Streamlit) use on each screen where a codebook's labels
are picked by key: a label's `shortcut` may not be one of them there (checked when a
codebook is loaded or added, `codebook.loader`). Keys ignore capitals. Digits with
Shift, arrows and Ctrl+Enter are never a label's (a shortcut is one letter or digit)."""
