"""Who a rater is and what an item says are sealed, and `carelens verify` checks
every protection of every append-only table, one line per one missing.

The attacks run from a plain sqlite3 connection (foreign keys off: as the sqlite3
shell would) on which the functions carelens's triggers call are registered
without the record's key (`tests.tamper.attacker`: the shell itself cannot write
a sealed table at all), against a copy of the demo database."""

from __future__ import annotations

import sqlite3

import pytest

from cli import main
from review.team.identity import identity_from_claims, reviewer_for_identity
from review.workspace import open_store
from store.verify import append_only_tables, verify_file
from tests.tamper import attacker

IDP = "https://idp.example.org"


def raw(path) -> sqlite3.Connection:
    return attacker(path)


def verify_cli(path, capsys) -> tuple[int, list[str]]:
    code = main(["--db", str(path), "verify"])
    return code, capsys.readouterr().out.splitlines()


@pytest.fixture
def signed_in(demo_copy):
    """The demo with a person who signed in (issuer and subject)."""
    s = open_store(demo_copy)
    me = reviewer_for_identity(s, identity_from_claims(
        {"iss": IDP, "sub": "mei-sub", "name": "Dr. Ines Quarshie"}))
    s.close()
    return demo_copy, me


@pytest.mark.parametrize("column,value", [("login_issuer", "https://evil.example.org"),
                                          ("login_subject", "someone-else"),
                                          ("name", "adjudicated"), ("kind", "machine")])
def test_a_raters_identity_cannot_be_rewritten(signed_in, column, value):
    path, me = signed_in
    conn = raw(path)
    with pytest.raises(sqlite3.IntegrityError, match="never changed"):
        conn.execute(f"UPDATE raters SET {column} = ? WHERE id = ?", (value, me.id))
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        conn.execute("DELETE FROM raters WHERE id = ?", (me.id,))
    with pytest.raises(sqlite3.IntegrityError, match="never replaced"):
        conn.execute("INSERT OR REPLACE INTO raters (id, name, kind, created_at)"
                     " VALUES (?, 'Mallory', 'human', 'now')", (me.id,))
    row = conn.execute("SELECT name, kind, login_issuer, login_subject FROM raters"
                       " WHERE id = ?", (me.id,)).fetchone()
    assert row == ("Dr. Ines Quarshie", "human", IDP, "mei-sub")


def test_a_raters_role_and_profile_still_change(signed_in):
    from review.team.reviewers import find_reviewer, grant_role, update_profile

    path, me = signed_in
    s = open_store(path)
    admin = find_reviewer(s, s.scalar("SELECT name FROM raters WHERE role = 'admin' LIMIT 1"))
    grant_role(s, admin, me.name, "adjudicator")
    update_profile(s, me, "GP", None)
    assert s.scalar("SELECT role FROM raters WHERE id = ?", (me.id,)) == "adjudicator"
    s.close()
    assert verify_file(path).whole


@pytest.mark.parametrize("sql", [
    "UPDATE items SET payload = json_object('text', 'forged') WHERE id = {id}",
    "UPDATE items SET uid = 'forged' WHERE id = {id}",
    "UPDATE items SET id = 999999 WHERE id = {id}",
    "DELETE FROM items WHERE id = {id}",
    "INSERT OR REPLACE INTO items (id, uid, dataset_id, kind, payload, created_at)"
    " SELECT id, uid, dataset_id, kind, json_object('text', 'forged'), created_at"
    " FROM items WHERE id = {id}",
])
def test_an_items_text_and_id_cannot_be_rewritten(demo_copy, sql):
    conn = raw(demo_copy)
    item, before = conn.execute("SELECT id, payload FROM items ORDER BY id LIMIT 1").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="never"):
        conn.execute(sql.format(id=item))
    assert conn.execute("SELECT payload FROM items WHERE id = ?", (item,)).fetchone()[0] == before


def test_an_item_replaced_by_its_uid_leaves_its_answers_naming_nothing(demo_copy, capsys):
    conn = raw(demo_copy)
    item, uid = conn.execute("SELECT i.id, i.uid FROM items i WHERE EXISTS (SELECT 1 FROM"
                             " annotations a WHERE a.item_id = i.id) LIMIT 1").fetchone()
    conn.execute("INSERT OR REPLACE INTO items (uid, dataset_id, kind, payload, created_at)"
                 " SELECT uid, dataset_id, kind, json_object('text', 'forged'), created_at"
                 " FROM items WHERE id = ?", (item,))
    conn.close()
    code, out = verify_cli(demo_copy, capsys)
    assert code != 0
    assert any(line.count("annotations:") and "name a row of items that is not there" in line
               for line in out), out


