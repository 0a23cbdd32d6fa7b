"""The record: append-only against every statement, chained, verified, backed up.

The database itself refuses to change, remove or replace a row of an
append-only table, whatever program sends the statement (the sqlite3 shell
included); each answer and audit entry is chained to the one before by a
hash, and `carelens verify` finds a protection dropped, a row removed or
changed, in one line each."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import threading

import pytest

from cli import main
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from store import Store
from store.migrations import APPEND_ONLY, APPEND_ONLY_LATER, APPEND_ONLY_M019
from store.sealed import chained_tables
from store.verify import verify_file

needs_shell = pytest.mark.skipif(shutil.which("sqlite3") is None,
                                 reason="the sqlite3 shell is not installed")


def shell(path, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sqlite3", str(path), sql], capture_output=True, text=True)


def verify_cli(path, capsys) -> tuple[int, list[str]]:
    code = main(["--db", str(path), "verify"])
    return code, capsys.readouterr().out.splitlines()


def rows(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def demo(demo_copy):
    """The demo database with a round review, a tag and a flag: a row in every
    append-only table."""
    from review.browse.tags import add_tag
    from review.reviewing.items import flag_item
    from review.team.reviewers import find_reviewer
    from review.team.rounds import RoundSpec, create_round, reserve_next_item

    s = open_store(demo_copy)
    admin = next(r for r in s.query("SELECT name FROM raters WHERE role = 'admin'"))
    admin = find_reviewer(s, admin[0])
    rid = create_round(s, RoundSpec("sealed", "carebench.escalation_needed",
                                    reviewers_per_item=1, limit=2), admin)
    me = ensure_reviewer(s, "Dr. Record")
    item = reserve_next_item(s, rid, me)
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(s, me, item, qid, "1B_ESCALATION_URGENT_CARE", round_id=rid)
    flag_item(s, me, item, True, "look again")
    add_tag(s, me, item, "unsafe reassurance", note="noted")
    s.close()
    return demo_copy


@needs_shell
@pytest.mark.parametrize("table", APPEND_ONLY)
def test_the_shell_cannot_replace_a_row_of_an_append_only_table(demo, table):
    before = rows(demo, f"SELECT * FROM {table} ORDER BY rowid")
    assert before, f"the fixture has a row in {table}"
    columns = [r[1] for r in rows(demo, f"PRAGMA table_info({table})")]
    # A chained table takes no insert from the shell at all (it lacks the chain's
    # function); its chain trigger dropped, the refusal of a replacement still holds.
    unchain = f"DROP TRIGGER IF EXISTS {table}_chain; " if table in chained_tables() else ""
    # The first row again, under its own rowid.
    values = ", ".join(["rowid"] + columns)
    r = shell(demo, f"{unchain}INSERT OR REPLACE INTO {table} (rowid, {', '.join(columns)})"
                    f" SELECT {values} FROM {table} ORDER BY rowid LIMIT 1;")
    assert r.returncode != 0 and "append-only" in r.stderr, r.stderr
    r = shell(demo, f"{unchain}REPLACE INTO {table} ({', '.join(columns)})"
                    f" SELECT {', '.join(columns)} FROM {table} ORDER BY rowid LIMIT 1;")
    assert r.returncode != 0 and "append-only" in r.stderr, r.stderr
    for sql in (f"UPDATE {table} SET rowid = rowid;", f"DELETE FROM {table};"):
        r = shell(demo, sql)
        assert r.returncode != 0 and "append-only" in r.stderr, (sql, r.stderr)
    assert rows(demo, f"SELECT * FROM {table} ORDER BY rowid") == before


def test_insert_or_replace_cannot_rewrite_an_answer_nor_forge_an_audit_entry(demo):
    s = Store(demo)
    answer = s.query_one("SELECT * FROM annotations ORDER BY id LIMIT 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        s.conn.execute(
            "INSERT OR REPLACE INTO annotations (id, item_id, question_id, rater_id, status, value,"
            " source, created_at) VALUES (?, ?, ?, ?, 'answered', '0A_NO_ESCALATION_INFO_NEEDED',"
            " 'app', ?)", (answer["id"], answer["item_id"], answer["question_id"],
                           answer["rater_id"], answer["created_at"]))
    entry = s.query_one("SELECT * FROM audit_log ORDER BY id LIMIT 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        s.conn.execute("INSERT OR REPLACE INTO audit_log (id, at, actor, action, entity)"
                       " VALUES (?, '2020-01-01', 'someone else', 'answer', 'annotations')",
                       (entry["id"],))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        s.conn.execute("INSERT INTO annotations (id, item_id, question_id, rater_id, status,"
                       " source, created_at) VALUES (?, ?, ?, ?, 'skipped', 'app', 'now')"
                       " ON CONFLICT (id) DO UPDATE SET value = 'x'",
                       (answer["id"], answer["item_id"], answer["question_id"],
                        answer["rater_id"]))
    assert tuple(s.query_one("SELECT * FROM annotations WHERE id = ?", (answer["id"],))) \
        == tuple(answer)
    s.close()


def test_verify_passes_an_untouched_database(demo, capsys):
    code, out = verify_cli(demo, capsys)
    assert code == 0 and len(out) == 1 and "record whole" in out[0]


@needs_shell
def test_verify_finds_a_dropped_trigger_and_an_answer_deleted_through_it(demo, capsys):
    victim = rows(demo, "SELECT id FROM annotations ORDER BY id LIMIT 1 OFFSET 4")[0][0]
    r = shell(demo, f"DROP TRIGGER annotations_no_delete; DELETE FROM annotations WHERE id = {victim};")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(demo, capsys)
    assert code != 0
    assert any("annotations_no_delete" in line and "dropped" in line for line in out)
    assert any(f"answer {victim} removed" in line for line in out)
    assert len(out) == 2  # one line per problem, not one per row after it


@needs_shell
def test_verify_finds_a_trigger_put_back_after_the_last_answer_was_deleted(demo, capsys):
    last = rows(demo, "SELECT max(id) FROM annotations")[0][0]
    sql = rows(demo, "SELECT sql FROM sqlite_master WHERE name = 'annotations_no_delete'")[0][0]
    r = shell(demo, f"DROP TRIGGER annotations_no_delete; DELETE FROM annotations WHERE id = {last};"
                    f" {sql};")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(demo, capsys)
    assert code != 0 and len(out) == 1, out
    assert out[0].startswith(f"{demo}: annotations: answer {last:,} removed (record position")


@needs_shell
def test_verify_finds_an_answer_changed_and_an_audit_entry_rewritten(demo, capsys):
    r = shell(demo, "DROP TRIGGER annotations_no_update; UPDATE annotations SET value ="
                    " '0A_NO_ESCALATION_INFO_NEEDED' WHERE id = 3;"
                    " DROP TRIGGER audit_log_no_update; UPDATE audit_log SET actor = 'nobody'"
                    " WHERE id = 2;")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(demo, capsys)
    assert code != 0
    assert any("answer 3 changed" in line for line in out)
    assert any("audit entry 2 changed" in line for line in out)
    assert sum("dropped" in line for line in out) == 2


@needs_shell
def test_verify_finds_a_trigger_that_is_not_carelens_own(demo, capsys):
    r = shell(demo, "CREATE TRIGGER quietly AFTER INSERT ON flags BEGIN SELECT 1; END;")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(demo, capsys)
    assert code != 0 and any("unknown trigger quietly on flags" in line for line in out)


@needs_shell
def test_the_shell_cannot_append_an_unchained_answer(demo):
    r = shell(demo, "INSERT INTO audit_log (at, actor, action, entity) VALUES"
                    " ('2020-01-01', 'someone', 'answer', 'annotations');")
    assert r.returncode != 0 and "carelens_seal" in r.stderr


def test_every_answer_and_audit_entry_is_chained_as_it_is_written(store):
    from tests.helpers import write_prefixes

    write_prefixes(store, 6)
    me = ensure_reviewer(store, "Dr. Chain")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    for item in [r[0] for r in store.query("SELECT id FROM items")]:
        commit_answer(store, me, item, qid, "0B")
    for table in chained_tables():
        assert store.scalar(f"SELECT COUNT(*) FROM {table} WHERE chain IS NULL") == 0
        assert store.scalar(f"SELECT COUNT(DISTINCT chain) = COUNT(*) FROM {table}") == 1
    assert verify_file(store.path).whole


def test_a_database_made_before_the_chain_is_chained_when_opened(tmp_path):
    """The migration back-fills the chain of the rows an older database holds."""
    from sqlite_utils import Database

    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m015_record_sealed")
    conn.execute("INSERT INTO audit_log (at, actor, action, entity) VALUES ('2025-01-01', 'a',"
                 " 'import', 'imports')")
    conn.execute("INSERT INTO audit_log (at, actor, action, entity) VALUES ('2025-01-02', 'b',"
                 " 'import', 'imports')")
    conn.close()
    assert not verify_file(path).whole  # the schema line: a migration is not applied
    Store(path).close()
    verdict = verify_file(path)
    # The two entries, and the one that says the record was sealed under its key (m110).
    assert verdict.whole and verdict.rows["audit_log"] == 3, verdict.problems


def test_a_backup_made_while_reviewers_answer_is_whole_and_restores(demo, tmp_path, capsys):
    s = open_store(demo)
    me = ensure_reviewer(s, "Dr. Busy")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    items = [r[0] for r in s.query("SELECT id FROM items WHERE kind = 'prefix' LIMIT 200")]
    s.close()
    stop, errors = threading.Event(), []

    def answering():
        local = open_store(demo)
        try:
            for item in items:
                if stop.is_set():
                    break
                commit_answer(local, me, item, qid, "0B")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            local.close()

    writer = threading.Thread(target=answering)
    writer.start()
    try:
        out = tmp_path / "backup.db"
        assert main(["--db", str(demo), "backup", "--out", str(out)]) == 0
    finally:
        stop.set()
        writer.join()
    assert errors == []
    printed = capsys.readouterr().out
    assert "record whole" in printed
    assert not (tmp_path / "backup.db-wal").exists()  # one file, no log beside it
    # Restore: the backup in the database's place, its witness beside it, opens and verifies.
    restored = tmp_path / "restored.db"
    shutil.copy(out, restored)
    code, lines = verify_cli(restored, capsys)
    assert code == 1 and "witness" in lines[0] and "is not there" in lines[0], lines
    shutil.copy(f"{out}.witness", f"{restored}.witness")
    code, lines = verify_cli(restored, capsys)
    assert code == 0, lines
    s = open_store(restored)
    assert s.scalar("SELECT COUNT(*) FROM annotations") >= 1
    s.close()
    # A backup never overwrites a file.
    assert main(["--db", str(demo), "backup", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("table", APPEND_ONLY_LATER + APPEND_ONLY_M019)
def test_the_later_append_only_tables_refuse_a_replacement(demo, table):
    """labels_opened, reveals, round_frame, round members, the tag list and its
    changes, study settings (each its own change) refuse it too."""
    s = Store(demo)
    me = s.scalar("SELECT id FROM raters WHERE name = 'Dr. Record'")
    answer = s.query_one("SELECT id, item_id FROM annotations ORDER BY id LIMIT 1")
    seed = {
        "labels_opened": ("INSERT INTO labels_opened (rater_id, screen, unanswered, opened_at)"
                          " VALUES (?, 'browse', 3, 'then')", (me,)),
        "reveals": ("INSERT INTO reveals (rater_id, item_id, annotation_id, shown_at)"
                    " VALUES (?, ?, ?, 'then')", (me, answer["item_id"], answer["id"])),
        "round_frame": None,  # the fixture's round recorded its frame
        "round_members": ("INSERT INTO round_members (round_id, rater_id, in_round, named_by,"
                          " created_at) SELECT id, ?, 1, 'test', 'then' FROM review_rounds"
                          " LIMIT 1", (me,)),
        "tags": None,  # seeded by the migrations
        "tag_changes": ("INSERT INTO tag_changes (tag_id, retired, changed_by, created_at)"
                        " SELECT id, 1, 'test', 'then' FROM tags LIMIT 1", ()),
        "study_settings": ("INSERT INTO study_settings (key, value, set_by, set_at) VALUES"
                           " ('reviewers_add_tags', 'true', 'test', 'then')", ()),
    }[table]
    if seed is not None:
        with s.transaction() as conn:
            conn.execute(*seed)
    columns = [r[1] for r in s.query(f"PRAGMA table_info({table})")]
    assert s.scalar(f"SELECT COUNT(*) FROM {table}") >= 1
    with pytest.raises(sqlite3.IntegrityError, match="append-only|recorded once"):
        s.conn.execute(f"INSERT OR REPLACE INTO {table} (rowid, {', '.join(columns)})"
                       f" SELECT rowid, {', '.join(columns)} FROM {table} ORDER BY rowid LIMIT 1")
    s.close()


def test_the_progress_and_audit_screen_gives_the_same_verdict(demo, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    def screen():
        monkeypatch.setenv("CARELENS_DB", str(demo))
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.query_params["reviewer"] = "Jordan Lee"
        at.run()
        at.switch_page("pages/activity.py").run()
        assert not at.exception
        return at

    at = screen()
    assert any("record whole" in s.value for s in at.success) and not at.error
    conn = sqlite3.connect(demo)
    conn.execute("DROP TRIGGER audit_log_no_delete")
    conn.close()
    at = screen()
    assert any("audit\\_log\\_no\\_delete" in e.value and "dropped" in e.value for e in at.error)
