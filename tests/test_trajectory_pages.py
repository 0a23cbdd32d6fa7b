"""The Trajectory and Graded-conversation screens under Streamlit's AppTest:
the real app script, a database built by importing invented files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review.datasets.sources import import_file
from review.datasets.sources.clinicare import trial_uid
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, open_app, rows, shown
from tests.review_fixtures import HOSTILE, IMG, KB_UID, LONG_OUTPUT, SCRIPT, import_all

REVIEWER = "Dr. Screen Test"
COMPLETION_UID = "hb:p-inv-1::c1"
REAL_HEALTHBENCH = ROOT.parent / "shared" / "data" / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
MY_FILES = ["pages/trajectories.py", "pages/graded.py", "pages/_rubric.py", "pages/_steps.py"]


@pytest.fixture
def db_path(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "screens.db"
    s = open_store(path)
    import_all(s, tmp_path / "files")
    ensure_reviewer(s, REVIEWER, "emergency medicine", "registrar")
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(path))
    return path


def open_page(page: str, **params: str) -> AppTest:
    return open_app(page, REVIEWER, **params)


def sent(at: AppTest) -> str:
    """Every Markdown string the page sent (markdown, captions, alerts), as sent."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in ("success", "error", "warning", "info") for e in getattr(at, kind)]
    return "\n".join(parts)


def texts(at: AppTest) -> str:
    """What a reader sees of it (see `tests.helpers.shown`)."""
    return shown(sent(at))


def my_annotations(path: Path) -> list[tuple]:
    return rows(path, "SELECT q.key, a.target, a.status, a.value, a.rationale, a.extra, a.phase"
                      " FROM annotations a JOIN raters r ON r.id = a.rater_id"
                      " JOIN questions q ON q.id = a.question_id WHERE r.name = ? ORDER BY a.id",
                (REVIEWER,))


def item_id(path: Path, uid: str) -> int:
    return rows(path, "SELECT id FROM items WHERE uid = ?", (uid,))[0][0]


