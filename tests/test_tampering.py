"""Tamperings done with nothing but the file: each makes `carelens verify` exit 1,
naming what it found, one line per problem; an untouched database and a fresh
backup verify whole.

The attacker holds the database file (and, where a test says so, its folder),
the sqlite3 shell and Python's sqlite3 with carelens's source at hand, never the
record's key (`tests.tamper`). The first tests are the eight of issue 28 that
`verify` used to call whole; then every sealed table edited, emptied of a row
and added to with its protection put back; the schema changed (triggers, views,
indexes, tables); the witness edited; the key and the migrations list."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from cli import main
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer, find_reviewer
from review.workspace import open_store
from store.key import RecordKeyError
from store.sealed import CHAINED, SEALED, VERSIONS, body, chained_tables
from store.verify import verify_file
from store.witness import witness_path
from tests.conftest import ROOT, copy_database
from tests.tamper import attacker, guessed_key, needs_shell, rows, shell, unkeyed

TAIL = 25
HEALTHBENCH = ROOT.parent / "shared" / "data" / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
"""Answers the fixture gives last, by one reviewer: the record's last positions."""


@pytest.fixture(scope="module")
def sealed_db(demo_db, tmp_path_factory) -> Path:
    """The demo with a row in every sealed table, given through carelens, ending
    with TAIL answers: built once, copied for each test."""
    from review.browse.tags import add_tag
    from review.reviewing.items import flag_item
    from review.team.rounds import RoundSpec, create_round, reserve_next_item

    path = tmp_path_factory.mktemp("sealed") / "study.db"
    copy_database(demo_db, path)
    s = open_store(path)
    admin = find_reviewer(s, s.scalar("SELECT name FROM raters WHERE role = 'admin' LIMIT 1"))
    rid = create_round(s, RoundSpec("sealed", "carebench.escalation_needed",
                                    reviewers_per_item=1, limit=4), admin)
    # An active round: its draws are the rows of round_sequence.
    create_round(s, RoundSpec("sealed active", "carebench.response_action", design="active",
                              limit=20, reviewers_per_item=1), admin)
    me = ensure_reviewer(s, "Dr. Tamper")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    item = reserve_next_item(s, rid, me)
    commit_answer(s, me, item, qid, "1B_ESCALATION_URGENT_CARE", round_id=rid)
    flag_item(s, me, item, True, "look again")
    add_tag(s, me, item, "unsafe reassurance", note="noted")
    answer = s.scalar("SELECT id FROM annotations WHERE item_id = ? LIMIT 1", (item,))
    with s.transaction() as conn:
        conn.execute("INSERT INTO reveals (rater_id, item_id, annotation_id, shown_at)"
                     " VALUES (?, ?, ?, 'then')", (me.id, item, answer))
        conn.execute("INSERT INTO labels_opened (rater_id, screen, unanswered, opened_at)"
                     " VALUES (?, 'browse', 3, 'then')", (me.id,))
        conn.execute("INSERT INTO round_members (round_id, rater_id, in_round, named_by,"
                     " created_at) VALUES (?, ?, 1, 'test', 'then')", (rid, me.id))
        conn.execute("INSERT INTO round_redraws (round_id, item_id, places, reason, redrawn_by,"
                     " redrawn_at) VALUES (?, ?, 1, 'stuck', 'test', 'then')", (rid, item))
        conn.execute("INSERT INTO tag_changes (tag_id, retired, changed_by, created_at)"
                     " SELECT id, 1, 'test', 'then' FROM tags LIMIT 1")
        conn.execute("INSERT INTO study_settings (key, value, set_by, set_at) VALUES"
                     " ('reviewers_add_tags', 'true', 'test', 'then')")
    tail = ensure_reviewer(s, "Dr. Tail")
    for item in [r[0] for r in s.query("SELECT id FROM items WHERE kind = 'prefix' ORDER BY id"
                                       " LIMIT ?", (TAIL,))]:
        commit_answer(s, tail, item, qid, "0B")
    for table in SEALED:
        assert s.scalar(f"SELECT COUNT(*) FROM {table}"), f"the fixture has a row in {table}"
    s.close()
    assert verify_file(path).whole
    return path


@pytest.fixture
def db(sealed_db, tmp_path) -> Path:
    path = tmp_path / "study.db"
    copy_database(sealed_db, path)
    return path


def verify_cli(path, capsys, *more: str) -> tuple[int, list[str]]:
    code = main(["--db", str(path), "verify", *more])
    lines = [line.removeprefix(f"{path}: ") for line in capsys.readouterr().out.splitlines()]
    return code, lines


def found(lines: list[str], *words: str) -> bool:
    return any(all(w in line for w in words) for line in lines)


