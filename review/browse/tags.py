"""Tags: a user-defined error taxonomy applied to items or to single steps.

The taxonomy starts with the safety-failure types seeded by the schema
(missed urgent escalation, unsafe reassurance, unsafe remote dosing,
fabricated evidence, unsupported claim, under 'safety failure'); reviewers
add their own. Tagging is append-only: removing a tag writes a new row, so
the history of who tagged what, when and why is never lost. The newest row
for (item, target, tag) says whether the tag is in force.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from review.team.reviewers import Reviewer
from store import Store, utcnow

STEP_TARGET = re.compile(r"^step:[1-9][0-9]*$")


@dataclass(frozen=True)
class Tag:
    id: int
    name: str
    description: str | None
    parent: str | None
    """The broader tag this one refines."""
    created_by: str


@dataclass(frozen=True)
class TagEvent:
    tag: str
    target: str
    added: bool
    """True: the tag was applied; False: removed."""
    by: str
    note: str | None
    at: str


@dataclass(frozen=True)
class TagCount:
    tag: str
    items: int
    """Items carrying the tag on the whole item."""
    steps: int
    """Single steps carrying the tag."""


def list_tags(store: Store) -> list[Tag]:
    """The taxonomy, broader tags first, each followed by its narrower tags."""
    rows = store.query("SELECT t.id, t.name, t.description, p.name, t.created_by, t.parent_id"
                       " FROM tags t LEFT JOIN tags p ON p.id = t.parent_id ORDER BY t.id")
    children: dict[int | None, list[Any]] = {}
    for row in rows:
        children.setdefault(row[5], []).append(row)
    out: list[Tag] = []

    def walk(parent: int | None) -> None:
        for row in children.get(parent, []):
            out.append(Tag(row[0], row[1], row[2], row[3], row[4]))
            walk(row[0])
    walk(None)
    return out


def create_tag(store: Store, name: str, created_by: str, description: str | None = None,
               parent: str | None = None) -> Tag:
    """Add a tag to the taxonomy (one transaction). Names are unique, ignoring case."""
    name = " ".join((name or "").split())
    if not name:
        raise ValueError("a tag needs a name")
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM tags WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"there is already a tag called {name!r}")
        parent_id = None
        if parent:
            row = conn.execute("SELECT id FROM tags WHERE name = ?", (parent,)).fetchone()
            if row is None:
                raise ValueError(f"no tag called {parent!r} to put it under")
            parent_id = row[0]
        cur = conn.execute(
            "INSERT INTO tags (name, description, parent_id, created_by, created_at)"
            " VALUES (?,?,?,?,?)", (name, description or None, parent_id, created_by, utcnow()))
        store.audit(created_by, "tag_create", "tags", cur.lastrowid, None,
                    {"name": name, "description": description, "parent": parent})
    return Tag(cur.lastrowid, name, description or None, parent, created_by)


def _check_target(target: str) -> str:
    target = target or ""
    if target and not STEP_TARGET.match(target):
        raise ValueError(f"a tag goes on the whole item ('') or on one step ('step:N'), not {target!r}")
    return target


def _set_tag(store: Store, reviewer: Reviewer, item_id: int, tag: str, target: str,
             note: str | None, added: bool) -> int | None:
    target = _check_target(target)
    with store.transaction() as conn:
        tag_row = conn.execute("SELECT id, name FROM tags WHERE name = ?", (tag,)).fetchone()
        if tag_row is None:
            raise ValueError(f"no tag called {tag!r}")
        if conn.execute("SELECT 1 FROM items WHERE id = ?", (item_id,)).fetchone() is None:
            raise ValueError(f"no item {item_id}")
        last = conn.execute(
            "SELECT added FROM item_tags WHERE item_id = ? AND target = ? AND tag_id = ?"
            " ORDER BY id DESC LIMIT 1", (item_id, target, tag_row[0])).fetchone()
        in_force = bool(last and last[0])
        if in_force == added:
            return None  # already so: nothing to record
        cur = conn.execute(
            "INSERT INTO item_tags (item_id, target, tag_id, rater_id, added, note, created_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (item_id, target, tag_row[0], reviewer.id, int(added), (note or "").strip() or None,
             utcnow()))
        store.audit(reviewer.name, "tag" if added else "untag", "item_tags", cur.lastrowid,
                    {"tag": tag_row[1], "in_force": in_force},
                    {"item_id": item_id, "target": target, "tag": tag_row[1], "in_force": added,
                     "note": note or None})
        return cur.lastrowid


def add_tag(store: Store, reviewer: Reviewer, item_id: int, tag: str, target: str = "",
            note: str | None = None) -> int | None:
    """Tag an item (target '') or one step ('step:N'). Returns the new row id,
    or None when the tag was already on it."""
    return _set_tag(store, reviewer, item_id, tag, target, note, True)


def remove_tag(store: Store, reviewer: Reviewer, item_id: int, tag: str, target: str = "",
               note: str | None = None) -> int | None:
    """Take a tag off (a new row; the earlier ones stay). None when it was not on."""
    return _set_tag(store, reviewer, item_id, tag, target, note, False)


def tags_on(store: Store, item_id: int) -> list[TagEvent]:
    """The tags in force on an item and its steps, with who applied them and why."""
    rows = store.query(
        "SELECT g.name, t.target, t.added, r.name, t.note, t.created_at FROM current_item_tags t"
        " JOIN tags g ON g.id = t.tag_id JOIN raters r ON r.id = t.rater_id"
        " WHERE t.item_id = ? ORDER BY t.target, g.name", (item_id,))
    return [TagEvent(r[0], r[1], bool(r[2]), r[3], r[4], r[5]) for r in rows]


def tag_history(store: Store, item_id: int) -> list[TagEvent]:
    """Every tag added to or removed from an item, oldest first."""
    rows = store.query(
        "SELECT g.name, t.target, t.added, r.name, t.note, t.created_at FROM item_tags t"
        " JOIN tags g ON g.id = t.tag_id JOIN raters r ON r.id = t.rater_id"
        " WHERE t.item_id = ? ORDER BY t.id", (item_id,))
    return [TagEvent(r[0], r[1], bool(r[2]), r[3], r[4], r[5]) for r in rows]


def tag_counts(store: Store, item_ids: list[int] | None = None) -> list[TagCount]:
    """How often each tag is in force, on whole items and on single steps, among
    `item_ids` (all items when None); every tag of the taxonomy is listed."""
    only = "" if item_ids is None else " AND c.item_id IN (SELECT value FROM json_each(?))"
    rows = store.query(
        "SELECT g.name, COUNT(DISTINCT CASE WHEN t.target = '' THEN t.item_id END),"
        " COUNT(CASE WHEN t.target != '' THEN 1 END)"
        " FROM tags g LEFT JOIN (SELECT c.* FROM current_item_tags c"
        f" WHERE 1{only}) t ON t.tag_id = g.id GROUP BY g.id ORDER BY g.id",
        [] if item_ids is None else [json.dumps(item_ids)])
    return [TagCount(r[0], r[1], r[2]) for r in rows]