def qp(at: AppTest, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


# -- the trajectory screen -------------------------------------------------------------

def test_the_queue_opens_the_first_run_and_steps_move_with_buttons_and_jump(db_path):
    at = open_page("pages/trajectories.py")
    run = item_id(db_path, KB_UID)
    # Blind to the agent (issue 19 fix 6): an opaque id in the address and on the
    # details line, not the run's id, which names the agent (`__aa`), nor its name.
    assert qp(at, "item") == f"item-{run}" and qp(at, "step") == "1"
    assert KB_UID not in texts(at) and f"id item-{run}" in texts(at)
    assert "0 of 4 runs reviewed by you" in at.get("progress")[0].proto.text
    assert "step 1 of 4" in texts(at)
    action_button(at, "trj_next").click().run()
    assert "step 2 of 4" in texts(at) and qp(at, "step") == "2"
    action_button(at, "trj_next").click().run()
    page = texts(at)
    assert "Said to the patient" in page and "Patient replied" in page
    assert "When did the cough start?" in page and "Two weeks ago." in page
    assert at.expander[0].label == "Agent's reasoning" and not at.expander[0].proto.expanded
    action_button(at, "trj_prev").click().run()
    assert "step 2 of 4" in texts(at)
    at.number_input(key=f"trj_stepbox:{run}").set_value(4).run()
    assert "step 4 of 4" in texts(at) and qp(at, "step") == "4"
    assert action_button(at, "trj_next").disabled  # the last step


def test_a_long_tool_output_is_cut_and_arguments_are_shown_as_data(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID, step="4")
    assert "step 4 of 4" in texts(at)
    assert {"test": "full blood count"} in [json.loads(j.proto.body) for j in at.json]
    shown = [c.value for c in at.code]
    first = next(c for c in shown if c.startswith("line 0:"))
    assert len(first) <= 4000 and len(LONG_OUTPUT) > 60_000
    assert any(e.label.startswith("Show the remaining") for e in at.expander)
    assert sum(len(c) for c in shown if c.startswith("line ") or "\nline " in c) < 70_000
    assert any(b.proto.label.startswith("Download the whole output") for b in at.get("download_button"))


def test_the_system_prompt_and_the_task_are_not_steps_to_mark(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID, step="1")
    assert not at.exception
    assert not any((b.key or "").startswith("trj_save_mark:") for b in at.button)
    assert any("marks are for the agent's steps" in c.value for c in at.caption)


def test_mark_a_step_with_the_error_codebook_severity_and_note(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID, step="3")
    run = item_id(db_path, KB_UID)
    assert action_button(at, "trj_save_mark").disabled
    assert action_button(at, "trj_sevbtn", "3").disabled  # severity comes after the error type
    action_button(at, "trj_errbtn", "missed_essential_question").click().run()
    assert action_button(at, "trj_save_mark").disabled  # still needs a severity
    action_button(at, "trj_sevbtn", "4").click().run()
    note = next(t for t in at.text_input if t.key and t.key.startswith("trj_note:")
                and t.key.endswith(f":{run}:3"))
    note.input("never asked about allergies").run()
    action_button(at, "trj_save_mark").click().run()
    assert not at.exception
    assert my_annotations(db_path) == [(
        "trajectory.step_error", "step:3", "answered", "missed_essential_question",
        "never asked about allergies", json.dumps({"blinding": "reveal_after_commit", "severity": 4},
                                                   separators=(",", ":")), "blind")]
    page = texts(at)
    assert "Step 3 marked: Missed question, severity 4 (Serious)." in page
    assert "1 error marked by you" in page
    assert action_button(at, "trj_save_mark").disabled  # nothing changed since
    action_button(at, "trj_next").click().run()
    action_button(at, "trj_errbtn", "no_error").click().run()
    assert not action_button(at, "trj_save_mark").disabled  # a checked step needs no severity
    action_button(at, "trj_save_mark").click().run()
    assert [a[1:4] for a in my_annotations(db_path)][-1] == ("step:4", "answered", "no_error")


def test_criteria_are_blind_until_committed_then_shown_beside_the_judges(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID)
    before = texts(at)
    for hidden in ("klinikebench-verifier", "klinikebench-judge", "The verifier", "The judge",
                   "asked at step 3", "never asked"):
        assert hidden not in before
    action_button(at, "rv_met").click().run()  # criterion 1 (diagnosis): met, focus moves on
    action_button(at, "rv_not_met").click().run()  # criterion 2 (required tools)
    action_button(at, "rv_cannot").click().run()  # criterion 3
    assert "Commit 3 answers" in action_button(at, "rv_commit").label
    assert my_annotations(db_path) == []  # drafts until committed
    action_button(at, "rv_commit").click().run()
    assert not at.exception
    got = [(k.removeprefix(KB_UID + ":"), s, v) for k, _, s, v, *_ in my_annotations(db_path)]
    assert got == [("gate:diagnosis", "answered", "met"), ("gate:required_tools", "answered", "not_met"),
                   ("gate:parameterised_actions", "cannot_assess", None)]
    page = texts(at)
    assert "Committed 3 answers." in page and "The verifier" in page  # its id is in a tooltip
    assert "asked at step 3" not in page  # the must-ask topics are not committed yet: still hidden
    # answer the rest with the keyboard's buttons, then commit: every judge appears
    for _ in range(6):
        action_button(at, "rv_met").click().run()
    action_button(at, "rv_commit").click().run()
    page = texts(at)
    assert "asked at step 3" in page and "never asked" in page
    assert "reviewed by you" in page and "1 of 4 runs reviewed by you" in at.get("progress")[0].proto.text


def drafts_of(db_path) -> list[tuple]:
    s = open_store(db_path)
    rows = [tuple(r) for r in s.query(
        "SELECT q.key, d.value, d.rationale FROM drafts d JOIN questions q ON q.id = d.question_id"
        " JOIN raters r ON r.id = d.rater_id WHERE r.name = ? ORDER BY q.id", (REVIEWER,))]
    s.close()
    return rows


def test_verdicts_picked_but_not_committed_survive_a_closed_tab(db_path):
    """Uncommitted verdicts are drafts in the database: a new browser session on the
    same run gets them back; committing turns them into answers and the drafts go."""
    at = open_page("pages/trajectories.py", item=KB_UID)
    action_button(at, "rv_met").click().run()  # criterion 1
    action_button(at, "rv_not_met").click().run()  # criterion 2
    why = next(t for t in at.text_input if t.key and t.key.startswith("rv_why:"))
    why.input("the vitals were never taken").run()  # criterion 3's reason, no verdict yet
    assert my_annotations(db_path) == []
    kept = [(k.removeprefix(KB_UID + ":"), v, r) for k, v, r in drafts_of(db_path)]
    assert kept == [("gate:diagnosis", "met", None), ("gate:required_tools", "not_met", None),
                    ("gate:parameterised_actions", None, "the vitals were never taken")]
    fresh = open_page("pages/trajectories.py", item=KB_UID)  # the tab was closed: a new session
    assert "Your uncommitted verdicts were restored" in texts(fresh)
    assert "Commit 2 answers" in action_button(fresh, "rv_commit").label
    picks = {sc.key: sc.value for sc in fresh.segmented_control if sc.key.startswith("rv:")}
    assert sorted(v for v in picks.values() if v) == ["met", "not_met"]
    # The keys go on where the work stopped: criterion 3, the first with no verdict.
    action_button(fresh, "rv_not_met").click().run()
    action_button(fresh, "rv_commit").click().run()
    assert not fresh.exception
    got = [(k.removeprefix(KB_UID + ":"), v) for k, _, _, v, *_ in my_annotations(db_path)]
    assert got == [("gate:diagnosis", "met"), ("gate:required_tools", "not_met"),
                   ("gate:parameterised_actions", "not_met")]
    # The picks became answers, the reason typed first went with its verdict.
    assert drafts_of(db_path) == []


def test_the_clinicare_verdict_with_its_evidence_and_the_reveal(db_path, tmp_path):
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,NO\n")
    s = open_store(db_path)
    import_file(s, cohort)
    run = s.scalar("SELECT id FROM items WHERE uid = ?", (trial_uid("sc07-a1b2c3__x1"),))
    verdict = s.scalar("SELECT id FROM questions WHERE key = 'clinicare.verdict'")
    s.close()
    at = open_page("pages/trajectories.py", item=trial_uid("sc07-a1b2c3__x1"))
    page = texts(at)
    assert "sc07-a1b2c3" not in page  # the task id identifies a patient
    assert "Verdict: " in page and "`obs-3`" in page  # the final answer, folded on the left
    assert any(e.label.startswith("The run's final answer") for e in at.expander)
    at.button(key="ev:obs-3").click().run()
    assert "step 3 of 5" in texts(at)
    assert "The agent itself" not in texts(at) and "The reference label" not in texts(at)
    at.segmented_control(key=f"rv:{run}:{verdict}").set_value("NO").run()
    action_button(at, "rv_commit").click().run()
    page = texts(at)
    # The raters in plain words (their ids, agent:vendor/model-x and clinicare-cohort, in tooltips)
    assert "The agent itself (model-x)" in page and "The reference label" in page and "on the task" in page


def test_an_embedded_subagent_run_opens(db_path):
    at = open_page("pages/trajectories.py", item="harbor:trial-9__abc", step="3")
    button = next(b for b in at.button if shown(b.label).startswith("Open subagent run child-1"))
    button.click().run()
    assert not at.exception
    assert "Child agent: the chart shows no fever." in texts(at)


# -- the graded-conversation screen ------------------------------------------------------

def test_grade_a_completion_with_the_keys_and_see_both_scores(db_path):
    at = open_page("pages/graded.py", item=COMPLETION_UID)
    page = texts(at)
    assert "Completion under review" in page
    # Blind to the model (issue 19 fix 6): the details line names no model, nor an id
    # that names it; an opaque id stands for the completion, in the address too.
    opaque = f"item-{item_id(db_path, COMPLETION_UID)}"
    assert "vendor/model-a" not in page and COMPLETION_UID not in page and f"id {opaque}" in page
    assert qp(at, "item") == opaque
    assert "MUST NOT · -4" in page and "+5 pts" in page
    assert "It says to stop the soap." not in page and "openai:grader-x@v1" not in page
    assert "The judge" not in page
    # A MUST-NOT criterion's verdicts say what "met" means there: it did the harmful thing.
    must_not = [c for c in at.segmented_control if "Did it (harmful)" in str(c.proto)]
    assert len(must_not) == 1
    assert not [m for m in at.metric]  # no score before any commit
    for key in ("rv_met", "rv_not_met", "rv_not_met"):
        action_button(at, key).click().run()
    action_button(at, "rv_commit").click().run()
    assert not at.exception
    page = texts(at)
    assert "It says to stop the soap." in page and "Lips only, not breathing." in page
    scores = {shown(m.label): m.value for m in at.metric}
    assert scores == {"You": "0.62", "The grader (grader-x)": "0.62"}  # 5 of 8 positive points
    assert any(e.label.startswith("Reference: the physician-written") for e in at.expander)
    action_button(at, "rv_up").click().run()  # the focus stays on the last criterion: up, then down
    action_button(at, "rv_down").click().run()
    action_button(at, "rv_met").click().run()  # revise criterion 3 after the reveal
    action_button(at, "rv_commit").click().run()
    assert my_annotations(db_path)[-1][3:] == ("met", None, '{"blinding":"reveal_after_commit"}',
                                               "after_reveal")
    assert {m.label: m.value for m in at.metric}["You"] == "0.12"  # (5 - 4) / 8


@pytest.mark.parametrize("page, uid", [("pages/trajectories.py", KB_UID), ("pages/graded.py", COMPLETION_UID)])
def test_flag_an_item_to_come_back_to_and_clear_it(db_path, page, uid):
    at = open_page(page, item=uid)
    assert action_button(at, "rv_flag").label == "Flag"
    action_button(at, "rv_flag").click().run()
    assert not at.exception and action_button(at, "rv_flag").label == "Unflag"
    action_button(at, "rv_flag").click().run()
    flags = rows(db_path, "SELECT f.raised FROM flags f JOIN raters r ON r.id = f.rater_id"
                          " WHERE r.name = ? AND f.item_id = ? ORDER BY f.id", (REVIEWER, item_id(db_path, uid)))
    assert flags == [(1,), (0,)] and action_button(at, "rv_flag").label == "Flag"
    assert my_annotations(db_path) == []  # a flag is not an answer


def test_left_and_right_move_between_conversations(db_path):
    at = open_page("pages/graded.py", item="hb:p-inv-1")
    assert "the physician-written ideal completion" in texts(at)
    action_button(at, "hb_next").click().run()
    # The completion names its model: an opaque id while the reviewer is blind to it.
    assert qp(at, "item") == f"item-{item_id(db_path, COMPLETION_UID)}"
    action_button(at, "hb_prev").click().run()
    assert qp(at, "item") == "hb:p-inv-1"


def test_the_real_healthbench_rows_show_all_352_criteria(db_path):
    if not REAL_HEALTHBENCH.is_file():
        pytest.skip(f"real HealthBench sample not found at {REAL_HEALTHBENCH} "
                    "(see ../shared/data/PROVENANCE.md)")
    s = open_store(db_path)
    import_file(s, REAL_HEALTHBENCH)
    uids = [r[0] for r in s.query("SELECT uid FROM items WHERE kind = 'graded_conversation'"
                                  " AND uid NOT LIKE 'hb:p-inv-%' ORDER BY id")]
    s.close()
    assert len(uids) == 30
    at = open_page("pages/graded.py", item=uids[0])
    shown = without = 0
    for uid in uids:
        at.query_params["item"] = uid
        at.run()
        assert not at.exception, uid
        rows_shown = [w for w in at.segmented_control if w.key.startswith("rv:")]
        if "has no completion to grade" in texts(at):
            without += 1
            assert all(w.disabled for w in rows_shown)  # shown for reference, not graded
        shown += len(rows_shown)
    assert shown == 352 and without == 6


def test_items_without_a_completion_are_out_of_the_queue_but_open_by_link(db_path, tmp_path):
    meta = tmp_path / "meta.jsonl"
    meta.write_text(json.dumps({
        "prompt": [{"role": "user", "content": "Invented."}], "completion": "Invented reply.",
        "prompt_id": "p-stub", "completion_id": "m1", "rubric": "Is kind.", "binary_labels": [True],
        "anonymized_physician_ids": ["ph-1"], "category": "c"}) + "\n")
    s = open_store(db_path)
    import_file(s, meta)
    s.close()
    at = open_page("pages/graded.py", item="hb:p-stub")
    assert "has no completion to grade" in texts(at)
    assert [w.disabled for w in at.segmented_control] == [True]
    assert not [b for b in at.button if b.key == "rv_commit"]
    at = open_page("pages/graded.py")
    assert qp(at, "item") == "hb:p-inv-1"  # the queue starts with something to grade


# -- safe rendering ---------------------------------------------------------------------------

@pytest.mark.parametrize("page,params", [
    ("pages/trajectories.py", {"item": KB_UID, "step": "4"}),
    ("pages/graded.py", {"item": COMPLETION_UID}),
])
def test_script_and_image_payloads_in_a_model_message_stay_text(db_path, page, params):
    at = open_page(page, **params)
    raw = sent(at)
    assert SCRIPT in shown(raw) and IMG in shown(raw)  # shown as the text it is ...
    assert not re.search(r"(?<!\\)<(script|img)", raw)  # ... every '<' escaped: nothing to run
    assert len(at.get("html")) == 0
    assert HOSTILE and SCRIPT and IMG  # the payloads the fixture planted


def test_no_screen_of_this_issue_allows_html():
    for name in MY_FILES + ["app.py", "pages/_shared.py"]:
        assert "unsafe_allow_html" not in (ROOT / name).read_text(), name


def test_a_reason_typed_without_a_verdict_does_not_claim_restored_verdicts(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID)
    action_button(at, "rv_met").click().run()
    why = next(t for t in at.text_input if t.key and t.key.startswith("rv_why:"))
    why.input("check the vitals").run()  # criterion 2's reason, no verdict
    action_button(at, "rv_commit").click().run()
    fresh = open_page("pages/trajectories.py", item=KB_UID)
    assert "were restored" not in texts(fresh)
    assert "check the vitals" in [t.value for t in fresh.text_input]


def test_another_reviewer_in_the_same_browser_starts_from_their_own_work(db_path):
    at = open_page("pages/trajectories.py", item=KB_UID)
    action_button(at, "rv_met").click().run()
    action_button(at, "rv_not_met").click().run()  # two picks by the first reviewer, not committed
    s = open_store(db_path)
    ensure_reviewer(s, "Dr. Second")
    s.close()
    at.session_state["reviewer"] = "Dr. Second"  # as the sidebar's choice does
    at.run()
    assert not at.exception
    assert "Nothing to commit" in action_button(at, "rv_commit").label
    assert all(sc.value is None for sc in at.segmented_control if sc.key.startswith("rv:"))


def test_a_verdict_picked_with_the_judges_on_screen_is_recorded_after_the_reveal(db_path):
    from review.team.rounds import RoundSpec, create_round

    s = open_store(db_path)
    rid = create_round(s, RoundSpec("Speed", "criteria@trajectory", stratify_by="none",
                                    blinding="suggest"), ensure_reviewer(s, "Ada Admin", role="admin"))
    s.close()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = REVIEWER
    at.run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)  # chosen on the page, after the app opened
    at.run()
    uid = at.query_params["item"]
    action_button(at, "rv_met").click().run()  # the judges are on screen in a 'suggest' round
    fresh = open_page("pages/trajectories.py", item=uid)  # later, in free review (reveal after commit)
    action_button(fresh, "rv_commit").click().run()
    assert not fresh.exception
    got = [(a[2], json.loads(a[5])["blinding"]) for a in my_annotations(db_path)]
    s = open_store(db_path)
    phases = [r[0] for r in s.query(
        "SELECT a.phase FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE r.name = ?",
        (REVIEWER,))]
    s.close()
    assert got and phases == ["after_reveal"]