@contextmanager
def put_back(conn: sqlite3.Connection, *triggers: str):
    """Drop these triggers and make them again, as they were, afterwards."""
    saved = [conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0]
             for t in triggers]
    for t in triggers:
        conn.execute(f"DROP TRIGGER {t}")
    yield conn
    for sql in saved:
        conn.execute(sql)


def chained_rows(conn: sqlite3.Connection, since: int = 0) -> list[tuple]:
    """(seq, table, rowid, body) of every chained row from position `since`, in order."""
    out = []
    for table in chained_tables():
        out += [(r[0], table, r[1], r[2]) for r in conn.execute(
            f"SELECT seq, rowid, {body(table)} FROM {table} WHERE seq >= ?", (since,))]
    return sorted(out)


def recompute(conn: sqlite3.Connection, since: int, seal) -> None:
    """Every hash from position `since` on made again with `seal` (not the key), and the
    head moved to the last: what the attacker does after a change."""
    previous = _hash_at(conn, since - 1)
    guards = [f"{t}_no_update" for t in chained_tables()] + ["chain_heads_forward_only"]
    with put_back(conn, *guards):
        for seq, table, rowid, fields in chained_rows(conn, since):
            previous = seal(previous, seq, table, fields)
            conn.execute(f"UPDATE {table} SET chain = ? WHERE rowid = ?", (previous, rowid))
        conn.execute("UPDATE chain_heads SET hash = ? WHERE name = 'record'", (previous,))


def _hash_at(conn: sqlite3.Connection, seq: int) -> str | None:
    for table in chained_tables():
        row = conn.execute(f"SELECT chain FROM {table} WHERE seq = ?", (seq,)).fetchone()
        if row:
            return row[0]
    return None


def last_head(path) -> str:
    """The head as `verify` prints it, to write down."""
    verdict = verify_file(path)
    assert verdict.whole, verdict.problems
    return verdict.head_text


# -- untouched ---------------------------------------------------------------------------

def test_an_untouched_database_is_whole(db, capsys):
    code, out = verify_cli(db, capsys)
    assert code == 0 and len(out) == 1 and out[0].startswith("record whole: "), out
    assert "head " in out[0] and "witnessed" in out[0]


