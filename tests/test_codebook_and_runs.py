"""Codebook edits reach every screen that shows labels, are saved safely when
admins edit at once, and are refused when they change nothing; the agent-run
screen reads the odd fields an importer accepts; a cited evidence id is found
only as a whole id."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
from streamlit.testing.v1 import AppTest

from codebook import CodebookError
from review.datasets.sources import InputError, import_file
from review.reviewing.commit import mark_step
from review.reviewing.criteria import evidence_steps, find_item, item_questions
from review.reviewing.trajectory import trajectory_payload, trajectory_view
from review.team.codebook_versions import codebook_history, current_codebook, edit_label
from review.team.reviewers import ensure_reviewer
from review.text import safe_markdown
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, adjudicate_screen, adjudication_db, shown
from tests.review_fixtures import KB_UID, import_all
from tests.test_criteria import CLINICARE_UID
from tests.test_sources_trajectories import atif_doc, make_trial

KEY = "carebench-escalation"
STEPS = "trajectory-errors"


def _app(db, monkeypatch, reviewer: str) -> AppTest:
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = reviewer
    return at


def _before_writing(store, action, monkeypatch) -> None:
    """Run `action` once, just before `store` opens its next write transaction:
    another admin's save landing between an edit's reads and its write."""
    real = store.transaction
    done = []

    @contextmanager
    def once(*args, **kwargs):
        if not done:
            done.append(1)
            action()
        with real(*args, **kwargs) as conn:
            yield conn

    monkeypatch.setattr(store, "transaction", once)


# -- 1. the wording in force is the wording shown ----------------------------------------

@pytest.fixture
def runs(tmp_path):
    """The review fixtures (agent runs) and an admin."""
    db = tmp_path / "runs.db"
    s = open_store(db)
    import_all(s, tmp_path / "files")
    admin = ensure_reviewer(s, "Dr. Admin", role="admin")
    yield db, s, admin
    s.close()


def test_the_trajectory_screen_shows_the_step_error_wording_in_force(runs, monkeypatch):
    db, s, admin = runs
    version = edit_label(s, admin, STEPS, "unsupported_claim", {"short": "Claim without evidence",
                         "definition": "Says what no step showed."}, "plainer wording")
    aid = mark_step(s, admin, find_item(s, KB_UID), 4, "unsupported_claim", 3)
    assert s.scalar("SELECT codebook_version FROM annotations WHERE id = ?", (aid,)) == version
    at = _app(db, monkeypatch, "Dr. Admin")
    at.query_params["item"] = KB_UID
    at.query_params["step"] = "4"
    at.run()
    at.switch_page("pages/trajectories.py").run()
    assert not at.exception
    button = action_button(at, "trj_errbtn", "unsupported_claim")
    assert button.label == "Claim without evidence"
    # Codebook wording is shown as written: escaped for the Markdown a help text is read as.
    assert button.help == safe_markdown("Says what no step showed.")
    assert any("your mark" in m.value and "Claim without evidence" in shown(m.value)
               for m in at.markdown)


def test_the_adjudicate_screen_shows_the_step_error_wording_in_force(tmp_path, monkeypatch):
    path, s, a, b, run = adjudication_db(tmp_path)
    admin = ensure_reviewer(s, "Dr. Admin", role="admin")
    edit_label(s, admin, STEPS, "unsafe_action", {"short": "Harmful act"}, "plainer wording")
    mark_step(s, a, run, 3, "unsafe_action", 5)
    mark_step(s, b, run, 3, "no_error")
    s.close()
    at = adjudicate_screen(path, monkeypatch, "steps")
    page = "\n".join(shown(m.value) for m in at.markdown)
    assert "Reviewer A · Harmful act · severity 5" in page, page


def test_a_runs_verdict_question_carries_the_codebook_in_force(runs):
    _, s, admin = runs
    qs = item_questions(s, find_item(s, CLINICARE_UID))
    verdict = next(q for q in qs if q.kind == "labelset")
    code = verdict.book.codes[0]
    version = edit_label(s, admin, verdict.codebook, code, {"short": "Yes, it does"}, "wording")
    verdict = next(q for q in item_questions(s, find_item(s, CLINICARE_UID)) if q.kind == "labelset")
    assert (verdict.book.version, verdict.book.label(code).short) == (version, "Yes, it does")


# -- 2. admins editing at once -------------------------------------------------------------

@pytest.fixture
def book(tmp_path):
    s = open_store(tmp_path / "t.db")
    a = ensure_reviewer(s, "Dr. A", role="admin")
    b = ensure_reviewer(s, "Dr. B", role="admin")
    yield s, a, b, current_codebook(s, KEY).codes
    s.close()


def test_an_edit_saved_meanwhile_is_kept_in_the_next_version(book, tmp_path, monkeypatch):
    s, a, b, codes = book

    def a_saves():
        other = open_store(tmp_path / "t.db")
        edit_label(other, a, KEY, codes[0], {"short": "Ask a question first"}, "A's change")
        other.close()

    _before_writing(s, a_saves, monkeypatch)
    assert edit_label(s, b, KEY, codes[1], {"short": "Self-care at home"}, "B's change") == "1.3"
    newest = current_codebook(s, KEY)
    assert newest.label(codes[1]).short == "Self-care at home"
    assert newest.label(codes[0]).short == "Ask a question first", "Dr. A's edit was lost"
    assert [v.version for v in codebook_history(s, KEY)] == ["1.3", "1.2", "1.1"]


def test_saves_racing_for_one_version_number_all_land(tmp_path, book):
    s, a, b, codes = book
    ready = threading.Barrier(len(codes))
    errors: list[Exception] = []

    def save(who, code):
        st = open_store(tmp_path / "t.db")
        real = st.transaction

        @contextmanager
        def after_everyone_read(*args, **kwargs):
            ready.wait(timeout=10)  # every save has begun before any writes
            with real(*args, **kwargs) as conn:
                yield conn

        st.transaction = after_everyone_read
        try:
            edit_label(st, who, KEY, code, {"short": f"New words for {code}"}, "change")
        except Exception as exc:  # noqa: BLE001 - the test reports whatever went wrong
            errors.append(exc)
        finally:
            st.close()

    threads = [threading.Thread(target=save, args=((a, b)[i % 2], code))
               for i, code in enumerate(codes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(v.version for v in codebook_history(s, KEY)) == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    newest = current_codebook(s, KEY)
    assert [newest.label(c).short for c in codes] == [f"New words for {c}" for c in codes]


def test_a_save_on_a_version_edited_meanwhile_is_refused(book):
    s, a, b, codes = book
    assert edit_label(s, a, KEY, codes[0], {"short": "A words"}, "A", base_version="1.1") == "1.2"
    with pytest.raises(CodebookError, match=r"edited meanwhile by Dr\. A .*reload to see it"):
        edit_label(s, b, KEY, codes[1], {"short": "B words"}, "B", base_version="1.1")
    assert [v.version for v in codebook_history(s, KEY)] == ["1.2", "1.1"]
    assert edit_label(s, b, KEY, codes[1], {"short": "B words"}, "B", base_version="1.2") == "1.3"


def _codebook_page(db, monkeypatch) -> AppTest:
    at = _app(db, monkeypatch, "Jordan Lee")  # an admin of the demo
    at.run()
    at.switch_page("pages/codebook.py").run()
    assert not at.exception
    return at


def _save(at: AppTest, note: str, **fields) -> AppTest:
    for label, value in fields.items():
        next(t for t in [*at.text_input, *at.text_area] if t.label == label).input(value)
    next(t for t in at.text_input if t.label == "Change note").input(note)
    next(b for b in at.button if b.label == "Save as a new version").click()
    return at.run()


def test_the_codebook_screen_saves_an_edit_and_says_so(demo_copy, monkeypatch):
    at = _save(_codebook_page(demo_copy, monkeypatch), "shorter", **{"Short name": "Urgent care"})
    assert not at.exception
    assert any("Saved as version 1.2" in shown(x.value) for x in at.success), [e.value for e in at.error]
    with open_store(demo_copy) as s:
        assert current_codebook(s, KEY).version == "1.2"


def test_the_codebook_screen_refuses_a_save_on_a_version_edited_meanwhile(demo_copy, monkeypatch):
    at = _codebook_page(demo_copy, monkeypatch)
    code = next(x for x in at.selectbox if x.label == "Label").value
    with open_store(demo_copy) as s:  # another admin saves while this form is open
        other = ensure_reviewer(s, "Dr. Other", role="admin")
        edit_label(s, other, KEY, code, {"definition": "Their definition."}, "their change")
    at = _save(at, "my change", **{"Short name": "My words"})
    assert not at.exception
    assert any("edited meanwhile by Dr. Other" in shown(e.value) and "reload to see it" in e.value
               for e in at.error), [e.value for e in at.error]
    with open_store(demo_copy) as s:
        assert [v.version for v in codebook_history(s, KEY)] == ["1.2", "1.1"]
        assert current_codebook(s, KEY).label(code).definition == "Their definition."


# -- 3. an edit that changes nothing ----------------------------------------------------------

def test_an_edit_that_changes_nothing_is_refused(book):
    s, a, _, codes = book
    label = current_codebook(s, KEY).label(codes[1])
    for changes in ({}, {"short": label.short, "rules": list(label.rules)}):
        with pytest.raises(CodebookError, match="nothing changed"):
            edit_label(s, a, KEY, codes[1], changes, "no change")
    assert [v.version for v in codebook_history(s, KEY)] == ["1.1"]
    edit_label(s, a, KEY, codes[1], {"short": label.short, "example": "A new invented case."}, "one")
    entry = s.query_one("SELECT old, new FROM audit_log WHERE action = 'codebook_edit'")
    assert '"example"' in entry["new"] and '"short"' not in entry["new"]  # only what changed


def test_the_codebook_screen_says_when_nothing_changed(demo_copy, monkeypatch):
    at = _save(_codebook_page(demo_copy, monkeypatch), "saved without a change")
    assert not at.exception
    assert any("nothing changed" in e.value for e in at.error), [e.value for e in at.error]
    with open_store(demo_copy) as s:
        assert [v.version for v in codebook_history(s, KEY)] == ["1.1"]


# -- 4, 5. fields of a run the importer accepts ------------------------------------------------

def test_odd_but_clear_run_fields_are_read_as_meant():
    doc = atif_doc(3)
    doc["agent"]["version"] = 2
    doc["final_metrics"] = {"total_cost_usd": "0.0123", "total_prompt_tokens": "300",
                            "total_completion_tokens": 61.0}
    view = trajectory_view(trajectory_payload(doc))
    assert view.agent["version"] == "2"
    tl = view.timeline
    assert (tl.cost_usd, tl.prompt_tokens, tl.completion_tokens, tl.unread) == (0.0123, 300, 61, {})


def test_a_run_total_that_spells_no_number_is_kept_and_the_steps_stand_in():
    doc = atif_doc(3)
    doc["final_metrics"] = {"total_cost_usd": "n/a", "total_prompt_tokens": "lots"}
    tl = trajectory_view(trajectory_payload(doc)).timeline
    assert tl.cost_usd == pytest.approx(0.003) and tl.prompt_tokens == 300
    assert tl.unread == {"total_cost_usd": "n/a", "total_prompt_tokens": "lots"}


def test_a_null_total_cost_falls_back_to_the_steps():
    doc = atif_doc(3)
    doc["final_metrics"] = {"total_prompt_tokens": None, "total_cost_usd": None}
    tl = trajectory_view(trajectory_payload(doc)).timeline
    assert tl.prompt_tokens == 300
    assert tl.cost_usd == pytest.approx(0.003)


def _run_screen(tmp_path, monkeypatch, doc) -> AppTest:
    make_trial(tmp_path / "job", "trial-1", atif=doc, rewards={"reward": 1.0})
    db = tmp_path / "t.db"
    with open_store(db) as s:
        import_file(s, tmp_path / "job", "harbor")
        ensure_reviewer(s, "Dr. Runs")
        uid = s.scalar("SELECT uid FROM items WHERE kind = 'trajectory'")
    at = _app(db, monkeypatch, "Dr. Runs")
    at.query_params["item"] = uid
    at.run()
    at.switch_page("pages/trajectories.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_trajectory_screen_shows_a_numeric_agent_version(tmp_path, monkeypatch):
    doc = atif_doc()
    doc["agent"]["version"] = 2
    at = _run_screen(tmp_path, monkeypatch, doc)
    # A version that is a number (ATIF allows it) breaks nothing; while the reviewer is
    # blind to the agent the details line names neither it nor its version (issue 19).
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert captions and not any("fake-agent" in c for c in captions), captions


@pytest.mark.parametrize("cost,shows", [("0.0123", "$0.0123"), ("n/a", "$0.0030"), (None, "$0.0030")])
def test_the_trajectory_screen_shows_a_run_cost_given_as_text_or_null(tmp_path, monkeypatch,
                                                                      cost, shows):
    doc = atif_doc()
    doc["final_metrics"] = {"total_cost_usd": cost, "total_prompt_tokens": "300"}
    at = _run_screen(tmp_path, monkeypatch, doc)
    summary = next(shown(c.value) for c in at.caption if "steps" in c.value and "tool calls" in c.value)
    assert shows in summary and "300 prompt" in summary
    assert ("total_cost_usd in the file is not a number: `n/a`" in summary) == (cost == "n/a")


@pytest.mark.parametrize("where,value,message", [
    ("agent.version", {"major": 2}, "agent.version: expected text or a number, got object"),
    ("final_metrics.total_cost_usd", [0.1], "final_metrics.total_cost_usd: expected a number, got list"),
    ("final_metrics.total_prompt_tokens", True,
     "final_metrics.total_prompt_tokens: expected a number, got true/false"),
])
def test_a_run_field_with_no_clear_meaning_is_refused_by_name(store, tmp_path, where, value, message):
    doc = atif_doc()
    part, key = where.split(".")
    doc.setdefault(part, {})[key] = value
    make_trial(tmp_path / "job", "trial-1", atif=doc, rewards={"reward": 1.0})
    with pytest.raises(InputError, match="job/trial-1/agent/trajectory.json: " + message):
        import_file(store, tmp_path / "job", "harbor")


# -- 6. a cited evidence id is found as a whole id -----------------------------------------------

def _answer_view(*contents: str):
    steps = [{"step_id": 1, "source": "user", "message": "Does the patient have diabetes?"}]
    for i, content in enumerate(contents, start=2):
        steps.append({"step_id": i, "source": "agent", "message": "Reading the chart.",
                      "tool_calls": [{"tool_call_id": f"c{i}", "function_name": "fhir_read",
                                      "arguments": {}}],
                      "observation": {"results": [{"source_call_id": f"c{i}", "content": content}]}})
    return trajectory_view(trajectory_payload({"schema_version": "ATIF-v1.6", "agent": {"name": "a"},
                                               "steps": steps}))


def test_a_citation_is_not_found_inside_a_longer_id():
    view = _answer_view('{"id": "obs-12", "code": "HbA1c"}', "Observation/obs-3 was read.",
                        "Last seen obs-4.", "OID 1.2.840 and obs-5b")
    found = evidence_steps(view, ["obs-1", "obs-12", "obs-3", "obs-4", "obs-5", "1.2", "1.2.840"])
    assert found == {"obs-1": [], "obs-12": [1], "obs-3": [2], "obs-4": [3], "obs-5": [],
                     "1.2": [], "1.2.840": [4]}
