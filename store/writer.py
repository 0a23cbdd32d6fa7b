"""Writing a stream of records inside one transaction.

`RecordWriter` resolves public keys (item uid, question key, rater name) to
row ids with small caches, inserts items, questions, raters and annotations,
and skips what is already there, so importing the same content twice changes
nothing. It never commits: the caller's transaction does, all or nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from itertools import chain, groupby

from store.records import (
    AnnotationRecord,
    ItemRecord,
    QuestionRecord,
    RaterRecord,
    Record,
    RunRecord,
)
from store.runs import belongs_to_run
from store.values import from_json, to_json, utcnow

DATASET_KINDS = {
    "carebench": "carebench",
    "klinikebench": "klinikebench",
    "healthbench": "healthbench",
    "clinicare": "clinicare",
    "harbor": "harbor",
}


Validator = Callable[[str, str, str], str]
"""(codebook key, question kind, value) -> the value as stored; raises ValueError."""


ItemsWritten = Callable[[sqlite3.Connection, list[int], bool], None]
"""(connection, row ids of items just written or just replaced, later) -> None.
Runs inside the writer's transaction, so what it writes commits or rolls back
with the items. review.browse.search registers one: with later=False it indexes the
items' text at once; with later=True (an import, see `RecordWriter.index_later`)
it only drops the text of replaced items, and the caller catches the index up
after the commit (`review.browse.search.ensure_index`)."""

ITEMS_WRITTEN: list[ItemsWritten] = []
"""Hooks called after items are written. Append to it with `on_items_written`."""


def on_items_written(hook: ItemsWritten) -> ItemsWritten:
    """Register a hook (once) to run after every batch of items a writer writes."""
    if hook not in ITEMS_WRITTEN:
        ITEMS_WRITTEN.append(hook)
    return hook


class InputError(ValueError):
    """Bad input. The message names the file and line or field, and what is wrong."""


MAX_ID_CHARS = 512
"""Characters an id may have at most: an item's uid (and its parent's), a question
key, a rater name. Longer is refused (it is not an id a person can read, quote or
search for; a file that has one is damaged or hostile). Importers check the fields
ids are made from against it too, to name the field."""


def too_long(value: object, what: str) -> str | None:
    """Why an id is refused for its length (`what` names it), or None."""
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        shown = repr(value[:60]) + "…"
        return (f"{what} {shown} is {len(value):,} characters long; an id has at most"
                f" {MAX_ID_CHARS}")
    return None


class WriteRules:
    """What a writer may write, checked as it writes (an import's rules:
    `review.datasets.sources.rules`). The default allows everything."""

    def new_rater(self, record: RaterRecord) -> None:
        """Before a rater is created; raises InputError to refuse."""

    def answer(self, record: AnnotationRecord, rater_id: int,
               in_force: sqlite3.Row | None) -> None:
        """Before an answer is written; `in_force` is the rater's answer to the
        unit it would supersede (None if there is none). Raises InputError to refuse."""

    def written(self, record: AnnotationRecord, rater_id: int, annotation_id: int,
                in_force: sqlite3.Row | None) -> None:
        """After the answer was written as row `annotation_id`."""


_BIND_ERRORS = (OverflowError, UnicodeEncodeError, sqlite3.ProgrammingError,
                sqlite3.InterfaceError)
"""What sqlite3 raises for a value it cannot store (an integer beyond 64 bits,
text that is not valid Unicode, an object or a list): a bad row, named by
`RecordWriter._unstorable`."""

_ITEM_FIELDS = ("uid", "dataset", "kind", "parent", "case_id", "round_id", "split", "model",
                "failed", "payload", "meta", "import", "created_at", "run")
_RUN_FIELDS = ("dataset", "kind", "key", "model_requested", "model_actual", "provider", "protocol",
               "prompt_version", "attempt", "source", "import", "meta", "created_at")


def _id_text(value: object) -> str | None:
    """A run's field as text (a file may give a model name as a number)."""
    if value is None or isinstance(value, str):
        return value
    return to_json(value) if isinstance(value, (dict, list)) else str(value)