def test_a_fresh_backup_is_whole_and_its_head_is_witnessed_twice(db, tmp_path, capsys):
    out = tmp_path / "backup.db"
    assert main(["--db", str(db), "backup", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    head = last_head(out)
    assert f"head {head}" in printed and "record whole" in printed
    assert verify_cli(out, capsys) == (0, [verify_file(out).summary()])
    assert verify_cli(db, capsys)[0] == 0
    live = witness_path(db).read_text().splitlines()[-1]
    copy = witness_path(out).read_text().splitlines()[-1]
    assert live.endswith(f"backup {out.resolve()}") and copy.endswith(f"copy of {db.resolve()}")
    assert live.split()[:2] == copy.split()[:2]  # the same head, in both witnesses
    assert oct(witness_path(out).stat().st_mode & 0o777) == "0o600"


def test_a_head_written_down_verifies_and_a_wrong_one_does_not(db, capsys):
    head = last_head(db)
    assert verify_cli(db, capsys, "--head", head)[0] == 0
    position, hash_ = head.split(":")
    code, out = verify_cli(db, capsys, "--head", f"{position}:{'0' * 32}")
    assert code == 1 and found(out, f"position {position} is not the head you gave"), out
    assert main(["--db", str(db), "verify", "--head", "twelve"]) == 2
    assert "POSITION:HASH" in capsys.readouterr().err


# -- issue 28's eight ----------------------------------------------------------------------

@pytest.mark.parametrize("seal", [unkeyed, guessed_key], ids=["sha256", "a guessed key"])
def test_an_answer_edited_and_every_later_hash_recomputed(db, capsys, seal):
    conn = attacker(db)
    answer, seq = conn.execute("SELECT id, seq FROM annotations WHERE value IS NOT NULL"
                               " ORDER BY id LIMIT 1 OFFSET 100").fetchone()
    with put_back(conn, "annotations_no_update"):
        conn.execute("UPDATE annotations SET value = '0A_NO_ESCALATION_INFO_NEEDED' WHERE id = ?",
                     (answer,))
    recompute(conn, seq, seal)
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1
    assert found(out, f"record: positions {seq:,}-", "do not follow from the record's key",
                 f"answers {answer:,}-"), out
    assert found(out, "is not the one witnessed"), out


def test_an_answer_slipped_in_with_the_old_hash_function(db, capsys):
    values = rows(db, "SELECT item_id, question_id, rater_id FROM annotations ORDER BY id"
                      " DESC LIMIT 1")[0]
    insert = ("INSERT INTO annotations (item_id, question_id, rater_id, status, value, source,"
              " created_at) VALUES (?, ?, ?, 'answered', '0A_NO_ESCALATION_INFO_NEEDED', 'app',"
              " '2025-01-01')")
    # The three lines of the old chain, under the old function's name: nothing calls it now.
    conn = sqlite3.connect(db, isolation_level=None)
    conn.create_function("carelens_chain", 2, lambda p, b: unkeyed(p, 0, "", b))
    with pytest.raises(sqlite3.OperationalError, match="no such function: carelens_seal"):
        conn.execute(insert, values)
    conn.close()
    # Registered under the name the triggers call now: the row goes in, and shows.
    conn = attacker(db)
    new = conn.execute(insert, values).lastrowid
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, f"annotations: answer {new:,} changed after it was written,"
                                    " or written without the record's key"), out


def test_the_tail_cut_with_the_head_repointed(db, capsys):
    conn = attacker(db)
    cut = conn.execute("SELECT seq FROM annotations ORDER BY id DESC LIMIT 1 OFFSET ?",
                       (TAIL - 1,)).fetchone()[0]
    gone = {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE seq >= ?", (cut,)).fetchone()[0]
            for t in chained_tables()}
    assert gone["annotations"] == TAIL, gone
    assert all(n == 0 for t, n in gone.items() if t not in ("annotations", "audit_log")), gone
    with put_back(conn, "annotations_no_delete", "audit_log_no_delete",
                  "chain_heads_forward_only"):
        conn.execute("DELETE FROM annotations WHERE seq >= ?", (cut,))
        conn.execute("DELETE FROM audit_log WHERE seq >= ?", (cut,))
        last = max(chained_rows(conn))
        conn.execute("UPDATE chain_heads SET last_id = ?, hash = ? WHERE name = 'record'",
                     (last[0], _hash_at(conn, last[0])))
        for table in ("annotations", "audit_log"):
            conn.execute("UPDATE chain_heads SET last_id = (SELECT max(rowid) FROM "
                         f"{table}) WHERE name = ?", (table,))
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1, out
    assert found(out, f"it ends at position {cut - 1:,}", "was witnessed",
                 "rows were cut from its end"), out


def test_the_tail_cut_without_repointing_the_head_names_the_rows(db, capsys):
    conn = attacker(db)
    last_answers = [r[0] for r in conn.execute(
        "SELECT id FROM annotations ORDER BY id DESC LIMIT 3")]
    with put_back(conn, "annotations_no_delete"):
        conn.execute(f"DELETE FROM annotations WHERE id >= {min(last_answers)}")
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1
    assert found(out, f"answers {min(last_answers):,}-{max(last_answers):,} removed"), out


def test_an_older_backup_copied_over_the_live_database(db, tmp_path, capsys):
    old = tmp_path / "monday.db"
    assert main(["--db", str(db), "backup", "--out", str(old)]) == 0
    s = open_store(db)
    me = ensure_reviewer(s, "Dr. Later")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(s, me, s.scalar("SELECT MIN(id) FROM items WHERE kind = 'prefix'"), qid, "0B")
    s.close()
    later = last_head(db)
    for leftover in (f"{db}-wal", f"{db}-shm"):
        Path(leftover).unlink(missing_ok=True)
    shutil.copy(old, db)  # the file alone: the witness beside it is the live one
    capsys.readouterr()
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, "but position", "was witnessed", "an older copy"), out
    # With its witness too (whoever holds the folder): only a head written down elsewhere sees it.
    shutil.copy(witness_path(old), witness_path(db))
    assert verify_cli(db, capsys)[0] == 0
    code, out = verify_cli(db, capsys, "--head", later)
    assert code == 1 and found(out, "before the head you gave"), out


@needs_shell
def test_a_role_changed_by_hand(db, capsys):
    name = "Dr. Tamper"
    r = shell(db, f"UPDATE raters SET role = 'adjudicator' WHERE name = '{name}';")
    assert r.returncode != 0 and "no such function: carelens_" in r.stderr  # the shell cannot
    conn = attacker(db)
    conn.execute("UPDATE raters SET role = 'adjudicator' WHERE name = ?", (name,))
    conn.close()
    rater = rows(db, "SELECT id FROM raters WHERE name = ?", (name,))[0][0]
    code, out = verify_cli(db, capsys)
    # carelens's trigger named the change; nothing with the key made a version of it.
    assert code == 1 and out == [f"raters: rater {rater} ('{name}') is not as carelens last"
                                 " sealed it: changed outside carelens"], out


