"""The words items and answers are stored under, each defined once.

Every screen, importer, export and rater reads these from here: the kinds of
item, the question a step mark answers and the codes an answer may carry
besides a codebook's labels, and how labels were shown to a reviewer when
they answered.
"""

from __future__ import annotations

ITEM_KINDS = ("prefix", "response", "trajectory", "graded_conversation")
"""What a reviewer looks at: a prefix (patient turns so far), a response (one
model's reply to a prefix), a trajectory (an agent run), a graded conversation."""
LABEL_KINDS = ("prefix", "response")
"""Item kinds asked one label question each (the CARE-Bench escalation labels)."""
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
