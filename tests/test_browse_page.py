"""The Browse screen under Streamlit's AppTest: no browser, the real app script."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from review.browse import BrowseQuery, browse, facets, saved_views, tag_history
from review.workspace import open_store
from tests.browse_data import REVIEWER, add_trajectories
from tests.conftest import ROOT

BROWSE = "pages/browse.py"
@pytest.fixture
def db_path(demo_copy):
    add_trajectories(demo_copy)
    return demo_copy


@pytest.fixture
def app(db_path, monkeypatch):
    """The Browse page, opened as the test reviewer."""
    monkeypatch.setenv("CARELENS_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = REVIEWER
    at.run()
    at.switch_page(BROWSE)
    return at


def texts(at) -> str:
    """The page's Markdown with the escaping backslashes taken out."""
    return "\n".join(m.value for m in at.markdown).replace("\\", "")


def total_shown(at) -> int:
    line = next(m.value for m in at.markdown if m.value.startswith("**") and " item" in m.value)
    return int(line.split("**")[1].replace(",", ""))


def expected_total(db_path, q: BrowseQuery) -> int:
    s = open_store(db_path)
    try:
        return browse(s, q).total
    finally:
        s.close()


def test_search_then_two_facets_put_the_view_in_the_url(app, db_path):
    app.run()
    assert not app.exception
    app.text_input(key="browse:q").input("emergency").run()
    assert not app.exception
    assert app.query_params["q"] == "emergency"
    assert "**emergency**" in texts(app)
    assert total_shown(app) == expected_total(db_path, BrowseQuery(text="emergency"))
    app.multiselect(key="browse:models").select("aster-7b · unprompted").run()
    app.button_group(key="browse:rounds").select("2").run()
    assert not app.exception
    q = BrowseQuery.from_params(dict(app.query_params))
    assert (q.text, q.models, q.rounds) == ("emergency", ("aster-7b · unprompted",), (2,))
    assert total_shown(app) == expected_total(db_path, q)
    # the facet still offers the other models, with their counts
    options = app.multiselect(key="browse:models").options
    assert any(o.startswith("borealis-large (") for o in options)


def test_a_link_opens_the_same_view(app, db_path):
    for key, value in (("q", "emergency"), ("model", "aster-7b"), ("item_kind", "response")):
        app.query_params[key] = value
    app.run()
    assert not app.exception
    assert app.text_input(key="browse:q").value == "emergency"
    assert app.multiselect(key="browse:models").value == ["aster-7b"]
    assert total_shown(app) == expected_total(
        db_path, BrowseQuery(text="emergency", models=("aster-7b",), kinds=("response",)))


def test_tag_a_step_found_by_search_then_take_the_tag_off(app, db_path):
    app.query_params["q"] = '"troponin came back normal"'
    app.run()
    assert not app.exception and total_shown(app) == 1
    s = open_store(db_path)
    run_id = s.scalar("SELECT id FROM items WHERE kind = 'trajectory' AND uid NOT LIKE 'kb:demo/%'"
                      " ORDER BY id LIMIT 1")  # the first run add_trajectories imported
    s.close()
    assert "in step 7" in texts(app)
    app.button(key=f"browse:tag_open:{run_id}").click().run()  # the item's Tag dialog
    assert app.selectbox(key=f"browse:tag_where:{run_id}").value == "step:7"
    app.selectbox(key=f"browse:tag_name:{run_id}").set_value("fabricated evidence")
    app.text_input(key=f"browse:tag_note:{run_id}").input("no troponin was ever ordered")
    app.button(key=f"browse:tag_add:{run_id}").click().run()
    assert not app.exception
    s = open_store(db_path)
    events = [(e.tag, e.target, e.added, e.by) for e in tag_history(s, run_id)]
    s.close()
    assert events == [("fabricated evidence", "step:7", True, REVIEWER)]
    app.button(key=f"browse:tag_open:{run_id}").click().run()
    app.button(key=f"browse:untag:{run_id}:fabricated evidence:step:7").click().run()
    s = open_store(db_path)
    assert [e.added for e in tag_history(s, run_id)] == [True, False]
    s.close()


