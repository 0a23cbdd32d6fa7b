"""Review functions: the queue, blinding, reveal, revisions, skip and flag."""

from __future__ import annotations

import pytest

from codebook import BLIND, SUGGEST
from review.reviewing.blinding import later_rounds_owed, reveal_reference_labels
from review.reviewing.commit import commit_answer, skip_item
from review.reviewing.items import find_item_id, flag_item, is_flagged, load_item, my_answers
from review.reviewing.queue import QueueFilter, next_unreviewed_item, queue_progress
from review.team.reviewers import ensure_reviewer


def test_queue_walks_items_in_order_and_counts_progress(demo):
    me = ensure_reviewer(demo, "Dr. New", "general practice", "GP")
    filt = QueueFilter(kind="prefix")
    progress = queue_progress(demo, me.id, filt)
    assert progress.done == 0 and progress.total == 85
    first = next_unreviewed_item(demo, me.id, filt)
    item = load_item(demo, first)
    assert item.uid == "demo_case_0001_r01" and item.question_key == "carebench.escalation_needed"
    commit_answer(demo, me, first, item.question_id, "0A")
    second = next_unreviewed_item(demo, me.id, filt, after_id=first)
    assert load_item(demo, second).uid == "demo_case_0001_r02"
    assert queue_progress(demo, me.id, filt).done == 1


def test_filters_narrow_the_queue(demo):
    me = ensure_reviewer(demo, "Dr. New")
    filt = QueueFilter(kind="response", model="borealis-large", round_id=2)
    item = load_item(demo, next_unreviewed_item(demo, me.id, filt))
    assert item.model == "borealis-large" and item.round_id == 2
    assert len(item.rounds) == 2  # the prefix turns so far, split by round
    assert queue_progress(demo, me.id, filt).total < 85


def test_labels_are_hidden_until_the_reviewer_commits(demo):
    me = ensure_reviewer(demo, "Dr. New")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="response")))
    assert reveal_reference_labels(demo, me.id, item) is None
    commit_answer(demo, me, item.id, item.question_id, "0A")
    labels = reveal_reference_labels(demo, me.id, item)
    raters = {(lab.rater, lab.about) for lab in labels}
    assert ("demo:mapper@v1", "this response") in raters
    # The prefix's gold waits for the reviewer's own blind answer to the prefix.
    assert ("carebench-gold", "the prefix") not in raters
    prefix = load_item(demo, item.parent_id)
    assert commit_answer_phase(demo, me, prefix) == "blind"
    # ... and for the case's later rounds: this round's gold would tell about theirs.
    owed = later_rounds_owed(demo, me.id, prefix.id)
    assert prefix.round_id == 1 and owed == [2, 3]
    labels = reveal_reference_labels(demo, me.id, item)
    assert ("carebench-gold", "the prefix") not in {(lab.rater, lab.about) for lab in labels}
    assert reveal_reference_labels(demo, me.id, prefix) is None
    for later in owed:
        later_prefix = load_item(demo, find_item_id(demo, prefix.uid.replace("_r01", f"_r{later:02d}")))
        assert commit_answer_phase(demo, me, later_prefix) == "blind"
    labels = reveal_reference_labels(demo, me.id, item)
    assert ("carebench-gold", "the prefix") in {(lab.rater, lab.about) for lab in labels}
    assert reveal_reference_labels(demo, me.id, prefix)
    # Other reviewers' answers are never part of the reveal.
    assert not any(lab.rater.startswith("Dr.") for lab in labels)


def commit_answer_phase(store, reviewer, item) -> str:
    annotation = commit_answer(store, reviewer, item.id, item.question_id, "1A")
    return store.scalar("SELECT phase FROM annotations WHERE id = ?", (annotation,))


