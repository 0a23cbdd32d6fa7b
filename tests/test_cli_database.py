"""carelens on a database it cannot use: one line on stderr naming the path and
what is wrong, exit status 2, and no new empty database made behind a typo.
Only demo, import and serve make a database."""

from __future__ import annotations

import sqlite3

import pytest

import cli
from review.workspace import open_store
from tests.helpers import one_line, run_cli, write_jsonl

PREFIX = {"prefix_id": "meb_v1_case_0001_r01", "input_patient_turns": ["x"],
          "gold_label": "0A_NO_ESCALATION_INFO_NEEDED"}






@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "t.db"
    open_store(path).close()
    return path


@pytest.mark.parametrize("argv", [
    ["export", "--what", "annotations", "--out", "a.csv"],
    ["export", "--what", "carebench-labels", "--out", "a.csv"],
    ["search", "cough"],
    ["agreement", "--question-set", "carebench.escalation_needed", "--a", "group:clinicians"],
    ["triage-metrics"],
    ["map", "--model", "openai:gpt-4.1-mini", "--dry-run"],
])
def test_a_command_that_reads_refuses_a_database_that_does_not_exist(tmp_path, capsys, argv,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "typo.db"
    code, out, err = run_cli(capsys, "--db", str(missing), *argv)
    assert code == 2 and not missing.exists() and out == ""
    assert one_line(err) == (f"carelens: {missing}: no such database (check --db or $CARELENS_DB; "
                             "`carelens import` or `carelens demo` makes a new one)\n")


def test_import_makes_a_new_database_but_not_its_folder(tmp_path, capsys):
    prefixes = write_jsonl(tmp_path / "p.jsonl", [PREFIX])
    code, _, err = run_cli(capsys, "--db", str(tmp_path / "nope" / "x.db"), "import", str(prefixes))
    assert code == 2 and not (tmp_path / "nope").exists()
    assert f"folder {tmp_path / 'nope'} does not exist" in one_line(err)
    code, out, _ = run_cli(capsys, "--db", str(tmp_path / "new.db"), "import", str(prefixes))
    assert code == 0 and "1 row, 1 new item, " in out  # singular for one (issue 19)


def test_a_file_that_is_not_a_database(tmp_path, capsys):
    bad = tmp_path / "notes.db"
    bad.write_text("not a database\n")
    for argv in (["export", "--what", "annotations", "--out", str(tmp_path / "a.csv")],
                 ["import", str(write_jsonl(tmp_path / "p.jsonl", [PREFIX]))]):
        code, _, err = run_cli(capsys, "--db", str(bad), *argv)
        assert code == 2 and one_line(err) == (
            f"carelens: {bad}: not a database (a carelens database is an SQLite file)\n")
    assert bad.read_text() == "not a database\n" and not (tmp_path / "a.csv").exists()


def test_a_folder_given_as_the_database(tmp_path, capsys):
    code, _, err = run_cli(capsys, "--db", str(tmp_path), "search", "x")
    assert code == 2 and "is a folder" in one_line(err)


def test_a_locked_database(db_path, tmp_path, capsys, monkeypatch):
    import store.db

    monkeypatch.setattr(store.db, "BUSY_TIMEOUT_MS", 200)   # instead of waiting 60 s
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")                        # another program writing
    try:
        code, _, err = run_cli(capsys, "--db", str(db_path), "import",
                           str(write_jsonl(tmp_path / "p.jsonl", [PREFIX])))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and one_line(err).startswith(f"carelens: {db_path}: database is locked")


def test_an_output_file_in_a_folder_that_does_not_exist(db_path, tmp_path, capsys):
    for argv in (["export", "--what", "annotations", "--out", str(tmp_path / "nope" / "a.csv")],
                 ["agreement", "--question-set", "carebench.escalation_needed",
                  "--a", "group:clinicians", "--html", str(tmp_path / "nope" / "r.html")]):
        code, out, err = run_cli(capsys, "--db", str(db_path), *argv)
        assert code == 2 and out == ""
        assert f"folder {tmp_path / 'nope'} does not exist" in one_line(err)


def test_an_sqlite_error_that_is_not_about_the_file_is_not_hidden():
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")
    except sqlite3.Error as exc:
        assert cli.database_problem(exc) is None  # a bug keeps its traceback