def test_side_by_side_and_saving_the_view(app, db_path):
    app.query_params["q"] = '"left arm"'
    app.query_params["item_kind"] = "prefix"
    app.run()
    s = open_store(db_path)
    prefix = s.scalar("SELECT id FROM items WHERE uid = 'demo_case_0003_r02'")
    s.close()
    app.button(key=f"browse:side:{prefix}").click().run()
    assert not app.exception
    assert app.query_params["side"] == "demo_case_0003_r02"
    shown = texts(app)
    assert "**Side by side**" in shown and "aster-7b" in shown and "cobalt-mini" in shown
    assert not [t for t in app.text_input if t.label == "Save this view as"]  # the tab not open
    app.session_state["browse:tab"] = "Save and share"  # only the tab on screen is drawn
    app.run()
    form_input = next(t for t in app.text_input if t.label == "Save this view as")
    form_input.input("left arm, prefixes")
    next(b for b in app.button if b.label == "Save view").click().run()
    assert not app.exception
    s = open_store(db_path)
    views = {v.name: v.query for v in saved_views(s)}
    s.close()
    assert views["left arm, prefixes"] == BrowseQuery(text='"left arm"', kinds=("prefix",),
                                                      side="demo_case_0003_r02")


def test_compare_two_raters_and_pick_a_disagreement(app, db_path):
    app.run()
    app.selectbox(key="browse:rater_a").set_value("demo:mapper@v1").run()
    app.selectbox(key="browse:rater_b").set_value("parent:carebench-gold").run()
    assert not app.exception
    s = open_store(db_path)
    cells = facets(s, BrowseQuery(rater_a="demo:mapper@v1", rater_b="parent:carebench-gold"))["pair"]
    s.close()
    disagreement = next(v for v in cells.values if not v.label.endswith("(agree)"))
    pair = app.selectbox(key="browse:pair")
    assert f"{disagreement.label} ({disagreement.count})" in pair.options
    pair.select(disagreement.value).run()
    assert not app.exception
    q = BrowseQuery.from_params(dict(app.query_params))
    assert q.rater_a == "demo:mapper@v1" and q.a_said and q.b_said and q.a_said != q.b_said
    assert total_shown(app) == expected_total(db_path, q)


@pytest.mark.parametrize("raw", ['"', "NEAR((", "-", "*", "a OR OR b", "<script>x</script>"])
def test_hostile_searches_show_no_error(app, raw):
    app.run()
    app.text_input(key="browse:q").input(raw).run()
    assert not app.exception
    assert "<script>" not in texts(app)