def test_suggest_mode_shows_the_prefix_gold_with_the_response(demo):
    me = ensure_reviewer(demo, "Dr. New")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="response")))
    labels = reveal_reference_labels(demo, me.id, item, mode=SUGGEST)
    assert ("carebench-gold", "the prefix") in {(lab.rater, lab.about) for lab in labels}


def test_blind_mode_never_reveals_and_suggest_mode_always_does(demo):
    me = ensure_reviewer(demo, "Dr. New")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    assert reveal_reference_labels(demo, me.id, item, mode=SUGGEST)
    commit_answer(demo, me, item.id, item.question_id, "0A", mode=BLIND)
    assert reveal_reference_labels(demo, me.id, item, mode=BLIND) is None


def test_change_after_reveal_is_a_new_after_reveal_annotation(demo):
    me = ensure_reviewer(demo, "Dr. New")
    # A case's last round: its gold shows at once (an earlier round's waits for the later ones).
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix", round_id=3)))
    commit_answer(demo, me, item.id, item.question_id, "0B", confidence=3, seconds_on_task=4.2)
    commit_answer(demo, me, item.id, item.question_id, "0A", rationale="gold convinced me")
    answers = my_answers(demo, me.id, item.id, item.question_id)
    assert [(a.value[:2], a.phase) for a in answers] == [("0B", "blind"), ("0A", "after_reveal")]
    row = demo.query_one("SELECT seconds_on_task, codebook_version, extra FROM annotations WHERE id = ?",
                         (answers[0].annotation_id,))
    assert row["seconds_on_task"] == 4.2 and row["codebook_version"] == "1.1"
    assert '"blinding":"reveal_after_commit"' in row["extra"]


def test_cannot_assess_skip_and_flag(demo):
    me = ensure_reviewer(demo, "Dr. New")
    filt = QueueFilter(kind="prefix")
    first = next_unreviewed_item(demo, me.id, filt)
    qid = load_item(demo, first).question_id
    commit_answer(demo, me, first, qid, None, status="cannot_assess", rationale="too little history")
    second = next_unreviewed_item(demo, me.id, filt)
    with pytest.raises(ValueError, match="say why"):
        skip_item(demo, me, second, qid, "  ")
    skip_item(demo, me, second, qid, "outside my specialty")
    assert next_unreviewed_item(demo, me.id, filt) not in (first, second)
    # A skip does not reveal the labels: it is not an answer.
    assert reveal_reference_labels(demo, me.id, load_item(demo, second)) is None
    flag_item(demo, me, first, True, "odd wording")
    assert is_flagged(demo, me.id, first)
    flag_item(demo, me, first, False)
    assert not is_flagged(demo, me.id, first)
    actions = [r[0] for r in demo.query("SELECT action FROM audit_log WHERE actor = 'Dr. New' ORDER BY id")]
    assert actions == ["add_reviewer", "answer", "skip", "flag", "unflag"]


def test_bad_answers_are_refused_and_nothing_is_written(demo):
    me = ensure_reviewer(demo, "Dr. New")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    before = demo.scalar("SELECT COUNT(*) FROM annotations")
    with pytest.raises(ValueError, match="allowed"):
        commit_answer(demo, me, item.id, item.question_id, "urgent-ish")
    with pytest.raises(ValueError, match="confidence"):
        commit_answer(demo, me, item.id, item.question_id, "0A", confidence=9)
    assert demo.scalar("SELECT COUNT(*) FROM annotations") == before


def test_reviewer_names_cannot_take_a_machine_raters_name(demo):
    with pytest.raises(ValueError, match="machine rater"):
        ensure_reviewer(demo, "demo:mapper@v1")
    with pytest.raises(ValueError, match="needs a name"):
        ensure_reviewer(demo, "   ")


def test_a_name_differing_only_in_capitals_is_not_a_second_reviewer(demo):
    before = demo.scalar("SELECT COUNT(*) FROM raters")
    with pytest.raises(ValueError, match="'Dr. Amara Okafor' is already a reviewer"):
        ensure_reviewer(demo, "dr. amara  OKAFOR")
    assert demo.scalar("SELECT COUNT(*) FROM raters") == before
    assert ensure_reviewer(demo, "Dr. Amara Okafor").name == "Dr. Amara Okafor"


