"""The audit log in words: who did what to which item, the value before and
after, with items, rounds and people named and labels in the codebook's words
(the raw entries stay one toggle away)."""

from __future__ import annotations

from review.reviewing.commit import commit_answer
from review.team.activity import audit_entries, audit_lines
from review.team.reviewers import ensure_reviewer, grant_role
from review.team.rounds import RoundSpec, create_round, name_round_members, reserve_next_item
from tests.helpers import shown

Q = "carebench.escalation_needed"


def test_the_log_says_who_did_what_to_which_item(demo):
    admin = ensure_reviewer(demo, "Jordan Lee")
    rid = create_round(demo, RoundSpec("Pilot", Q, limit=2), admin)
    doc = ensure_reviewer(demo, "Dr. New")
    qid = demo.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
    item = reserve_next_item(demo, rid, doc)
    uid = demo.scalar("SELECT uid FROM items WHERE id = ?", (item,))
    commit_answer(demo, doc, item, qid, "0A_NO_ESCALATION_INFO_NEEDED", round_id=rid,
                  rationale="needs more history")
    commit_answer(demo, doc, item, qid, "1B_ESCALATION_URGENT_CARE", round_id=rid)
    name_round_members(demo, admin, rid, ["Dr. New"])
    grant_role(demo, admin, "Dr. New", "adjudicator")
    lines = {(x.entry.action, x.what, x.item, x.change)
             for x in audit_lines(demo, audit_entries(demo, limit=12))}
    assert ("reserve", "took a place in round Pilot", uid, "") in lines
    assert ("answer", "answered in round Pilot", uid, "Ask first · “needs more history”") in lines
    assert ("revise", "changed an answer in round Pilot", uid, "Ask first → Urgent care") in lines
    assert ("name_round_members", "named the reviewers of round Pilot", "", "anyone → Dr. New") in lines
    assert ("grant_role", "changed the role of Dr. New", "", "reviewer → adjudicator") in lines
    assert all("{" not in x[3] for x in lines)  # no JSON in the words


def test_the_progress_and_audit_screen_shows_words_and_the_raw_entries_on_demand(demo_copy,
                                                                              monkeypatch):
    from tests.test_team_pages import app_as

    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/activity.py").run()
    assert not at.exception
    log = at.dataframe[1].value
    assert list(log.columns) == ["When", "Who", "Did", "Item", "Change"]
    assert any(shown(d).startswith("imported ") for d in log["Did"])
    at.toggle(key="audit_raw").set_value(True).run()
    raw = at.dataframe[1].value
    assert "after" in raw.columns and any(v.startswith("{") for v in raw["after"])