def test_a_conversation_graded_in_part_says_how_far(db_path):
    at = open_page("pages/graded.py", item=COMPLETION_UID)
    assert "not yet graded by you" in texts(at)
    action_button(at, "rv_met").click().run()
    action_button(at, "rv_commit").click().run()
    assert not at.exception
    assert "in progress: 1 of 3 graded by you" in texts(at)


def test_after_a_reload_the_keys_go_on_at_the_first_open_criterion(db_path):
    """Verdicts picked on criteria 1 and 2, then the tab reloaded: the restored drafts
    keep their answers and the next key answers criterion 3 (it went back to 1)."""
    at = open_page("pages/trajectories.py", item=KB_UID)
    action_button(at, "rv_met").click().run()
    action_button(at, "rv_not_met").click().run()
    fresh = open_page("pages/trajectories.py", item=KB_UID)  # a new session: the reload
    assert "Your uncommitted verdicts were restored" in texts(fresh)
    action_button(fresh, "rv_cannot").click().run()
    drafts = rows(db_path, "SELECT q.key, d.value FROM drafts d JOIN questions q ON q.id = d.question_id"
                           " WHERE d.target = '' ORDER BY q.id")
    assert [value for _, value in drafts] == ["met", "not_met", "cannot_assess"]


def test_a_step_mark_begun_and_left_unsaved_is_shown_on_the_run(db_path):
    from review.reviewing.criteria import step_question_id
    from review.reviewing.drafts import save_step_draft
    from review.team.reviewers import find_reviewer

    with open_store(db_path) as s:
        me = find_reviewer(s, REVIEWER)
        save_step_draft(s, me, item_id(db_path, KB_UID), step_question_id(s), 4, "wrong_tool", 2, None)
    at = open_page("pages/trajectories.py", item=KB_UID, step="5")
    assert "1 unsaved mark: step 4 (M saves)" in texts(at)


