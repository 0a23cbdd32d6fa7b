"""The Trajectories screen keeps a clinician's place and work: a step mark begun
is a draft that a new session brings back, a link to a step opens that step,
the next run opens at its first step, every run can be flagged, and a subagent
run is read in place (AppTest, the real app script)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review.datasets.sources import import_file
from review.reviewing.criteria import item_questions
from review.reviewing.names import item_in_address
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, open_app, rows, shown
from tests.review_fixtures import HARBOR_UID, KB_UID, import_all
from tests.test_sources_trajectories import atif_doc, make_trial

REVIEWER = "Dr. Place Keeper"
NOTE = "never asked about drug allergies before prescribing"


@pytest.fixture
def db_path(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "screen.db"
    s = open_store(path)
    import_all(s, tmp_path / "files")
    ensure_reviewer(s, REVIEWER)
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(path))
    return path


def open_page(page: str = "pages/trajectories.py", **params: str) -> AppTest:
    """A new browser session (a reload, a closed tab, another browser) on `page`."""
    params = {"reviewer": REVIEWER, **params}  # a test may name another reviewer
    return open_app(page, params.pop("reviewer"), **params)


def step_drafts(path: Path) -> list[tuple]:
    return rows(path, "SELECT d.target, d.value, d.severity, d.rationale FROM drafts d"
                      " JOIN raters r ON r.id = d.rater_id WHERE r.name = ? AND d.target != ''"
                      " ORDER BY d.target", (REVIEWER,))


def note_box(at: AppTest, step: int):
    return next(t for t in at.text_input if t.key and t.key.startswith("trj_note:")
                and t.key.endswith(f":{step}"))


def shown_step(at: AppTest) -> str:
    return re.search(r"step (\d+) of \d+", shown("\n".join(m.value for m in at.markdown))).group(1)


def qp(at: AppTest, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


# -- a step mark begun is a draft ------------------------------------------------------

def test_a_step_mark_begun_comes_back_in_a_new_session_and_goes_once_saved(db_path):
    at = open_page(item=KB_UID, step="3")
    action_button(at, "trj_errbtn", "missed_essential_question").click().run()
    action_button(at, "trj_sevbtn", "4").click().run()
    note_box(at, 3).input(NOTE).run()
    assert step_drafts(db_path) == [("step:3", "missed_essential_question", 4, NOTE)]
    s = open_store(db_path)
    ensure_reviewer(s, "Dr. Other")
    s.close()
    other = open_page(reviewer="Dr. Other", item=KB_UID, step="3")
    assert action_button(other, "trj_errbtn", "missed_essential_question").proto.type == "secondary"
    assert note_box(other, 3).value == ""  # a draft is its reviewer's own

    fresh = open_page(item=KB_UID, step="3")  # the tab was closed: a new session
    assert note_box(fresh, 3).value == NOTE
    assert action_button(fresh, "trj_errbtn", "missed_essential_question").proto.type == "primary"
    assert action_button(fresh, "trj_sevbtn", "4").proto.type == "primary"
    assert any("Your unsaved mark on step 3 was restored" in c.value for c in fresh.caption)
    action_button(fresh, "trj_save_mark").click().run()
    assert not fresh.exception
    marks = rows(db_path, "SELECT a.target, a.value, json_extract(a.extra, '$.severity'), a.rationale"
                          " FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE r.name = ?",
                 (REVIEWER,))
    assert marks == [("step:3", "missed_essential_question", 4, NOTE)]
    assert step_drafts(db_path) == []  # saving the mark removed its draft
    assert not any("was restored" in c.value for c in fresh.caption)


def test_a_step_mark_brought_back_to_the_saved_one_leaves_no_draft(db_path):
    at = open_page(item=KB_UID, step="3")
    action_button(at, "trj_errbtn", "no_error").click().run()
    action_button(at, "trj_save_mark").click().run()
    action_button(at, "trj_errbtn", "unsafe_action").click().run()
    assert step_drafts(db_path) == [("step:3", "unsafe_action", None, None)]
    action_button(at, "trj_errbtn", "no_error").click().run()  # back to what is saved
    assert step_drafts(db_path) == []
    fresh = open_page(item=KB_UID, step="3")
    assert action_button(fresh, "trj_errbtn", "no_error").proto.type == "primary"  # the saved mark
    assert action_button(fresh, "trj_save_mark").disabled


# -- the step in the URL ---------------------------------------------------------------

def test_a_link_to_a_step_of_a_run_already_open_opens_that_step(db_path):
    at = open_page(item=KB_UID, step="4")
    assert shown_step(at) == "4"
    action_button(at, "trj_prev").click().run()  # the page's own moves are kept
    assert shown_step(at) == "3" and qp(at, "step") == "3"
    # Elsewhere in the app (Adjudicate's "Open the run at this step") a link asks for step 2.
    at.switch_page("pages/review.py").run()
    at.query_params.update(item=KB_UID, step="2")
    at.switch_page("pages/trajectories.py").run()
    assert not at.exception
    assert shown_step(at) == "2" and qp(at, "step") == "2"
    action_button(at, "trj_next").click().run()
    assert shown_step(at) == "3" and qp(at, "step") == "3"


def test_the_next_run_of_a_round_opens_at_its_first_step(db_path):
    s = open_store(db_path)
    rid = create_round(s, RoundSpec("Runs", "criteria@trajectory", reviewers_per_item=1,
                                    stratify_by="none"), ensure_reviewer(s, "Ada Admin", role="admin"))
    s.close()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = REVIEWER
    at.run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)  # chosen on the page, after the app opened
    at.run()
    first = qp(at, "item")
    action_button(at, "trj_next").click().run()
    action_button(at, "trj_next").click().run()
    assert shown_step(at) == "3"
    s = open_store(db_path)
    run = item_in_address(s, first)  # opaque while blind to the agent: item-<n>
    asked = item_questions(s, run)
    s.close()
    for q in asked:
        if q.kind == "criterion":
            action_button(at, "rv_met").click().run()
        else:  # an outcome verdict (e.g. CliniCARE's)
            at.segmented_control(key=f"rv:{run}:{q.id}").set_value("cannot_assess").run()
    action_button(at, "rv_commit").click().run()
    at.button(key="trj_next_round").click().run()
    assert not at.exception and qp(at, "item") != first
    assert shown_step(at) == "1" and qp(at, "step") == "1"


def test_a_change_of_filters_opens_the_queue_at_its_first_step(db_path):
    at = open_page(item=KB_UID, step="3")
    assert shown_step(at) == "3"
    at.selectbox(key="trj_dataset").set_value("harbor").run()
    assert not at.exception
    harbor = open_store(db_path)
    assert qp(at, "item") == f"item-{item_in_address(harbor, HARBOR_UID)}"
    harbor.close()
    assert shown_step(at) == "1"


# -- flag ------------------------------------------------------------------------------

def test_a_run_without_criteria_can_be_flagged(tmp_path, monkeypatch):
    job = tmp_path / "plain-job"
    make_trial(job, "trial-plain", atif=atif_doc(2))  # no verifier rewards: no criteria
    path = tmp_path / "plain.db"
    s = open_store(path)
    import_file(s, job, "harbor")
    ensure_reviewer(s, REVIEWER)
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(path))
    at = open_page(item="harbor:trial-plain__abc")
    assert any("no criteria to answer" in c.value for c in at.caption)
    assert action_button(at, "rv_flag").proto.shortcut.upper() == "F"
    action_button(at, "rv_flag").click().run()
    assert not at.exception and action_button(at, "rv_flag").label == "Unflag"
    assert rows(path, "SELECT f.raised FROM flags f JOIN items i ON i.id = f.item_id"
                      " WHERE i.uid = ?", ("harbor:trial-plain__abc",)) == [(1,)]


# -- a subagent run --------------------------------------------------------------------

def test_a_subagent_run_stays_open_in_place_while_the_run_is_reviewed(db_path):
    at = open_page(item=HARBOR_UID, step="3")
    opener = next(b for b in at.button if shown(b.label).startswith("Open subagent run child-1"))
    opener.click().run()
    child = "Child agent: the chart shows no fever."
    assert child in shown("\n".join(m.value for m in at.markdown))
    action_button(at, "rv_met").click().run()  # Y answers the run under review, in plain view
    assert not at.exception
    assert child in shown("\n".join(m.value for m in at.markdown))  # still open, not hidden
    closer = next(b for b in at.button if shown(b.label).startswith("Close subagent run child-1"))
    closer.click().run()
    assert child not in shown("\n".join(m.value for m in at.markdown))
