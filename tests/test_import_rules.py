"""Imports add answers; they put no words in anyone's mouth.

The adversarial run's four-row labels-long file replaced the gold label, a
clinician's answer (marked blind), a machine rater's label and the settled
answer, and the audit log said only "cli import". Here each of those rows is
refused without --replace (the database left as it was), replaced with it
and audited answer by answer, and a file still brings in a study's raters
with their phases and history."""

from __future__ import annotations

import csv

import pytest

from cli import main
from review.datasets.sources import ImportOptions, InputError, import_file
from review.reviewing.commit import commit_answer
from review.team.adjudication import settle
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.helpers import table_counts

RESPONSE_Q = "carebench.response_action"
PREFIX_Q = "carebench.escalation_needed"
CODES = ("0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
         "1A_ESCALATION_NONURGENT_CARE", "1B_ESCALATION_URGENT_CARE")


def in_force(s, rater: str, uid: str, question: str):
    return s.query_one(
        "SELECT c.id, c.value, c.phase FROM current_annotations c JOIN raters r ON r.id ="
        " c.rater_id JOIN items i ON i.id = c.item_id JOIN questions q ON q.id = c.question_id"
        " WHERE r.name = ? AND i.uid = ? AND q.key = ?", (rater, uid, question))


def other(code: str) -> str:
    return next(c for c in CODES if c != code)


def write_csv(path, rows, header=("item_id", "rater", "value", "question", "phase")):
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture
def study(demo_copy):
    """The demo with a clinician who reviews here (an answer given in the app) and a
    settled answer: each kind of answer the attack file replaced."""
    s = open_store(demo_copy)
    prefix = s.scalar("SELECT uid FROM items WHERE kind = 'prefix' ORDER BY id LIMIT 1")
    response = s.scalar("SELECT i.uid FROM items i WHERE i.kind = 'response' AND EXISTS ("
                        "SELECT 1 FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                        " WHERE c.item_id = i.id AND r.name = 'demo:mapper@v2') ORDER BY i.id"
                        " LIMIT 1")
    me = ensure_reviewer(s, "Dr. Mei Tanaka")
    item = s.scalar("SELECT id FROM items WHERE uid = ?", (response,))
    qid = s.scalar("SELECT id FROM questions WHERE key = ?", (RESPONSE_Q,))
    commit_answer(s, me, item, qid, "1A_ESCALATION_NONURGENT_CARE")
    judge = ensure_reviewer(s, "Dr. Sam Rivera", role="adjudicator")
    settle(s, None, item, judge, "1B_ESCALATION_URGENT_CARE", "reviewer_error", "red flag",
           question_key=RESPONSE_Q)
    s.close()
    return demo_copy, prefix, response


def attack_rows(s, prefix, response):
    gold = in_force(s, "carebench-gold", prefix, PREFIX_Q)["value"]
    mapper = in_force(s, "demo:mapper@v2", response, RESPONSE_Q)["value"]
    return [
        (prefix, "carebench-gold", other(gold), PREFIX_Q, ""),
        (response, "Dr. Mei Tanaka", "0A_NO_ESCALATION_INFO_NEEDED", RESPONSE_Q, "blind"),
        (response, "demo:mapper@v2", other(mapper), RESPONSE_Q, ""),
        (response, "adjudicated", "0A_NO_ESCALATION_INFO_NEEDED", RESPONSE_Q, ""),
    ]


@pytest.mark.parametrize("row", range(4), ids=["gold", "clinician", "machine", "settled"])
def test_no_row_of_the_attack_file_changes_an_answer_in_force(study, tmp_path, row):
    path, prefix, response = study
    s = open_store(path)
    before = table_counts(s)
    attack = attack_rows(s, prefix, response)[row]
    f = write_csv(tmp_path / "attack.csv", [attack])
    with pytest.raises(InputError, match=r"attack\.csv:2: "):
        import_file(s, f, "labels-long")
    assert table_counts(s) == before


def test_a_file_cannot_replace_an_answer_in_force_without_replace(study, tmp_path, capsys):
    path, prefix, response = study
    s = open_store(path)
    gold = in_force(s, "carebench-gold", prefix, PREFIX_Q)
    f = write_csv(tmp_path / "gold.csv", [(prefix, "carebench-gold", other(gold["value"]),
                                           PREFIX_Q, "")])
    assert main(["--db", str(path), "import", str(f)]) == 2
    err = capsys.readouterr().err
    assert "would replace the answer in force of 'carebench-gold'" in err and "--replace" in err
    assert in_force(s, "carebench-gold", prefix, PREFIX_Q)["id"] == gold["id"]


