"""Writing a stream of records inside one transaction.

`RecordWriter` resolves public keys (item uid, question key, rater name) to
row ids with small caches, inserts items, questions, raters and annotations,
and skips what is already there, so importing the same content twice changes
nothing. It never commits: the caller's transaction does, all or nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable

from store.db import to_json, utcnow
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord, Record

DATASET_KINDS = {
    "carebench": "carebench",
    "klinikebench": "klinikebench",
    "healthbench": "healthbench",
    "clinicare": "clinicare",
    "harbor": "harbor",
}


Validator = Callable[[str, str, str], str]
"""(codebook key, question kind, value) -> the value as stored; raises ValueError."""


ItemsWritten = Callable[[sqlite3.Connection, list[int]], None]
"""(connection, row ids of items just written or just replaced) -> None. Runs
inside the writer's transaction, so what it writes commits or rolls back with
the items (review.search registers one that indexes their text)."""

ITEMS_WRITTEN: list[ItemsWritten] = []
"""Hooks called after items are written. Append to it with `on_items_written`."""


def on_items_written(hook: ItemsWritten) -> ItemsWritten:
    """Register a hook (once) to run after every batch of items a writer writes."""
    if hook not in ITEMS_WRITTEN:
        ITEMS_WRITTEN.append(hook)
    return hook


def _items_written(conn: sqlite3.Connection, item_ids: list[int]) -> None:
    for hook in ITEMS_WRITTEN:
        hook(conn, item_ids)


class InputError(ValueError):
    """Bad input. The message names the file and line or field, and what is wrong."""


class RecordWriter:
    def __init__(self, conn: sqlite3.Connection, *, source: str, import_id: int | None = None,
                 where: str = "", validate: Validator | None = None):
        self.conn = conn
        self.validate = validate
        self._question_info: dict[int, tuple[str, str]] = {}
        self.source = source
        self.import_id = import_id
        self.where = where
        self.now = utcnow()
        self._datasets: dict[str, int] = {}
        self._items: dict[str, int] = {}
        self._questions: dict[str, int] = {}
        self._raters: dict[str, int] = {}
        self._pending: dict[str, tuple] = {}
        self.n_items = 0
        self.n_annotations = 0
        self.n_skipped = 0

    # -- lookups -----------------------------------------------------------
    def dataset_id(self, name: str) -> int:
        if name not in self._datasets:
            row = self.conn.execute("SELECT id FROM datasets WHERE name = ?", (name,)).fetchone()
            if row is None:
                kind = next((k for k in DATASET_KINDS if name.startswith(k)), "generic")
                cur = self.conn.execute(
                    "INSERT INTO datasets (name, kind, created_at) VALUES (?, ?, ?)",
                    (name, kind, self.now),
                )
                self._datasets[name] = cur.lastrowid
            else:
                self._datasets[name] = row[0]
        return self._datasets[name]

    def item_id(self, uid: str, line: int | None = None) -> int:
        if uid in self._pending:
            self.flush()
        if uid not in self._items:
            row = self.conn.execute("SELECT id FROM items WHERE uid = ?", (uid,)).fetchone()
            if row is None:
                raise InputError(f"{self._loc(line)}unknown item {uid!r}: import the items first")
            self._items[uid] = row[0]
        return self._items[uid]

    def question_id(self, key: str, line: int | None = None) -> int:
        if key not in self._questions:
            row = self.conn.execute("SELECT id FROM questions WHERE key = ?", (key,)).fetchone()
            if row is None:
                raise InputError(f"{self._loc(line)}unknown question {key!r}")
            self._questions[key] = row[0]
        return self._questions[key]

    def rater_id(self, name: str, line: int | None = None) -> int:
        if name not in self._raters:
            row = self.conn.execute("SELECT id FROM raters WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise InputError(f"{self._loc(line)}unknown rater {name!r}")
            self._raters[name] = row[0]
        return self._raters[name]

    def _loc(self, line: int | None) -> str:
        if self.where and line is not None:
            return f"{self.where}:{line}: "
        return f"{self.where}: " if self.where else ""

    # -- writes ------------------------------------------------------------
    def write(self, records: Iterable[Record]) -> None:
        for record in records:
            if isinstance(record, AnnotationRecord):
                self.annotation(record)
            elif isinstance(record, ItemRecord):
                self.item(record)
            elif isinstance(record, RaterRecord):
                self.rater(record)
            elif isinstance(record, QuestionRecord):
                self.question(record)
            else:  # pragma: no cover - programming error
                raise TypeError(f"not a record: {record!r}")
        self.flush()

    def rater(self, r: RaterRecord) -> int:
        row = self.conn.execute("SELECT id, kind FROM raters WHERE name = ?", (r.name,)).fetchone()
        if row is not None:
            if row[1] != r.kind and not r.kind_assumed:
                raise InputError(
                    f"{self._loc(None)}rater {r.name!r} exists as a {row[1]} rater, not {r.kind}"
                )
            self._raters[r.name] = row[0]
            return row[0]
        cur = self.conn.execute(
            "INSERT INTO raters (name, kind, role, specialty, seniority, provider, model,"
            " prompt_version, meta, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (r.name, r.kind, r.role, r.specialty, r.seniority, r.provider, r.model,
             r.prompt_version, to_json(r.meta), self.now),
        )
        self._raters[r.name] = cur.lastrowid
        return cur.lastrowid

    def question(self, q: QuestionRecord) -> int:
        row = self.conn.execute("SELECT id FROM questions WHERE key = ?", (q.key,)).fetchone()
        if row is not None:
            self._questions[q.key] = row[0]
            return row[0]
        item_id = self.item_id(q.item_uid) if q.item_uid else None
        cur = self.conn.execute(
            "INSERT INTO questions (key, codebook, kind, text, item_id, applies_to, points, meta)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (q.key, q.codebook, q.kind, q.text, item_id, q.applies_to, q.points, to_json(q.meta)),
        )
        self._questions[q.key] = cur.lastrowid
        return cur.lastrowid

    _INSERT_ITEM = (
        "INSERT INTO items (uid, dataset_id, kind, parent_id, case_id, round_id, split, model,"
        " failed, payload, meta, import_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (uid) DO NOTHING"
    )
    _BATCH = 1000

    def flush(self) -> None:
        """Insert the items held back for a batched insert."""
        if self._pending:
            before = ITEMS_WRITTEN and self.conn.execute("SELECT MAX(id) FROM items").fetchone()[0] or 0
            cur = self.conn.executemany(self._INSERT_ITEM, self._pending.values())
            self.n_items += max(cur.rowcount, 0)
            self._pending.clear()
            if ITEMS_WRITTEN and cur.rowcount:
                _items_written(self.conn, [r[0] for r in self.conn.execute(
                    "SELECT id FROM items WHERE id > ? ORDER BY id", (before,))])

    def item(self, it: ItemRecord) -> int | None:
        """Insert an item unless its uid exists. Plain new items are batched
        (their row id is looked up only if something refers to them);
        stubs and stub replacements are written at once. A caller that uses
        this directly instead of `write()` must call `flush()` before its
        transaction ends."""
        stub = bool(it.meta.get("stub"))
        if not it.replace_stub and stub and (it.uid in self._items or it.uid in self._pending):
            return self._items.get(it.uid)  # a stub for an item this import already holds
        parent_id = self.item_id(it.parent_uid) if it.parent_uid else None
        values = (
            it.uid, self.dataset_id(it.dataset), it.kind, parent_id, it.case_id, it.round_id,
            it.split, it.model, int(it.failed), to_json(it.payload), to_json(it.meta),
            self.import_id, self.now,
        )
        if not stub and not it.replace_stub:
            if it.uid not in self._pending:
                self._pending[it.uid] = values
            if len(self._pending) >= self._BATCH:
                self.flush()
            return None
        row = self.conn.execute(self._INSERT_ITEM + " RETURNING id", values).fetchone()
        if row is not None:
            self.n_items += 1
            self._items[it.uid] = row[0]
            _items_written(self.conn, [row[0]])
            return row[0]
        item_id = self.item_id(it.uid)
        if it.replace_stub:
            # A stub (made from a generation whose prefix was not imported yet)
            # takes the full prefix record when that arrives.
            cur = self.conn.execute(
                "UPDATE items SET dataset_id=?, kind=?, parent_id=?, case_id=?, round_id=?, split=?,"
                " model=?, failed=?, payload=?, meta=? WHERE id = ? AND json_extract(meta, '$.stub')",
                (*values[1:11], item_id),
            )
            if cur.rowcount:
                _items_written(self.conn, [item_id])
        return item_id

    def default_question(self, item_id: int, line: int | None) -> str:
        """The one question asked of an item's kind, when a file names none."""
        rows = self.conn.execute(
            "SELECT q.key FROM questions q JOIN items i ON q.applies_to = i.kind WHERE i.id = ?",
            (item_id,),
        ).fetchall()
        if len(rows) != 1:
            raise InputError(
                f"{self._loc(line)}name the question: this item kind has "
                f"{'no question' if not rows else 'several: ' + ', '.join(r[0] for r in rows)}"
            )
        return rows[0][0]

    def annotation(self, a: AnnotationRecord) -> int | None:
        item_id = self.item_id(a.item_uid, a.line)
        key = a.question_key or self.default_question(item_id, a.line)
        question_id = self.question_id(key, a.line)
        rater_id = self.rater_id(a.rater, a.line)
        if a.status == "answered" and self.validate is not None:
            if question_id not in self._question_info:
                row = self.conn.execute(
                    "SELECT codebook, kind FROM questions WHERE id = ?", (question_id,)
                ).fetchone()
                self._question_info[question_id] = (row[0], row[1])
            book, kind = self._question_info[question_id]
            try:
                a.value = self.validate(book, kind, a.value)
            except ValueError as exc:
                raise InputError(f"{self._loc(a.line)}{exc}") from None
        current = self.conn.execute(
            "SELECT id, status, value, rationale FROM annotations WHERE item_id = ? AND question_id = ?"
            " AND rater_id = ? AND target = ? ORDER BY id DESC LIMIT 1",
            (item_id, question_id, rater_id, a.target),
        ).fetchone()
        if current is not None and (current[1], current[2], current[3]) == (
            a.status, a.value, a.rationale
        ):
            self.n_skipped += 1
            return None
        cur = self.conn.execute(
            "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value,"
            " rationale, confidence, phase, codebook_version, supersedes_id, source, import_id,"
            " extra, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (item_id, question_id, rater_id, a.target, a.status, a.value, a.rationale,
             a.confidence, a.phase, a.codebook_version, current[0] if current else None,
             self.source, self.import_id, to_json(a.extra), self.now),
        )
        self.n_annotations += 1
        return cur.lastrowid