def test_the_criteria_come_with_what_the_task_requires(demo_copy, monkeypatch):
    """'Did the agent reach the task's reference diagnosis?' can only be answered
    with the reference diagnosis (and the required tools and parameters) in view:
    each under the gate that asks about it."""
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    with open_store(demo_copy) as s:
        ensure_reviewer(s, REVIEWER)
    at = open_app("pages/trajectories.py", REVIEWER, item="kb:demo/r1/kb-demo-001__atlas-clinician")
    text = texts(at)
    gates = {"reference diagnosis?": "Reference diagnosis: stable angina",
             "tool the task requires?": "Required tools: check_vitals; order_test; refer",
             "parameters the task requires?": "prescribe: drug glyceryl trinitrate spray, dose "
                                              "400 micrograms, route sublingual"}
    captions = [shown(c.value) for c in at.caption]
    for gate, need in gates.items():
        assert gate in text and any(need in c for c in captions), gate


def test_a_reviewer_blind_to_the_agent_reads_its_name_on_no_step(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Blind", "general practice", "GP")
    s.close()
    at = open_app("pages/trajectories.py", "Dr. Blind", step="6")
    page = texts(at)
    assert "step 6 of" in page and "agent run" in page
    assert "atlas-clinician" not in page and "brisk-clinician" not in page
