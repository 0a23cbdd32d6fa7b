"""Which of the clinicians' answers a comparison uses: the one place this is decided.

Every answer is recorded with its *phase*: ``blind`` (given before any machine or
reference label was shown), ``after_reveal`` (given, or changed, once they had been
shown), ``suggested`` (the labels were shown up front, in a speed round) or
``imported`` (read from a file). A comparison of people with a machine is only
honest on answers the people gave before they saw the machine's label, so:

- the default, ``blind``, takes each clinician's newest answer given before any
  label was seen: their blind answers, and imported answers (a file says
  otherwise by giving the phase column: the labels-long importer reads it);
- ``current`` takes each clinician's newest answer whatever its phase, including
  answers changed after the machine label was shown: only by explicit choice, and
  every output that uses it says so;
- ``after_reveal``, ``suggested`` and ``imported`` take that phase only.

Machine and reference labels are never filtered by phase: they are not given by
people who could have seen another label.

No imports beyond the standard library: the command line reads the choices here
before it loads anything heavy.
"""

from __future__ import annotations

BLIND = "blind"
CURRENT = "current"
PHASES = (BLIND, CURRENT, "after_reveal", "suggested", "imported")
"""The phase choices of every comparison (``--phase`` and the screen's picker)."""
DEFAULT_PHASE = BLIND
RECORDED_PHASES = ("blind", "after_reveal", "suggested", "imported")
"""The phases an answer can be recorded with (the annotations table's check)."""
BEFORE_ANY_LABEL = ("blind", "imported")
"""Recorded phases counted as given before any machine label was seen."""

PHASE_WORDS = {
    BLIND: "blind answers (given before any machine label was seen; imported answers "
           "count as blind unless their file gives another phase)",
    CURRENT: "current answers (each clinician's latest, including answers changed after "
             "the machine label was shown)",
    "after_reveal": "after-reveal answers only (given once the machine label was shown)",
    "suggested": "suggested-phase answers only (the machine label was shown up front)",
    "imported": "imported answers only",
}
SHORT_WORDS = {
    BLIND: "Blind answers (before any machine label was seen)",
    CURRENT: "Current answers (latest, after any reveal)",
    "after_reveal": "After-reveal answers only",
    "suggested": "Suggested-phase answers only",
    "imported": "Imported answers only",
}


def normalise_phase(phase: str | None) -> str:
    """The phase a comparison uses: the default when none is given; ValueError for an
    unknown one."""
    if phase in (None, ""):
        return DEFAULT_PHASE
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    return phase


def recorded_phases(phase: str | None) -> tuple[str, ...] | None:
    """The recorded phases a clinician's answer may have under this choice; None: any."""
    phase = normalise_phase(phase)
    if phase == CURRENT:
        return None
    if phase == BLIND:
        return BEFORE_ANY_LABEL
    return (phase,)


def phase_condition(phase: str | None, annotation: str = "a",
                    rater: str = "r") -> tuple[str, list]:
    """An SQL expression, true for the answers this choice may use (every machine and
    reference answer, the clinicians' answers of its phases), and its parameters."""
    allowed = recorded_phases(phase)
    if allowed is None:
        return "1", []
    marks = ", ".join("?" for _ in allowed)
    return f"({rater}.kind != 'human' OR {annotation}.phase IN ({marks}))", list(allowed)


def describe_phase(phase: str | None) -> str:
    """Which answers, in words, for every output that shows a figure."""
    return "clinicians' " + PHASE_WORDS[normalise_phase(phase)]