@pytest.mark.parametrize("table", ["round_members", "study_settings", "tag_changes", "tags",
                                   "labels_opened", "reveals", "round_frame", "item_tags",
                                   "round_reviews"])
def test_verify_names_each_protection_missing_on_every_append_only_table(demo_copy, capsys,
                                                                          table):
    conn = raw(demo_copy)
    for kind in ("no_update", "no_delete", "no_replace"):
        conn.execute(f"DROP TRIGGER {table}_{kind}")
    conn.close()
    code, out = verify_cli(demo_copy, capsys)
    assert code != 0
    missing = [line for line in out if "protection missing" in line and f" {table} " in line]
    assert len(missing) == 3, out
    assert {w for w in ("refuses UPDATE", "refuses DELETE", "INSERT OR REPLACE")
            if any(w in line for line in missing)} == {"refuses UPDATE", "refuses DELETE",
                                                      "INSERT OR REPLACE"}


@pytest.mark.parametrize("trigger", ["raters_identity_fixed", "items_identity_fixed",
                                     "raters_no_delete", "items_no_replace"])
def test_verify_finds_the_identity_protections_dropped(demo_copy, capsys, trigger):
    conn = raw(demo_copy)
    conn.execute(f"DROP TRIGGER {trigger}")
    conn.close()
    code, out = verify_cli(demo_copy, capsys)
    assert code != 0 and any(trigger in line for line in out), out


def test_verify_finds_an_append_only_table_dropped(demo_copy, capsys):
    conn = raw(demo_copy)
    conn.execute("DROP TABLE round_members")
    conn.close()
    code, out = verify_cli(demo_copy, capsys)
    assert code != 0 and any("table missing: round_members" in line for line in out), out


def test_every_append_only_table_is_held_to_all_three():
    tables = append_only_tables()
    assert {"annotations", "audit_log", "item_tags", "round_reviews", "reveals",
            "labels_opened", "round_frame", "round_members", "study_settings", "tags",
            "tag_changes", "flags", "codebook_versions"} <= set(tables)


def test_the_demo_is_whole(demo_copy):
    assert verify_file(demo_copy).whole


# -- m041: tags applied, flags, reveals and choices to see the labels are chained ------

@pytest.fixture
def judged(demo_copy):
    """The demo with a tag applied, a flag raised, a label revealed and a choice to see
    the labels: a row in each table m041 chains."""
    from review.browse.tags import add_tag
    from review.reviewing.items import flag_item
    from review.team.reviewers import ensure_reviewer

    s = open_store(demo_copy)
    me = ensure_reviewer(s, "Dr. Chain")
    item = s.scalar("SELECT id FROM items ORDER BY id LIMIT 1")
    add_tag(s, me, item, "unsafe reassurance", note="noted")
    flag_item(s, me, item, True, "look again")
    answer = s.scalar("SELECT id FROM annotations WHERE item_id = ? LIMIT 1", (item,))
    with s.transaction() as conn:
        conn.execute("INSERT INTO reveals (rater_id, item_id, annotation_id, shown_at)"
                     " VALUES (?, ?, ?, 'then')", (me.id, item, answer))
        conn.execute("INSERT INTO labels_opened (rater_id, screen, unanswered, opened_at)"
                     " VALUES (?, 'browse', 3, 'then')", (me.id,))
    for table in ("item_tags", "flags", "reveals", "labels_opened"):
        assert s.scalar(f"SELECT COUNT(*) FROM {table} WHERE chain IS NULL") == 0, table
    s.close()
    assert verify_file(demo_copy).whole
    return demo_copy


@pytest.mark.parametrize("table", ["item_tags", "flags", "reveals", "labels_opened"])
def test_verify_finds_a_judgement_or_reveal_deleted_with_the_trigger_dropped(judged, capsys,
                                                                             table):
    conn = raw(judged)
    last = conn.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0]
    conn.execute(f"DROP TRIGGER {table}_no_delete")
    conn.execute(f"DELETE FROM {table} WHERE id = ?", (last,))
    conn.close()
    code, out = verify_cli(judged, capsys)
    assert code != 0
    assert any(f"{table}_no_delete" in line for line in out), out
    assert any(line.split(": ", 2)[1].startswith(table) and "removed" in line
               for line in out), out


