"""What the database holds: items by kind, answers, and the imports that brought them.

The Data screen's figures, read here so that the screen holds no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from codebook import ITEM_KINDS
from store import Store


@dataclass(frozen=True)
class KindCount:
    """The items of one kind."""

    kind: str
    items: int
    """Every item of the kind, the prompts below included."""
    failed: int
    """Failed generations (kept, and shown as failures)."""
    prompts: int
    """Graded conversations without a reply: the prompt its graded replies share."""


def item_counts(store: Store) -> list[KindCount]:
    """Items counted by kind, in the order of the review screens."""
    order = " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(ITEM_KINDS))
    return [KindCount(r["kind"], r["n"], r["failed"] or 0, r["prompts"] or 0) for r in store.query(
        "SELECT kind, COUNT(*) AS n, SUM(failed) AS failed, SUM(kind = 'graded_conversation'"
        " AND json_extract(payload, '$.completion') IS NULL) AS prompts FROM items GROUP BY kind"
        f" ORDER BY CASE kind {order} ELSE {len(ITEM_KINDS)} END")]


def annotation_count(store: Store) -> int:
    """Every answer by every rater, revisions included."""
    return store.scalar("SELECT COUNT(*) FROM annotations")


@dataclass(frozen=True)
class ImportRecord:
    """One import, as the Data screen lists it."""

    imported_at: str
    path: str
    """The file's name as given on import."""
    format: str
    n_rows: int
    n_items: int
    n_completed: int
    """Placeholders an earlier file had named, completed by this one."""
    n_annotations: int
    actor: str


def import_history(store: Store, limit: int = 50) -> list[ImportRecord]:
    """The latest imports, newest first."""
    return [ImportRecord(r["imported_at"], r["path"], r["format"], r["n_rows"], r["n_items"],
                         r["n_completed"], r["n_annotations"], r["actor"]) for r in store.query(
        "SELECT imported_at, path, format, n_rows, n_items, n_completed, n_annotations, actor"
        " FROM imports ORDER BY id DESC LIMIT ?", (limit,))]
