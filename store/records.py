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


Record = RaterRecord | ItemRecord | QuestionRecord | AnnotationRecord
