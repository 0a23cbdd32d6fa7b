"""The store: one SQLite file, opened and migrated by one class.

Rules (ARCHITECTURE.md): one connection per unit of work or per thread, never
shared across Streamlit sessions; WAL, foreign keys and a busy timeout on
every connection; each public write is exactly one transaction opened with
BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout instead of
failing with "database is locked" when a deferred transaction upgrades.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store.chain import Sealer, register_functions, register_keyed, seal_versions
from store.key import RecordKey, RecordKeyError, find, missing
from store.migrations import migrations
from store.records import QuestionRecord
from store.sessions import require_in_force
from store.values import to_json, utcnow
from store.witness import Witness, witness_path
from store.writer import RecordWriter

BUSY_TIMEOUT_MS = 60_000
_migrated: set[str] = set()
_migrate_lock = threading.Lock()
_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(path: str) -> threading.Lock:
    key = path if path == ":memory:" else str(Path(path).resolve())
    lock = _write_locks.get(key)
    if lock is None:
        with _write_locks_guard:
            lock = _write_locks.setdefault(key, threading.Lock())
    return lock


WAL_AUTOCHECKPOINT = 1000
"""Pages in the write-ahead log after which a commit copies them into the
database file (SQLite's default), except after a bulk write."""

BULK_CACHE_KIB = 65_536
"""Page cache of a connection during a bulk write (SQLite's default is 2 MiB).
A full study's items and their indexes no longer fit in the default: SQLite
then spills dirty pages into the write-ahead log mid-transaction and writes
many of them again at the commit. Given back when the write ends."""


class _Checkpointer(threading.Thread):
    """Copies committed pages from the write-ahead log into the database file
    (a PASSIVE checkpoint: it never waits for, or blocks, readers and
    writers), on its own connection, so the commit of a bulk write returns
    without doing it. A request while it runs makes it go round once more.
    Not a daemon: a command-line import that ends first waits for it."""

    def __init__(self, path: str):
        super().__init__(name="carelens-checkpoint", daemon=False)
        self.path = path
        self.again = False

    def run(self) -> None:
        try:
            while True:
                _checkpoint(self.path)
                with _checkpoints_guard:
                    if not self.again:
                        return
                    self.again = False
        finally:
            with _checkpoints_guard:  # whatever happened, a later request starts a new thread
                if _checkpoints.get(self.path) is self:
                    del _checkpoints[self.path]


def _checkpoint(path: str, tries: int = 20) -> None:
    try:
        # mode=rw: a database deleted meanwhile is not made again, empty.
        conn = sqlite3.connect(f"{Path(path).as_uri()}?mode=rw", uri=True, timeout=1)
    except sqlite3.Error:
        return
    try:
        for _ in range(tries):
            busy = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0]
            if not busy:
                return
            time.sleep(0.05)  # another connection's checkpoint holds the log: ours follows it
    except sqlite3.Error:
        pass  # the next commit's own checkpoint catches up
    finally:
        conn.close()


_checkpoints: dict[str, _Checkpointer] = {}
_checkpoints_guard = threading.Lock()


def checkpoint_soon(path: str | Path) -> None:
    """Checkpoint this database on a background thread (see `_Checkpointer`)."""
    key = str(Path(path).resolve())
    with _checkpoints_guard:
        running = _checkpoints.get(key)
        if running is not None:
            running.again = True
            return
        _checkpoints[key] = thread = _Checkpointer(key)
    thread.start()


def wait_for_checkpoints(timeout: float | None = None) -> None:
    """Block until the background checkpoints started so far have finished."""
    with _checkpoints_guard:
        threads = list(_checkpoints.values())
    for thread in threads:
        thread.join(timeout)


def create_private(path: str | Path) -> None:
    """Create the file at `path`, empty, readable and writable by its owner only
    (mode 0600, whatever the umask), unless it exists: a database holds
    clinicians' answers and rationales. SQLite gives the files beside it (the
    write-ahead log, its index, a rollback journal) the database file's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def connect(path: str | Path) -> sqlite3.Connection:
    """A new connection with the project's pragmas. Autocommit mode: every
    transaction is opened explicitly (see `Store.transaction`). A database file
    that does not exist yet is created mode 0600 (`create_private`)."""
    if str(path) != ":memory:":
        create_private(path)
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=True
    )
    conn.row_factory = sqlite3.Row
    register_functions(conn)  # the chains before m110 (their migrations call it)
    register_record_key(conn, str(path))  # the record's keyed chain (store.chain, store.key)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def record_of(conn: sqlite3.Connection) -> tuple[str, str] | None:
    """(the record's id, its key's fingerprint), or None before m110 sealed it."""
    try:
        row = conn.execute("SELECT id, key_id FROM record").fetchone()
    except sqlite3.OperationalError:
        return None  # no such table: not sealed yet (m110 does it)
    return None if row is None else (row[0], row[1])


def record_key_of(conn: sqlite3.Connection, path: str) -> tuple[RecordKey | None,
                                                                  str | None]:
    """(the key that seals this database, None) or (None, why it is not here); (None,
    None) before the record is sealed."""
    record = record_of(conn)
    if record is None:
        return None, None
    key = find(record[1])
    if key is None:
        return None, missing(record[1], path)
    return key, None


def register_record_key(conn: sqlite3.Connection, path: str) -> RecordKey | None:
    """Register the record's keyed hash on `conn`, or a function that refuses to
    write (saying why) when the database's key is not here."""
    key, why = record_key_of(conn, path)
    register_keyed(conn, key, why or "the record is not sealed yet: open it with carelens")
    return key


