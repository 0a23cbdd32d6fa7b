"""The store: schema, append-only annotations, transactions, concurrency."""

from __future__ import annotations

import sqlite3
import subprocess
import threading

import pytest

from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from store import Store


def test_schema_opens_cleanly_and_is_migrated_once(tmp_path):
    path = tmp_path / "a.db"
    s = Store(path)
    tables = {r[0] for r in s.query("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}
    assert {"items", "questions", "raters", "annotations", "current_annotations", "audit_log",
            "imports", "datasets", "flags", "codebook_versions", "llm_calls"} <= tables
    assert s.scalar("PRAGMA journal_mode") == "wal"
    assert s.scalar("PRAGMA foreign_keys") == 1
    n = s.scalar("SELECT COUNT(*) FROM _sqlite_migrations")
    s.close()
    assert Store(path).scalar("SELECT COUNT(*) FROM _sqlite_migrations") == n
    # The sqlite3 shell reads it, with the column comments in the schema.
    if subprocess.run(["which", "sqlite3"], capture_output=True).returncode == 0:
        out = subprocess.run(["sqlite3", str(path), ".schema annotations"],
                             capture_output=True, text=True, check=True).stdout
        assert "append-only" in out or "supersedes" in out


@pytest.fixture
def answered(store):
    from tests.helpers import write_prefixes

    write_prefixes(store, 3)
    rev = ensure_reviewer(store, "Dr. Test")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    # The case's last round: its labels show once it is answered (an earlier round's
    # wait for the case's later rounds), so a revision is after the reveal.
    item = store.scalar("SELECT id FROM items WHERE round_id = 3 ORDER BY id LIMIT 1")
    aid = commit_answer(store, rev, item, qid, "1B")
    return store, rev, item, qid, aid


def test_annotations_refuse_update_and_delete(answered):
    store, *_ , aid = answered
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("UPDATE annotations SET value = '0A_NO_ESCALATION_INFO_NEEDED' WHERE id = ?", (aid,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("DELETE FROM annotations WHERE id = ?", (aid,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("DELETE FROM audit_log")


def test_sqlite3_shell_cannot_change_an_annotation(answered):
    store, *_ = answered
    if subprocess.run(["which", "sqlite3"], capture_output=True).returncode != 0:
        pytest.skip("the sqlite3 shell is not installed")
    before = (store.scalar("SELECT group_concat(value) FROM annotations"),
              store.scalar("SELECT COUNT(*) FROM audit_log"))
    for sql in ("DELETE FROM annotations;", "UPDATE annotations SET value = 'x';",
                "DELETE FROM audit_log;", "UPDATE audit_log SET actor = 'someone else';"):
        r = subprocess.run(["sqlite3", store.path, sql], capture_output=True, text=True)
        assert r.returncode != 0 and "append-only" in r.stderr, sql
    assert (store.scalar("SELECT group_concat(value) FROM annotations"),
            store.scalar("SELECT COUNT(*) FROM audit_log")) == before


def test_a_revision_supersedes_and_current_view_shows_newest(answered):
    store, rev, item, qid, aid = answered
    aid2 = commit_answer(store, rev, item, qid, "1A", rationale="on reflection")
    rows = store.query("SELECT id, value, phase, supersedes_id FROM annotations WHERE rater_id = ?"
                       " ORDER BY id", (rev.id,))
    assert [r["value"] for r in rows] == ["1B_ESCALATION_URGENT_CARE", "1A_ESCALATION_NONURGENT_CARE"]
    assert rows[0]["phase"] == "blind" and rows[1]["phase"] == "after_reveal"
    assert rows[1]["supersedes_id"] == aid
    current = store.query("SELECT id FROM current_annotations WHERE rater_id = ?", (rev.id,))
    assert [r[0] for r in current] == [aid2]
    actions = [r[0] for r in store.query("SELECT action FROM audit_log WHERE entity = 'annotations' ORDER BY id")]
    assert actions == ["answer", "revise"]
    old = store.scalar("SELECT old FROM audit_log WHERE action = 'revise'")
    assert "1B_ESCALATION_URGENT_CARE" in old


def test_failed_transaction_leaves_nothing(answered):
    store, *_ = answered
    before = store.scalar("SELECT COUNT(*) FROM audit_log")
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.audit("x", "test", "none", None)
            raise RuntimeError("boom")
    assert store.scalar("SELECT COUNT(*) FROM audit_log") == before


def test_eight_threads_commit_500_each_without_lock_errors(tmp_path):
    """8 reviewers at once, each with their own connection: all 4,000 kept."""
    from tests.helpers import write_prefixes

    path = tmp_path / "c.db"
    s = open_store(path)
    write_prefixes(s, 500)
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    ids = [r[0] for r in s.query("SELECT id FROM items ORDER BY id")]
    reviewers = [ensure_reviewer(s, f"Reviewer {i}") for i in range(8)]
    s.close()
    errors: list[BaseException] = []

    def work(rev):
        try:
            local = open_store(path)
            for item in ids:
                commit_answer(local, rev, item, qid, "0B")
            local.close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check = open_store(path)
    assert check.scalar("SELECT COUNT(*) FROM annotations WHERE rater_id IN (SELECT id FROM raters WHERE kind='human')") == 4000
    assert check.scalar("SELECT COUNT(*) FROM current_annotations WHERE source = 'app'") == 4000


# -- bulk writes: the checkpoint leaves the commit ---------------------------------------------

def _open_checkpointed(path) -> Store:
    """A new database whose schema is already in the database file itself."""
    s = open_store(path)
    s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return s


def _bulk_insert(store: Store, n: int = 3000) -> None:
    with store.transaction(bulk=True) as conn:
        conn.executemany("INSERT INTO audit_log (actor, action, entity, at) VALUES (?, ?, ?, ?)",
                         [("bulk", "test", "x" * 2000, "2026-01-01") for _ in range(n)])


def _rows_in_main_file(path, tmp_path) -> int:
    """Audit rows in the database file alone, without its write-ahead log."""
    copy = tmp_path / "main-file-only.db"
    copy.write_bytes(path.read_bytes())
    conn = sqlite3.connect(copy)
    try:
        return conn.execute("SELECT COUNT(*) FROM audit_log WHERE actor = 'bulk'").fetchone()[0]
    finally:
        conn.close()


def test_a_bulk_commit_leaves_the_checkpoint_to_a_thread(tmp_path, monkeypatch):
    import store.db as db

    asked: list[str] = []
    monkeypatch.setattr(db, "checkpoint_soon", asked.append)
    path = tmp_path / "bulk.db"
    s = _open_checkpointed(path)
    _bulk_insert(s)
    assert asked == [str(path)]
    # Committed: another connection reads every row (they are in the log) ...
    other = open_store(path)
    assert other.scalar("SELECT COUNT(*) FROM audit_log WHERE actor = 'bulk'") == 3000
    other.close()
    # ... but the commit did not copy them into the database file: SQLite's
    # automatic checkpoint (1,000 pages) would have.
    assert _rows_in_main_file(path, tmp_path) == 0
    assert s.scalar("PRAGMA wal_autocheckpoint") == db.WAL_AUTOCHECKPOINT
    db._checkpoint(str(path))
    assert _rows_in_main_file(path, tmp_path) == 3000
    s.close()


def test_the_background_checkpoint_copies_every_committed_page(tmp_path):
    from store.db import wait_for_checkpoints

    path = tmp_path / "bulk.db"
    s = _open_checkpointed(path)
    _bulk_insert(s)
    _bulk_insert(s)  # asked again while the first may still run: it goes round once more
    wait_for_checkpoints()
    busy, log, copied = s.query_one("PRAGMA wal_checkpoint(PASSIVE)")
    assert (busy, copied) == (0, log)
    assert _rows_in_main_file(path, tmp_path) == 6000
    s.close()


def test_a_failed_bulk_write_restores_the_automatic_checkpoint(tmp_path, monkeypatch):
    import store.db as db

    asked: list[str] = []
    monkeypatch.setattr(db, "checkpoint_soon", asked.append)
    s = open_store(tmp_path / "bulk.db")
    cache = s.scalar("PRAGMA cache_size")
    with pytest.raises(RuntimeError):
        with s.transaction(bulk=True) as conn:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -db.BULK_CACHE_KIB
            conn.execute("INSERT INTO audit_log (actor, action, entity, at) VALUES ('a','b','c','d')")
            raise RuntimeError("bad row")
    assert s.scalar("PRAGMA wal_autocheckpoint") == db.WAL_AUTOCHECKPOINT
    assert s.scalar("PRAGMA cache_size") == cache  # the large cache is given back
    assert asked == []
    assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE actor = 'a'") == 0
    s.close()


def test_a_checkpoint_never_makes_a_deleted_database_again(tmp_path):
    from store.db import _checkpoint

    _checkpoint(str(tmp_path / "gone.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_process_killed_right_after_a_bulk_commit_keeps_its_rows(tmp_path):
    """The rows are committed when the transaction returns, checkpoint or not."""
    import signal
    import sys

    path = tmp_path / "killed.db"
    open_store(path).close()
    script = (
        "import os, signal, sys\n"
        "sys.path.insert(0, '.')\n"
        "from review.workspace import open_store\n"
        f"s = open_store({str(path)!r})\n"
        "with s.transaction(bulk=True) as conn:\n"
        "    conn.executemany(\"INSERT INTO audit_log (actor, action, entity, at) VALUES (?,?,?,?)\",\n"
        "                     [('bulk', 'test', 'x' * 200, 'now')] * 5000)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    s = open_store(path)
    assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE actor = 'bulk'") == 5000
    assert s.scalar("PRAGMA integrity_check") == "ok"
    s.close()


def test_a_failed_commit_rolls_back_and_frees_the_store(tmp_path):
    """A COMMIT refused by a deferred constraint leaves no transaction open."""
    s = open_store(tmp_path / "c.db")
    s.conn.execute("PRAGMA foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError):
        with s.transaction() as conn:
            conn.execute("PRAGMA defer_foreign_keys = ON")
            conn.execute("INSERT INTO items (uid, dataset_id, kind, payload, created_at)"
                         " VALUES ('orphan', 999, 'prefix', '{}', 'now')")
    assert not s.conn.in_transaction
    with s.transaction() as conn:  # the same store writes again at once
        conn.execute("INSERT INTO audit_log (actor, action, entity, at) VALUES ('a','b','c','d')")
    other = open_store(tmp_path / "c.db")
    assert other.scalar("SELECT COUNT(*) FROM items WHERE uid = 'orphan'") == 0
    other.close()
    s.close()


def test_checkpoint_puts_everything_in_the_file_even_while_one_runs(tmp_path):
    path = tmp_path / "bulk.db"
    s = _open_checkpointed(path)
    _bulk_insert(s)  # a background checkpoint starts
    s.checkpoint()  # waits for it, then empties the log
    assert _rows_in_main_file(path, tmp_path) == 3000
    assert (path.parent / "bulk.db-wal").stat().st_size == 0
    s.close()


def test_a_checkpointer_that_dies_lets_the_next_request_start_another(tmp_path, monkeypatch):
    import store.db as db

    def boom(path, tries=20):
        raise MemoryError("simulated")

    monkeypatch.setattr(db, "_checkpoint", boom)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    path = tmp_path / "x.db"
    open_store(path).close()
    db.checkpoint_soon(path)
    db.wait_for_checkpoints()
    assert str(path.resolve()) not in db._checkpoints


def test_a_full_disk_inside_a_transaction_is_reported_as_a_full_disk(tmp_path):
    """SQLite rolls a transaction back by itself on SQLITE_FULL: the error the caller
    gets says the disk is full, not 'cannot rollback - no transaction is active'."""
    import sqlite3

    from store import Store

    s = Store(tmp_path / "full.db")
    s.conn.execute("CREATE TABLE big (b BLOB)")
    s.conn.execute(f"PRAGMA max_page_count = {s.scalar('PRAGMA page_count') + 50}")  # a full disk
    with pytest.raises(sqlite3.OperationalError) as caught:
        with s.transaction() as conn:
            for _ in range(100):
                conn.execute("INSERT INTO big VALUES (randomblob(4000))")
    assert caught.value.sqlite_errorname == "SQLITE_FULL", str(caught.value)
    assert s.scalar("SELECT count(*) FROM big") == 0  # nothing kept, and the store still works
    s.close()
