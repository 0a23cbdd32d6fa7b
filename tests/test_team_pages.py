"""Rounds, adjudication, progress/audit and codebook screens under AppTest."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from streamlit.testing.v1 import AppTest

from review.reviewing.names import item_in_address
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round
from review.workspace import open_store
from tests.conftest import ROOT
from tests.helpers import action_button, open_app


def app_as(name, db, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = name
    return at


def test_an_admin_creates_a_round_from_the_screen(demo_copy, monkeypatch):
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    assert not at.exception
    at.text_input[0].input("Validation double review")
    at.number_input[2].set_value(12)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception
    s = open_store(demo_copy)
    assert s.scalar("SELECT COUNT(*) FROM round_items") == 12
    assert s.scalar("SELECT name FROM review_rounds") == "Validation double review"


def test_a_reviewer_does_not_get_the_admin_or_adjudication_screens(demo_copy, monkeypatch):
    at = app_as("Dr. Amara Okafor", demo_copy, monkeypatch).run()
    with pytest.raises(Exception):  # noqa: B017 - the page is not registered for reviewers
        at.switch_page("pages/rounds.py").run()


def test_review_in_a_round_reserves_and_counts(demo_copy, monkeypatch):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("R", "carebench.escalation_needed", limit=5),
                       ensure_reviewer(s, "Jordan Lee"))
    ensure_reviewer(s, "Dr. Round New")
    s.close()
    at = app_as("Dr. Round New", demo_copy, monkeypatch)
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    assert "0 of 5 answered by you in R · the round: 0 of 10 reviews" in at.get("progress")[0].proto.text
    action_button(at, "label", "1A_ESCALATION_NONURGENT_CARE").click().run()
    assert "1 of 5 answered by you in R" in at.get("progress")[0].proto.text
    s = open_store(demo_copy)
    assert s.scalar("SELECT COUNT(*) FROM annotations WHERE round_id = ?", (rid,)) == 1


def test_back_and_next_in_a_round_stay_in_the_round(demo_copy, monkeypatch):
    """Inside a round, Back and Next move through the round's items given to
    me (they used to open the free queue's neighbours, where an answer could
    not count and was refused); an item the round does not hold asks nothing."""
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("R", "carebench.escalation_needed", limit=5),
                       ensure_reviewer(s, "Jordan Lee"))
    ensure_reviewer(s, "Dr. Round New")
    in_round = {r[0] for r in s.query("SELECT i.uid FROM round_items ri JOIN items i"
                                      " ON i.id = ri.item_id WHERE ri.round_id = ?", (rid,))}
    s.close()
    at = app_as("Dr. Round New", demo_copy, monkeypatch)
    at.query_params["round"] = str(rid)
    at.run()

    def shown() -> str:
        item = at.query_params["item"]
        return item[0] if isinstance(item, list) else item

    first = shown()
    assert first in in_round
    assert action_button(at, "next").disabled  # this one first: the round gives one at a time
    action_button(at, "label", "1A_ESCALATION_NONURGENT_CARE").click().run()
    second = shown()
    assert second in in_round and second != first
    action_button(at, "prev").click().run()
    assert shown() == first
    # Of the five the round has for this reviewer, not of the two given so far.
    assert any("item 1 of 5 for you in R" in m.value for m in at.markdown)
    action_button(at, "next").click().run()
    assert shown() == second
    # An address naming an item outside the round: no answer is asked for.
    outside = next(f"demo_case_{n:04d}_r01" for n in range(1, 99)
                   if f"demo_case_{n:04d}_r01" not in in_round)
    at.query_params["item"] = outside
    at.session_state["item_uid"] = None
    at.run()
    assert any("is not part of R" in w.value for w in at.warning)
    assert not [b for b in at.button if (b.key or "").startswith("label:")]


def test_a_round_does_not_give_an_item_its_reviewer_answered_before(demo_copy, monkeypatch):
    """A round asks for blind answers: Dr. Okafor answered every prefix before
    the round, so it has nothing for her, and says why."""
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("R", "carebench.escalation_needed", limit=5),
                       ensure_reviewer(s, "Jordan Lee"))
    s.close()
    at = app_as("Dr. Amara Okafor", demo_copy, monkeypatch)
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    assert any("you reviewed 0 of its 5 items. 5 you had answered outside the round are not given"
               in m.value for m in at.success)


def test_an_answer_given_after_the_place_lapsed_is_kept_outside_the_round(demo_copy, monkeypatch):
    """A clinician who took longer than the reservation, while a colleague took
    the place, loses nothing: the answer is kept, outside the round, and said so."""
    from review.reviewing.commit import commit_answer
    from review.team.rounds import reserve_next_item

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("R", "carebench.escalation_needed", reviewers_per_item=1,
                                    limit=5), ensure_reviewer(s, "Jordan Lee"))
    slow = ensure_reviewer(s, "Dr. Slow")
    s.close()
    at = app_as("Dr. Slow", demo_copy, monkeypatch)
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    s = open_store(demo_copy)
    held = s.scalar("SELECT item_id FROM reservations WHERE rater_id = ?", (slow.id,))
    with s.transaction() as conn:  # twenty minutes later
        conn.execute("UPDATE reservations SET expires_at = '2000-01-01' WHERE rater_id = ?", (slow.id,))
    quick = ensure_reviewer(s, "Dr. Quick")
    assert reserve_next_item(s, rid, quick) == held
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(s, quick, held, qid, "0A", round_id=rid)
    s.close()
    action_button(at, "label", "1A_ESCALATION_NONURGENT_CARE").click().run()
    assert not at.exception
    assert any("Your answer is kept, outside the round" in w.value for w in at.warning)
    s = open_store(demo_copy)
    row = s.query_one("SELECT round_id, value, json_extract(extra, '$.late_for_round') FROM annotations"
                      " WHERE rater_id = ? AND item_id = ?", (slow.id, held))
    assert (row[0], row[1][:2], row[2]) == (None, "1A", rid)
    assert s.scalar("SELECT COUNT(*) FROM round_reviews WHERE round_id = ? AND item_id = ?",
                    (rid, held)) == 1
    s.close()
    # The item lost to Dr. Quick is no longer counted as one of Dr. Slow's.
    assert "0 of 4 answered by you in R · the round: 1 of 5 reviews" in at.get("progress")[0].proto.text


def test_adjudicate_progress_and_codebook_screens_render(demo_copy, monkeypatch):
    at = app_as("Dr. Sam Rivera", demo_copy, monkeypatch).run()
    at.switch_page("pages/adjudicate.py").run()
    assert not at.exception
    assert "Item 1 of" in at.get("progress")[0].proto.text
    at.button(key="adj_pos:Next").click().run()  # the queue's Next (→)
    assert "Item 2 of" in at.get("progress")[0].proto.text
    at.button(key="adj_pos:Previous").click().run()
    assert "Item 1 of" in at.get("progress")[0].proto.text
    at.switch_page("pages/activity.py").run()
    assert not at.exception
    at.switch_page("pages/codebook.py").run()
    assert not at.exception
    assert any("Versions" in h.value for h in at.subheader)


def test_data_screen_runs_the_mapper_against_a_fake_provider(demo_copy, monkeypatch):
    from tests import conftest_llm as llm

    gen = llm.fake_server()
    fake = next(gen)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-page-test-0000")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
        at.switch_page("pages/data.py").run()
        form = [t for t in at.text_input if t.label == "Model"][0]
        form.input("openai:gpt-4.1-mini")
        [n for n in at.number_input if n.label.startswith("At most")][0].set_value(3)
        [b for b in at.button if b.label == "Run"][0].click()
        at.run(timeout=60)
        assert not at.exception
        assert any("answered" in s.value for s in at.success)
        s = open_store(demo_copy)
        assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.name = 'openai:gpt-4.1-mini@mapper-v1'") == 3
    finally:
        next(gen, None)


def test_an_admin_creates_a_round_over_agent_runs(demo_copy, monkeypatch):
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    what = at.selectbox[0]
    assert "criteria@trajectory" in what.options or any("Agent runs" in o for o in what.options)
    what.set_value("criteria@trajectory").run()
    stratify = next(sb for sb in at.selectbox if sb.label == "Stratify by")
    # no gold label on runs; the responding model (the agent) is a stratum too
    assert stratify.options == ["category or theme", "responding model", "nothing"]
    at.text_input[0].input("Runs, double review")
    next(b for b in at.button if "Create round" in b.label).click()
    at.run()
    assert not at.exception
    assert any("Trajectories screen" in m.value for m in at.success)
    s = open_store(demo_copy)
    assert s.scalar("SELECT question_key FROM review_rounds") == "criteria@trajectory"
    assert s.scalar("SELECT COUNT(*) FROM round_items") == s.scalar(
        "SELECT COUNT(*) FROM items WHERE kind = 'trajectory' AND failed = 0")
    s.close()


def test_a_clinician_reviews_agent_runs_in_a_round(demo_copy, monkeypatch):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Runs", "criteria@trajectory", reviewers_per_item=1,
                                    stratify_by="none", blinding="blind"),
                       ensure_reviewer(s, "Jordan Lee"))
    runs = s.scalar("SELECT COUNT(*) FROM round_items WHERE round_id = ?", (rid,))
    s.close()
    at = app_as("Dr. New Runs", demo_copy, monkeypatch)
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. New Runs")
    s.close()
    at.run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert f"0 of {runs} reviewed by you in Runs" in at.get("progress")[0].proto.text
    first = at.query_params["item"]
    assert at.button(key="trj_next_round").disabled  # reserved for me until I have reviewed it
    s = open_store(demo_copy)
    from review.reviewing.criteria import item_questions

    criteria = [q for q in item_questions(s, item_in_address(s, first))
                if q.kind == "criterion"]
    s.close()
    action_button(at, "rv_met").click().run()  # one verdict committed: my place is kept ...
    action_button(at, "rv_commit").click().run()
    assert f"0 of {runs} reviewed by you in Runs" in at.get("progress")[0].proto.text
    assert at.button(key="trj_next_round").disabled  # ... but the run is not reviewed yet
    assert any(f"in progress: 1 of {len(criteria)} answered by you" in m.value for m in at.markdown)
    for _ in criteria[1:]:
        action_button(at, "rv_met").click().run()
    action_button(at, "rv_commit").click().run()
    assert not at.exception
    assert f"1 of {runs} reviewed by you in Runs" in at.get("progress")[0].proto.text
    s = open_store(demo_copy)
    rows = s.query("SELECT round_id, json_extract(extra, '$.blinding') FROM annotations a"
                   " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'Dr. New Runs'")
    assert len(rows) == len(criteria) and {tuple(r) for r in rows} == {(rid, "blind")}
    s.close()
    # Fully blind: the judge's verdicts stay hidden after the commit.
    assert any("stay hidden under this review's blinding" in c.value for c in at.caption)
    at.button(key="trj_next_round").click().run()
    assert not at.exception and at.query_params["item"] != first


def test_verdicts_on_a_run_whose_place_lapsed_are_kept_outside_the_round(demo_copy, monkeypatch):
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.rounds import reserve_next_item

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Runs", "criteria@trajectory", reviewers_per_item=1,
                                    stratify_by="none"), ensure_reviewer(s, "Jordan Lee"))
    slow = ensure_reviewer(s, "Dr. Slow Runs")
    s.close()
    at = app_as("Dr. Slow Runs", demo_copy, monkeypatch).run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    s = open_store(demo_copy)
    first = at.query_params["item"]
    run = item_in_address(s, first)
    criteria = [q for q in item_questions(s, run) if q.kind == "criterion"]
    with s.transaction() as conn:  # the reservation lapses; a colleague reviews the run
        conn.execute("UPDATE reservations SET expires_at = '2000-01-01' WHERE rater_id = ?", (slow.id,))
    quick = ensure_reviewer(s, "Dr. Quick Runs")
    assert reserve_next_item(s, rid, quick) == run
    commit_verdicts(s, quick, run, [Verdict(q.id, "met") for q in criteria], round_id=rid)
    s.close()
    for _ in criteria:
        action_button(at, "rv_not_met").click().run()
    action_button(at, "rv_commit").click().run()
    assert not at.exception
    assert any("Your answer is kept, outside the round" in w.value for w in at.warning)
    s = open_store(demo_copy)
    rows = {tuple(r) for r in s.query(
        "SELECT round_id, value, json_extract(extra, '$.late_for_round') FROM annotations"
        " WHERE rater_id = ? AND item_id = ?", (slow.id, run))}
    assert rows == {(None, "not_met", rid)}
    assert s.scalar("SELECT COUNT(*) FROM annotations WHERE rater_id = ? AND item_id = ?",
                    (slow.id, run)) == len(criteria)
    s.close()
    assert at.query_params.get("item") != first  # on to the round's next run


def test_a_run_begun_in_a_round_comes_back_before_a_new_one(demo_copy, monkeypatch):
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.reviewing.navigation import unfinished_in_round
    from review.team.rounds import reserve_next_item

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Runs", "criteria@trajectory", stratify_by="none"),
                       ensure_reviewer(s, "Jordan Lee"))
    me = ensure_reviewer(s, "Dr. Half Way")
    begun = reserve_next_item(s, rid, me)
    q = next(q for q in item_questions(s, begun) if q.kind == "criterion")
    commit_verdicts(s, me, begun, [Verdict(q.id, "met")], round_id=rid)
    assert unfinished_in_round(s, rid, me.id) == begun
    s.close()
    at = app_as("Dr. Half Way", demo_copy, monkeypatch).run()  # a new tab, no item in the address
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.run()
    s = open_store(demo_copy)
    assert item_in_address(s, at.query_params["item"]) == begun  # opaque: blind to the agent
    s.close()


def test_a_run_opened_by_address_outside_the_round_is_reviewed_outside_it(demo_copy, monkeypatch):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Two runs", "criteria@trajectory", stratify_by="none", limit=2),
                       ensure_reviewer(s, "Jordan Lee"))
    outside = s.scalar("SELECT uid FROM items WHERE kind = 'trajectory' AND failed = 0 AND id NOT IN"
                       " (SELECT item_id FROM round_items WHERE round_id = ?)", (rid,))
    ensure_reviewer(s, "Dr. Linked")
    s.close()
    at = app_as("Dr. Linked", demo_copy, monkeypatch).run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.query_params["item"] = outside
    at.run()
    assert not at.exception
    assert any("is not part of Two runs" in w.value for w in at.warning)
    with open_store(demo_copy) as s:  # the address names it (opaquely: blind to the agent)
        assert item_in_address(s, at.query_params["item"]) == item_in_address(s, outside)
    assert [b for b in at.button if b.key == "trj_next_open"]  # the free queue's buttons


def test_a_run_reviewed_blind_in_a_round_stays_blind_in_free_review(demo_copy, monkeypatch):
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.rounds import reserve_next_item

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Blind", "criteria@trajectory", stratify_by="none",
                                    blinding="blind"), ensure_reviewer(s, "Jordan Lee"))
    me = ensure_reviewer(s, "Dr. Peek")
    run = reserve_next_item(s, rid, me)
    commit_verdicts(s, me, run, [Verdict(q.id, "met") for q in item_questions(s, run)
                                 if q.kind == "criterion"], round_id=rid)
    uid = s.scalar("SELECT uid FROM items WHERE id = ?", (run,))
    s.close()
    at = app_as("Dr. Peek", demo_copy, monkeypatch).run()
    at.switch_page("pages/trajectories.py")
    at.query_params["item"] = uid  # free review, no round chosen
    at.run()
    assert not at.exception
    page = "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)
    assert "you review this agent run blind in Blind".lower() in page.lower()
    assert "klinikebench-judge" not in page


def test_a_clinician_who_answered_the_runs_before_is_told_why_the_round_gives_nothing(
        demo_copy, monkeypatch):
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Runs", "criteria@trajectory", stratify_by="none"),
                       ensure_reviewer(s, "Jordan Lee"))
    before = s.scalar("SELECT COUNT(DISTINCT a.item_id) FROM annotations a JOIN raters r"
                      " ON r.id = a.rater_id JOIN round_items ri ON ri.item_id = a.item_id"
                      " AND ri.round_id = ? WHERE r.name = 'Dr. Amara Okafor' AND a.target = ''",
                      (rid,))
    s.close()
    assert before > 0  # the demo's clinicians answered the runs' criteria already
    at = app_as("Dr. Amara Okafor", demo_copy, monkeypatch).run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.run()
    assert not at.exception
    assert any(f"{before} you had answered outside the round" in m.value for m in at.success)


def test_an_item_held_in_a_blind_round_stays_blind_in_free_review(demo_copy, monkeypatch):
    from review.reviewing.items import load_item
    from review.team.rounds import reserve_next_item

    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Blind R", "carebench.escalation_needed", reviewers_per_item=1,
                                    blinding="blind", limit=5), ensure_reviewer(s, "Jordan Lee"))
    me = ensure_reviewer(s, "Dr. Peek")
    held = load_item(s, reserve_next_item(s, rid, me))
    s.close()
    at = app_as("Dr. Peek", demo_copy, monkeypatch)
    at.query_params["item"] = held.uid  # free review, by its link
    at.run()
    assert any("You review this item blind in Blind R" in c.value for c in at.caption)
    action_button(at, "label", "0A_NO_ESCALATION_INFO_NEEDED").click().run()
    assert not at.exception
    assert "**Gold**" not in " ".join(m.value for m in at.markdown)
    s = open_store(demo_copy)
    assert s.scalar("SELECT json_extract(extra, '$.blinding') FROM annotations a JOIN raters r"
                    " ON r.id = a.rater_id WHERE r.name = 'Dr. Peek'") == "blind"


def test_a_reviewer_reads_only_their_own_audit_entries(demo_copy, monkeypatch):
    """The audit log holds every answer's value and rationale: a reviewer sees
    their own entries only; an adjudicator sees everyone's."""
    from review.reviewing.commit import commit_answer
    from review.reviewing.items import load_item
    from review.reviewing.queue import QueueFilter, next_unreviewed_item

    s = open_store(demo_copy)
    colleague, newcomer = ensure_reviewer(s, "Dr. Colleague"), ensure_reviewer(s, "Dr. Newcomer")
    item = load_item(s, next_unreviewed_item(s, newcomer.id, QueueFilter(kind="prefix")))
    commit_answer(s, colleague, item.id, item.question_id, "1B", rationale="COLLEAGUE-SECRET")
    s.close()

    def log_as(name: str) -> str:
        at = app_as(name, demo_copy, monkeypatch).run()
        at.switch_page("pages/activity.py").run()
        assert not at.exception
        return " ".join(df.value.to_csv() for df in at.dataframe)

    assert "COLLEAGUE-SECRET" not in log_as("Dr. Newcomer")
    assert "COLLEAGUE-SECRET" in log_as("Dr. Sam Rivera")