class Store:
    """A carelens database. Cheap to open: create one per unit of work or per
    thread; the schema is migrated the first time a path is opened."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.conn = connect(self.path)
        self.db = Database(self.conn)
        self._in_tx = False
        self.session_id: int | None = None
        """Server mode: the sign-in (`sessions` row) this store acts in. Every write
        transaction first checks it is still in force (`store.sessions`) and writes
        nothing otherwise. None: no session (local mode, the command line)."""
        key = str(Path(self.path).resolve()) if self.path != ":memory:" else None
        self._key = key
        """The file's resolved path (None in memory): what a background
        checkpoint opens, whatever the working directory is by then."""
        self._write_lock = _write_lock(self.path)
        """The lock this process's writers to the file queue on (found once: finding
        it resolves the path, a few system calls)."""
        self._witness = Witness(witness_path(key)) if key else None
        """The database's witness file (`store.witness`)."""
        self._witness_next = False
        """Witness the head after the next transaction whatever it sealed (a
        migration that sealed the record under its key)."""
        self._record()
        if key is None or key not in _migrated:
            with _migrate_lock:
                if key is None or key not in _migrated:
                    self._migrate()
                    if key:
                        _migrated.add(key)

    def _record(self) -> None:
        """Which record this is and whether its key is here (`store.key`)."""
        record = record_of(self.conn)
        self.record_id = record[0] if record else None
        """The record's id (its witness names it); None before m110 sealed it."""
        key, self.no_key = record_key_of(self.conn, self.path)
        """Why the record's key is not here, in one line (None: it is, or the
        record is not sealed yet): every write is then refused with it."""
        sealer = getattr(self.db, "record_sealer", None)  # m110's, if it ran just now
        if key is None:
            self.sealer = None
        elif sealer is not None and sealer.key.id == key.id:
            self.sealer = sealer
        else:  # this store's own: it tells whether a write sealed a row, and which to version
            self.sealer = register_keyed(self.conn, key, sealer=Sealer(key))

    def _migrate(self) -> None:
        if not migrations.pending(self.db):
            return
        # Hold the write lock while checking and applying, so two processes
        # opening a new file at once cannot both apply the same migration
        # (apply() nests its own transactions as savepoints inside ours).
        with self.transaction():
            if migrations.pending(self.db):
                migrations.apply(self.db)
                if self.record_id is None and record_of(self.conn) is not None:
                    self._record()  # m110 sealed it just now: its key is known
                    self._witness_next = True

    def close(self) -> None:
        self.conn.close()
        if self._witness is not None:
            self._witness.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, bulk: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction, BEGIN IMMEDIATE ... COMMIT; rolled back on
        any exception (including KeyboardInterrupt), so a failed or killed
        write leaves the database exactly as it was.

        Writers in this process first queue on a lock per database file:
        SQLite's busy handler waits by sleeping (up to 100 ms a try), so
        twenty threads contending for the write lock spend most of their
        time asleep; a Python lock hands over at once. Other processes still
        meet the busy timeout.

        `bulk`: a large write (an import). Its commit does not copy the pages
        it wrote from the write-ahead log into the database file, which
        SQLite's automatic checkpoint would do inside the COMMIT (for a full
        study, a fifth of the import); `checkpoint_soon` does it on a thread of
        its own once the rows are committed. Nothing is less safe for it: the
        committed rows are in the log, which every reader reads and which
        survives a killed process."""
        if self._in_tx:
            raise RuntimeError("nested write transaction: each public write is one transaction")
        if self.no_key is not None:
            raise RecordKeyError(self.no_key)
        committed = False
        head = None
        with self._write_lock:
            cache = self.conn.execute("PRAGMA cache_size").fetchone()[0] if bulk else None
            try:
                if bulk:
                    self.conn.execute("PRAGMA wal_autocheckpoint = 0")
                    self.conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
                self.conn.execute("BEGIN IMMEDIATE")
                self._in_tx = True
                try:
                    # Under the write lock: a session ended an instant ago writes nothing.
                    require_in_force(self.conn, self.session_id)
                    if self.sealer is not None:
                        self.sealer.moved = False
                        self.sealer.versions.clear()
                    yield self.conn
                    if self.sealer is not None and self.sealer.versions:
                        seal_versions(self.conn, self.sealer)
                    if self._witness_next or (self.sealer is not None and self.sealer.moved):
                        head = self._head()  # read where this transaction left it
                except BaseException:
                    # SQLite may have rolled back by itself (a full disk, SQLITE_FULL):
                    # a second ROLLBACK would hide that error behind "no transaction".
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise
                else:
                    try:
                        self.conn.execute("COMMIT")
                    except BaseException:
                        # A COMMIT can fail (a deferred constraint, a full disk):
                        # never leave the transaction open behind a released lock.
                        if self.conn.in_transaction:
                            self.conn.execute("ROLLBACK")
                        raise
                    committed = True
                finally:
                    self._in_tx = False
            finally:
                if bulk:
                    try:
                        self.conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
                    finally:
                        self.conn.execute(f"PRAGMA cache_size = {int(cache)}")
        if head is not None and committed and self.sealer is not None:
            self._witness_next = False
            if self._witness is not None:
                self._witness.append(self.sealer, self.record_id, head[0], head[1])
        if bulk and committed and self._key is not None:
            checkpoint_soon(self._key)

    def _head(self) -> tuple[int, str] | None:
        """The record's head: (its last position, that position's hash)."""
        if self.record_id is None:
            return None
        row = self.conn.execute(
            "SELECT last_id, hash FROM chain_heads WHERE name = 'record'").fetchone()
        return None if row is None else (row[0], row[1])

    def require_session(self) -> None:
        """Raise `store.sessions.SessionEnded` unless the session this store acts in
        is in force: for a read that hands out data (a download), which no write
        transaction guards."""
        require_in_force(self.conn, self.session_id)

    def checkpoint(self, timeout: float = 10) -> None:
        """Copy everything committed into the database file itself and empty
        the write-ahead log, e.g. before the file alone is copied. Waits for
        background checkpoints first: while one runs, SQLite reports a
        TRUNCATE checkpoint as busy instead of doing it."""
        wait_for_checkpoints(timeout)
        deadline = time.monotonic() + timeout
        while self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError(
                    f"{self.path}: the write-ahead log is still in use by another connection")
            time.sleep(0.05)

    # -- reads -------------------------------------------------------------
    def query(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Any = ()) -> sqlite3.Row | None:
        return self.conn.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    # -- helpers used inside a transaction ---------------------------------
    def audit(
        self,
        actor: str,
        action: str,
        entity: str,
        entity_id: int | None,
        old: Any = None,
        new: Any = None,
    ) -> None:
        """Append one row to the audit log (call inside a transaction)."""
        self.conn.execute(
            "INSERT INTO audit_log (at, actor, action, entity, entity_id, old, new) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                utcnow(),
                actor,
                action,
                entity,
                entity_id,
                None if old is None else to_json(old),
                None if new is None else to_json(new),
            ),
        )

    # -- public writes: each is exactly one transaction --------------------
    def sync_codebooks(self, books: list[Any], actor: str = "system") -> None:
        """Record each shipped codebook version and the questions it defines.
        Reads first and writes only when something is new."""
        missing = [
            b for b in books
            if self.scalar(
                "SELECT 1 FROM codebook_versions WHERE codebook = ? AND version = ?",
                (b.key, b.version),
            ) is None
            or any(
                self.scalar("SELECT 1 FROM questions WHERE key = ?", (q.key,)) is None
                for q in b.questions
            )
        ]
        if not missing:
            return
        with self.transaction() as conn:
            writer = RecordWriter(conn, source="codebook")
            for book in missing:
                # A version is never replaced (the table refuses an insert that takes an
                # existing one): only a version not yet recorded is written.
                cur = conn.execute(
                    "INSERT INTO codebook_versions (codebook, version, content, note, created_by,"
                    " created_at) SELECT ?,?,?,?,?,? WHERE NOT EXISTS (SELECT 1 FROM"
                    " codebook_versions WHERE codebook = ? AND version = ?)",
                    (book.key, book.version, to_json(book.to_dict()), "shipped with carelens",
                     actor, utcnow(), book.key, book.version),
                )
                if cur.rowcount:
                    self.audit(actor, "codebook_load", "codebook_versions", cur.lastrowid,
                               None, {"codebook": book.key, "version": book.version})
                for q in book.questions:
                    writer.question(QuestionRecord(
                        key=q.key, codebook=book.key, kind=book.kind if book.kind == "labelset"
                        else "criterion", text=q.text, applies_to=q.applies_to,
                    ))