def test_a_role_changed_by_hand_with_the_seal_dropped_and_put_back(db, capsys):
    conn = attacker(db)
    with put_back(conn, "raters_seal_update"):
        conn.execute("UPDATE raters SET role = 'adjudicator' WHERE name = 'Dr. Tamper'")
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1 and found(out, "raters: rater", "'Dr. Tamper'",
                                                 "not as carelens last sealed it"), out


def test_a_role_changed_by_hand_then_a_change_through_carelens_does_not_hide_it(db, capsys):
    """The change carelens seals next starts from the row as the attacker left it: its
    version says what the row was before it, and that is not what carelens sealed."""
    from review.team.reviewers import update_profile

    conn = attacker(db)
    with put_back(conn, "raters_seal_update"):
        conn.execute("UPDATE raters SET role = 'adjudicator' WHERE name = 'Dr. Tamper'")
    conn.close()
    s = open_store(db)
    update_profile(s, find_reviewer(s, "Dr. Tamper"), "emergency medicine", None)
    version = s.scalar("SELECT max(id) FROM row_versions")
    s.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1 and found(
        out, "raters: rater", "'Dr. Tamper'", "was changed outside carelens before its change"
        f" sealed as row version {version:,}"), out


def test_a_role_granted_through_carelens_is_a_sealed_audited_event(db):
    from review.team.reviewers import grant_role

    s = open_store(db)
    admin = find_reviewer(s, s.scalar("SELECT name FROM raters WHERE role = 'admin' LIMIT 1"))
    versions = s.scalar("SELECT COUNT(*) FROM row_versions WHERE tbl = 'raters'")
    grant_role(s, admin, "Dr. Tamper", "adjudicator")
    assert s.scalar("SELECT COUNT(*) FROM row_versions WHERE tbl = 'raters'") == versions + 1
    assert s.scalar("SELECT new FROM audit_log WHERE action = 'grant_role' ORDER BY id DESC"
                    " LIMIT 1") == '{"role":"adjudicator"}'
    s.close()
    assert verify_file(db).whole


@needs_shell
def test_a_patient_turn_rewritten_with_the_triggers_put_back(db, capsys):
    item, uid = rows(db, "SELECT id, uid FROM items WHERE kind = 'prefix' ORDER BY id"
                         " LIMIT 1")[0]
    triggers = rows(db, "SELECT sql FROM sqlite_master WHERE name IN ('items_identity_fixed',"
                        " 'items_seal_update')")
    r = shell(db, "DROP TRIGGER items_identity_fixed; DROP TRIGGER items_seal_update;"
                  " UPDATE items SET payload = json_set(payload, '$.turns[0]', 'I feel fine"
                  f" now') WHERE id = {item}; " + "; ".join(t[0] for t in triggers) + ";")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(db, capsys)
    assert code == 1 and out == [f"items: item {item} ('{uid}') is not as carelens last sealed"
                                 " it: changed outside carelens"], out


@needs_shell
def test_a_codebook_definition_rewritten_with_the_trigger_put_back(db, capsys):
    version = rows(db, "SELECT id FROM codebook_versions ORDER BY id LIMIT 1")[0][0]
    trigger = rows(db, "SELECT sql FROM sqlite_master WHERE name ="
                       " 'codebook_versions_no_update'")[0][0]
    r = shell(db, "DROP TRIGGER codebook_versions_no_update; UPDATE codebook_versions SET"
                  " content = replace(content, 'emergency', 'routine') WHERE id ="
                  f" {version}; {trigger};")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1
    assert found(out, f"codebook_versions: codebook version {version} changed after it was"
                      " written"), out


@needs_shell
def test_a_question_reworded_with_the_triggers_put_back(db, capsys):
    question, key = rows(db, "SELECT id, key FROM questions ORDER BY id LIMIT 1")[0]
    triggers = rows(db, "SELECT sql FROM sqlite_master WHERE name IN"
                        " ('questions_identity_fixed', 'questions_seal_update')")
    r = shell(db, "DROP TRIGGER questions_identity_fixed; DROP TRIGGER questions_seal_update;"
                  f" UPDATE questions SET text = 'Is all well?' WHERE id = {question}; "
                  + "; ".join(t[0] for t in triggers) + ";")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(db, capsys)
    assert code == 1 and out == [f"questions: question {question} ('{key}') is not as carelens"
                                 " last sealed it: changed outside carelens"], out


