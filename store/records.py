"""Plain records that importers, the demo and the LLM raters hand to the store.

They name things by their public keys (item uid, question key, rater name);
the store resolves those to row ids, so no caller needs to know the schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RaterRecord:
    name: str
    """Unique shown name. Machine raters: provider:model@prompt_version."""
    kind: str
    """human | machine | reference"""
    role: str | None = None
    specialty: str | None = None
    seniority: str | None = None
    provider: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    kind_assumed: bool = False
    """True when the source did not say the kind: an existing rater of another kind is used."""


@dataclass(slots=True)
class RunRecord:
    """The run items belong to (`store.runs`): named by the fields its source says
    identify it. The writer finds the run of that identity in the dataset or makes it
    (when the first item of it is written), and gives each item of it the run's id."""

    dataset: str
    kind: str
    """The kind of its items: response | trajectory | graded_conversation."""
    identity: dict[str, Any]
    """`store.runs.IDENTITY` fields and whatever else identifies it in its format."""
    model_actual: str | None = None
    """The model served, where the source says so for the run."""
    meta: dict[str, Any] = field(default_factory=dict)
    """What else the source says of it (not part of its identity)."""
    aliases: tuple[str, ...] = ()
    """Names the submitter gave it (CARE-Bench `model_alias`)."""
    source: str | None = None
    """The file it comes from, when not the file being imported."""

    @property
    def key(self) -> str:
        from store.runs import run_key

        return run_key(self.identity)


@dataclass(slots=True)
class ItemRecord:
    uid: str
    """Stable public id, unique across the database."""
    kind: str
    """prefix | response | trajectory | graded_conversation"""
    dataset: str
    payload: dict[str, Any]
    """What the reviewer reads; its shape depends on `kind` (see review.display)."""
    parent_uid: str | None = None
    case_id: str | None = None
    round_id: int | None = None
    split: str | None = None
    model: str | None = None
    failed: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    replace_stub: bool = False
    """Overwrite an item of the same uid that was created as a stub (meta.stub)."""
    line: int | None = None
    """Source line, for error messages and row counts."""
    run: RunRecord | None = None
    """The run a response, trajectory or completion belongs to (`store.runs`); None:
    the run of its model alone (`{"model_requested": model}`), as a file that names no
    more gives it. Prefixes, prompts, tasks and placeholders belong to none."""
    shared: bool = False
    """The uid names the item whatever run brings it (a HealthBench completion id is a
    digest of the prompt and the text): an item of that uid already in another run is
    this item, and stays in its run (the writer counts it in `joined`). Otherwise an
    item of that uid in another run is refused, never taken as this one."""


@dataclass(slots=True)
class QuestionRecord:
    key: str
    codebook: str
    kind: str
    """labelset | criterion"""
    text: str
    item_uid: str | None = None
    applies_to: str | None = None
    points: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    replace_stub: bool = False
    """Fill in a question of the same key made as a placeholder (meta.stub)."""


@dataclass(slots=True)
class AnnotationRecord:
    item_uid: str
    question_key: str
    rater: str
    """Rater name; the rater must have been given earlier in the same stream or exist."""
    value: str | None
    status: str = "answered"
    rationale: str | None = None
    confidence: int | None = None
    phase: str = "imported"
    target: str = ""
    codebook_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None
    """Source line, for error messages."""


Record = RaterRecord | ItemRecord | QuestionRecord | AnnotationRecord | RunRecord
