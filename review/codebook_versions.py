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
from review.reviewers import Reviewer, is_admin
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


def edit_label(store: Store, admin: Reviewer, key: str, code: str, changes: dict,
               note: str) -> str:
    """Change the wording of one label; returns the new version string."""
    if not is_admin(admin):
        raise CodebookError("only an admin can edit the codebook")
    if not note.strip():
        raise CodebookError("say what changed and why (the change note)")
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise CodebookError(f"only {', '.join(EDITABLE)} can change; not {', '.join(sorted(unknown))}")
    book = current_codebook(store, key)
    if book is None:
        raise CodebookError(f"no codebook {key!r}")
    content = book.to_dict()
    for label in content["labels"]:
        if label["code"] == code:
            label.update({k: v for k, v in changes.items()})
            break
    else:
        raise CodebookError(f"codebook {key!r} has no label {code!r}")
    taken = {v.version for v in codebook_history(store, key)}
    content["version"] = _next_version(book.version, taken)
    parse_codebook(content, source=f"edit of {key}")  # validate before writing
    with store.transaction() as conn:
        cur = conn.execute(
            "INSERT INTO codebook_versions (codebook, version, content, note, created_by, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (key, content["version"], to_json(content), note.strip(), admin.name, utcnow()))
        old = next(lb for lb in book.to_dict()["labels"] if lb["code"] == code)
        store.audit(admin.name, "codebook_edit", "codebook_versions", cur.lastrowid,
                    {"version": book.version, **{k: old.get(k) for k in changes}},
                    {"version": content["version"], "code": code, **changes, "note": note.strip()})
    return content["version"]
