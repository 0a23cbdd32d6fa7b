"""The review layer of agent runs and graded conversations: queue, questions,
batch commits, step marks, blinding and scores. Fixtures are invented."""

from __future__ import annotations

import json

import pytest

from codebook import BLIND, SUGGEST
from review.datasets.sources import import_file
from review.datasets.sources.clinicare import trial_uid
from review.reviewing.blinding import revealed_verdicts
from review.reviewing.commit import AnswerSpec, Verdict, commit_answers, commit_verdicts, mark_step
from review.reviewing.criteria import (
    evidence_steps,
    find_item,
    is_reviewed,
    item_position,
    item_questions,
    my_current_answers,
    next_unreviewed,
    rater_scores,
    review_progress,
    step_marks,
)
from review.reviewing.queue import QueueFilter
from review.reviewing.screens import open_graded, open_run
from review.team.reviewers import ensure_reviewer
from tests.helpers import table_counts, write_jsonl
from tests.review_fixtures import HARBOR_UID, HOSTILE, KB_UID, PROMPT

CLINICARE_UID = trial_uid("sc07-a1b2c3__x1")
COMPLETION_UID = "hb:p-inv-1::c1"


@pytest.fixture
def me(db):
    return ensure_reviewer(db, "Dr. Rubric", "general medicine")


def item(db, uid):
    item_id = find_item(db, uid)
    assert item_id is not None, uid
    return item_id


def answer_all(db, reviewer, item_id, choice="met"):
    qs = item_questions(db, item_id)
    return commit_verdicts(db, reviewer, item_id, [
        Verdict(q.id, choice if q.kind == "criterion" else "cannot_assess") for q in qs])


# -- what an item asks --------------------------------------------------------------

def test_a_klinikebench_run_asks_its_gates_and_topics_but_not_the_clinicare_verdict(db):
    qs = item_questions(db, item(db, KB_UID))
    suffixes = [q.key.removeprefix(KB_UID + ":") for q in qs]
    assert suffixes == ["gate:diagnosis", "gate:required_tools", "gate:parameterised_actions",
                        "gate:must_ask", "outcome", "gate:safety_net", "ask:1", "ask:2", "ask:3"]
    assert all(q.kind == "criterion" and q.criterion is not None for q in qs)


def test_a_clinicare_run_also_asks_the_outcome_verdict(db):
    qs = item_questions(db, item(db, CLINICARE_UID))
    assert [q.key for q in qs if q.kind == "labelset"] == ["clinicare.verdict"]
    must_not = [q for q in qs if q.criterion is not None and q.criterion.must_not]
    assert [q.text for q in must_not] == ["Invents a lab value"]
    assert qs[-1].book.codes[0] == "YES"


def test_a_completion_is_graded_on_its_prompts_criteria(db):
    qs = item_questions(db, item(db, COMPLETION_UID))
    assert [q.text for q in qs] == [c["criterion"] for c in PROMPT["rubrics"]]
    assert [q.criterion.points for q in qs] == [5, 3, -4] and qs[2].criterion.must_not


# -- the queue ------------------------------------------------------------------------

def test_a_run_is_reviewed_once_every_question_it_asks_is_answered(db, me):
    filt = QueueFilter(kind="trajectory")
    assert review_progress(db, me.id, filt).total == 4
    first = next_unreviewed(db, me.id, filt)
    assert first == item(db, KB_UID)
    qs = item_questions(db, first)
    commit_verdicts(db, me, first, [Verdict(qs[0].id, "met")])
    mark_step(db, me, first, 3, "missed_essential_question", 4)
    assert not is_reviewed(db, me.id, first)  # one criterion and a step mark are not enough
    assert next_unreviewed(db, me.id, filt) == first
    commit_verdicts(db, me, first, [Verdict(q.id, "cannot_assess") for q in qs[1:]])
    assert is_reviewed(db, me.id, first)
    assert review_progress(db, me.id, filt).done == 1
    second = next_unreviewed(db, me.id, filt)
    assert second not in (None, first)
    assert next_unreviewed(db, me.id, filt, after_id=second) not in (None, first, second)
    other = ensure_reviewer(db, "Dr. Other")
    assert next_unreviewed(db, other.id, filt) == first  # my review is mine alone