def test_the_prompt_versions_offered_follow_the_llm_task(demo_copy, monkeypatch):
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/data.py").run()
    versions = next(sb for sb in at.selectbox if sb.label == "Prompt version")
    assert versions.options and all(v.startswith("mapper") for v in versions.options)
    next(sb for sb in at.selectbox if sb.label == "Task").set_value("judge").run()
    versions = next(sb for sb in at.selectbox if sb.label == "Prompt version")
    assert versions.options and all(v.startswith("judge") for v in versions.options)
    formats = next(sb for sb in at.selectbox if sb.label == "Format").options
    assert "harbor" not in formats and "carebench-prefixes" in formats  # folders come by the CLI


def test_a_round_asking_more_reviewers_than_there_are_people_says_so(demo_copy, monkeypatch):
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/rounds.py").run()
    at.text_input[0].input("Too many")
    next(n for n in at.number_input if n.label.startswith("Reviewers per item")).set_value(10)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception
    assert any("10 reviewers per item" in w.value and "no item can be completed" in w.value
               for w in at.warning)


def test_picking_verdicts_keeps_the_run_reserved_for_a_long_review(demo_copy, monkeypatch):
    """A run's forty criteria can take longer than one reservation: each verdict
    picked (a draft) renews it, so the review still counts in the round."""
    s = open_store(demo_copy)
    rid = create_round(s, RoundSpec("Long runs", "criteria@trajectory", reviewers_per_item=1,
                                    stratify_by="none", blinding="blind", reservation_minutes=20),
                       ensure_reviewer(s, "Jordan Lee"))
    me = ensure_reviewer(s, "Dr. Slow")
    s.close()
    at = app_as("Dr. Slow", demo_copy, monkeypatch)
    at.run()
    at.switch_page("pages/trajectories.py")
    at.query_params["round"] = str(rid)
    at.run()
    s = open_store(demo_copy)
    held = "SELECT expires_at FROM reservations WHERE round_id = ? AND rater_id = ? AND released_at IS NULL"
    # The reviewer has been at it a while: the reservation is about to lapse.
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat(timespec="microseconds")
    with s.transaction() as conn:
        conn.execute("UPDATE reservations SET expires_at = ? WHERE round_id = ? AND rater_id = ?",
                     (soon, rid, me.id))
    action_button(at, "rv_met").click().run()  # a verdict picked, not yet committed
    assert not at.exception
    assert s.scalar(held, (rid, me.id)) > (datetime.now(UTC) + timedelta(minutes=19)).isoformat()
    s.close()