def app_as(db_path, monkeypatch, name: str, role: str = "reviewer") -> AppTest:
    """The app for `name` (added with `role` if new), after its first run."""
    from review.team.reviewers import ensure_reviewer

    with open_store(db_path) as s:
        ensure_reviewer(s, name, role=role)
    monkeypatch.setenv("CARELENS_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = name
    at.run()
    return at


def import_a_new_case(db_path) -> None:
    """Another user imports one new prefix."""
    from review.datasets.sources import import_file

    new_case = db_path.parent / "new_case.jsonl"
    new_case.write_text('{"prefix_id": "late_case_r01", "input_patient_turns": ["A new cough."],'
                        ' "gold_label": "0A_NO_ESCALATION_INFO_NEEDED"}\n')
    with open_store(db_path) as s:
        import_file(s, new_case)


def test_a_reviewer_with_blind_work_left_chooses_to_see_every_raters_labels(demo_copy, monkeypatch):
    """Browse and Agreement show gold and machine labels: a reviewer with items still
    waiting for a blind answer is told, and sees them only by choosing to (recorded)."""
    from review.reviewing.blinding import LABELS_OPENED

    at = app_as(demo_copy, monkeypatch, "Dr. New Blind")
    at.switch_page(BROWSE).run()
    assert not at.exception
    assert any("still waiting for your blind answer" in w.value for w in at.warning)
    assert not at.text_input  # nothing of the screen behind it
    at.switch_page("pages/agreement.py").run()
    assert any("still waiting for your blind answer" in w.value for w in at.warning)
    at.button(key="labels_gate_open").click().run()
    assert not at.exception and not at.warning
    with open_store(demo_copy) as s:
        assert s.query_one("SELECT actor, json_extract(new, '$.screen') FROM audit_log WHERE action = ?",
                           (LABELS_OPENED,))[:] == ("Dr. New Blind", "agreement")
    at.switch_page(BROWSE).run()  # asked once ...
    assert not any("blind answer" in w.value for w in at.warning)
    # ... until items they were not asked about arrive: a new case is imported.
    import_a_new_case(demo_copy)
    at.switch_page(BROWSE).run()
    assert any("1 item added since you last chose to see the labels is waiting for your blind answer"
               in w.value for w in at.warning)
    at.button(key="labels_gate_open").click().run()
    assert not at.warning
    with open_store(demo_copy) as s:
        assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE action = ?", (LABELS_OPENED,)) == 2
    lead = app_as(demo_copy, monkeypatch, "Dr. Lead", role="adjudicator")
    lead.switch_page(BROWSE).run()
    assert not any("blind answer" in w.value for w in lead.warning)  # adjudicators are not asked


def test_the_exports_of_every_raters_labels_ask_first_too(demo_copy, monkeypatch):
    at = app_as(demo_copy, monkeypatch, "Dr. Export Blind")
    at.switch_page("pages/data.py").run()
    assert not at.exception
    assert not at.get("download_button")  # the files hold every rater's labels ...
    assert any("still waiting for your blind answer" in w.value for w in at.warning)
    assert at.get("file_uploader")  # ... the rest of the screen is there
    at.button(key="labels_gate_open").click().run()
    assert len(at.get("download_button")) == 3


def test_items_imported_while_the_warning_is_up_are_asked_about(demo_copy, monkeypatch):
    """Choosing to see the labels answers the warning that was on screen: an item
    imported between the warning and the click is asked about afterwards."""
    at = app_as(demo_copy, monkeypatch, "Dr. New Blind")
    at.switch_page(BROWSE).run()
    assert any("still waiting for your blind answer" in w.value for w in at.warning)
    import_a_new_case(demo_copy)  # meanwhile
    at.button(key="labels_gate_open").click().run()
    at.switch_page(BROWSE).run()
    assert any("1 item added since you last chose to see the labels is waiting" in w.value
               for w in at.warning)


def test_with_nothing_left_to_answer_blind_the_labels_open_on_the_record(tmp_path, monkeypatch):
    from review.reviewing.blinding import LABELS_OPENED
    """A reviewer who has answered every item in a blind round is not asked
    before Browse shows every rater's labels; but the opening is recorded, so
    an answer they change afterwards is not recorded as a blind one."""
    from review.reviewing.commit import commit_answer
    from review.reviewing.items import load_item
    from review.team.reviewers import ensure_reviewer
    from review.team.rounds import RoundSpec, create_round, reserve_next_item
    from tests.helpers import write_prefixes

    path = tmp_path / "blind.db"
    s = open_store(path)
    write_prefixes(s, 3)
    rid = create_round(s, RoundSpec("Blind", "carebench.escalation_needed", reviewers_per_item=1,
                                    blinding="blind"), ensure_reviewer(s, "Jordan Lee", role="admin"))
    me = ensure_reviewer(s, "Dr. Blind")
    done = []
    while (x := reserve_next_item(s, rid, me)) is not None:
        commit_answer(s, me, x, load_item(s, x).question_id, "0A", mode="blind", round_id=rid)
        done.append(x)
    s.close()
    at = app_as(path, monkeypatch, "Dr. Blind")
    at.switch_page(BROWSE).run()
    assert not at.exception and not any("blind answer" in w.value for w in at.warning)
    with open_store(path) as s:
        assert s.query_one("SELECT actor, json_extract(new, '$.unanswered') FROM audit_log"
                           " WHERE action = ?", (LABELS_OPENED,))[:] == ("Dr. Blind", 0)
        new = commit_answer(s, me, done[0], load_item(s, done[0]).question_id, "1B", mode="blind",
                            round_id=rid)
        assert s.scalar("SELECT phase FROM annotations WHERE id = ?", (new,)) == "after_reveal"
    at.switch_page(BROWSE).run()  # seen since: not recorded twice
    with open_store(path) as s:
        assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE action = ?", (LABELS_OPENED,)) == 1


def test_an_adjudicator_who_also_reviews_opens_the_labels_on_the_record(demo_copy, monkeypatch):
    """Adjudicators are not asked before Browse shows every rater's labels, but the
    opening is recorded: an answer they give afterwards is not a blind one."""
    from review.reviewing.blinding import LABELS_OPENED
    from review.reviewing.commit import commit_answer
    from review.reviewing.items import find_item_id, load_item
    from review.team.reviewers import ensure_reviewer

    at = app_as(demo_copy, monkeypatch, "Dr. Senior", role="adjudicator")
    at.switch_page(BROWSE).run()
    assert not at.exception and not any("blind answer" in w.value for w in at.warning)
    with open_store(demo_copy) as s:
        assert s.scalar("SELECT COUNT(*) FROM audit_log WHERE action = ? AND actor = 'Dr. Senior'",
                        (LABELS_OPENED,)) == 1
        senior = ensure_reviewer(s, "Dr. Senior")
        item = load_item(s, find_item_id(s, "demo_case_0001_r01::aster-7b::unprompted@demo-1"))
        aid = commit_answer(s, senior, item.id, item.question_id, "0A_NO_ESCALATION_INFO_NEEDED")
        assert s.scalar("SELECT phase FROM annotations WHERE id = ?", (aid,)) == "after_reveal"
