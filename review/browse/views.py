"""Saved views: a Browse view kept under a name, as its URL query string."""

from __future__ import annotations

from dataclasses import dataclass

from review.browse.query import BrowseQuery
from review.team.access import require_role
from review.team.people import Reviewer
from store import Store, utcnow


@dataclass(frozen=True)
class SavedView:
    name: str
    query: BrowseQuery
    created_by: str
    created_at: str


def save_view(store: Store, name: str, query: BrowseQuery, created_by: str | Reviewer
              ) -> SavedView:
    """Keep the view under `name` (one transaction); saving again under the same
    name replaces it, and the audit log keeps what it showed before. `created_by`:
    the person saving it (checked: `browse`), or a name (the command line's)."""
    if isinstance(created_by, Reviewer):
        require_role(created_by, "browse")
        created_by = created_by.name
    name = " ".join((name or "").split())
    if not name:
        raise ValueError("give the view a name")
    qs = query.with_page(1).query_string()
    now = utcnow()
    with store.transaction() as conn:
        old = conn.execute("SELECT id, query FROM saved_views WHERE name = ?", (name,)).fetchone()
        if old is None:
            view_id = conn.execute(
                "INSERT INTO saved_views (name, query, created_by, created_at) VALUES (?,?,?,?)",
                (name, qs, created_by, now)).lastrowid
        else:
            view_id = old[0]
            conn.execute("UPDATE saved_views SET query = ?, created_by = ?, created_at = ?"
                         " WHERE id = ?", (qs, created_by, now, view_id))
        store.audit(created_by, "save_view", "saved_views", view_id,
                    None if old is None else {"query": old[1]}, {"name": name, "query": qs})
    return SavedView(name, BrowseQuery.from_query_string(qs), created_by, now)


def saved_views(store: Store) -> list[SavedView]:
    """All saved views, newest first."""
    rows = store.query("SELECT name, query, created_by, created_at FROM saved_views"
                       " ORDER BY created_at DESC, id DESC")
    return [SavedView(r[0], BrowseQuery.from_query_string(r[1]), r[2], r[3]) for r in rows]