def test_replace_replaces_and_audits_each_answer_with_old_and_new(study, tmp_path, capsys):
    path, prefix, response = study
    s = open_store(path)
    gold = in_force(s, "carebench-gold", prefix, PREFIX_Q)
    mapper = in_force(s, "demo:mapper@v2", response, RESPONSE_Q)
    mine = in_force(s, "Dr. Mei Tanaka", response, RESPONSE_Q)
    f = write_csv(tmp_path / "fix.csv", [
        (prefix, "carebench-gold", other(gold["value"]), PREFIX_Q, ""),
        (response, "demo:mapper@v2", other(mapper["value"]), RESPONSE_Q, ""),
        (response, "Dr. Mei Tanaka", "0B_NO_ESCALATION_SELF_CARE_MONITOR", RESPONSE_Q, ""),
    ])
    assert main(["--db", str(path), "import", "--replace", "--actor", "cli:study-lead",
                 str(f)]) == 0
    assert "3 replacing answers in force, audited" in capsys.readouterr().out
    assert in_force(s, "carebench-gold", prefix, PREFIX_Q)["value"] == other(gold["value"])
    entries = s.query("SELECT actor, entity_id, old, new FROM audit_log WHERE action ="
                      " 'import_replace' ORDER BY id")
    assert [e["actor"] for e in entries] == ["cli:study-lead"] * 3
    import json
    olds = [json.loads(e["old"]) for e in entries]
    news = [json.loads(e["new"]) for e in entries]
    assert [o["value"] for o in olds] == [gold["value"], mapper["value"], mine["value"]]
    assert [o["annotation_id"] for o in olds] == [gold["id"], mapper["id"], mine["id"]]
    assert [n["rater"] for n in news] == ["carebench-gold", "demo:mapper@v2", "Dr. Mei Tanaka"]
    assert news[0]["value"] == other(gold["value"])
    # Replaced, not rewritten: the old answers are still there, superseded.
    assert s.scalar("SELECT supersedes_id FROM annotations WHERE id = ?",
                    (entries[0]["entity_id"],)) == gold["id"]


def test_replace_never_writes_the_settled_answer_nor_a_blind_answer_for_a_reviewer(study,
                                                                                  tmp_path):
    path, prefix, response = study
    s = open_store(path)
    for row, words in ((attack_rows(s, prefix, response)[3], "settled answers"),
                       (attack_rows(s, prefix, response)[1], "reviews here")):
        f = write_csv(tmp_path / "x.csv", [row])
        with pytest.raises(InputError, match=words):
            import_file(s, f, "labels-long", ImportOptions(replace=True))


def test_the_cli_names_who_imported(study, tmp_path):
    path, prefix, _ = study
    f = write_csv(tmp_path / "new.csv", [(prefix, "Dr. New Colleague", CODES[0], PREFIX_Q, "")])
    assert main(["--db", str(path), "import", str(f)]) == 0
    s = open_store(path)
    actor = s.scalar("SELECT actor FROM audit_log WHERE action = 'import' ORDER BY id DESC")
    assert actor.startswith("cli:") and actor != "cli:"


def test_a_file_brings_in_a_study_with_its_phases_and_history(study, tmp_path):
    """Raters the file brings in: a later row of the same rater is their revision."""
    path, prefix, response = study
    s = open_store(path)
    f = write_csv(tmp_path / "elsewhere.csv", [
        (response, "Dr. Elsewhere", CODES[0], RESPONSE_Q, "blind"),
        (response, "Dr. Elsewhere", CODES[3], RESPONSE_Q, "after_reveal"),
        (prefix, "Dr. Elsewhere", CODES[2], PREFIX_Q, "blind"),
    ])
    result = import_file(s, f, "labels-long")
    assert result.annotations == 3
    rows = s.query("SELECT a.value, a.phase, a.supersedes_id FROM annotations a JOIN raters r"
                   " ON r.id = a.rater_id WHERE r.name = 'Dr. Elsewhere' ORDER BY a.id")
    assert [(r["value"], r["phase"]) for r in rows] == [(CODES[0], "blind"),
                                                       (CODES[3], "after_reveal"),
                                                       (CODES[2], "blind")]
    assert rows[1]["supersedes_id"] is not None


