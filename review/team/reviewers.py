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


def people_sql(alias: str = "") -> str:
    """SQL true for human raters who review in the app (`alias`: the raters
    table's alias in the query): not those an import brought with another role,
    such as HealthBench's anonymized physicians (`physician`), whose labels are
    data, not anyone's login or anyone's work to adjudicate."""
    a = f"{alias}." if alias else ""
    return (f"{a}kind = 'human' AND ({a}role IS NULL OR {a}role IN"
            f" ({', '.join(repr(r) for r in ROLES)}))")


PEOPLE = people_sql()


SETTLED_ANSWERS = "adjudicated"
"""The rater of settled answers (`review.team.adjudication.ADJUDICATED`)."""

REFERENCE_RATERS = ("carebench-gold", "klinikebench-verifier", "clinicare-cohort",
                    "clinicare-verifier", "harbor-verifier")
"""The reference raters the importers make (gold labels, verifiers): names no
person may take, even before the file that brings them is imported."""


def reserved_name(store: Store | None, name: str) -> str | None:
    """Why no person (a display name at sign-in, a name added in the sidebar, a
    rater a file creates) may be called `name`; None when a person may. The
    names the system uses are never a person's, in any capitals: the settled
    answers (`adjudicated`), groups (`group:...`), machine and reference raters
    (a colon: `provider:model@prompt`; the reference raters' names), and the
    name of any rater in `store` that is not a person."""
    folded = " ".join(name.split()).casefold()
    if folded == SETTLED_ANSWERS:
        return f"{SETTLED_ANSWERS!r} is the name of the settled answers"
    if folded.startswith("group:"):
        return "a name beginning 'group:' names a group of raters"
    if ":" in folded:
        return "a name with a colon is a machine or reference rater's (provider:model@prompt)"
    if folded in {n.casefold() for n in REFERENCE_RATERS}:
        return f"{name!r} is the name of a reference rater"
    if store is not None:
        other = store.query_one(
            f"SELECT name, kind FROM raters WHERE NOT ({PEOPLE}) AND name = ? COLLATE NOCASE",
            (" ".join(name.split()),))
        if other is not None:
            return f"{other['name']!r} is the name of a {other['kind']} rater whose answers are data"
    return None


def list_reviewers(store: Store) -> list[Reviewer]:
    rows = store.query(
        f"SELECT id, name, role, specialty, seniority FROM raters WHERE {PEOPLE} ORDER BY name"
    )
    return [_from_row(r) for r in rows]


def find_reviewer(store: Store, name: str) -> Reviewer | None:
    row = store.query_one(
        f"SELECT id, name, role, specialty, seniority FROM raters WHERE {PEOPLE} AND name = ?",
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
    folded = name.casefold()
    twin = next((r.name for r in list_reviewers(store) if r.name.casefold() == folded), None)
    if twin is not None:
        raise ValueError(f"{twin!r} is already a reviewer (the names differ only in capitals): "
                         "choose that name in the list, or give another name")
    with store.transaction() as conn:
        clash = conn.execute("SELECT kind, role FROM raters WHERE name = ?", (name,)).fetchone()
        if clash is not None and clash[0] != "human":
            raise ValueError(f"{name!r} is the name of a {clash[0]} rater; choose another name")
        if clash is not None and clash[1] is not None and clash[1] not in ROLES:
            raise ValueError(f"{name!r} is the name of an imported rater whose answers are data, "
                             "not a reviewer's; choose another name")
        reserved = reserved_name(store, name) if clash is None else None
        if reserved is not None:
            raise ValueError(f"{reserved}; choose another name")
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


def can_adjudicate(reviewer: Reviewer | None) -> bool:
    return reviewer is not None and reviewer.role in ("adjudicator", "admin")


def is_admin(reviewer: Reviewer | None) -> bool:
    return reviewer is not None and reviewer.role == "admin"


def grant_role(store: Store, admin: Reviewer, name: str, role: str) -> Reviewer:
    """An admin gives a reviewer a role (reviewer, adjudicator or admin)."""
    if not is_admin(admin):
        raise ValueError("only an admin can grant roles")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    target = find_reviewer(store, name)
    if target is None:
        raise ValueError(f"no reviewer named {name!r}")
    if target.id == admin.id and role != "admin":
        raise ValueError("an admin cannot take their own admin role away")
    with store.transaction() as conn:
        # Again, under the write lock: the admin may have been demoted meanwhile, and
        # no grant may leave the database without an admin.
        if conn.execute("SELECT role FROM raters WHERE id = ?", (admin.id,)).fetchone()[0] != "admin":
            raise ValueError("only an admin can grant roles (yours was changed meanwhile)")
        admins = conn.execute(f"SELECT COUNT(*) FROM raters WHERE {PEOPLE} AND role = 'admin'"
                              " AND id != ?", (target.id,)).fetchone()[0]
        if role != "admin" and admins == 0:
            raise ValueError("that would leave no admin: make someone else an admin first")
        conn.execute("UPDATE raters SET role = ? WHERE id = ?", (role, target.id))
        store.audit(admin.name, "grant_role", "raters", target.id, {"role": target.role},
                    {"role": role})
    found = find_reviewer(store, name)
    assert found is not None
    return found


def update_profile(store: Store, reviewer: Reviewer, specialty: str | None,
                   seniority: str | None) -> Reviewer:
    with store.transaction() as conn:
        conn.execute("UPDATE raters SET specialty = ?, seniority = ? WHERE id = ?",
                     (specialty or None, seniority or None, reviewer.id))
        store.audit(reviewer.name, "profile", "raters", reviewer.id,
                    {"specialty": reviewer.specialty, "seniority": reviewer.seniority},
                    {"specialty": specialty, "seniority": seniority})
    found = find_reviewer(store, reviewer.name)
    assert found is not None
    return found