@pytest.mark.parametrize("table,column,value", [("item_tags", "added", 0),
                                                ("flags", "raised", 0),
                                                ("reveals", "shown_at", "later"),
                                                ("labels_opened", "unanswered", 0)])
def test_verify_finds_a_judgement_or_reveal_changed(judged, capsys, table, column, value):
    conn = raw(judged)
    first = conn.execute(f"SELECT MIN(id) FROM {table}").fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, first))
    conn.execute(f"DROP TRIGGER {table}_no_update")
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, first))
    conn.close()
    code, out = verify_cli(judged, capsys)
    assert code != 0
    assert any(f"{table}: " in line and "changed after it was written" in line
               for line in out), out


def test_a_database_made_before_m041_is_chained_when_opened(tmp_path):
    from sqlite_utils import Database

    from store import Store
    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m041_more_chains")
    conn.execute("INSERT INTO raters (name, kind, created_at) VALUES ('Dr. Old', 'human', 'then')")
    conn.execute("INSERT INTO labels_opened (rater_id, screen, unanswered, opened_at)"
                 " VALUES (1, 'browse', 2, 'then')")
    conn.close()
    Store(path).close()
    verdict = verify_file(path)
    assert verdict.whole and verdict.rows["labels_opened"] == 1, verdict.problems


def test_a_database_not_yet_migrated_is_told_so_not_called_tampered(tmp_path):
    from sqlite_utils import Database

    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m040_identity_sealed")
    conn.close()
    problems = verify_file(path).problems
    assert any(p.startswith("schema: ") and "m040_identity_sealed" in p for p in problems), problems
    assert not any("dropped" in p or "changed" in p for p in problems), problems
    assert any("raters_identity_fixed" in p and "not made yet" in p for p in problems)


@pytest.mark.parametrize("sql", [
    "UPDATE questions SET text = 'forged wording' WHERE id = {id}",
    "UPDATE questions SET points = -10 WHERE id = {id}",
    "UPDATE questions SET key = 'forged' WHERE id = {id}",
    "DELETE FROM questions WHERE id = {id}",
    "INSERT OR REPLACE INTO questions (id, key, codebook, kind, text)"
    " SELECT id, key, codebook, kind, 'forged wording' FROM questions WHERE id = {id}",
])
def test_what_was_asked_cannot_be_rewritten(demo_copy, capsys, sql):
    conn = raw(demo_copy)
    question, before = conn.execute(
        "SELECT q.id, q.text FROM questions q WHERE EXISTS (SELECT 1 FROM annotations a"
        " WHERE a.question_id = q.id) ORDER BY q.id LIMIT 1").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="never"):
        conn.execute(sql.format(id=question))
    assert conn.execute("SELECT text FROM questions WHERE id = ?",
                        (question,)).fetchone()[0] == before
    conn.execute("DROP TRIGGER questions_identity_fixed")
    conn.close()
    code, out = verify_cli(demo_copy, capsys)
    assert code != 0 and any("questions_identity_fixed" in line for line in out), out


def test_a_protection_missing_from_an_older_database_is_restored_and_recorded(tmp_path):
    """A table protected by a migration that ran before the table was made (m019 before
    round members existed, on some databases) lacks its refusal of a replacement: m043
    makes it as a new database has it, and writes it in the audit log."""
    from sqlite_utils import Database

    from store import Store
    from store.db import connect
    from store.migrations import migrations

    path = tmp_path / "old.db"
    conn = connect(path)
    migrations.apply(Database(conn), stop_before="m043_protections_restored")
    conn.execute("DROP TRIGGER round_members_no_replace")
    conn.close()
    assert any("round_members_no_replace" in p for p in verify_file(path).problems)
    s = Store(path)
    assert s.scalar("SELECT json_extract(new, '$.trigger') FROM audit_log WHERE action ="
                    " 'protection_restored'") == "round_members_no_replace"
    s.close()
    assert verify_file(path).whole


def test_a_new_database_restores_nothing(store):
    assert store.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'protection_restored'") == 0
