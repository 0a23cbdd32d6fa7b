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


def reviewer_for_login(store: Store, login: str, display_name: str | None = None) -> Reviewer:
    """Server mode: the reviewer behind an OIDC login, created on first sign-in.

    The identity comes from the login and cannot be chosen. The very first
    person to sign in to a database with no admin becomes its admin; everyone
    else starts as a reviewer until an admin grants more."""
    login = login.strip().lower()
    if not login:
        raise ValueError("the login carries no identity")
    known = "SELECT id, name, role, specialty, seniority FROM raters WHERE login = ?"
    row = store.query_one(known, (login,))
    if row:
        return _from_row(row)
    with store.transaction() as conn:
        # Again, under the write lock: another tab signing the same person in
        # for the first time may have created them since.
        if (row := conn.execute(known, (login,)).fetchone()) is not None:
            return _from_row(row)
        has_admin = conn.execute(
            "SELECT 1 FROM raters WHERE kind = 'human' AND role = 'admin' AND login IS NOT NULL"
        ).fetchone()
        role = "reviewer" if has_admin else "admin"
        base = " ".join((display_name or login).split())
        name, n = base, 1
        while conn.execute("SELECT 1 FROM raters WHERE name = ?", (name,)).fetchone():
            n += 1
            name = f"{base} ({n})"
        cur = conn.execute(
            "INSERT INTO raters (name, kind, role, login, created_at) VALUES (?, 'human', ?, ?, ?)",
            (name, role, login, utcnow()))
        store.audit(name, "sign_in_first", "raters", cur.lastrowid, None,
                    {"name": name, "role": role, "login": login})
    return _from_row(store.query_one(known, (login,)))