def test_imported_physicians_are_data_not_people_who_log_in(demo):
    """HealthBench's anonymized physicians label criteria, but nobody reviews as them."""
    from review.team.reviewers import find_reviewer, list_reviewers

    assert demo.scalar("SELECT COUNT(*) FROM raters WHERE role = 'physician'") == 3
    names = {r.name for r in list_reviewers(demo)}
    assert "Dr. Amara Okafor" in names and not any(n.startswith("healthbench-physician") for n in names)
    assert find_reviewer(demo, "healthbench-physician:ph-a") is None
    with pytest.raises(ValueError, match="imported rater"):
        ensure_reviewer(demo, "healthbench-physician:ph-a")
    from review.team.activity import reviewer_progress

    assert not any(p.name.startswith("healthbench-physician") for p in reviewer_progress(demo))


def test_a_draft_survives_until_the_answer_and_then_goes(demo):
    from review.reviewing.drafts import load_draft, save_draft

    me = ensure_reviewer(demo, "Dr. Drafter")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    save_draft(demo, me, item.id, item.question_id, "worried about a bleed", 4)
    save_draft(demo, me, item.id, item.question_id, "worried about a bleed; ask onset", 4)
    draft = load_draft(demo, me.id, item.id, item.question_id)
    assert (draft.rationale, draft.confidence) == ("worried about a bleed; ask onset", 4)
    assert demo.scalar("SELECT COUNT(*) FROM annotations WHERE rater_id = ?", (me.id,)) == 0
    commit_answer(demo, me, item.id, item.question_id, "0A", rationale=draft.rationale)
    assert load_draft(demo, me.id, item.id, item.question_id) is None
    save_draft(demo, me, item.id, item.question_id, "  ", None)
    assert load_draft(demo, me.id, item.id, item.question_id) is None


def test_a_picked_verdict_is_a_draft_and_an_empty_one_is_dropped(demo):
    from review.reviewing.drafts import drop_draft, load_draft, load_drafts, save_draft

    me = ensure_reviewer(demo, "Dr. Picker")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    save_draft(demo, me, item.id, item.question_id, None, None, value="1A_ESCALATION_NONURGENT_CARE")
    assert load_draft(demo, me.id, item.id, item.question_id).value == "1A_ESCALATION_NONURGENT_CARE"
    assert set(load_drafts(demo, me.id, item.id)) == {item.question_id}
    save_draft(demo, me, item.id, item.question_id, "  ", None, value=None)  # emptied: gone
    assert load_draft(demo, me.id, item.id, item.question_id) is None
    save_draft(demo, me, item.id, item.question_id, "why", None)
    drop_draft(demo, me, item.id, item.question_id)
    assert load_drafts(demo, me.id, item.id) == {}


def test_an_answer_after_the_labels_were_once_shown_is_never_blind(demo):
    """The reveal is not undone by what came after it: answer (labels shown),
    skip, answer again -> after the reveal; answer in free review, then in a
    blind round -> after the reveal too."""
    from review.team.rounds import RoundSpec, create_round, reserve_next_item

    me = ensure_reviewer(demo, "Dr. Phase")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix", round_id=3)))
    commit_answer(demo, me, item.id, item.question_id, "0A")
    skip_item(demo, me, item.id, item.question_id, "second thoughts")
    commit_answer(demo, me, item.id, item.question_id, "1B")
    assert [a.phase for a in my_answers(demo, me.id, item.id, item.question_id)] == [
        "blind", "after_reveal", "after_reveal"]
    rid = create_round(demo, RoundSpec("blind round", "carebench.escalation_needed",
                                       reviewers_per_item=1, blinding="blind"),
                       ensure_reviewer(demo, "Jordan Lee"))
    other = ensure_reviewer(demo, "Dr. Other")
    held = load_item(demo, reserve_next_item(demo, rid, other))
    for later in later_rounds_owed(demo, other.id, held.id):  # (so that its gold shows)
        uid = held.uid.replace(f"_r{held.round_id:02d}", f"_r{later:02d}")
        commit_answer(demo, other, find_item_id(demo, uid), held.question_id, "1A")
    commit_answer(demo, other, held.id, held.question_id, "0A")  # free review: gold shown
    commit_answer(demo, other, held.id, held.question_id, "1B", mode="blind", round_id=rid)
    assert my_answers(demo, other.id, held.id, held.question_id)[-1].phase == "after_reveal"


