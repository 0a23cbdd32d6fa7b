"""What a reviewer has been shown decides an answer's phase, and a reveal never
shows what other clinicians answered (not even the settled answer made of it)."""

from __future__ import annotations

from review.datasets.sources import import_file
from review.datasets.sources.clinicare import trial_uid
from review.reviewing.blinding import reveal_reference_labels, revealed_verdicts
from review.reviewing.commit import Verdict, commit_answer, commit_verdicts, mark_step
from review.reviewing.criteria import find_item, item_questions
from review.reviewing.items import load_item, my_answers
from review.reviewing.queue import QueueFilter, next_unreviewed_item
from review.team.adjudication import settle
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.review_fixtures import KB_UID, import_all
from tests.test_sources_trajectories import CLINICARE_REWARDS, make_trial


def phases(store, reviewer, item_id, question_id, target=""):
    return [a.phase for a in my_answers(store, reviewer.id, item_id, question_id, target)]


def test_a_settled_label_is_not_revealed_to_a_later_reviewer(demo_copy):
    s = open_store(demo_copy)
    a, b = ensure_reviewer(s, "Dr. A1"), ensure_reviewer(s, "Dr. B1")
    judge = ensure_reviewer(s, "Dr. Sam Rivera")
    me = ensure_reviewer(s, "Dr. Later")
    item = load_item(s, next_unreviewed_item(s, me.id, QueueFilter(kind="response")))
    commit_answer(s, a, item.id, item.question_id, "0A")
    commit_answer(s, b, item.id, item.question_id, "1B")
    settle(s, None, item.id, judge, "1B", "reviewer_error", "Dr. A1 missed the red flag",
           question_key=item.question_key)
    commit_answer(s, me, item.id, item.question_id, "1A")
    shown = {lab.rater for lab in reveal_reference_labels(s, me.id, item)}
    assert "demo:mapper@v1" in shown and "adjudicated" not in shown
    s.close()


def test_a_settled_verdict_is_not_revealed_with_the_judges(tmp_path):
    s = open_store(tmp_path / "s.db")
    import_all(s, tmp_path / "files")
    run = find_item(s, KB_UID)
    first = item_questions(s, run)[0]
    a, b = ensure_reviewer(s, "Dr. A"), ensure_reviewer(s, "Dr. B")
    commit_verdicts(s, a, run, [Verdict(first.id, "met")])
    commit_verdicts(s, b, run, [Verdict(first.id, "not_met")])
    settle(s, None, run, ensure_reviewer(s, "Dr. Judge", role="adjudicator"), "not_met",
           "reviewer_error", "Dr. A missed it", question_key=first.key)
    me = ensure_reviewer(s, "Dr. Third")
    commit_verdicts(s, me, run, [Verdict(first.id, "met")])
    raters = {v.rater for v in revealed_verdicts(s, me.id, run)[first.id]}
    assert raters and "adjudicated" not in raters
    s.close()


def test_a_corrected_step_mark_stays_blind(tmp_path):
    """No step's labels are shown on the review screens: correcting a mark is a
    revision, not an answer given after a reveal."""
    s = open_store(tmp_path / "s.db")
    import_all(s, tmp_path / "files")
    run = find_item(s, KB_UID)
    me = ensure_reviewer(s, "Dr. Phase")
    mark_step(s, me, run, 3, "wrong_tool", 2)
    mark_step(s, me, run, 3, "no_error")
    qid = s.scalar("SELECT question_id FROM annotations WHERE rater_id = ? LIMIT 1", (me.id,))
    assert phases(s, me, run, qid, "step:3") == ["blind", "blind"]
    s.close()


def test_the_tasks_verdict_seen_on_one_run_makes_the_next_run_of_the_task_not_blind(tmp_path):
    job = tmp_path / "cc-job"
    for n, model in ((1, "vendor/model-x"), (2, "vendor/model-y")):
        make_trial(job, f"trial-{n}", rewards=CLINICARE_REWARDS,
                   result={"task_name": "sc07-a1b2c3", "trial_name": f"sc07-a1b2c3__x{n}",
                           "config": {"agent": {"model_name": model}}},
                   report="# Findings\nNo fever recorded [obs-3].\n\n## Answer: NO\n")
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,NO\n")
    s = open_store(tmp_path / "s.db")
    import_file(s, job, "clinicare")
    import_file(s, cohort)
    me = ensure_reviewer(s, "Dr. Sibling")
    verdict = s.scalar("SELECT id FROM questions WHERE key = 'clinicare.verdict'")
    first, second = (find_item(s, trial_uid(f"sc07-a1b2c3__x{n}")) for n in (1, 2))
    commit_verdicts(s, me, first, [Verdict(verdict, "NO")])
    assert any(v.about == "the task" for v in revealed_verdicts(s, me.id, first)[verdict])
    commit_verdicts(s, me, second, [Verdict(verdict, "YES")])
    assert phases(s, me, first, verdict) == ["blind"]
    assert phases(s, me, second, verdict) == ["after_reveal"]
    s.close()