def _as_adjudicator(path, name="Dr. Link Test"):
    s = open_store(path)
    ensure_reviewer(s, name, role="adjudicator")
    s.close()
    return name


def _follow_link(at, page, **params):
    """What `st.page_link(page, query_params=params)` on Adjudicate does: same session,
    a new address (Adjudicate's own address had no `item`)."""
    at.switch_page("pages/adjudicate.py").run()
    for k in ("item", "step"):
        at.query_params.pop(k, None)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def _item_shown(at):
    """The uid of the item the address names (an opaque `item-<n>` while the
    reviewer is blind to the model or agent: issue 19 fix 6)."""
    v = at.query_params.get("item")
    v = v[0] if isinstance(v, list) else v
    with open_store(os.environ["CARELENS_DB"]) as s:
        item = item_in_address(s, v) if v else None
        return s.scalar("SELECT uid FROM items WHERE id = ?", (item,)) if item else v


def test_a_link_from_adjudicate_to_an_item_seen_earlier_in_the_session_opens_it(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    me = _as_adjudicator(demo_copy)
    a, b = "demo_case_0001_r01", "demo_case_0002_r01"
    at = open_app("pages/review.py", me, item=a)
    assert _item_shown(at) == a
    _follow_link(at, "pages/review.py", item=b)          # "Read the item" of case B
    assert _item_shown(at) == b
    _follow_link(at, "pages/review.py", item=a)          # back to case A in the queue, "Read the item"
    assert at.session_state["item_uid"] == a, "the link to A showed B instead"


def test_trajectory_link_to_a_run_seen_earlier_opens_that_run(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    me = _as_adjudicator(demo_copy)
    a = "kb:demo/r1/kb-demo-001__atlas-clinician"
    b = "kb:demo/r1/kb-demo-001__brisk-clinician"
    at = open_app("pages/trajectories.py", me, item=a, step="1")
    assert _item_shown(at) == a
    _follow_link(at, "pages/trajectories.py", item=b, step="2")   # "Open the run at this step"
    assert _item_shown(at) == b
    _follow_link(at, "pages/trajectories.py", item=a, step="3")
    assert _item_shown(at) == a, "the link to run A at step 3 opened run B (at step 3) instead"
