"""Who is reviewing: human raters with a profile (specialty, seniority, role)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from review.team.access import may, role_may
from review.team.people import (  # noqa: F401 - the people's names, read from here too
    PEOPLE,
    ROLES,
    SETTLED_ANSWERS,
    Reviewer,
    people_sql,
)
from review.team.people import reviewer_from_row as _from_row
from store import Store, utcnow
from store.names import name_problem  # noqa: F401 - what a name may hold, read from here too

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


_SAME_LETTER = str.maketrans({
    # Cyrillic and Greek letters drawn as Latin ones (after Unicode's confusables list).
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X", "У": "Y", "Ү": "Y", "Ѕ": "S", "І": "I", "Ј": "J", "Ԁ": "D",
    "Ԛ": "Q", "Ԝ": "W", "Һ": "H", "Ӏ": "I",
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i",
    "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ё": "ë",
    "ї": "ï", "ɡ": "g", "ı": "i",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
    "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    "α": "a", "ο": "o", "ρ": "p", "ι": "i", "κ": "k", "ν": "v", "υ": "u", "χ": "x",
})
_SAME_SHAPE = str.maketrans({"I": "l", "1": "l", "|": "l", "ǀ": "l", "0": "O"})


def _letters(name: str) -> str:
    """The name as drawn: NFKC (full-width, ligatures, ...), without what is not
    seen (spaces, zero-width and other format characters, combining marks left
    over), Cyrillic and Greek look-alikes read as the Latin letters they look like."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(ch for ch in text if not ch.isspace()
                   and unicodedata.category(ch) not in ("Cf", "Cc", "Mn", "Me", "Zl", "Zp"))
    return text.translate(_SAME_LETTER)


def likeness(name: str) -> tuple[str, str]:
    """Two keys under which names a screen shows alike meet: in any capitals, and
    by shape in their own capitals (I l 1, O 0, rn m, vv w)."""
    letters = _letters(name)
    shape = letters.translate(_SAME_SHAPE).replace("rn", "m").replace("vv", "w")
    return letters.casefold(), shape


class LookAlikes:
    """Names by their likeness keys: which of them a screen would show like another
    name, found in one look-up (an import checks each new rater against all)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._by_key: dict[tuple[int, str], list[str]] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        for i, key in enumerate(likeness(name)):
            self._by_key.setdefault((i, key), []).append(name)

    def find(self, name: str) -> str | None:
        """The first name added that a screen would show like `name` (differing in
        capitals, spaces, invisible characters, compatibility forms or look-alike
        letters) but that is not exactly `name`; None if there is none."""
        for i, key in enumerate(likeness(name)):
            for other in self._by_key.get((i, key), ()):
                if other != name:
                    return other
        return None


def look_alike(name: str, names: Iterable[str]) -> str | None:
    """The first of `names` a screen would show like `name` but that is not exactly
    `name` (`LookAlikes.find`); None if there is none."""
    return LookAlikes(names).find(name)


def all_rater_names(conn) -> list[str]:
    """Every rater's name (people, machine and reference raters)."""
    return [r[0] for r in conn.execute("SELECT name FROM raters")]


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
    twin = look_alike(name, all_rater_names(store.conn))
    if twin is not None:
        who = "reviewer" if any(r.name == twin for r in list_reviewers(store)) else "rater"
        raise ValueError(f"{twin!r} is already a {who}, and {name!r} would be shown like it"
                         " (capitals, spaces, invisible or look-alike characters): choose that"
                         " name in the list, or give another name")
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"{name!r}: {problem}; give another name")
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
    """Whether they may settle disagreements (`review.team.access.MATRIX`: adjudicate)."""
    return may(reviewer, "adjudicate")


def is_admin(reviewer: Reviewer | None) -> bool:
    """Whether they administer the study: create rounds, grant roles, edit the
    codebook (`review.team.access.MATRIX`: manage_rounds, an admin's)."""
    return may(reviewer, "manage_rounds")


def grant_role(store: Store, admin: Reviewer, name: str, role: str, *,
               server: bool = False) -> Reviewer:
    """An admin gives a reviewer a role (reviewer, adjudicator or admin). On a
    server (`server`) admins are named in the configuration (CARELENS_ADMINS, or
    the secrets' admins: `review.team.identity`), so no grant makes or unmakes one."""
    if not may(admin, "grant_roles"):
        raise ValueError("only an admin can grant roles")
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    target = find_reviewer(store, name)
    if target is None:
        raise ValueError(f"no reviewer named {name!r}")
    if server and "admin" in (role, target.role) and role != target.role:
        raise ValueError("on a server, admins are named in the configuration (CARELENS_ADMINS"
                         " or admins in the secrets), not granted here")
    if target.id == admin.id and role != "admin":
        raise ValueError("an admin cannot take their own admin role away")
    with store.transaction() as conn:
        # Again, under the write lock: the admin may have been demoted meanwhile, and
        # no grant may leave the database without an admin.
        if not role_may(conn.execute("SELECT role FROM raters WHERE id = ?",
                                     (admin.id,)).fetchone()[0], "grant_roles"):
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
