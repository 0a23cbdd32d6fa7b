"""Who is reviewing: human raters with a profile (specialty, seniority, role)."""

from __future__ import annotations

from dataclasses import dataclass

from store import Store, utcnow

ROLES = ("reviewer", "adjudicator", "admin")


@dataclass(frozen=True)
class Reviewer:
    id: int
    name: str
    role: str
    specialty: str | None = None
    seniority: str | None = None


def _from_row(row) -> Reviewer:
    return Reviewer(row["id"], row["name"], row["role"] or "reviewer", row["specialty"],
                    row["seniority"])


def list_reviewers(store: Store) -> list[Reviewer]:
    rows = store.query(
        "SELECT id, name, role, specialty, seniority FROM raters WHERE kind = 'human' ORDER BY name"
    )
    return [_from_row(r) for r in rows]


def find_reviewer(store: Store, name: str) -> Reviewer | None:
    row = store.query_one(
        "SELECT id, name, role, specialty, seniority FROM raters WHERE kind = 'human' AND name = ?",
        (name,),
    )
    return _from_row(row) if row else None


def ensure_reviewer(store: Store, name: str, specialty: str | None = None,
                    seniority: str | None = None, role: str = "reviewer") -> Reviewer:
    """The human rater of that name, created with this profile if new."""
    name = " ".join(name.split())
    if not name:
        raise ValueError("a reviewer needs a name")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    existing = find_reviewer(store, name)
    if existing:
        return existing
    with store.transaction() as conn:
        clash = conn.execute("SELECT kind FROM raters WHERE name = ?", (name,)).fetchone()
        if clash is not None and clash[0] != "human":
            raise ValueError(f"{name!r} is the name of a {clash[0]} rater; choose another name")
        if clash is None:
            cur = conn.execute(
                "INSERT INTO raters (name, kind, role, specialty, seniority, created_at)"
                " VALUES (?, 'human', ?, ?, ?, ?)",
                (name, role, specialty or None, seniority or None, utcnow()),
            )
            store.audit(name, "add_reviewer", "raters", cur.lastrowid, None,
                        {"name": name, "role": role, "specialty": specialty,
                         "seniority": seniority})
    found = find_reviewer(store, name)
    assert found is not None
    return found