@needs_shell
def test_the_view_of_answers_in_force_recreated_to_flip_the_mappers_labels(db, capsys):
    flipped = ("CREATE VIEW current_annotations AS SELECT a.id, a.item_id, a.question_id,"
               " a.rater_id, a.target, a.status, CASE WHEN r.kind = 'machine' THEN"
               " '0A_NO_ESCALATION_INFO_NEEDED' ELSE a.value END AS value, a.rationale,"
               " a.confidence, a.phase, a.codebook_version, a.seconds_on_task, a.supersedes_id,"
               " a.source, a.import_id, a.extra, a.created_at, a.round_id, a.chain, a.seq"
               " FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE a.id = (SELECT"
               " MAX(b.id) FROM annotations b WHERE b.item_id = a.item_id AND b.question_id ="
               " a.question_id AND b.rater_id = a.rater_id AND b.target = a.target)")
    r = shell(db, f"DROP VIEW current_annotations; {flipped};")
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(db, capsys)
    assert code == 1 and out == ["view changed: current_annotations is not the one carelens"
                                 " made (it decides which answer of each rater is in force)"]


# -- every sealed table --------------------------------------------------------------------

EDITS = {
    "annotations": "rationale = 'forged'", "audit_log": "actor = 'nobody'",
    "item_tags": "note = 'forged'", "flags": "note = 'forged'", "reveals": "shown_at = 'later'",
    "labels_opened": "screen = 'forged'", "round_reviews": "completed_at = 'later'",
    "codebook_versions": "note = 'forged'", "round_frame": "stratum = 'forged'",
    "round_members": "named_by = 'forged'", "round_redraws": "reason = 'forged'",
    "tags": "description = 'forged'", "tag_changes": "note = 'forged'",
    "study_settings": "set_by = 'forged'", "raters": "specialty = 'forged'",
    "runs": "protocol = 'forged'", "run_aliases": "alias = 'forged'",
    "items": "split = 'forged'", "questions": "text = 'forged'", "datasets": "kind = 'forged'",
    "imports": "actor = 'forged'", "review_rounds": "blinding = 'suggest'",
    "round_items": "answers_needed = 9", "row_versions": "digest = 'forged'",
    "round_sequence": "drawn_at = 'later'",
}
"""A change to a row of each sealed table (a table sealed later adds its own)."""


def test_every_sealed_table_has_an_edit_here():
    assert set(EDITS) == set(SEALED)


def _protections(conn: sqlite3.Connection, table: str, kinds: tuple[str, ...]) -> list[str]:
    names = [f"{table}_{k}" for k in kinds]
    return [n for n in names if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                             (n,)).fetchone()]


@pytest.mark.parametrize("table", list(SEALED))
def test_every_sealed_table_edited_with_its_protection_put_back(db, capsys, table):
    conn = sqlite3.connect(db, isolation_level=None)  # the shell's view: no functions at all
    rowid = conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    kinds = ("no_update",) if SEALED[table].kind == CHAINED else ("identity_fixed",
                                                                  "seal_update")
    with put_back(conn, *_protections(conn, table, kinds)):
        conn.execute(f"UPDATE {table} SET {EDITS[table]} WHERE rowid = ?", (rowid,))
    conn.close()
    code, out = verify_cli(db, capsys)
    if table == "row_versions":  # the row it versions is named, and is unlike its version
        assert code == 1 and len(out) == 2 and found(out, "its version (row version 1,"), out
        return
    assert code == 1 and len(out) == 1, out
    assert out[0].startswith(f"{table}: {SEALED[table].word} {rowid:,}") and (
        "changed after it was written" in out[0] or "not as carelens last sealed" in out[0]), out


@pytest.mark.parametrize("table", list(SEALED))
def test_every_sealed_table_with_a_row_removed_and_its_protection_put_back(db, capsys, table):
    conn = sqlite3.connect(db, isolation_level=None)
    rowid = conn.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    with put_back(conn, *_protections(conn, table, ("no_delete",))):
        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1
    word = SEALED[table].word
    assert found(out, f"{table}: {word} {rowid:,}", "removed") or found(
        out, f"{table}: {word} {rowid:,} ", "removed"), out


