"""Codebook versions kept in the database: a study's own codebooks, in-app
edits, and their history.

The shipped TOML files are version 1 of each shipped codebook. A study adds
its own from a file written in the same format (`add_codebook`: `carelens
codebook add`, the Codebook screen), held to the same rules, and from then on
its questions can be imported, answered and measured. A file of a codebook the
database holds is its next version: wording, rules, examples, keys, weights
and the risk order may change, and questions may be added; the codes, their
order, the scale and the questions already asked stay (earlier answers keep
their meaning). An admin's edit of a label's wording or rules makes a new
version too, with a change note. The newest version of each codebook is the
one in force (`codebook.codebooks`); every annotation records the version it
was given under, so the history can say how many answers each version received.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from codebook import (
    Codebook,
    CodebookError,
    codebook_in_force,
    codebooks,
    dump_codebook,
    load_codebook_text,
    parse_codebook,
)
from review.team.access import may, require
from review.team.reviewers import Reviewer
from store import Store, to_json, utcnow
from store.records import QuestionRecord
from store.writer import RecordWriter

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
    """The version in force of a codebook: the newest in the database (an added file, an
    edit), else the shipped file; None for a key neither knows."""
    return codebook_in_force(store, key)


def study_codebooks(store: Store) -> dict[str, Codebook]:
    """Every codebook this database answers with, at the version in force, by key."""
    return codebooks(store)


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


# -- a study's own codebook, from a file ----------------------------------------------------

@dataclass(frozen=True)
class Added:
    """What `add_codebook` did."""

    book: Codebook
    stored: bool
    """False: the file is the version in force already; nothing was written."""
    previous: str | None = None
    """The version it follows (None: a codebook new to this database)."""
    questions: tuple[str, ...] = ()
    """Keys of the questions (and criteria) it asks for the first time."""

    def summary(self) -> str:
        book = self.book
        if not self.stored:
            return (f"{book.source}: {book.key} version {book.version} is the version in force"
                    " already; nothing changed")
        what = (f"{len(book.labels)} labels, {book.scale}"
                + (", multiple choice" if book.multi else "")
                + (", rationale required" if book.rationale_required else ""))
        asks = (f"; new questions: {', '.join(self.questions)}" if self.questions else "")
        follows = f" (after version {self.previous})" if self.previous else " (new)"
        return f"{book.source}: {book.key} version {book.version}{follows}: {what}{asks}"


def questions_of(book: Codebook) -> list[QuestionRecord]:
    """The questions a codebook asks, as the store keeps them: each label question
    of its kind of item, and each criterion of a rubric's checklist."""
    out = [QuestionRecord(key=q.key, codebook=book.key,
                          kind="labelset" if book.kind == "labelset" else "criterion",
                          text=q.text, applies_to=q.applies_to) for q in book.questions]
    out += [QuestionRecord(key=c.key, codebook=book.key, kind="criterion", text=c.text,
                           applies_to=c.applies_to, points=c.points,
                           meta={"must_not": c.must_not, "group": book.key, "index": n})
            for n, c in enumerate(book.criteria)]
    return out


def _comparable(book: Codebook) -> dict[str, Any]:
    content = book.to_dict()
    content.pop("version")
    return content


def _follows(old: Codebook, new: Codebook) -> None:
    """Refuse a new version that would change what earlier answers mean."""
    where = f"{new.source}: "
    if new.kind != old.kind:
        raise CodebookError(f"{where}kind: version {old.version} in force is a {old.kind}; a "
                            "new version keeps the kind (add a codebook under a new key)")
    if new.codes != old.codes:
        raise CodebookError(
            f"{where}labels: a new version keeps the codes and their order, so that earlier "
            f"answers keep their meaning: version {old.version} has {', '.join(old.codes)}; "
            "change the wording, or add a codebook under a new key")
    for what, a, b in (("scale", old.scale, new.scale), ("choice", old.choice, new.choice)):
        if a != b:
            raise CodebookError(f"{where}{what}: version {old.version} in force is {a!r}; a "
                                f"new version keeps it (got {b!r})")
    asked = {q.key: q for q in questions_of(new)}
    for q in questions_of(old):
        if q.key not in asked:
            raise CodebookError(f"{where}questions: {q.key!r} of version {old.version} is left "
                                "out; a new version keeps the questions already asked")


def _check_questions(conn: Any, book: Codebook) -> list[QuestionRecord]:
    """The questions new to the database; refuse a key another codebook (or a file) has
    taken, or a question asked before in other words (what was asked is sealed)."""
    new = []
    for q in questions_of(book):
        row = conn.execute("SELECT codebook, kind, text, applies_to, points, item_id FROM"
                           " questions WHERE key = ?", (q.key,)).fetchone()
        if row is None:
            new.append(q)
            continue
        if row[0] != book.key or row[5] is not None:
            raise CodebookError(f"{book.source}: question key {q.key!r} is already asked by "
                                f"codebook {row[0]!r}; choose another key")
        if (row[1], row[2], row[3], row[4]) != (q.kind, q.text, q.applies_to, q.points):
            raise CodebookError(
                f"{book.source}: question {q.key!r} was asked before as {row[2]!r} (of each "
                f"{row[3]}); what was asked is kept as it was asked, so earlier answers keep "
                "their meaning: ask the new wording under a new key")
    return new


