"""Items, raters and rounds in the clinician's words (review.reviewing.names)."""

from __future__ import annotations

import pytest

from review.reviewing.names import item_name, ordinal, plural, rater_name, study_round, turn
from tests.review_fixtures import KB_UID, import_all


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
    a = name_of(demo, "demo_case_0012_r02::borealis-large::unprompted@demo-1")
    b = name_of(demo, "demo_case_0001_r01::borealis-large::unprompted@demo-1")
    assert a.subject == b.subject == "Model C's reply"
    assert a.title == "Model C's reply to conversation 12, after the patient's 2nd message"
    assert "borealis-large" in a.details and "borealis" not in a.title
    assert name_of(demo, "demo_case_0001_r01::aster-7b::unprompted@demo-1").subject == "Model A's reply"


def test_two_runs_of_one_model_are_two_letters(demo):
    """The demo's aster-7b answered twice (unprompted, prompted): two different replies to
    one conversation are never both "Model A's reply"."""
    unprompted = name_of(demo, "demo_case_0001_r01::aster-7b::unprompted@demo-1")
    prompted = name_of(demo, "demo_case_0001_r01::aster-7b::prompted@demo-prompted-1")
    assert unprompted.subject == "Model A's reply" and prompted.subject == "Model B's reply"
    assert name_of(demo, "demo_case_0001_r01::cobalt-mini::unprompted@demo-1").subject \
        == "Model D's reply"


def test_agent_runs_and_graded_conversations_have_no_ids_in_their_titles(demo):
    run = name_of(demo, "kb:demo/r1/kb-demo-003__brisk-clinician")
    assert run.title == "Case 3, agent run B" and "kb:demo" in run.details
    # the demo's completions carry simple-evals' completion ids (a digest of the text)
    completion = demo.scalar("SELECT uid FROM items WHERE uid LIKE 'hb:demo-hb-004::%'"
                             " AND model = 'borealis-large'")
    graded = name_of(demo, completion)
    # numbered among the graded conversations, under their own word: the first is 1
    # (it was "Conversation 41", after the demo's 40 CARE-Bench conversations)
    assert graded.title == "Graded conversation 4, model B's completion"


def test_two_datasets_never_both_have_a_conversation_1(demo, tmp_path):
    """Conversations and cases are numbered over the study, not per dataset (nor
    per kind): with a second import beside the demo, every conversation and
    every case has a number of its own."""
    assert name_of(demo, "demo_case_0001_r01").place.startswith("Conversation 1,")  # read before
    import_all(demo, tmp_path / "files")  # KlinikeBench, Harbor, HealthBench: new datasets
    firsts = demo.query(
        "SELECT MIN(id) AS id, dataset_id, kind FROM items WHERE kind IN ('prefix',"
        " 'graded_conversation', 'trajectory') GROUP BY dataset_id, case_id")
    assert len({r["dataset_id"] for r in firsts}) >= 3
    places: dict[str, list[int]] = {}
    for row in firsts:
        places.setdefault(item_name(demo, row["id"]).place.split(",")[0], []).append(row["id"])
    assert all(len(ids) == 1 for ids in places.values()), {
        p: ids for p, ids in places.items() if len(ids) > 1}
    assert name_of(demo, "demo_case_0001_r01").place.startswith("Conversation 1,")
    assert name_of(demo, "hb:p-inv-1::c1").place == "Graded conversation 5"
    assert name_of(demo, KB_UID).place != name_of(
        demo, "kb:demo/r1/kb-demo-001__atlas-clinician").place == "Case 1"


def test_a_count_of_one_is_singular():
    assert [plural(n, "item") for n in (0, 1, 2, 1200)] == [
        "0 items", "1 item", "2 items", "1,200 items"]
    assert plural(1, "criterion", "criteria") == "1 criterion"
    assert plural(3, "criterion", "criteria") == "3 criteria"
    assert plural(1, "reply", "replies") == "1 reply"


@pytest.mark.parametrize("raw, words", [
    ("demo:mapper@v1", "The mapper, prompt v1"),
    ("klinikebench-judge:demo/judge-1", "The judge (judge-1)"),
    ("healthbench-grader", "The grader"),
    ("carebench-gold", "The reference label"),
    ("klinikebench-verifier", "The verifier"),
    ("adjudicated", "The settled answer"),
    ("healthbench-physician:ph-a", "Physician ph-a"),
    ("Dr. Mei Tanaka", "Dr. Mei Tanaka"),
    ("nobody-known", "nobody-known"),
])
def test_raters_are_named_by_their_role(demo, raw, words):
    assert rater_name(demo, raw) == words


def test_a_study_round_and_a_turn_are_never_the_same_word():
    assert study_round("Pilot") == "Study round: Pilot"
    assert turn(2) == "turn 2"
