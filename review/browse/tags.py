"""Tags: a user-defined error taxonomy applied to items or to single steps.

The taxonomy starts with the safety-failure types seeded by the schema
(missed urgent escalation, unsafe reassurance, unsafe remote dosing,
fabricated evidence, unsupported claim, under 'safety failure'). Admins add
their own ("mapper error"), and so do reviewers where the study allows it
(`review.team.study`: reviewers_add_tags, which an admin sets). The list is
append-only like the rest: a tag is never renamed or deleted; one retired is
a new row in `tag_changes` (no longer offered; where it was applied it
stays), and may be offered again the same way. Tagging is append-only too:
removing a tag writes a new row, so the history of who tagged what, when and
why is never lost. The newest row for (item, target, tag) says whether the
tag is in force.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from review.team.reviewers import Reviewer
from review.team.study import allows
from store import Store, utcnow
from store.names import name_problem

STEP_TARGET = re.compile(r"^step:[1-9][0-9]*$")


@dataclass(frozen=True)
class Tag:
    id: int
    name: str
    description: str | None
    parent: str | None
    """The broader tag this one refines."""
    created_by: str
    retired: bool = False
    """No longer offered (where it was applied, it stays)."""


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


_RETIRED = ("(SELECT c.retired FROM tag_changes c WHERE c.tag_id = t.id"
            " ORDER BY c.id DESC LIMIT 1)")


def list_tags(store: Store, retired: bool = False) -> list[Tag]:
    """The taxonomy, broader tags first, each followed by its narrower tags; with
    `retired`, the retired tags too (marked)."""
    rows = store.query("SELECT t.id, t.name, t.description, p.name, t.created_by, t.parent_id,"
                       f" COALESCE({_RETIRED}, 0) FROM tags t LEFT JOIN tags p ON p.id = t.parent_id"
                       " ORDER BY t.id")
    children: dict[int | None, list[Any]] = {}
    for row in rows:
        children.setdefault(row[5], []).append(row)
    out: list[Tag] = []

    def walk(parent: int | None) -> None:
        for row in children.get(parent, []):
            if retired or not row[6]:
                out.append(Tag(row[0], row[1], row[2], row[3], row[4], bool(row[6])))
            walk(row[0])
    walk(None)
    return out


def may_add_tags(store: Store, reviewer: Reviewer | None) -> bool:
    """Admins may add tags to the list; reviewers and adjudicators where the study
    allows it (`reviewers_add_tags`, set by an admin)."""
    from review.team.access import allowed  # here: see create_tag

    if reviewer is None:
        return False
    return allowed(reviewer, "add_tags", server=True) or allows(store, "reviewers_add_tags")


def create_tag(store: Store, name: str, by: Reviewer, description: str | None = None,
               parent: str | None = None) -> Tag:
    """Add a tag to the taxonomy (one transaction), if `by` may (`may_add_tags`).
    Names are unique, ignoring case (a retired tag's name too: offer it again)."""
    # Imported here: access imports the workspace, which imports this package.
    from review.team.access import require

    if not may_add_tags(store, by):
        require(by, "add_tags", server=True)  # refuses, saying who may
    name = " ".join((name or "").split())
    if not name:
        raise ValueError("a tag needs a name")
    if (problem := name_problem(name)) is not None:
        raise ValueError(f"tag {name!r}: {problem}")
    with store.transaction() as conn:
        twin = conn.execute(f"SELECT t.name, COALESCE({_RETIRED}, 0) FROM tags t WHERE t.name = ?",
                            (name,)).fetchone()
        if twin:
            raise ValueError(f"there is already a tag called {twin[0]!r}"
                             + (" (retired: offer it again instead)" if twin[1] else ""))
        parent_id = None
        if parent:
            row = conn.execute("SELECT id FROM tags WHERE name = ?", (parent,)).fetchone()
            if row is None:
                raise ValueError(f"no tag called {parent!r} to put it under")
            parent_id = row[0]
        cur = conn.execute(
            "INSERT INTO tags (name, description, parent_id, created_by, created_at)"
            " VALUES (?,?,?,?,?)", (name, description or None, parent_id, by.name, utcnow()))
        store.audit(by.name, "tag_create", "tags", cur.lastrowid, None,
                    {"name": name, "description": description, "parent": parent})
    return Tag(cur.lastrowid, name, description or None, parent, by.name)


def retire_tag(store: Store, admin: Reviewer, name: str, note: str | None = None,
               retired: bool = True) -> bool:
    """Retire a tag from the list (or, `retired` False, offer it again): a new row,
    the tag and everywhere it was applied kept. Only an admin may. False when it
    was so already."""
    from review.team.access import require  # here: see create_tag

    require(admin, "manage_tags", server=True)
    with store.transaction() as conn:
        row = conn.execute(f"SELECT t.id, COALESCE({_RETIRED}, 0) FROM tags t WHERE t.name = ?",
                           (name,)).fetchone()
        if row is None:
            raise ValueError(f"no tag called {name!r}")
        if bool(row[1]) == retired:
            return False
        cur = conn.execute(
            "INSERT INTO tag_changes (tag_id, retired, changed_by, note, created_at)"
            " VALUES (?,?,?,?,?)", (row[0], int(retired), admin.name, note or None, utcnow()))
        store.audit(admin.name, "tag_retire" if retired else "tag_offer", "tag_changes",
                    cur.lastrowid, {"tag": name, "retired": not retired},
                    {"tag": name, "retired": retired, "note": note or None})
    return True


def _check_target(target: str) -> str:
    target = target or ""
    if target and not STEP_TARGET.match(target):
        raise ValueError(f"a tag goes on the whole item ('') or on one step ('step:N'), not {target!r}")
    return target


def _set_tag(store: Store, reviewer: Reviewer, item_id: int, tag: str, target: str,
             note: str | None, added: bool) -> int | None:
    target = _check_target(target)
    with store.transaction() as conn:
        tag_row = conn.execute(f"SELECT t.id, t.name, COALESCE({_RETIRED}, 0) FROM tags t"
                               " WHERE t.name = ?", (tag,)).fetchone()
        if tag_row is None:
            raise ValueError(f"no tag called {tag!r}")
        if added and tag_row[2]:
            raise ValueError(f"the tag {tag_row[1]!r} is retired: an admin can offer it again")
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
