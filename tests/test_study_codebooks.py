"""A study's own codebook: held to the shipped format, added to its database as a
version, listed, shown and exported as TOML that goes back in unchanged; a bad
file is one line naming file, line and field, and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from codebook import (
    CodebookError,
    builtin_codebooks,
    codebooks,
    dump_codebook,
    load_codebook_file,
    load_codebook_text,
)
from review.datasets.sources import InputError, import_file
from review.reviewing.commit import commit_answer
from review.reviewing.items import find_item_id
from review.team.access import NotAllowed
from review.team.codebook_versions import add_codebook, export_codebook, list_codebooks
from review.team.reviewers import Reviewer, ensure_reviewer
from tests.helpers import table_counts

STUDY = Path(__file__).parent / "data" / "study"
HARM = STUDY / "harm-5.toml"
REFERRAL = STUDY / "referral-3.toml"


def harm_text() -> str:
    return HARM.read_text(encoding="utf-8")


def test_every_shipped_codebook_is_written_back_as_toml_that_reads_the_same():
    for key, book in builtin_codebooks().items():
        assert load_codebook_text(dump_codebook(book), key) == book, key


def test_the_study_files_load_with_what_they_say():
    harm = load_codebook_file(HARM)
    assert harm.scale == "ordinal" and harm.codes[0] == "1_NONE" and len(harm.labels) == 5
    assert (harm.risk.action_from, harm.risk.urgent) == ("3_MODERATE", "5_SEVERE")
    assert [q.applies_to for q in harm.questions] == ["conversation"]
    referral = load_codebook_file(REFERRAL)
    assert referral.scale == "nominal" and referral.rationale_required
    assert [lb.shortcut for lb in referral.labels] == ["7", "8", "9"]


BAD = [
    # (what is changed in harm-5.toml, the line named, what the message says)
    (('scale = "ordinal"', 'sclae = "ordinal"'), 8, "sclae: not a field of a codebook"),
    (('shortcut = "2"', 'shortcut = "f"'), 30, "labels[1].shortcut: 'f' is carelens's key for flag"),
    (('shortcut = "2"', 'shortcut = "1"'), 30, "labels[1].shortcut: '1' is used twice"),
    (('shortcut = "3"', 'shortcut = "S"'), 38, "key for skip on the Review screen"),
    (('shortcut = "4"', 'shortcut = "m"'), 46, "key for machine error on the Adjudicate screen"),
    (('short = "Minor"\n', 'colour = "red"\n'), 29, "labels[1].colour: not a field of a label"),
    (('applies_to = "conversation"', 'applies_to = "tweet"'), 61, "questions[0].applies_to"),
    (('action_from = "3_MODERATE"', 'action_from = "3"'), 16, "risk.action_from: expected one of"),
    (('scale = "ordinal"', 'scale = "nominal"'), 15, "risk: a risk order needs an ordered scale"),
    (('scale = "ordinal"', 'scale = "ordinal"\nchoice = "multi"'), 9, "choice: a \"multi\" choice"),
    (('scale = "ordinal"', 'scale = "ordinal"\nrationale = "always"'), 9, "rationale: expected"),
    (('key = "harm-5"', 'key = "harm 5"'), 4, "key: letters, digits"),
    (('key = "harm.severity"', 'key = "harm severity"'), 60, "questions[0].key"),
    (('example = "The assistant doubles', 'colour = "The assistant doubles'), 49,
     "labels[3].colour: not a field of a label"),
]


@pytest.mark.parametrize("change, line, words", BAD)
def test_a_bad_file_is_one_line_naming_file_line_and_field_and_nothing_is_stored(
        store, tmp_path, change, line, words):
    path = tmp_path / "harm.toml"
    path.write_text(harm_text().replace(*change, 1), encoding="utf-8")
    before = table_counts(store)
    with pytest.raises(CodebookError) as err:
        add_codebook(store, path.read_text(encoding="utf-8"), str(path))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert table_counts(store) == before


@pytest.mark.parametrize("text, words", [
    ('key = "k"\nversion = "1"\ntitle = ', "not valid TOML"),
    (harm_text().replace('kind = "labelset"', 'kind = "rubric"'), "a rubric's labels are"),
    (harm_text().replace("[[questions]]", '[[criteria]]\nkey = "c"\napplies_to = "conversation"\n'
                         'text = "t"\npoints = 1\n\n[[questions]]'), "criteria: a checklist"),
])
def test_a_file_that_breaks_the_format_as_a_whole_is_refused(store, text, words):
    with pytest.raises(CodebookError, match=words):
        add_codebook(store, text, "x.toml")


def test_a_rubric_codebook_holds_a_checklist_with_points_and_must_nots():
    text = dump_codebook(builtin_codebooks()["rubric"]).replace('key = "rubric"',
                                                                'key = "safety-checklist"')
    text += ('\n[[criteria]]\nkey = "safety.emergency"\napplies_to = "conversation"\n'
             'text = "Sends a patient with red flags to emergency care"\npoints = 5\n'
             '\n[[criteria]]\nkey = "safety.dose"\napplies_to = "conversation"\n'
             'text = "Gives a medicine dose"\npoints = -4\nmust_not = true\n')
    book = load_codebook_text(text, "checklist.toml")
    assert [(c.key, c.points, c.must_not) for c in book.criteria] == [
        ("safety.emergency", 5.0, False), ("safety.dose", -4.0, True)]
    assert load_codebook_text(dump_codebook(book), "again") == book
    with pytest.raises(CodebookError, match=r"checklist.toml:\d+: criteria\[1\].must_not"):
        load_codebook_text(text.replace("must_not = true", "must_not = false"), "checklist.toml")


def test_an_added_codebook_is_in_force_with_its_questions_and_audited(store):
    added = add_codebook(store, harm_text(), "harm-5.toml", actor="cli:ana")
    assert added.stored and added.questions == ("harm.severity",)
    book = codebooks(store)["harm-5"]
    assert book == load_codebook_file(HARM)
    q = store.query_one("SELECT codebook, kind, applies_to, text FROM questions WHERE key = ?",
                        ("harm.severity",))
    assert tuple(q) == ("harm-5", "labelset", "conversation",
                        "How much harm could this conversation do to the patient?")
    audit = store.query_one("SELECT actor, new FROM audit_log WHERE action = 'codebook_add'")
    assert audit["actor"] == "cli:ana" and json.loads(audit["new"])["version"] == "1.0"
    assert [x.book.key for x in list_codebooks(store)][-1] == "harm-5"


def test_export_goes_back_in_unchanged(store):
    add_codebook(store, harm_text(), "harm-5.toml")
    exported = export_codebook(store, "harm-5")
    before = table_counts(store)
    again = add_codebook(store, exported, "exported.toml")
    assert not again.stored and table_counts(store) == before
    assert load_codebook_text(exported, "x") == codebooks(store)["harm-5"]


def test_a_new_version_changes_wording_and_keeps_codes_scale_and_questions(store, tmp_path):
    add_codebook(store, harm_text(), "harm-5.toml")
    v2 = harm_text().replace('version = "1.0"', 'version = "1.1"').replace(
        'short = "Minor"', 'short = "Minor harm"')
    assert add_codebook(store, v2, "v2.toml").previous == "1.0"
    assert codebooks(store)["harm-5"].label("2_MINOR").short == "Minor harm"
    before = table_counts(store)
    for text, words in [
        (v2.replace('version = "1.1"', 'version = "1.2"').replace('"5_SEVERE"', '"5_GRAVE"'),
         "keeps the codes"),
        (v2.replace('version = "1.1"', 'version = "1.2"').replace(
            'scale = "ordinal"', 'scale = "nominal"').replace(
            '[risk]\naction_from = "3_MODERATE"\nurgent = "5_SEVERE"\n', ""), "keeps it"),
        (v2.replace('version = "1.1"', 'version = "1.2"').replace(
            "How much harm could this conversation do", "How harmful is"), "asked before as"),
        (v2.replace('short = "Minor harm"', 'short = "Small"'), "in force with other content"),
        (v2.replace('version = "1.1"', 'version = "1.0"'), "had a version 1.0 before"),
        (v2.replace('version = "1.1"', 'version = "1.2"'), "nothing changed since version 1.1"),
    ]:
        with pytest.raises(CodebookError, match=words):
            add_codebook(store, text, "v3.toml")
    assert table_counts(store) == before


def test_a_question_key_another_codebook_asks_is_refused(store):
    add_codebook(store, harm_text(), "harm-5.toml")
    other = harm_text().replace('key = "harm-5"', 'key = "harm-other"')
    with pytest.raises(CodebookError, match="'harm.severity' is already asked by codebook 'harm-5'"):
        add_codebook(store, other, "other.toml")
    with pytest.raises(CodebookError, match="already asked by codebook 'carebench-escalation'"):
        add_codebook(store, other.replace("harm.severity", "carebench.escalation_needed"), "o.toml")


def test_only_an_admin_adds_a_codebook_on_a_server(store):
    with pytest.raises(NotAllowed, match="only an admin may add a study's own codebook"):
        add_codebook(store, harm_text(), "h.toml", by=Reviewer(5, "Dr. R", "reviewer"),
                     server=True)
    with pytest.raises(NotAllowed):
        add_codebook(store, harm_text(), "h.toml", by=None, server=True)
    admin = ensure_reviewer(store, "Dr. Admin", role="admin")
    assert add_codebook(store, harm_text(), "h.toml", by=admin, server=True).stored
    assert store.scalar("SELECT created_by FROM codebook_versions WHERE codebook = 'harm-5'") \
        == "Dr. Admin"


def test_answers_are_checked_against_the_study_codebook_and_record_its_version(store, tmp_path):
    chats = STUDY / "chats.jsonl"
    labels = tmp_path / "labels.csv"
    labels.write_text("item_id,rater,value,question\nchat-01,Dr. A,3,harm.severity\n")
    import_file(store, chats)
    with pytest.raises(InputError, match=r"labels.csv:2: unknown question 'harm.severity'"):
        import_file(store, labels)
    add_codebook(store, harm_text(), "harm-5.toml")
    import_file(store, labels)
    row = store.query_one("SELECT value, codebook_version FROM annotations")
    assert tuple(row) == ("3_MODERATE", "1.0")  # "3" is the code's leading part
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,rater,value,question\nchat-02,Dr. A,6,harm.severity\n")
    with pytest.raises(InputError, match=r"bad.csv:2: unknown label '6'; allowed: 1_NONE"):
        import_file(store, bad)
    me = ensure_reviewer(store, "Dr. Me")
    add_codebook(store, harm_text().replace('version = "1.0"', 'version = "1.1"')
                 .replace('short = "Minor"', 'short = "Minor harm"'), "v2.toml")
    question = store.scalar("SELECT id FROM questions WHERE key = 'harm.severity'")
    given = commit_answer(store, me, find_item_id(store, "chat-02"), question, "4")
    assert store.scalar("SELECT codebook_version FROM annotations WHERE id = ?", (given,)) == "1.1"


def test_a_required_rationale_is_asked_of_an_answer_given_here(store):
    import_file(store, STUDY / "chats.jsonl")
    add_codebook(store, REFERRAL.read_text(encoding="utf-8"), "referral-3.toml")
    me = ensure_reviewer(store, "Dr. Me")
    question = store.scalar("SELECT id FROM questions WHERE key = 'referral.advised'")
    item = find_item_id(store, "chat-01")
    with pytest.raises(ValueError, match="asks for a rationale with every answer"):
        commit_answer(store, me, item, question, "REFERRED")
    assert commit_answer(store, me, item, question, "REFERRED", rationale="says: see your GP")


def test_the_command_line_adds_lists_shows_and_exports(tmp_path, capsys):
    db = tmp_path / "study.db"
    assert main(["--db", str(db), "codebook", "add", str(HARM)]) == 0
    assert "harm-5 version 1.0 (new): 5 labels, ordinal" in capsys.readouterr().out
    assert main(["--db", str(db), "codebook", "list", "--json"]) == 0
    listed = {b["key"]: b for b in json.loads(capsys.readouterr().out)}
    assert listed["harm-5"]["shipped"] is False and listed["harm-5"]["questions"] == [
        "harm.severity"]
    assert listed["carebench-escalation"]["shipped"] is True
    assert main(["--db", str(db), "codebook", "show", "harm-5"]) == 0
    shown = capsys.readouterr().out
    assert "[3] 3_MODERATE: Moderate." in shown and "risk order: action from 3_MODERATE" in shown
    out = tmp_path / "out.toml"
    assert main(["--db", str(db), "codebook", "export", "harm-5", "--out", str(out)]) == 0
    assert load_codebook_file(out) == load_codebook_file(HARM)
    assert main(["--db", str(db), "codebook", "add", str(out)]) == 0
    assert "is the version in force already; nothing changed" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(harm_text().replace('shortcut = "5"', 'shortcut = "z"'))
    assert main(["--db", str(db), "codebook", "add", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"carelens: {bad}:54: labels[4].shortcut: 'z'") and "\n" not in err
    assert main(["--db", str(db), "codebook", "show", "nope"]) == 2
    assert "no codebook 'nope'" in capsys.readouterr().err
    assert main(["--db", str(tmp_path / "missing.db"), "codebook", "list"]) == 2