@pytest.mark.parametrize("table", list(SEALED))
def test_every_sealed_table_with_a_row_slipped_in_past_its_seal(db, capsys, table):
    """A copy of a row under a new row id, its sealing trigger dropped and put back."""
    conn = sqlite3.connect(db, isolation_level=None)
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")
               if r[1] not in ("id", "seq", "chain")]
    unique = {"raters": "name", "items": "uid", "questions": "key", "datasets": "name",
              "review_rounds": "name", "tags": "name", "codebook_versions": "version",
              "imports": "sha256", "run_aliases": "alias"}
    picked = [f"{c} || ' again'" if c == unique.get(table) else c for c in columns]
    if table == "runs":  # its key is JSON, and the run's identity
        picked[columns.index("key")] = "json_set(key, '$.again', 1)"
    if table in ("round_reviews", "round_frame", "round_items"):
        picked[columns.index("item_id")] = "(SELECT max(id) FROM items)"
    if table == "reveals":
        picked[columns.index("annotation_id")] = "(SELECT max(id) FROM annotations)"
    if table == "round_sequence":  # one draw a place, and an item drawn once
        picked[columns.index("position")] = "position + 1000"
        picked[columns.index("item_id")] = "(SELECT max(id) FROM items)"
    kinds = ("chain", "no_replace") if SEALED[table].kind == CHAINED else ("seal_insert",)
    with put_back(conn, *_protections(conn, table, kinds)):
        new = conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT"
                           f" {', '.join(picked)} FROM {table} ORDER BY rowid LIMIT 1").lastrowid
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1
    assert found(out, f"{table}: {SEALED[table].word} {new:,}", "added without its chain") \
        or found(out, f"{table}: {SEALED[table].word} {new:,}", "never sealed") \
        or found(out, f"its version (row version {new:,}) was never sealed"), out


# -- the schema ----------------------------------------------------------------------------

@needs_shell
@pytest.mark.parametrize("sql,words", [
    ("CREATE UNIQUE INDEX one_answer ON annotations (item_id, rater_id) WHERE round_id IS NOT"
     " NULL;", "unknown index one_answer on annotations"),
    ("DROP INDEX annotations_unit;", "index missing: annotations_unit on annotations"),
    ("DROP INDEX annotations_unit; CREATE INDEX annotations_unit ON annotations (item_id)"
     " WHERE rater_id != 1;", "index changed: annotations_unit on annotations"),
    ("CREATE VIEW forged AS SELECT 1;", "unknown view forged"),
    ("DROP VIEW current_item_tags;", "view missing: current_item_tags"),
    ("CREATE TABLE extra (x);", "unknown table extra"),
    ("ALTER TABLE raters ADD COLUMN trusted INTEGER DEFAULT 1;", "table changed: raters"),
    ("CREATE TRIGGER quietly AFTER INSERT ON flags BEGIN SELECT 1; END;",
     "unknown trigger quietly on flags"),
    ("DROP TRIGGER raters_seal_update;",
     "protection missing: raters no longer seals each change of a row"),
    ("DROP TRIGGER annotations_no_delete; CREATE TRIGGER annotations_no_delete BEFORE DELETE ON"
     " annotations WHEN old.rater_id = 0 BEGIN SELECT RAISE(ABORT, 'annotations are"
     " append-only and cannot be deleted'); END;",
     "protection changed: trigger annotations_no_delete on annotations"),
    ("DROP TRIGGER items_chain;", None),  # items are versioned: no such trigger
])
def test_the_schema_changed(db, capsys, sql, words):
    r = shell(db, sql)
    if words is None:
        assert r.returncode != 0 and "no such trigger" in r.stderr
        return
    assert r.returncode == 0, r.stderr
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, words), out


# -- the witness ---------------------------------------------------------------------------

def test_the_witness_edited(db, capsys):
    path = witness_path(db)
    lines = path.read_text().splitlines()
    seq, head, *rest = lines[-3].split(" ")
    lines[-3] = " ".join([str(int(seq) - 1), head, *rest])
    path.write_text("\n".join(lines) + "\n")
    code, out = verify_cli(db, capsys)
    assert code == 1 and out == [f"witness: line {len(lines) - 2} of {path.name} does not"
                                 " carry the record's seal: changed, written without its key,"
                                 " or another record's"], out


def test_the_witness_removed(db, capsys):
    witness_path(db).unlink()
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, "witness:", "is not there", "verify --head"), out


def test_another_records_witness_put_beside_it(db, tmp_path, capsys):
    other = tmp_path / "other.db"
    open_store(other).close()
    shutil.copy(witness_path(other), witness_path(db))
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, "witness: line", "another record's"), out


def test_a_witness_line_forged_without_the_key(db, capsys):
    from store.chain import Sealer
    from store.key import RecordKey
    from store.witness import line

    record = rows(db, "SELECT id FROM record")[0][0]
    forged = Sealer(RecordKey(b"a key of my own, 32 characters at least", "mine"))
    with witness_path(db).open("a") as fh:
        fh.write(line(forged, record, 10**6, "0" * 32))
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1 and found(out, "does not carry the record's seal"), out


# -- the key and the migrations --------------------------------------------------------------