def test_the_clinicare_verdict_must_be_answered_too(db, me):
    run = item(db, CLINICARE_UID)
    qs = item_questions(db, run)
    commit_verdicts(db, me, run, [Verdict(q.id, "not_met") for q in qs if q.kind == "criterion"])
    assert not is_reviewed(db, me.id, run)
    commit_verdicts(db, me, run, [Verdict(qs[-1].id, "NO")])
    assert is_reviewed(db, me.id, run)


def test_filters_narrow_the_run_queue(db, me):
    filt = QueueFilter(kind="trajectory", dataset="clinicare")
    assert review_progress(db, me.id, filt).total == 2
    assert next_unreviewed(db, me.id, filt) in {item(db, CLINICARE_UID),
                                                item(db, trial_uid("sc09-ffee01__x2"))}
    model = QueueFilter(kind="trajectory", model="vendor/clin-1")
    assert next_unreviewed(db, me.id, model) == item(db, KB_UID)


def test_graded_queue_skips_prompts_with_nothing_to_grade(db, me, tmp_path):
    meta = write_jsonl(tmp_path / "meta.jsonl", [{
        "prompt": [{"role": "user", "content": "An invented question with no rubric row."}],
        "completion": "An invented reply.", "prompt_id": "p-meta", "completion_id": "m1",
        "rubric": "Says something kind.", "binary_labels": [True], "anonymized_physician_ids": ["ph-z"],
        "category": "cluster:x"}])
    import_file(db, meta)
    filt = QueueFilter(kind="graded_conversation")
    uids = set()
    item_id = next_unreviewed(db, me.id, filt)
    while item_id is not None and item_id not in uids:
        uids.add(item_id)
        answer_all(db, me, item_id)
        item_id = next_unreviewed(db, me.id, filt)
    assert item_id is None
    names = {db.scalar("SELECT uid FROM items WHERE id = ?", (i,)) for i in uids}
    assert names == {"hb:p-inv-1", COMPLETION_UID, "hb:p-meta::m1"}  # not the stub hb:p-meta
    assert item_position(db, item(db, "hb:p-meta"), filt) == (0, 3)  # opened by link only
    assert item_position(db, item(db, "hb:p-meta::m1"), filt) == (3, 3)
    assert review_progress(db, me.id, filt).done == review_progress(db, me.id, filt).total == 3


# -- committing -----------------------------------------------------------------------

def test_a_batch_is_one_transaction_a_bad_answer_rejects_it_all(db, me):
    run = item(db, KB_UID)
    qs = item_questions(db, run)
    before = table_counts(db)
    with pytest.raises(ValueError, match="unknown verdict 'perhaps'"):
        commit_verdicts(db, me, run, [Verdict(qs[0].id, "met"), Verdict(qs[1].id, "perhaps")])
    assert table_counts(db) == before
    foreign = item_questions(db, item(db, COMPLETION_UID))[0]
    with pytest.raises(ValueError, match="not asked of this item"):
        commit_verdicts(db, me, run, [Verdict(foreign.id, "met")])
    with pytest.raises(ValueError, match="nothing to commit"):
        commit_verdicts(db, me, run, [])
    assert table_counts(db) == before