def add_codebook(store: Store, text: str, source: str, *, by: Reviewer | None = None,
                 actor: str | None = None, server: bool = False,
                 note: str | None = None) -> Added:
    """Add a codebook from its TOML text (`source`: the file's name, for messages) as a
    new version in the database, in one transaction, audited (`codebook_add`).

    Validated as the shipped files are (`codebook.load_codebook_text`: a bad file is
    one CodebookError naming file, line and field, and nothing is stored). A codebook
    the database holds already takes the file as its next version (see `_follows`);
    the version in force given again changes nothing. `by` is who adds it (an admin;
    None: the operator at the command line, `actor` naming them in the audit log)."""
    require(by, "add_codebook", server=server)
    who = by.name if by is not None else (actor or "cli")
    book = load_codebook_text(text, source)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with store.transaction() as conn:
        old = codebooks(conn).get(book.key)
        stored = conn.execute("SELECT version, content FROM codebook_versions WHERE codebook = ?",
                              (book.key,)).fetchall()
        versions = {r[0]: r[1] for r in stored}
        if old is not None:
            if book.version == old.version:
                if _comparable(book) == _comparable(old):
                    return Added(book, stored=False)
                raise CodebookError(
                    f"{source}: version: {book.key} version {book.version} is in force with "
                    "other content; give the changed file a new version")
            if book.version in versions:
                raise CodebookError(
                    f"{source}: version: {book.key} had a version {book.version} before "
                    f"(version {old.version} is in force); give the file a new version")
            if _comparable(book) == _comparable(old):
                raise CodebookError(
                    f"{source}: nothing changed since version {old.version} in force but the "
                    "version: no new version was made")
            _follows(old, book)
        fresh = _check_questions(conn, book)
        content = book.to_dict()
        parse_codebook(json.loads(to_json(content)), source=source)  # stored as it is read back
        cur = conn.execute(
            "INSERT INTO codebook_versions (codebook, version, content, note, created_by,"
            " created_at) VALUES (?,?,?,?,?,?)",
            (book.key, book.version, to_json(content),
             (note or "").strip() or f"added from {source}", who, utcnow()))
        writer = RecordWriter(conn, source="codebook")
        for q in fresh:
            writer.question(q)
        store.audit(who, "codebook_add", "codebook_versions", cur.lastrowid,
                    {"version": old.version} if old is not None else None,
                    {"codebook": book.key, "version": book.version, "file": source,
                     "sha256": digest, "questions": [q.key for q in fresh]})
    return Added(book, stored=True, previous=old.version if old else None,
                 questions=tuple(q.key for q in fresh))


def export_codebook(store: Store, key: str, version: str | None = None) -> str:
    """A codebook (its version in force, or `version`) as TOML: what `add_codebook` takes
    back as the same codebook (`carelens codebook export`)."""
    if version is None:
        book = codebook_in_force(store, key)
        if book is None:
            raise CodebookError(f"no codebook {key!r}; known: {', '.join(codebooks(store))}")
        return dump_codebook(book)
    row = store.query_one("SELECT content FROM codebook_versions WHERE codebook = ? AND"
                          " version = ?", (key, version))
    if row is None:
        known = [r[0] for r in store.query("SELECT version FROM codebook_versions WHERE"
                                           " codebook = ? ORDER BY id", (key,))]
        raise CodebookError(f"no version {version!r} of codebook {key!r}"
                            + (f"; its versions: {', '.join(known)}" if known else ""))
    return dump_codebook(parse_codebook(json.loads(row[0]), source=f"{key} {version}"))


@dataclass(frozen=True)
class Listed:
    """One codebook as `carelens codebook list` and the Codebook screen name it."""

    book: Codebook
    shipped: bool
    """Shipped with carelens (its in-force version may be an edit)."""
    versions: int
    """Versions the database holds."""
    answers: int
    """Answers given to its questions, every version."""

    def line(self) -> str:
        b = self.book
        asks = ", ".join([q.key for q in b.questions] + [c.key for c in b.criteria]) or "-"
        return (f"{b.key:24} {b.version:8} {'shipped' if self.shipped else 'added':8} "
                f"{b.scale:8} {len(b.labels):2} labels  {self.answers:6,} answers  {b.title}"
                f"  [{asks}]")


def list_codebooks(store: Store) -> list[Listed]:
    """Every codebook in force, the shipped ones first, with its versions and answers."""
    from codebook import builtin_codebooks

    counts = dict(store.query(
        "SELECT q.codebook, COUNT(*) FROM annotations a JOIN questions q ON q.id = a.question_id"
        " GROUP BY q.codebook"))
    versions = dict(store.query("SELECT codebook, COUNT(*) FROM codebook_versions"
                                " GROUP BY codebook"))
    shipped = builtin_codebooks()
    books = codebooks(store)
    order = sorted(books, key=lambda k: (k not in shipped, k))
    return [Listed(books[k], k in shipped, versions.get(k, 0), counts.get(k, 0)) for k in order]