def test_the_same_answer_twice_is_one_answer(demo):
    me = ensure_reviewer(demo, "Dr. Double Click")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    first = commit_answer(demo, me, item.id, item.question_id, "1A", confidence=4)
    again = commit_answer(demo, me, item.id, item.question_id, "1A", confidence=4)
    assert again == first
    assert [(a.value, a.phase) for a in my_answers(demo, me.id, item.id, item.question_id)] == [
        ("1A_ESCALATION_NONURGENT_CARE", "blind")]
    # Anything different is a revision, kept beside the first.
    commit_answer(demo, me, item.id, item.question_id, "1A", confidence=5)
    assert len(my_answers(demo, me.id, item.id, item.question_id)) == 2


def test_an_adjudicators_own_answer_after_settling_is_not_blind(demo):
    from review.team.adjudication import settle

    judge = ensure_reviewer(demo, "Dr. Sam Rivera")  # the demo's adjudicator
    a, b = ensure_reviewer(demo, "Dr. A1"), ensure_reviewer(demo, "Dr. B1")
    item = load_item(demo, next_unreviewed_item(demo, judge.id, QueueFilter(kind="response")))
    commit_answer(demo, a, item.id, item.question_id, "0A")
    commit_answer(demo, b, item.id, item.question_id, "1B")
    settle(demo, None, item.id, judge, "1B", "reviewer_error", "", question_key=item.question_key)
    commit_answer(demo, judge, item.id, item.question_id, "1B")
    assert my_answers(demo, judge.id, item.id, item.question_id)[-1].phase == "after_reveal"


def test_choosing_to_see_every_label_makes_later_answers_after_the_reveal(demo):
    from review.reviewing.blinding import labels_mark, open_labels

    me = ensure_reviewer(demo, "Dr. Curious")
    item = load_item(demo, next_unreviewed_item(demo, me.id, QueueFilter(kind="prefix")))
    open_labels(demo, me, "browse", 85, labels_mark(demo))
    commit_answer(demo, me, item.id, item.question_id, "0A")
    assert my_answers(demo, me.id, item.id, item.question_id)[-1].phase == "after_reveal"


def test_a_revision_made_while_the_gold_is_still_held_back_is_blind(demo_copy):
    """Round 2 answered, its gold held back while round 3 is owed: nothing was
    revealed, so a change of mind is still a blind answer."""
    from review.workspace import open_store

    s = open_store(demo_copy)
    me = ensure_reviewer(s, "Dr. Phase Test")
    r2 = load_item(s, find_item_id(s, "demo_case_0001_r02"))
    commit_answer(s, me, r2.id, r2.question_id, "0A_NO_ESCALATION_INFO_NEEDED")
    assert reveal_reference_labels(s, me.id, r2) is None      # held back: round 3 is owed
    commit_answer(s, me, r2.id, r2.question_id, "1A_ESCALATION_NONURGENT_CARE")
    assert reveal_reference_labels(s, me.id, r2) is None      # still nothing shown
    phases = [a.phase for a in my_answers(s, me.id, r2.id, r2.question_id)]
    s.close()
    assert phases == ["blind", "blind"], phases