def test_commit_answers_writes_all_or_nothing_with_the_audit_trail(db, me):
    run = item(db, KB_UID)
    qs = item_questions(db, run)
    ids = commit_answers(db, me, run, [AnswerSpec(qs[0].id, "met", rationale="dx right"),
                                       AnswerSpec(qs[1].id, None, status="cannot_assess")])
    assert len(ids) == 2
    rows = db.query(f"SELECT status, value, rationale, phase FROM annotations WHERE id IN ({ids[0]}, {ids[1]})"
                    " ORDER BY id")
    assert [tuple(r) for r in rows] == [("answered", "met", "dx right", "blind"),
                                        ("cannot_assess", None, None, "blind")]
    assert db.scalar("SELECT COUNT(*) FROM audit_log WHERE entity = 'annotations' AND entity_id IN (?, ?)",
                     ids) == 2
    before = table_counts(db)
    with pytest.raises(ValueError, match="confidence must be 1 to 5"):
        commit_answers(db, me, run, [AnswerSpec(qs[2].id, "met"), AnswerSpec(qs[3].id, "met", confidence=7)])
    assert table_counts(db) == before


def test_a_revision_after_the_reveal_is_kept_as_its_own_phase(db, me):
    run = item(db, KB_UID)
    q = item_questions(db, run)[0]
    first = commit_verdicts(db, me, run, [Verdict(q.id, "not_met", "no diagnosis given")])[0]
    second = commit_verdicts(db, me, run, [Verdict(q.id, "met", "on reflection")])[0]
    row = db.query_one("SELECT phase, supersedes_id, value FROM annotations WHERE id = ?", (second,))
    assert tuple(row) == ("after_reveal", first, "met")
    assert my_current_answers(db, me.id, run)[q.id].rationale == "on reflection"


# -- step marks -----------------------------------------------------------------------

def test_marking_steps_with_error_type_severity_and_note(db, me):
    run = item(db, KB_UID)
    mark_step(db, me, run, 3, "missed_essential_question", 4, "never asked about allergies")
    mark_step(db, me, run, 4, "no_error", 5)  # a checked step carries no severity
    marks = step_marks(db, me.id, run)
    assert (marks[3].error, marks[3].severity, marks[3].note) == (
        "missed_essential_question", 4, "never asked about allergies")
    assert marks[4].severity is None and not marks[4].is_error
    mark_step(db, me, run, 3, "unsafe_action", 5)  # a new mark supersedes the old
    assert step_marks(db, me.id, run)[3].error == "unsafe_action"
    assert db.scalar("SELECT COUNT(*) FROM annotations WHERE target = 'step:3'") == 2
    screen = open_run(db, me.id, run)
    assert screen.view.timeline.marks[2].marked == "unsafe_action"
    assert step_marks(db, ensure_reviewer(db, "Dr. Other").id, run) == {}


@pytest.mark.parametrize("step,error,severity,message", [
    (3, "wrong_tool", None, "choose a severity"),
    (3, "wrong_tool", 6, "choose a severity"),
    (9, "wrong_tool", 2, "this run has no step 9"),
    (0, "no_error", None, "this run has no step 0"),
    (3, "bad_vibes", 2, "unknown label 'bad_vibes'"),
])
def test_a_bad_step_mark_is_refused_and_changes_nothing(db, me, step, error, severity, message):
    before = table_counts(db)
    with pytest.raises(ValueError, match=message):
        mark_step(db, me, item(db, KB_UID), step, error, severity)
    assert table_counts(db) == before


# -- blinding and the reveal ----------------------------------------------------------

def test_judges_stay_hidden_until_each_criterion_is_committed(db, me):
    run = item(db, KB_UID)
    qs = {q.key.removeprefix(KB_UID + ":"): q for q in item_questions(db, run)}
    assert revealed_verdicts(db, me.id, run) == {}
    commit_verdicts(db, me, run, [Verdict(qs["ask:1"].id, "met")])
    shown = revealed_verdicts(db, me.id, run)
    assert list(shown) == [qs["ask:1"].id]
    judge = shown[qs["ask:1"].id][0]
    assert (judge.rater, judge.rater_kind, judge.role, judge.value, judge.rationale) == (
        "klinikebench-judge:judgeco/j-2", "machine", "judge", "met", "asked at step 3")
    assert revealed_verdicts(db, me.id, run, BLIND) == {}
    everything = revealed_verdicts(db, me.id, run, SUGGEST)
    gate = everything[qs["gate:required_tools"].id][0]
    assert gate.rater == "klinikebench-verifier" and gate.extra["detail"] == {"missing": ["check_vitals"]}


