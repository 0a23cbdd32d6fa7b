"""Codebook versions kept in the database: in-app edits and their history.

The shipped TOML files are version 1 of each codebook; an admin's edit of a
label's wording or rules (codes stay fixed, so earlier answers keep their
meaning) makes a new version with a change note. Every annotation records
the version it was given under, so the history can say how many answers each
version received.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from codebook import Codebook, CodebookError, builtin_codebooks, parse_codebook
from review.team.access import may
from review.team.reviewers import Reviewer
from store import Store, to_json, utcnow

EDITABLE = ("short", "definition", "rules", "example")


@dataclass
class CodebookVersion:
    version: str
    note: str | None
    created_by: str
    created_at: str
    answers: int
    """Annotations given under this version."""


def current_codebook(store: Store, key: str) -> Codebook | None:
    """The newest version of a codebook: the last edit, else the shipped file."""
    row = store.query_one(
        "SELECT content FROM codebook_versions WHERE codebook = ? ORDER BY id DESC LIMIT 1", (key,))
    if row is None:
        return builtin_codebooks().get(key)
    return parse_codebook(json.loads(row[0]), source=f"database codebook {key}")


def codebook_history(store: Store, key: str) -> list[CodebookVersion]:
    rows = store.query(
        """SELECT v.version, v.note, v.created_by, v.created_at,
                  (SELECT COUNT(*) FROM annotations a JOIN questions q ON q.id = a.question_id
                   WHERE q.codebook = v.codebook AND a.codebook_version = v.version) AS answers
           FROM codebook_versions v WHERE v.codebook = ? ORDER BY v.id DESC""", (key,))
    return [CodebookVersion(*r) for r in rows]


def _next_version(version: str, taken: set[str]) -> str:
    major, _, minor = version.partition(".")
    n = int(minor) + 1 if minor.isdigit() else 1
    while f"{major}.{n}" in taken:
        n += 1
    return f"{major}.{n}"


def _same(a: object, b: object) -> bool:
    """Whether two values of a label field say the same (rules: a list or a tuple)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def _edited_since(store: Store, key: str, base_version: str) -> str:
    """Who saved the versions after `base_version` (everyone, when it is unknown)."""
    rows = store.query(
        "SELECT created_by FROM codebook_versions WHERE codebook = ? AND id > coalesce("
        "(SELECT id FROM codebook_versions WHERE codebook = ? AND version = ?), 0)"
        " GROUP BY created_by ORDER BY MIN(id)",
        (key, key, base_version))
    return ", ".join(r[0] for r in rows) or "another admin"


def edit_label(store: Store, admin: Reviewer, key: str, code: str, changes: dict,
               note: str, *, base_version: str | None = None) -> str:
    """Change the wording of one label; returns the new version string.

    `base_version`: the version the editor was shown. When another edit has
    been saved since, the save is refused (CodebookError: reload to see it)
    rather than overwriting wording the editor never saw. Without it, the
    change applies to the newest version at the moment of saving.

    Reading the newest version, choosing the next version number and writing
    the new version are one write transaction, so an edit saved meanwhile is
    never dropped and two saves never take the same number. An edit that
    changes nothing is refused: it would make a version that differs in name only.
    """
    if not may(admin, "edit_codebook"):
        raise CodebookError("only an admin can edit the codebook")
    if not note.strip():
        raise CodebookError("say what changed and why (the change note)")
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise CodebookError(f"only {', '.join(EDITABLE)} can change; not {', '.join(sorted(unknown))}")
    if not changes:
        raise CodebookError(f"nothing changed in label {code!r}: no new version was made")
    with store.transaction() as conn:
        book = current_codebook(store, key)  # read under the write lock: nobody saves meanwhile
        if book is None:
            raise CodebookError(f"no codebook {key!r}")
        if base_version is not None and book.version != base_version:
            raise CodebookError(
                f"{book.title} was edited meanwhile by {_edited_since(store, key, base_version)}"
                f" (you saw version {base_version}; it is now {book.version}); reload to see it,"
                " then make your change again")
        content = book.to_dict()
        old = next((lb for lb in content["labels"] if lb["code"] == code), None)
        if old is None:
            raise CodebookError(f"codebook {key!r} has no label {code!r}")
        changed = {k: v for k, v in changes.items() if not _same(v, old.get(k))}
        if not changed:
            raise CodebookError(f"nothing changed in label {code!r}: it already reads like this"
                                f" in version {book.version}; no new version was made")
        before = {k: old.get(k) for k in changed}
        old.update(changed)
        taken = {r[0] for r in conn.execute(
            "SELECT version FROM codebook_versions WHERE codebook = ?", (key,))}
        content["version"] = _next_version(book.version, taken)
        parse_codebook(content, source=f"edit of {key}")  # validate before writing
        cur = conn.execute(
            "INSERT INTO codebook_versions (codebook, version, content, note, created_by, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (key, content["version"], to_json(content), note.strip(), admin.name, utcnow()))
        store.audit(admin.name, "codebook_edit", "codebook_versions", cur.lastrowid,
                    {"version": book.version, **before},
                    {"version": content["version"], "code": code, **changed, "note": note.strip()})
    return content["version"]