_ANNOTATION_FIELDS = ("item", "question", "rater", "target", "status", "value", "rationale",
                      "confidence", "phase", "codebook_version", "supersedes", "source", "import",
                      "extra", "created_at")


def _problem(value: object) -> str | None:
    """Why SQLite cannot store a value, or None."""
    if value is None or type(value) in (float, bytes):
        return None
    if type(value) is int or type(value) is bool:
        return None if -(1 << 63) <= value < (1 << 63) else f"{value} is beyond a 64-bit integer"
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"not valid Unicode text (a lone surrogate at character {exc.start + 1})"
        return None
    return f"expected text or a number, got {type(value).__name__}"


class RecordWriter:
    def __init__(self, conn: sqlite3.Connection, *, source: str, import_id: int | None = None,
                 where: str = "", validate: Validator | None = None, index_later: bool = False,
                 rules: WriteRules | None = None, source_name: str | None = None):
        self.conn = conn
        self.source_name = source_name or where or None
        """The file being written from, as its runs record it (`runs.source`)."""
        self._run_ids: dict[tuple[int, str, str], int] = {}
        """(dataset id, item kind, run key) -> run id, of every run looked up or made."""
        self.runs_made: list[int] = []
        """Runs this writer made (the first item of each came with it)."""
        self.joined: dict[int, int] = {}
        """run id -> items this writer was given that were already there in that run, a run
        of another model than the one the writer was given them with (shared uids:
        `ItemRecord.shared`); they stay in it, and the import says so."""
        self.rules = rules
        """What may be written (None: everything), checked as each rater and answer is."""
        self.index_later = index_later
        """True: derived data (the search index) is caught up after the commit,
        in small transactions, instead of inside this one (imports: a large
        file would otherwise hold the write lock while its text is indexed)."""
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
        """Items held back to be written together, by uid."""
        self._replacing: set[str] = set()
        """Uids in `_pending` that replace a stub of the same uid."""
        self._waiting: list[tuple[AnnotationRecord, int | None, int]] = []
        """Answers on items still in `_pending`: (record, question id, rater id); the
        question id is None for a question still in `_pending_questions`."""
        self._pending_questions: dict[str, QuestionRecord] = {}
        """Questions bound to items still in `_pending`, by key: written with them."""
        self._lines: dict[str, int | None] = {}
        """Source line of every item this writer was given in full (not stubs),
        by uid: a uid given again is compared with the first (`_repeated`)."""
        self._stubs: dict[str, set[str]] = {}
        """Uids of stubs (items only named so far) by kind, read when the first
        record that may replace one of that kind comes (`_is_stub`)."""
        self._statements: dict[tuple[str, str, int], str] = {}
        """Multi-row INSERT statements by (head, tail, rows): built once."""
        self._variable_limit: int | None = None
        self.n_items = 0
        self.n_completed = 0
        """Stubs (items an earlier record only named) this writer filled in."""
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
        if key in self._pending_questions:
            self.flush()
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
    def _items_written(self, item_ids: list[int], fresh: bool = False) -> None:
        if fresh and self.index_later:
            return  # a new row has no stale text to drop
        for hook in ITEMS_WRITTEN:
            hook(self.conn, item_ids, self.index_later)

    def write(self, records: Iterable[Record]) -> None:
        handlers = {ItemRecord: self.item, AnnotationRecord: self.annotation,
                    RaterRecord: self.rater, QuestionRecord: self.question, RunRecord: self.run}
        for record in records:
            handler = handlers.get(type(record))
            if handler is None:  # pragma: no cover - programming error
                raise TypeError(f"not a record: {record!r}")
            handler(record)
        self.flush()

    def _id_length(self, value: object, what: str, line: int | None) -> None:
        """Refuse an id longer than MAX_ID_CHARS, naming the file and line."""
        if type(value) is str and len(value) > MAX_ID_CHARS:
            raise InputError(f"{self._loc(line)}{too_long(value, what)}")

    def rater(self, r: RaterRecord) -> int:
        self._id_length(r.name, "rater name", None)
        row = self.conn.execute("SELECT id, kind FROM raters WHERE name = ?", (r.name,)).fetchone()
        if row is not None:
            if row[1] != r.kind and not r.kind_assumed:
                raise InputError(
                    f"{self._loc(None)}rater {r.name!r} exists as a {row[1]} rater, not {r.kind}"
                )
            self._raters[r.name] = row[0]
            return row[0]
        if self.rules is not None:
            self.rules.new_rater(r)
        cur = self.conn.execute(
            "INSERT INTO raters (name, kind, role, specialty, seniority, provider, model,"
            " prompt_version, meta, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (r.name, r.kind, r.role, r.specialty, r.seniority, r.provider, r.model,
             r.prompt_version, to_json(r.meta), self.now),
        )
        self._raters[r.name] = cur.lastrowid
        return cur.lastrowid

    def run(self, r: RunRecord) -> int:
        """The id of the run `r` names (its dataset, kind and identity), made if it is not
        there; the names the submitter gave it are added to those it has."""
        dataset_id = self._datasets.get(r.dataset) or self.dataset_id(r.dataset)
        key = r.key
        unit = (dataset_id, r.kind, key)
        run_id = self._run_ids.get(unit)
        if run_id is None:
            row = self.conn.execute("SELECT id FROM runs WHERE dataset_id = ? AND kind = ?"
                                    " AND key = ?", unit).fetchone()
            if row is None:
                identity = r.identity
                attempt = identity.get("attempt") or 1
                values = (dataset_id, r.kind, key, _id_text(identity.get("model_requested")),
                          _id_text(r.model_actual), _id_text(identity.get("provider")),
                          _id_text(identity.get("protocol")),
                          _id_text(identity.get("prompt_version")), attempt,
                          r.source or self.source_name, self.import_id, to_json(r.meta),
                          self.now)
                try:
                    row = self.conn.execute(
                        "INSERT INTO runs (dataset_id, kind, key, model_requested, model_actual,"
                        " provider, protocol, prompt_version, attempt, source, import_id, meta,"
                        " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                        values).fetchone()
                except _BIND_ERRORS as exc:
                    raise self._unstorable(_RUN_FIELDS, values, None, exc) from None
                except sqlite3.IntegrityError as exc:  # an attempt that is not a number >= 1
                    raise InputError(f"{self._loc(None)}run attempt {attempt!r}: {exc}") from None
                self.runs_made.append(row[0])
            run_id = self._run_ids[unit] = row[0]
        for alias in r.aliases:
            self._id_length(alias, "model alias", None)
            self.conn.execute(
                "INSERT INTO run_aliases (run_id, alias, import_id, created_at)"
                " SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM run_aliases"
                " WHERE run_id = ? AND alias = ?)",
                (run_id, alias, self.import_id, self.now, run_id, alias))
        return run_id

    def _run_of(self, it: ItemRecord) -> int | None:
        """The run id an item belongs to (made with its first item), or None."""
        if not belongs_to_run(it.kind, it.parent_uid):
            return None
        run = it.run or RunRecord(it.dataset, it.kind, {"model_requested": it.model})
        return self.run(run)

    def question(self, q: QuestionRecord) -> int:
        """Insert a question unless its key exists. A question made as a
        placeholder (meta.stub: a file named it before the file that defines
        it, e.g. a HealthBench meta-evaluation row naming a rubric criterion)
        is filled in by a record with `replace_stub`; one that is not a
        placeholder is left as it is. A question bound to an item held in the batch
        is held with it, and written by `flush` (then the id is not returned)."""
        self._id_length(q.key, "question key", None)
        if q.item_uid is not None and q.item_uid in self._pending and not q.replace_stub:
            if q.key not in self._questions:
                self._pending_questions.setdefault(q.key, q)
            return None
        row = self.conn.execute("SELECT id, meta FROM questions WHERE key = ?", (q.key,)).fetchone()
        if row is not None:
            self._questions[q.key] = row[0]
            if q.replace_stub and from_json(row[1] or "{}").get("stub"):
                item_id = self.item_id(q.item_uid) if q.item_uid else None
                named = {k: v for k, v in from_json(row[1]).items() if k != "stub"}
                self.conn.execute(
                    "UPDATE questions SET codebook = ?, kind = ?, text = ?, item_id = ?,"
                    " applies_to = ?, points = ?, meta = ? WHERE id = ?",
                    (q.codebook, q.kind, q.text, item_id, q.applies_to, q.points,
                     to_json({**named, **q.meta}), row[0]))
            return row[0]
        item_id = self.item_id(q.item_uid) if q.item_uid else None
        cur = self.conn.execute(
            "INSERT INTO questions (key, codebook, kind, text, item_id, applies_to, points, meta)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (q.key, q.codebook, q.kind, q.text, item_id, q.applies_to, q.points, to_json(q.meta)),
        )
        self._questions[q.key] = cur.lastrowid
        return cur.lastrowid

    _ITEM_COLUMNS = (
        "INSERT INTO items (uid, dataset_id, kind, parent_id, case_id, round_id, split, model,"
        " failed, payload, meta, import_id, created_at, run_id) VALUES "
    )
    _ITEM_ROW = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    _NEW_ITEM = " ON CONFLICT (uid) DO NOTHING"
    _STUB_REPLACED = (
        " ON CONFLICT (uid) DO UPDATE SET dataset_id = excluded.dataset_id, kind = excluded.kind,"
        " parent_id = excluded.parent_id, case_id = excluded.case_id, round_id = excluded.round_id,"
        " split = excluded.split, model = excluded.model, failed = excluded.failed,"
        " payload = excluded.payload, meta = excluded.meta, import_id = excluded.import_id,"
        " run_id = excluded.run_id WHERE json_extract(items.meta, '$.stub')"
    )
    """A stub replaced takes the import that completed it as its import: the
    item a reviewer can now review came with that import (the labels gate
    asks about items that came after a reviewer chose to see the labels)."""
    _INSERT_ITEM = _ITEM_COLUMNS + _ITEM_ROW + _NEW_ITEM
    _BATCH = 1000

    def flush(self) -> None:
        """Write the items held back for a batched insert, then the answers
        that were waiting for them."""
        if not self._pending:
            return
        before = self.conn.execute("SELECT coalesce(MAX(id), 0) FROM items").fetchone()[0]
        replaced: list[int] = []
        if self._replacing:
            replaced = [r[0] for r in self.conn.execute(
                "SELECT id FROM items WHERE uid IN (SELECT value FROM json_each(?))"
                " AND json_extract(meta, '$.stub')", (to_json(list(self._replacing)),))]
        # In the order given (row ids follow the file). A stub replacement: a
        # stub (made from a generation whose prefix was not imported yet) takes
        # the full prefix record when that arrives; an item that is not a stub
        # is left as it is.
        for replacing, run in groupby(self._pending.items(), key=lambda kv: kv[0] in self._replacing):
            rows = [values for _, values in run]
            try:
                self._insert_rows(self._ITEM_COLUMNS, self._ITEM_ROW,
                                  self._STUB_REPLACED if replacing else self._NEW_ITEM, rows)
            except _BIND_ERRORS as exc:
                bad = next((r for r in rows if any(map(_problem, r))), rows[0])
                raise self._unstorable(_ITEM_FIELDS, bad, self._lines.get(bad[0]), exc) from None
        inserted = self.conn.execute(
            "SELECT COUNT(*) FROM items WHERE id > ?", (before,)).fetchone()[0]
        if inserted + len(replaced) < len(self._pending):
            self._check_runs(before)
        self.n_items += inserted
        self.n_completed += len(replaced)
        waiting, self._waiting = self._waiting, []
        if waiting or self._replacing or self._pending_questions:
            for uid, item_id in self.conn.execute(
                "SELECT uid, id FROM items WHERE uid IN (SELECT value FROM json_each(?))",
                (to_json(list(self._pending)),),
            ):
                self._items[uid] = item_id
        self._pending.clear()
        self._replacing.clear()
        self._write_pending_questions()
        if ITEMS_WRITTEN:
            # New rows have no stale text to drop: with index_later, only replaced ones are due.
            fresh = [] if self.index_later else [r[0] for r in self.conn.execute(
                "SELECT id FROM items WHERE id > ? ORDER BY id", (before,))]
            if fresh or replaced:
                self._items_written(fresh + replaced)
        self._write_waiting(waiting, before)

    _QUESTION_COLUMNS = ("INSERT INTO questions (key, codebook, kind, text, item_id, applies_to,"
                         " points, meta) VALUES ")
    _QUESTION_FIELDS = ("key", "codebook", "kind", "text", "item", "applies_to", "points", "meta")

    def _write_pending_questions(self) -> None:
        """The questions held with the batch's items, in a few multi-row statements
        (a question whose key exists is left as it is, as `question` leaves it)."""
        if not self._pending_questions:
            return
        held = list(self._pending_questions.values())
        self._pending_questions = {}
        rows = [(q.key, q.codebook, q.kind, q.text, self._items[q.item_uid], q.applies_to,
                 q.points, to_json(q.meta)) for q in held]
        try:
            self._insert_rows(self._QUESTION_COLUMNS, "(?,?,?,?,?,?,?,?)",
                              " ON CONFLICT (key) DO NOTHING", rows)
        except _BIND_ERRORS as exc:
            bad = next((r for r in rows if any(map(_problem, r))), rows[0])
            raise self._unstorable(self._QUESTION_FIELDS, bad, None, exc) from None
        for key, question_id in self.conn.execute(
                "SELECT key, id FROM questions WHERE key IN (SELECT value FROM json_each(?))",
                (to_json([q.key for q in held]),)):
            self._questions[key] = question_id

    _ROWS_PER_STATEMENT = 200
    """Rows one INSERT carries (13 values each: within SQLite's 32,766 since
    3.32, and its 999 before that via `_rows_per_statement`)."""

    def _insert_rows(self, head: str, row: str, tail: str, rows: list[tuple]) -> None:
        """`head VALUES row, row, ... tail` for each slice of `rows`: one
        statement per few hundred rows, in their order (row ids follow it).
        A full study's import spends a sixth less in SQLite than with one
        statement run per row (`executemany`): each run of a statement costs
        its set-up and a trip between Python and SQLite; SQLite also lets go
        of Python's lock for the whole statement, not for one row."""
        if not rows:
            return
        per = self._rows_per_statement(len(rows[0]))
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            key = (head, tail, len(chunk))
            sql = self._statements.get(key)
            if sql is None:
                sql = self._statements[key] = head + ",".join([row] * len(chunk)) + tail
            self.conn.execute(sql, list(chain.from_iterable(chunk)))

    def _unstorable(self, fields: tuple[str, ...], values: tuple, line: int | None,
                    exc: Exception) -> InputError:
        """The error for a row SQLite refused to store, naming line and field."""
        for name, value in zip(fields, values, strict=True):
            problem = _problem(value)
            if problem is not None:
                return InputError(f"{self._loc(line)}field {name!r}: {problem}")
        return InputError(f"{self._loc(line)}a value cannot be stored: {exc}")

    def _rows_per_statement(self, width: int) -> int:
        limit = self._variable_limit
        if limit is None:
            try:
                limit = self.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            except (AttributeError, sqlite3.Error):
                limit = 999  # the smallest SQLite has had
            self._variable_limit = limit
        return max(1, min(self._ROWS_PER_STATEMENT, limit // width))

    def item(self, it: ItemRecord) -> int | None:
        """Insert an item unless its uid exists; a stub replacement
        (`replace_stub`) overwrites an item of that uid made as a stub. Items
        are batched (their row id is looked up only if something refers to
        them); stubs are written at once. A caller that uses this directly
        instead of `write()` must call `flush()` before its transaction ends."""
        uid, replace = it.uid, it.replace_stub
        self._id_length(uid, "item id", it.line)
        self._id_length(it.parent_uid, "parent item id", it.line)
        stub = bool(it.meta.get("stub")) if it.meta else False
        if replace and not stub and not self._is_stub(uid, it.kind):
            replace = False  # nothing to fill in: an item like any other
        if stub and not replace:
            if uid in self._pending:
                return None  # a stub for an item this import already holds
            known = self._items.get(uid)
            if known is None:
                row = self.conn.execute("SELECT id FROM items WHERE uid = ?", (uid,)).fetchone()
                if row is not None:
                    known = self._items[uid] = row[0]
            if known is not None:
                return known  # the item exists: a stub adds nothing
        if it.shared and not stub and uid not in self._lines and self._joined(it):
            return None
        parent_id = None
        if it.parent_uid:
            parent_id = self._items.get(it.parent_uid) or self.item_id(it.parent_uid)
        values = (
            uid, self._datasets.get(it.dataset) or self.dataset_id(it.dataset), it.kind, parent_id,
            it.case_id, it.round_id, it.split, it.model, int(it.failed), to_json(it.payload),
            to_json(it.meta), self.import_id, self.now, None if stub else self._run_of(it),
        )
        if not stub:
            pending = self._pending
            if uid in self._lines:
                return self._repeated(uid, values, it.line)
            self._lines[uid] = it.line
            pending[uid] = values
            if replace:
                self._replacing.add(uid)
            if len(pending) >= self._BATCH:
                self.flush()
            return None
        if self._waiting:
            # Answers wait on items held in the batch: write those items first, so
            # row ids follow the file as when every answer wrote its item at once.
            self.flush()
        try:
            row = self.conn.execute(self._INSERT_ITEM + " RETURNING id", values).fetchone()
        except _BIND_ERRORS as exc:
            raise self._unstorable(_ITEM_FIELDS, values, it.line, exc) from None
        if it.kind in self._stubs:
            self._stubs[it.kind].add(uid)
        if row is not None:
            self.n_items += 1
            self._items[uid] = row[0]
            self._items_written([row[0]], fresh=True)
            return row[0]
        return self.item_id(uid)

    def _joined(self, it: ItemRecord) -> bool:
        """Whether a shared item is there already, not as a placeholder: then it is
        this item, in the run it came with (counted in `joined`), and nothing is written."""
        row = self.conn.execute("SELECT id, run_id, json_extract(meta, '$.stub') FROM items"
                                " WHERE uid = ?", (it.uid,)).fetchone()
        if row is None or row[2]:
            return False
        self._items[it.uid] = row[0]
        self._lines[it.uid] = it.line
        mine = (it.run.identity.get("model_requested") if it.run else None) or it.model
        if row[1] is not None and mine != self.conn.execute(
                "SELECT model_requested FROM runs WHERE id = ?", (row[1],)).fetchone()[0]:
            self.joined[row[1]] = self.joined.get(row[1], 0) + 1  # said in the summary
        return True

    def _is_stub(self, uid: str, kind: str) -> bool:
        """Whether an item of this uid is a stub, to be filled in by a record
        that replaces stubs. The stubs of a kind are read once per writer
        (through the dataset-and-kind index); a record that has no stub to
        fill in is written like any other, without a look-up per batch."""
        stubs = self._stubs.get(kind)
        if stubs is None:
            stubs = self._stubs[kind] = {row[0] for row in self.conn.execute(
                "SELECT uid FROM items WHERE dataset_id IN (SELECT id FROM datasets) AND kind = ?"
                " AND json_extract(meta, '$.stub')", (kind,))}
        return uid in stubs

    def _check_runs(self, before: int) -> None:
        """Items held that were not written because their uid was there already: each must
        be of the same run as the item there (importing a run's file again), never of
        another: an item of one run is never taken for another's (nor dropped)."""
        from store.runs import run_label_map

        runs = {uid: values[13] for uid, values in self._pending.items()
                if uid not in self._replacing}
        for uid, run_id in self.conn.execute(
                "SELECT uid, run_id FROM items WHERE uid IN (SELECT value FROM json_each(?))"
                " AND id <= ?", (to_json(list(runs)), before)):
            if run_id == runs[uid] or runs[uid] is None:
                continue
            labels = run_label_map(self.conn)
            theirs = f"run {run_id} ({labels.get(run_id, '?')})" if run_id else "no run"
            mine = labels.get(runs[uid], "?")
            raise InputError(
                f"{self._loc(self._lines.get(uid))}item {uid!r} is already there as part of"
                f" {theirs}; this row is of run {runs[uid]} ({mine}): a run's items are its own"
                " (import the other run under another dataset, or as another attempt)")

    def _repeated(self, uid: str, values: tuple, line: int | None) -> None:
        """An item given twice by one import: the same content again changes
        nothing; other content is refused, naming both lines (keeping either
        silently would pair an answer with words it was not given for)."""
        first = self._lines[uid]
        pending = self._pending.get(uid)
        if pending is not None:
            same = pending[1:11] == values[1:11]
        else:
            stored = self.conn.execute(
                "SELECT dataset_id, kind, parent_id, case_id, round_id, split, model, failed,"
                " payload, meta, import_id FROM items WHERE uid = ?", (uid,)).fetchone()
            # An item an earlier import wrote keeps its content (this file's is
            # not stored either time): only what this import stored is compared.
            same = stored is None or (stored[10] != self.import_id and self.import_id is not None) \
                or tuple(stored[:10]) == values[1:11]
        if not same:
            raise InputError(
                f"{self._loc(line)}item {uid!r} again, with other content than"
                f"{f' line {first}' if first is not None else ' before'}: a file gives each"
                " item once (two runs of one model, e.g. two protocols, need separate model names)")
        return None

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
        """Write an answer unless the rater's current answer is the same. An
        answer on an item still held in the batch waits for it (written by
        `flush`, in order); the row id is returned only when written at once."""
        self._id_length(a.item_uid, "item id", a.line)
        self._id_length(a.question_key, "question key", a.line)
        self._id_length(a.rater, "rater name", a.line)
        if a.question_key and a.item_uid in self._pending:
            question_id, rater_id = self._checked(a, a.question_key, held=True)
            self._waiting.append((a, question_id, rater_id))
            return None
        item_id = self.item_id(a.item_uid, a.line)
        key = a.question_key or self.default_question(item_id, a.line)
        question_id, rater_id = self._checked(a, key)
        if a.target:
            self._check_target(a, item_id)
        return self._write_annotation(a, item_id, question_id, rater_id)

    def _check_target(self, a: AnnotationRecord, item_id: int) -> None:
        """An answer about one step (`step:N`) names a step the item has. The
        target is stored in one spelling (`step:03` is `step:3`), so that one
        step is one unit everywhere."""
        number = a.target.removeprefix("step:")
        if not a.target.startswith("step:") or not number.isdigit():
            raise InputError(f"{self._loc(a.line)}target must be step:N, got {a.target!r}")
        a.target = f"step:{int(number)}"
        steps = self.conn.execute(
            "SELECT max(coalesce(json_array_length(payload, '$.steps'), 0),"
            " coalesce(json_array_length(payload, '$.transcript'), 0)) FROM items WHERE id = ?",
            (item_id,)).fetchone()[0] or 0
        if not 1 <= int(number) <= steps:
            raise InputError(f"{self._loc(a.line)}item {a.item_uid!r} has no step {number}"
                             f" ({steps} steps)")

    def _checked(self, a: AnnotationRecord, key: str, held: bool = False) -> tuple[int | None, int]:
        """The question and rater ids of an answer, its value validated. With `held`
        (the answer waits for its item), a question held with the batch gives no id
        yet (None: `_write_waiting` looks it up once written)."""
        pending = self._pending_questions.get(key) if held else None
        question_id = None if pending is not None else self.question_id(key, a.line)
        rater_id = self.rater_id(a.rater, a.line)
        if a.status == "answered" and self.validate is not None:
            if pending is not None:
                book, kind = pending.codebook, pending.kind
            else:
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
        return question_id, rater_id

    _ANNOTATION_COLUMNS = (
        "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value,"
        " rationale, confidence, phase, codebook_version, supersedes_id, source, import_id,"
        " extra, created_at) VALUES "
    )
    _ANNOTATION_ROW = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    _INSERT_ANNOTATION = _ANNOTATION_COLUMNS + _ANNOTATION_ROW

    def _write_annotation(self, a: AnnotationRecord, item_id: int, question_id: int,
                          rater_id: int) -> int | None:
        current = self.conn.execute(
            "SELECT id, status, value, rationale, extra, phase, import_id FROM annotations"
            " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target = ?"
            " ORDER BY id DESC LIMIT 1",
            (item_id, question_id, rater_id, a.target),
        ).fetchone()
        # The same answer again changes nothing. A step mark's severity, kept in
        # extra, is part of the answer: a changed one is a new answer (the rest
        # of extra is provenance, e.g. which run of an LLM rater gave it).
        if current is not None and (current[1], current[2], current[3]) == (
            a.status, a.value, a.rationale
        ) and from_json(current[4] or "{}").get("severity") == (a.extra or {}).get("severity"):
            self.n_skipped += 1
            return None
        if self.rules is not None:
            self.rules.answer(a, rater_id, current)
        row = self._annotation_row(a, item_id, question_id, rater_id, current[0] if current else None)
        try:
            cur = self.conn.execute(self._INSERT_ANNOTATION, row)
        except _BIND_ERRORS as exc:
            raise self._unstorable(_ANNOTATION_FIELDS, row, a.line, exc) from None
        self.n_annotations += 1
        if self.rules is not None:
            self.rules.written(a, rater_id, cur.lastrowid, current)
        return cur.lastrowid

    def _annotation_row(self, a: AnnotationRecord, item_id: int, question_id: int, rater_id: int,
                        supersedes: int | None) -> tuple:
        return (item_id, question_id, rater_id, a.target, a.status, a.value, a.rationale,
                a.confidence, a.phase, a.codebook_version, supersedes, self.source,
                self.import_id, to_json(a.extra), self.now)

    def _write_waiting(self, waiting: list[tuple[AnnotationRecord, int | None, int]],
                       before: int) -> None:
        """Answers that waited for their items, in order. An item created by
        this batch (row id above `before`) has no answers yet, so its first
        answer per rater and question needs no look-up and goes in a few
        multi-row statements; anything else takes the one-by-one path."""
        rows: list[tuple] = []
        lines: list[int | None] = []
        seen: set[tuple] = set()
        for a, question_id, rater_id in waiting:
            item_id = self._items[a.item_uid]
            if question_id is None:
                question_id = self._questions[a.question_key]
            if a.target:
                self._check_target(a, item_id)
            unit = (item_id, question_id, rater_id, a.target)
            if item_id > before and unit not in seen:
                seen.add(unit)
                if self.rules is not None:
                    self.rules.answer(a, rater_id, None)  # a new item: nothing in force
                rows.append(self._annotation_row(a, item_id, question_id, rater_id, None))
                lines.append(a.line)
                continue
            self._insert_annotations(rows, lines)
            rows, lines = [], []
            self._write_annotation(a, item_id, question_id, rater_id)
        self._insert_annotations(rows, lines)

    def _insert_annotations(self, rows: list[tuple], lines: list[int | None]) -> None:
        try:
            self._insert_rows(self._ANNOTATION_COLUMNS, self._ANNOTATION_ROW, "", rows)
        except _BIND_ERRORS as exc:
            i = next((i for i, r in enumerate(rows) if any(map(_problem, r))), 0)
            raise self._unstorable(_ANNOTATION_FIELDS, rows[i], lines[i], exc) from None
        self.n_annotations += len(rows)