def test_the_verdict_reveal_shows_the_agent_and_the_cohorts_expected_label(db, me, tmp_path):
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,YES\n")
    import_file(db, cohort)
    run = item(db, CLINICARE_UID)
    verdict = item_questions(db, run)[-1]
    commit_verdicts(db, me, run, [Verdict(verdict.id, "INDETERMINATE_LACK_OF_DATA")])
    shown = {(v.rater, v.value, v.about) for v in revealed_verdicts(db, me.id, run)[verdict.id]}
    assert shown == {("agent:vendor/model-x", "NO", "this item"), ("clinicare-cohort", "YES", "the task")}


def test_other_humans_are_never_revealed(db, me, tmp_path):
    meta = write_jsonl(tmp_path / "meta.jsonl", [{
        "prompt": PROMPT["prompt"], "completion": "x", "prompt_id": "p-inv-1", "completion_id": "c1",
        "rubric": PROMPT["rubrics"][0]["criterion"], "binary_labels": [False],
        "anonymized_physician_ids": ["ph-a"], "category": "c"}])
    import_file(db, meta)
    answer_all(db, me, item(db, COMPLETION_UID))
    raters = {v.rater for vs in revealed_verdicts(db, me.id, item(db, COMPLETION_UID)).values() for v in vs}
    assert raters == {"openai:grader-x@v1"}


def test_scores_by_the_healthbench_formula_for_me_and_the_judge(db, me):
    comp = item(db, COMPLETION_UID)
    qs = item_questions(db, comp)
    commit_verdicts(db, me, comp, [Verdict(qs[0].id, "met")])
    graded = open_graded(db, me.id, comp)
    lines = rater_scores(graded.questions, graded.mine, graded.revealed, me.name)
    assert [(s.rater, s.score, s.answered) for s in lines] == [(me.name, None, 1)]  # judge hidden
    commit_verdicts(db, me, comp, [Verdict(qs[1].id, "met"), Verdict(qs[2].id, "met")])
    graded = open_graded(db, me.id, comp)
    lines = {s.rater: s.score for s in rater_scores(graded.questions, graded.mine, graded.revealed, me.name)}
    assert lines[me.name] == pytest.approx((5 + 3 - 4) / 8)
    assert lines["openai:grader-x@v1"] == pytest.approx(5 / 8)
    commit_verdicts(db, me, comp, [Verdict(qs[0].id, "cannot_assess")])
    graded = open_graded(db, me.id, comp)
    mine = rater_scores(graded.questions, graded.mine, graded.revealed, me.name)[0]
    assert mine.score is None and mine.answered == 2  # no score with a criterion unassessed


# -- what the screens load ---------------------------------------------------------------

def test_open_run_keeps_hostile_text_as_data_and_finds_subagents_and_evidence(db, me):
    screen = open_run(db, me.id, item(db, KB_UID))
    assert screen.view.steps[3].message == HOSTILE  # escaping is the screen's job, not the model's
    assert screen.header.case_label == "kb-task-001" and screen.mine == {} and screen.revealed == {}
    harbor = open_run(db, me.id, item(db, HARBOR_UID))
    assert harbor.view.steps[2].subagents[0].embedded_index == 0
    clinicare = open_run(db, me.id, item(db, CLINICARE_UID))
    assert clinicare.header.case_label is None  # the task id identifies a patient
    assert clinicare.view.final_answer.evidence == ["obs-3"]
    found = evidence_steps(clinicare.view, ["obs-3", "obs-404"])
    assert [clinicare.view.steps[i].step_id for i in found["obs-3"]] == [3] and found["obs-404"] == []
    assert open_run(db, me.id, item(db, COMPLETION_UID)) is None
    assert open_graded(db, me.id, item(db, KB_UID)) is None
    graded = open_graded(db, me.id, item(db, COMPLETION_UID))
    assert HOSTILE in graded.view.completion and json.dumps(graded.header.meta)
