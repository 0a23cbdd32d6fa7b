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

# -- the words a clinician reads (every screen and export takes them from here) --------

ROLE_WORDS = {"gold": "the reference label", "verifier": "the verifier",
              "adjudicated": "the settled answer"}
"""A reference rater by what it is (the `gold` one: CARE-Bench's `carebench-gold`)."""
SETTLED_RATER = "adjudicated"
"""The name the settled answers are stored under (`review.team.settlements.ADJUDICATED`)."""
GROUP_WORDS = {"group:majority": "the clinicians' majority", "group:clinicians": "the clinicians",
               "group:adjudicated": "the settled answer"}
"""The groups a comparison names (`labels.compare`)."""


def first_up(words: str) -> str:
    """Words as the start of a line: "the mapper, prompt v1" -> "The mapper, prompt v1"."""
    return words[:1].upper() + words[1:]


def rater_words(name: str, kind: str | None, role: str | None, model: str | None = None,
                version: str | None = None) -> str:
    """A rater in a clinician's words, by their role (never the name it is stored
    under, `demo:mapper@v1`, `carebench-gold`, `healthbench-grader`, `adjudicated`):
    "the mapper, prompt v1"; "the judge (judge-1)"; "the grader"; "the reference
    label"; "the verifier"; "the settled answer"; "the agent itself (model-x)"; a
    HealthBench physician by their letter; a person by their name. Lower case, as
    inside a sentence (`first_up` starts a line with it)."""
    if name in GROUP_WORDS:
        return GROUP_WORDS[name]
    if name == SETTLED_RATER:
        return ROLE_WORDS["adjudicated"]
    if kind == "reference" or role == "adjudicated":
        return ROLE_WORDS.get(role or "", "a reference")
    if kind == "machine":
        short = (model or name).rsplit("/", 1)[-1].rsplit(":", 1)[-1].split("@", 1)[0]
        if role == "mapper":
            who = "the mapper" if short in ("", "mapper") else f"the mapper ({short})"
            return f"{who}, prompt {version}" if version else who
        if role == "agent":
            return f"the agent itself ({short})"
        if role == "model":
            return f"the model itself ({short})"
        if "grader" in name or "grader" in (model or ""):
            # A grader named for its benchmark ("healthbench-grader") is the grader;
            # one of several (openai:grader-x@v1) says which.
            bare = not any(c in name for c in ":@/")
            return "the grader" if bare else f"the grader ({short})"
        return "the judge" if short in ("", "judge") else f"the judge ({short})"
    if role == "physician" and ":" in name:
        return f"physician {name.rsplit(':', 1)[-1]}"
    return name