def test_a_database_without_its_key_says_so_in_one_line_and_writes_nothing(db, capsys,
                                                                           monkeypatch):
    monkeypatch.setenv("CARELENS_RECORD_KEY", "x" * 64)  # another record's key
    code, out = verify_cli(db, capsys)
    assert code == 1 and len(out) == 1, out
    assert found(out, "this record's key (", ") is not here", "CARELENS_RECORD_KEY holds key",
                 "its chain and its witness were not checked"), out
    before = db.read_bytes()
    s = open_store(db)
    assert s.scalar("SELECT COUNT(*) FROM annotations") > 0  # it reads
    me = find_reviewer(s, "Dr. Tamper")
    with pytest.raises(RecordKeyError, match="is not here"):
        commit_answer(s, me, 1, 1, "0B")
    with pytest.raises(sqlite3.OperationalError):  # past the store: the function refuses
        s.conn.execute("INSERT INTO audit_log (at, actor, action, entity) VALUES ('now', 'x',"
                       " 'y', 'z')")
    s.close()
    assert db.read_bytes() == before
    capsys.readouterr()
    assert main(["--db", str(db), "import", str(HEALTHBENCH)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not here" in err[0], err


def test_the_keys_fingerprint_edited_in_the_file(db, capsys):
    conn = sqlite3.connect(db, isolation_level=None)
    with put_back(conn, "record_no_update"):
        conn.execute("UPDATE record SET key_id = '0123456789abcdef'")
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, "this record's key (0123456789abcdef) is not here"), out


def test_the_migrations_list_edited_to_run_the_rekeying_again(db, capsys):
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm110_record_keyed'")
    conn.close()
    code, out = verify_cli(db, capsys)
    assert code == 1 and found(out, "migration(s) not applied (m110_record_keyed)"), out
    with pytest.raises(RecordKeyError, match="already sealed"):
        open_store(db)


# -- a key made on first use --------------------------------------------------------------

def run_carelens(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_key_made_on_first_use_is_said_and_kept_outside_the_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CARELENS_RECORD_KEY"}
    env["CARELENS_KEY_DIR"] = str(tmp_path / "home" / "keys")
    data = tmp_path / "data"
    data.mkdir()
    path = data / "study.db"
    r = run_carelens("--db", str(path), "import", str(HEALTHBENCH), env=env)
    made = [line for line in r.stderr.splitlines() if "made the record key" in line]
    assert len(made) == 1, r.stderr
    keys = list((tmp_path / "home" / "keys").iterdir())
    assert len(keys) == 1 and str(keys[0]) in made[0] and "keep it like a password" in made[0]
    assert oct(keys[0].stat().st_mode & 0o777) == "0o600"
    assert oct(keys[0].parent.stat().st_mode & 0o777) == "0o700"
    secret = [line for line in keys[0].read_text().splitlines() if not line.startswith("#")][0]
    assert secret.encode() not in path.read_bytes() and sorted(os.listdir(data)) == [
        "study.db", "study.db.witness"]
    r = run_carelens("--db", str(path), "verify", env=env)
    assert r.returncode == 0 and "record whole" in r.stdout and not r.stderr, r
    # The folder alone (a copy of it, a backup) carries no key.
    env["CARELENS_KEY_DIR"] = str(tmp_path / "elsewhere")
    r = run_carelens("--db", str(path), "verify", env=env)
    assert r.returncode == 1 and "is not here" in r.stdout


def test_a_key_too_short_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CARELENS_RECORD_KEY", "hunter2")
    assert main(["--db", str(tmp_path / "new.db"), "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CARELENS_RECORD_KEY is too short (7 characters)" in err[0]


def test_the_key_in_streamlits_secrets_seals_the_record(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from store.key import use_secret

    key = "s" * 48
    monkeypatch.delenv("CARELENS_RECORD_KEY")
    monkeypatch.setenv("CARELENS_DB", str(tmp_path / "app.db"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["carelens"] = {"record_key": key}
    try:
        at.run()
    finally:
        use_secret(None)  # the app passed it to the store: the process's, not this test's
    assert not at.exception and not at.error
    assert not (tmp_path / "keys").exists()  # no key made: the secrets' key seals it
    monkeypatch.setenv("CARELENS_RECORD_KEY", key)
    assert verify_file(tmp_path / "app.db").whole


def test_an_older_database_is_rekeyed_once_and_audited(tmp_path, capsys):
    from sqlite_utils import Database

    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m110_record_keyed")
    conn.execute("INSERT INTO audit_log (at, actor, action, entity) VALUES ('2025-01-01', 'a',"
                 " 'import', 'imports')")
    conn.execute("INSERT INTO raters (name, kind, role, created_at) VALUES ('Dr. Old', 'human',"
                 " 'reviewer', 'then')")
    conn.close()
    s = open_store(path)
    entry = s.query_one("SELECT old, new FROM audit_log WHERE action = 'record_keyed'")
    assert '"whole":true' in entry["old"] and '"migration":"m110"' in entry["new"]
    s.close()
    assert verify_file(path).whole


def test_an_older_database_whose_old_chain_was_broken_says_so_when_rekeyed(tmp_path, capsys):
    from sqlite_utils import Database

    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m110_record_keyed")
    conn.execute("INSERT INTO audit_log (at, actor, action, entity) VALUES ('2025-01-01', 'a',"
                 " 'import', 'imports')")
    conn.execute("DROP TRIGGER audit_log_no_update")
    conn.execute("UPDATE audit_log SET actor = 'b'")
    conn.close()
    s = open_store(path)
    assert '"whole":false' in s.scalar("SELECT old FROM audit_log WHERE action ="
                                       " 'record_keyed'")
    s.close()
    assert "were not whole when the record was sealed" in capsys.readouterr().err


# -- the one list of sealed tables ---------------------------------------------------------

def test_every_column_of_every_sealed_table_is_sealed(store):
    """A column added to a sealed table without its line in store/sealed.py (and a
    migration calling seal_tables) would be a part of the record nothing seals."""
    for table, seal in SEALED.items():
        columns = {r[1] for r in store.query(f"PRAGMA table_info({table})")}
        assert columns, f"{table} is in store.sealed but no migration makes it"
        assert columns - {"seq", "chain"} == set(seal.fields) - {"rowid"}, table


def test_every_sealed_table_is_sealed_on_a_new_database():
    from store.verify import SEALED_TRIGGERS, expected_triggers

    triggers = expected_triggers()
    for table, seal in SEALED.items():
        for kind in SEALED_TRIGGERS[seal.kind]:
            if (table, kind) == (VERSIONS, "chain"):
                continue  # the store seals versions as their transaction commits
            assert triggers.get(f"{table}_{kind}", ("",))[0] == table, f"{table}_{kind}"


def test_the_app_opened_without_the_records_key_says_so_in_one_line(db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CARELENS_RECORD_KEY", "y" * 64)
    monkeypatch.setenv("CARELENS_DB", str(db))
    before = db.read_bytes()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Tamper"
    at.run()
    assert not at.exception
    assert len(at.error) == 1 and "is not here" in at.error[0].value
    assert db.read_bytes() == before


def test_verify_while_reviewers_answer_finds_nothing_amiss(db):
    """The witness is read first, then the database in one snapshot: heads witnessed
    after the snapshot are not held against it."""
    import threading

    s = open_store(db)
    me = ensure_reviewer(s, "Dr. Busy")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    items = [r[0] for r in s.query("SELECT id FROM items WHERE kind = 'prefix' LIMIT 150")]
    s.close()
    stop, errors = threading.Event(), []

    def answering():
        local = open_store(db)
        try:
            for n, item in enumerate(items * 4):
                if stop.is_set():
                    break
                commit_answer(local, me, item, qid, ("0B", "1A")[n % 2])
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            local.close()

    writer = threading.Thread(target=answering)
    writer.start()
    try:
        verdicts = [verify_file(db) for _ in range(4)]
    finally:
        stop.set()
        writer.join()
    assert errors == [] and all(v.whole for v in verdicts), [v.problems for v in verdicts]
    assert verify_file(db).whole


@pytest.mark.parametrize("kind", ["chained", "versioned"])
def test_a_table_sealed_later_takes_its_line_and_one_call(store, monkeypatch, kind):
    """What another change does to seal a table of its own (e.g. a run): its line in
    store/sealed.py, and a migration calling seal_tables after making the table."""
    from store import sealed
    from store.migrations import seal_tables

    line = (sealed.chained("run", "runs are append-only", "id", "name") if kind == "chained"
            else sealed.versioned("run", "id", "name"))
    monkeypatch.setitem(sealed.SEALED, "runs_later", line)
    with store.transaction() as conn:
        conn.execute("CREATE TABLE runs_later (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO runs_later (name) VALUES ('made before it was sealed')")
        seal_tables(store.db, ["runs_later"])
        conn.execute("INSERT INTO runs_later (name) VALUES ('made after')")
    problems = verify_file(store.path).problems
    # Only that this test's table is not one the migrations make.
    assert problems and all(p.startswith(("unknown table runs_later", "unknown trigger runs_later_"))
                            for p in problems), problems
    conn = sqlite3.connect(store.path, isolation_level=None)
    with put_back(conn, "runs_later_no_update" if kind == "chained" else "runs_later_seal_update"):
        conn.execute("UPDATE runs_later SET name = 'forged' WHERE id = 1")
    conn.close()
    assert any(p.startswith("runs_later: run 1 ") and "changed" in p
               for p in verify_file(store.path).problems)
