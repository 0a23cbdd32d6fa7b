"""The Review screen under Streamlit's AppTest: no browser, the real script."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review.reviewing.commit import commit_answer
from review.reviewing.items import find_item_id, load_item
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, shown


@pytest.fixture
def app(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Page Test", "emergency medicine", "resident")
    s.close()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Page Test"
    return at


def rationale_box(at, item_id):
    """The Review screen's rationale box for an item (its key names the reviewer too)."""
    return next(t for t in at.text_area if t.key.startswith("rationale:")
                and t.key.endswith(f":{item_id}"))


def human_answers(path, name="Dr. Page Test"):
    s = open_store(path)
    rows = s.query("SELECT i.uid, a.value, a.phase, a.status FROM annotations a JOIN items i ON i.id = a.item_id"
                   " JOIN raters r ON r.id = a.rater_id WHERE r.name = ? ORDER BY a.id", (name,))
    s.close()
    return [tuple(r) for r in rows]


def test_without_a_reviewer_the_page_asks_who_is_reviewing(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("Choose your name in the sidebar" in i.value for i in at.info)


def test_answer_two_prefixes_and_see_the_reveal(app, demo_copy):
    app.run()
    assert not app.exception
    assert "0 of 85 answered by you" in app.get("progress")[0].proto.text
    assert app.query_params.get("item") in ("demo_case_0001_r01", ["demo_case_0001_r01"])
    action_button(app, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    assert not app.exception
    rationale_box(app, 2).input("sudden onset: red flag")
    action_button(app, "label", "1B_ESCALATION_URGENT_CARE").click().run()
    assert human_answers(demo_copy) == [
        ("demo_case_0001_r01", "0A_NO_ESCALATION_INFO_NEEDED", "blind", "answered"),
        ("demo_case_0001_r02", "1B_ESCALATION_URGENT_CARE", "blind", "answered"),
    ]
    assert "2 of 85 answered by you" in app.get("progress")[0].proto.text
    # The last answer is revealed beside the next item, but round 2's gold would
    # tell about round 3, which is next and still answered blind: it waits.
    texts = " ".join(shown(m.value) for m in app.markdown)
    assert "Your answer to Conversation 1, after the patient's 2nd message" in texts
    assert "**The reference label**" not in texts
    assert any("appear once you have answered round 3 of this case, so that round is still answered blind" in c.value for c in app.caption)
    action_button(app, "label", "1B_ESCALATION_URGENT_CARE").click().run()
    assert human_answers(demo_copy)[-1] == (
        "demo_case_0001_r03", "1B_ESCALATION_URGENT_CARE", "blind", "answered")
    # The case's last round answered: its gold, and that of the rounds before it.
    texts = " ".join(shown(m.value) for m in app.markdown)
    assert "Your answer to Conversation 1, after the patient's 3rd message" in texts
    assert "**The reference label** · :green-badge" in texts
    assert "**The reference label** · turn 1, where you said" in texts
    assert "**The reference label** · turn 2, where you said" in texts


def test_response_queue_shows_the_response_and_failures(app, demo_copy):
    app.query_params["kind"] = "response"
    app.run()
    assert not app.exception
    captions = " ".join(shown(c.value) for c in app.caption)
    assert "Model A's reply" in captions
    action_button(app, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    texts = " ".join(shown(m.value) for m in app.markdown)
    assert "The mapper, prompt v1" in texts and "The mapper, prompt v2" in texts
    # The prefix's gold waits for my own blind answer to the prefix, and I am told so.
    assert "**The reference label**" not in texts
    assert any("stays hidden until you answer the prefix" in c.value for c in app.caption)
    # Once I have answered the prefix, the gold answers another question: shown as what the
    # response should have done, not as agreeing or differing with my reading of the response.
    s = open_store(demo_copy)
    me = ensure_reviewer(s, "Dr. Page Test")
    prefix = load_item(s, find_item_id(s, "demo_case_0001_r01"))
    commit_answer(s, me, prefix.id, prefix.question_id, "1A_ESCALATION_NONURGENT_CARE")
    app.run()  # ... and the case's later rounds: round 1's gold would tell about theirs
    assert "**The reference label**" not in " ".join(shown(m.value) for m in app.markdown)
    assert any("appears once you have answered rounds 2 and 3 of this case" in c.value
               for c in app.caption)
    for later in ("demo_case_0001_r02", "demo_case_0001_r03"):
        commit_answer(s, me, find_item_id(s, later), prefix.question_id, "1A_ESCALATION_NONURGENT_CARE")
    s.close()
    app.run()
    texts = " ".join(shown(m.value) for m in app.markdown)
    assert "**The reference label** · what the reply should have done" in texts


def test_reopening_an_answered_item_and_revising_is_after_reveal(app, demo_copy):
    app.query_params["item"] = "demo_case_0001_r03"  # a case's last round: its gold shows at once
    app.run()
    action_button(app, "label", "0B_NO_ESCALATION_SELF_CARE_MONITOR").click().run()
    action_button(app, "reopen_last").click().run()
    assert not app.exception
    action_button(app, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    assert [a[1:3] for a in human_answers(demo_copy)] == [
        ("0B_NO_ESCALATION_SELF_CARE_MONITOR", "blind"), ("0A_NO_ESCALATION_INFO_NEEDED", "after_reveal")]


def test_codebook_and_data_screens_render(app, demo_copy):
    app.run()
    app.switch_page("pages/codebook.py").run()
    assert not app.exception
    # The labels in words; their codes, for researchers, on an admin's "stored as" line only.
    assert any("Urgent care" in m.value for m in app.markdown)
    assert not any("1B_ESCALATION_URGENT_CARE" in m.value for m in app.markdown)
    app.switch_page("pages/data.py").run()
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert {"Prefixes", "Responses", "Annotations"} <= set(metrics)
    s = open_store(demo_copy)
    prefixes = s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'prefix'")
    imports = s.scalar("SELECT COUNT(*) FROM imports")
    s.close()
    assert metrics["Prefixes"] == f"{prefixes:,}"
    # Graded conversations: what the Graded conversations screen can grade, not the shared prompts.
    with open_store(demo_copy) as s:
        gradable = s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'graded_conversation'"
                            " AND json_extract(payload, '$.completion') IS NOT NULL")
        assert gradable < s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'graded_conversation'")
    assert metrics["Graded conversations"] == f"{gradable:,}"
    history = app.dataframe[0].value  # the imports so far, newest first
    assert len(history) == imports > 0
    assert str(history["imported_at"].dtype).startswith("datetime64")
    # Files are often named after a model: not shown to a reviewer still blind to them.
    assert set(history["path"]) == {"(not shown while items wait for your blind answer)"}
    with open_store(demo_copy) as s:
        newest = Path(s.scalar("SELECT path FROM imports ORDER BY id DESC LIMIT 1"))
        ensure_reviewer(s, "Dr. Page Admin", role="admin")
    admin = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    admin.query_params["reviewer"] = "Dr. Page Admin"
    admin.run()
    admin.switch_page("pages/data.py").run()
    history = admin.dataframe[0].value
    assert (history["path"][0], history["folder"][0]) == (newest.name, str(newest.parent))
    assert {"n_items", "n_completed", "n_annotations"} <= set(history.columns)


def test_a_typed_rationale_comes_back_after_a_new_session(app, demo_copy):
    app.run()
    rationale_box(app, 1).input("thunderclap onset?").run()
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    fresh.query_params["reviewer"] = "Dr. Page Test"
    fresh.run()
    assert rationale_box(fresh, 1).value == "thunderclap onset?"
    assert any("Draft restored" in c.value for c in fresh.caption)
    assert human_answers(demo_copy) == []


def test_a_link_naming_an_unknown_reviewer_says_so(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Nobody `x`"
    at.run()
    assert not at.exception
    assert any("No reviewer named" in w.value and "Dr. Nobody" in w.value for w in at.sidebar.warning)


def test_a_providers_error_text_is_shown_as_written(demo_copy, monkeypatch, tmp_path):
    from review.datasets.sources import import_file
    from review.workspace import open_store
    from tests.helpers import write_jsonl

    hostile = "rate limited ![x](http://evil.example/e.png) :red[retry] <b>now</b>"
    path = write_jsonl(tmp_path / "raw_generations.jsonl", [{
        "prefix_id": "demo_case_0001_r01", "model": "m-err", "raw_model_response": None,
        "generation_failed": True, "error_message": hostile}])
    with open_store(demo_copy) as s:
        import_file(s, path)
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Mei Tanaka"
    at.query_params["kind"] = "response"
    at.query_params["item"] = "demo_case_0001_r01::m-err"
    at.run()
    assert not at.exception
    error = next(e.value for e in at.error if "Generation failed" in e.value)
    assert shown(error) == f"Generation failed: {hostile}"
    assert "![" not in error and ":red[" not in error and "<b>" not in error


def test_skipping_an_answered_item_says_it_withdraws_the_answer(app, demo_copy):
    app.run()
    action_button(app, "label", "0B_NO_ESCALATION_SELF_CARE_MONITOR").click().run()
    action_button(app, "reopen_last").click().run()
    skip = action_button(app, "skip")
    assert skip.label == "Withdraw and skip"
    assert any("skipping it withdraws your answer" in c.value for c in app.caption)
    app.text_input(key="skip_reason:1").input("answered the wrong case")
    action_button(app, "skip").click().run()
    assert not app.exception
    assert [a[3] for a in human_answers(demo_copy)] == ["answered", "skipped"]
    assert "1 of 85 answered by you · 1 of them skipped" in app.get("progress")[0].proto.text
    # An item not yet answered is skipped with the plain words.
    assert action_button(app, "skip").label == "Skip"


def test_a_blind_rounds_item_gold_is_not_shown_in_a_later_rounds_reveal(demo_copy, monkeypatch):
    """The last round's reveal shows every round's gold, each under its own blinding:
    a round a fully blind review round holds for the reviewer stays blind there too."""
    from review.reviewing.blinding import later_rounds_owed
    from review.team.rounds import RoundSpec, create_round, reserve_next_item
    from tests.helpers import open_app

    Q = "carebench.escalation_needed"
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    s = open_store(demo_copy)
    admin = ensure_reviewer(s, "Adm", role="admin")
    me = ensure_reviewer(s, "Dr. Blind Test")
    rid = create_round(s, RoundSpec("Blind study", Q, reviewers_per_item=1, blinding="blind"), admin)
    held = reserve_next_item(s, rid, me)                 # the blind round gives me an item...
    earlier = load_item(s, held)
    assert earlier.kind == "prefix" and later_rounds_owed(s, me.id, held), "needs a non-last round"
    commit_answer(s, me, held, earlier.question_id, "0A_NO_ESCALATION_INFO_NEEDED",
                  mode="blind", round_id=rid)             # ...answered blind, in the round
    # The case's later rounds, answered in Free review (not in the blind round's hands).
    uids = [f"{earlier.case_id}_r{r:02d}" for r in range(earlier.round_id + 1, 10)]
    later = [i for u in uids if (i := find_item_id(s, u)) is not None]
    for item_id in later:
        commit_answer(s, me, item_id, load_item(s, item_id).question_id,
                      "1B_ESCALATION_URGENT_CARE")
    last_uid = load_item(s, later[-1]).uid
    s.close()

    # Opened on its own in Free review, the blind round's item stays blind:
    at = open_app("pages/review.py", "Dr. Blind Test", item=earlier.uid)
    text = " ".join(shown(m.value) for m in at.markdown)
    assert "**The reference label**" not in text
    assert any("blind in Blind study" in c.value for c in at.caption)
    # ...but the last round's reveal shows its gold beside the others'.
    at = open_app("pages/review.py", "Dr. Blind Test", item=last_uid)
    text = " ".join(shown(m.value) for m in at.markdown)
    assert "**The reference label** · :" in text  # the last round's own reveal is fine
    assert f"**The reference label** · turn {earlier.round_id}," not in text, (
        "round held by a fully blind review round shows its gold in Free review")
