"""Items, raters and rounds in the clinician's words (review.reviewing.names)."""

from __future__ import annotations

import pytest

from review.reviewing.names import item_name, ordinal, rater_name, study_round, turn


def name_of(store, uid):
    return item_name(store, store.scalar("SELECT id FROM items WHERE uid = ?", (uid,)))


def test_ordinals_read_as_spoken():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]


def test_a_prefix_is_a_conversation_after_the_patients_message(demo):
    name = name_of(demo, "demo_case_0001_r02")
    assert name.title == "Conversation 1, after the patient's 2nd message"
    assert name.subject == "The patient's 2nd message"
    assert "demo_case_0001_r02" in name.details and "demo_case_0001_r02" not in name.title


def test_a_reply_names_its_model_by_a_letter_the_same_on_every_item(demo):
    a = name_of(demo, "demo_case_0012_r02::borealis-large")
    b = name_of(demo, "demo_case_0001_r01::borealis-large")
    assert a.subject == b.subject == "Model B's reply"
    assert a.title == "Model B's reply to conversation 12, after the patient's 2nd message"
    assert "borealis-large" in a.details and "borealis" not in a.title
    assert name_of(demo, "demo_case_0001_r01::aster-7b").subject == "Model A's reply"


def test_agent_runs_and_graded_conversations_have_no_ids_in_their_titles(demo):
    run = name_of(demo, "kb:demo/r1/kb-demo-003__brisk-clinician")
    assert run.title == "Case 3, agent run B" and "kb:demo" in run.details
    # the demo's completions carry simple-evals' completion ids (a digest of the text)
    completion = demo.scalar("SELECT uid FROM items WHERE uid LIKE 'hb:demo-hb-004::%'"
                             " AND model = 'borealis-large'")
    graded = name_of(demo, completion)
    assert graded.title == "Conversation 4, model B's completion"


@pytest.mark.parametrize("raw, words", [
    ("demo:mapper@v1", "Automated grader (v1)"),
    ("klinikebench-judge:demo/judge-1", "Automated judge (judge-1)"),
    ("carebench-gold", "Gold label"),
    ("klinikebench-verifier", "Verifier"),
    ("Dr. Mei Tanaka", "Dr. Mei Tanaka"),
    ("nobody-known", "nobody-known"),
])
def test_raters_are_named_by_their_role(demo, raw, words):
    assert rater_name(demo, raw) == words


def test_a_study_round_and_a_turn_are_never_the_same_word():
    assert study_round("Pilot") == "Study round: Pilot"
    assert turn(2) == "turn 2"