def test_a_file_adds_answers_for_raters_who_exist(study, tmp_path):
    path, _, _ = study
    s = open_store(path)
    unanswered = s.scalar(
        "SELECT uid FROM items i WHERE kind = 'response' AND NOT EXISTS (SELECT 1 FROM annotations"
        " a JOIN raters r ON r.id = a.rater_id WHERE a.item_id = i.id AND r.name = ?) LIMIT 1",
        ("Dr. Mei Tanaka",))
    f = write_csv(tmp_path / "more.csv", [(unanswered, "Dr. Mei Tanaka", CODES[1], RESPONSE_Q,
                                           "")])
    assert import_file(s, f, "labels-long").annotations == 1
    assert in_force(s, "Dr. Mei Tanaka", unanswered, RESPONSE_Q)["phase"] == "imported"


@pytest.mark.parametrize("name", ["adjudicated", "Adjudicated", "group:clinicians",
                                  "carebench-gold", "openai:gpt-4.1@v9"])
def test_a_file_cannot_create_a_person_named_as_the_system_names_raters(store, tmp_path, name):
    from tests.helpers import write_prefixes

    uid = write_prefixes(store, 1, with_gold=False)[0]
    before = table_counts(store)
    f = write_csv(tmp_path / "people.csv", [(uid, name, CODES[0], PREFIX_Q, "", "human")],
                  header=("item_id", "rater", "value", "question", "phase", "rater_kind"))
    with pytest.raises(InputError, match="people.csv"):
        import_file(store, f, "labels-long")
    assert table_counts(store) == before
    assert store.scalar("SELECT COUNT(*) FROM raters WHERE name = ? COLLATE NOCASE AND kind ="
                        " 'human'", (name,)) == 0


@pytest.mark.parametrize("kind,role", [("reference", "adjudicated"), ("human", ""),
                                       ("machine", ""), ("reference", "")])
def test_a_file_cannot_bring_in_the_settled_answers_where_there_are_none(
        store, tmp_path, kind, role):
    """A forged labels-long file naming `adjudicated` when this database has no settled
    answers yet (whatever kind and role it claims) is refused, the database as it was."""
    from tests.helpers import write_prefixes

    uid = write_prefixes(store, 1, with_gold=False)[0]
    assert store.scalar("SELECT COUNT(*) FROM raters WHERE name = 'adjudicated'") == 0
    before = table_counts(store)
    f = write_csv(tmp_path / "forged.csv", [(uid, "adjudicated", CODES[0], PREFIX_Q, "", kind,
                                             role)],
                  header=("item_id", "rater", "value", "question", "phase", "rater_kind",
                          "rater_role"))
    with pytest.raises(InputError, match=r"forged\.csv: rater 'adjudicated': .*settled answers"):
        import_file(store, f, "labels-long")
    assert table_counts(store) == before


@pytest.mark.parametrize("name", ["klinikebench-verifier", "KlinikeBench-Verifier", "harbor-verifier"])
def test_a_labels_file_cannot_create_a_reference_rater_of_an_importer(store, tmp_path, name):
    """Not yet in this database: a file of labels cannot make it first."""
    from tests.helpers import write_prefixes

    uid = write_prefixes(store, 1, with_gold=False)[0]
    before = table_counts(store)
    f = write_csv(tmp_path / "gold.csv", [(uid, name, CODES[0], PREFIX_Q, "", "reference")],
                  header=("item_id", "rater", "value", "question", "phase", "rater_kind"))
    with pytest.raises(InputError, match=r"gold\.csv: rater .*reference rater"):
        import_file(store, f, "labels-long")
    assert table_counts(store) == before


def test_a_labels_file_cannot_create_a_twin_of_a_rater_who_exists(study, tmp_path):
    path, prefix, _ = study
    s = open_store(path)
    before = table_counts(s)
    f = write_csv(tmp_path / "twin.csv", [(prefix, "DEMO:Mapper@v2", CODES[0], PREFIX_Q, "",
                                           "machine")],
                  header=("item_id", "rater", "value", "question", "phase", "rater_kind"))
    with pytest.raises(InputError, match=r"twin\.csv: .*would show it like the rater"):
        import_file(s, f, "labels-long")
    assert table_counts(s) == before
