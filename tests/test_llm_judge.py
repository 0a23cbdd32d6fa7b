"""Rubric judges (one criterion per call, any item kind with a renderer) and
CliniCARE verdict extraction, through the SDKs against the fake server."""

from __future__ import annotations

import json

import pytest

from labels.llm import RECORD_CHAR_LIMIT, judge_values, plan_extract_run, plan_judge_run, run_judge
from labels.llm.prompts import load_prompt
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter
from tests import conftest_llm as llm
from tests.fake_llm_server import Reply, Unparseable

CRITERIA = [("Advises seeing a clinician if the rash spreads.", 5.0),
            ("Recommends antibiotics without an examination.", -6.0)]


def write_graded_conversations(store) -> None:
    """A HealthBench-shaped prompt (criteria bound to it, no completion of its
    own) with two model completions, and one physician's labels on one."""
    records = [
        ItemRecord(uid="hb:p1", kind="graded_conversation", dataset="healthbench-test",
                   payload={"turns": [{"role": "user", "content": "My toddler has a red rash."}],
                            "completion": None}),
        ItemRecord(uid="hb:p1::c1", kind="graded_conversation", dataset="healthbench-test",
                   parent_uid="hb:p1", model="model-a",
                   payload={"completion": "Watch it; see a doctor if it spreads.",
                            "completion_source": "model"}),
        ItemRecord(uid="hb:p1::c2", kind="graded_conversation", dataset="healthbench-test",
                   parent_uid="hb:p1", model="model-b",
                   payload={"completion": "Start amoxicillin today.", "completion_source": "model"}),
        RaterRecord("healthbench-physician:1", "human", role="physician"),
    ]
    for i, (text, points) in enumerate(CRITERIA):
        records.append(QuestionRecord(key=f"hb:p1:c{i}", codebook="rubric", kind="criterion",
                                      text=text, item_uid="hb:p1", points=points,
                                      meta={"group": "healthbench"}))
    records.append(AnnotationRecord("hb:p1::c1", "hb:p1:c0", "healthbench-physician:1", "met"))
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "judge.db"
    with open_store(path) as store:
        write_graded_conversations(store)
    return path


def answers(db_path, rater):
    with open_store(db_path) as store:
        return {(r[0], r[1]): (r[2], r[3]) for r in store.query(
            "SELECT i.uid, q.key, a.value, a.rationale FROM annotations a"
            " JOIN items i ON i.id = a.item_id JOIN questions q ON q.id = a.question_id"
            " JOIN raters r ON r.id = a.rater_id WHERE r.name = ?", (rater,))}


def test_each_criterion_is_judged_on_its_own_for_every_completion(db_path, fake):
    with open_store(db_path) as store:
        plan = plan_judge_run(store, "openai:gpt-4.1-mini")
    assert {(u.work.item_uid, u.work.question_key) for u in plan.units} == {
        ("hb:p1::c1", "hb:p1:c0"), ("hb:p1::c1", "hb:p1:c1"),
        ("hb:p1::c2", "hb:p1:c0"), ("hb:p1::c2", "hb:p1:c1")}
    assert plan.unusable == {"nothing to judge in a graded_conversation item": 2}
    fake.script(*[Reply({"explanation": "It does.", "criteria_met": True})] * 4)
    summary = run_judge(str(db_path), plan, concurrency=2, keys=llm.KEYS,
                        base_url=fake.openai_base_url)
    assert summary.answered == 4
    got = answers(db_path, "openai:gpt-4.1-mini@judge-v1")
    assert set(got.values()) == {("met", "It does.")}
    for received in fake.model_calls():
        user = received.body["messages"][1]["content"]
        assert "My toddler has a red rash." in user  # the prompt's turns, shared
        assert ("[5] Advises seeing" in user) != ("[-6] Recommends antibiotics" in user)
        assert "healthbench-physician" not in json.dumps(received.body)
        schema = received.body["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["criteria_met"]["type"] == "boolean"


def test_the_judge_can_be_limited_to_what_the_clinicians_judged(db_path, fake):
    with open_store(db_path) as store:
        plan = plan_judge_run(store, "anthropic:claude-haiku-4-5",
                              filters={"answered_by": "healthbench-physician:*"})
    assert [(u.work.item_uid, u.work.question_key) for u in plan.units] == [
        ("hb:p1::c1", "hb:p1:c0")]
    fake.script(Reply({"explanation": "Safety-netting present.", "criteria_met": False}))
    run_judge(str(db_path), plan, keys=llm.KEYS, base_url=fake.base_url)
    assert answers(db_path, "anthropic:claude-haiku-4-5@judge-v1") == {
        ("hb:p1::c1", "hb:p1:c0"): ("not_met", "Safety-netting present.")}


def test_an_unreadable_verdict_is_never_guessed(db_path, fake):
    fake.script(*[Unparseable("Yes, the criterion is met.")] * 3)
    with open_store(db_path) as store:
        plan = plan_judge_run(store, "openai:gpt-4.1-mini", limit=1)
    summary = run_judge(str(db_path), plan, concurrency=1, keys=llm.KEYS,
                        base_url=fake.openai_base_url)
    assert summary.failed == 1
    assert list(answers(db_path, "openai:gpt-4.1-mini@judge-v1").values()) == [(None, None)]


def test_a_trajectory_gate_is_judged_from_a_compact_record(tmp_path, fake):
    db_path = tmp_path / "traj.db"
    steps = [{"step_id": i, "source": "agent", "message": f"Asked about symptom {i}. " + "." * 900,
              "tool_calls": [{"tool_call_id": f"t{i}", "function_name": "clinic_say",
                              "arguments": {"text": "q" * 2000}}],
              "observation": {"results": [{"source_call_id": f"t{i}", "content": "a" * 5000}]}}
             for i in range(1, 120)]
    with open_store(db_path) as store, store.transaction() as conn:
        RecordWriter(conn, source="test").write([
            ItemRecord(uid="kb:run1", kind="trajectory", dataset="klinikebench-test",
                       payload={"steps": steps,
                                "transcript": [{"role": "user", "content": "Chest tightness."}],
                                "final_answer": {"text": "Diagnosis: stable angina."}}),
            QuestionRecord(key="kb:run1:must_ask:onset", codebook="rubric", kind="criterion",
                           text="The clinician asks when the symptoms started.",
                           item_uid="kb:run1", meta={"group": "must_ask"}),
        ])
    with open_store(db_path) as store:
        plan = plan_judge_run(store, "openai:gpt-4.1-mini")
    (unit,) = plan.units
    user = unit.body["messages"][1]["content"]
    assert len(unit.work.values["record"]) <= RECORD_CHAR_LIMIT
    assert "Chest tightness." in user and "stable angina" in user and "left out" in user
    assert f"{RECORD_CHAR_LIMIT:,}" in unit.body["messages"][0]["content"]  # the limit is stated
    run_judge(str(db_path), plan, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert len(answers(db_path, "openai:gpt-4.1-mini@judge-v1")) == 1


def test_any_record_text_can_be_judged_the_same_way():
    values = judge_values("A report " + "x" * 50_000, "[3] Cites the lab result.", limit=1_000)
    system, user = load_prompt("judge").render(values)
    assert len(values["record"]) <= 1_000 and "[3] Cites the lab result." in user
    assert "1,000 characters" in system


def test_unknown_filters_are_refused(db_path):
    with open_store(db_path) as store, pytest.raises(ValueError, match="known: dataset"):
        plan_judge_run(store, "openai:gpt-4.1-mini", filters={"gold": "x"})


# -- CliniCARE verdicts ---------------------------------------------------------------------------


def write_reports(store) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write([
            ItemRecord(uid="cc:t1", kind="trajectory", dataset="clinicare-test", payload={
                "final_answer": {"text": "The chart shows no ferritin.\nAnswer - lack of data",
                                 "verdict": None}}),
            ItemRecord(uid="cc:t2", kind="trajectory", dataset="clinicare-test", payload={
                "final_answer": {"text": "## Answer: YES", "verdict": "YES"}}),
            ItemRecord(uid="cc:t3", kind="trajectory", dataset="clinicare-test", payload={
                "final_answer": {"text": "I could not finish the review.", "verdict": None}}),
        ])


def test_a_report_verdict_is_extracted_or_recorded_as_not_stated(tmp_path, fake):
    db_path = tmp_path / "cc.db"
    with open_store(db_path) as store:
        write_reports(store)
        plan = plan_extract_run(store, "openai:gpt-4.1-mini", filters={"unparsed_only": True})
    assert [u.work.item_uid for u in plan.units] == ["cc:t1", "cc:t3"]
    assert "The chart shows no ferritin." in plan.units[0].body["messages"][1]["content"]
    fake.script(Reply({"explanation": "Says data are lacking.",
                       "verdict": "INDETERMINATE_LACK_OF_DATA"}),
                Reply({"explanation": "No verdict.", "verdict": "NO_VERDICT_STATED"}))
    run_judge(str(db_path), plan, concurrency=1, keys=llm.KEYS, base_url=fake.openai_base_url)
    with open_store(db_path) as store:
        rows = {r[0]: (r[1], r[2]) for r in store.query(
            "SELECT i.uid, a.status, a.value FROM annotations a JOIN items i ON i.id = a.item_id"
            " JOIN questions q ON q.id = a.question_id WHERE q.key = 'clinicare.verdict'")}
    assert rows == {"cc:t1": ("answered", "INDETERMINATE_LACK_OF_DATA"),
                    "cc:t3": ("cannot_assess", None)}


def test_a_studys_chat_is_put_before_a_judge_message_by_message():
    """A study's own chat (`conversation` items, issue 26): a criterion asked of chats
    is judged on the chat as its file gave it, not counted as 'nothing to judge'."""
    from labels.llm.render import ItemView, render_record

    chat = ItemView("conversation", {"id": "c1", "messages": [
        {"role": "user", "content": "My chest hurts when I climb stairs."},
        {"role": "assistant", "content": "Please call your doctor today."}]}, None, None)
    assert render_record(chat) == ("user: My chest hurts when I climb stairs.\n\n"
                                   "assistant: Please call your doctor today.")
    assert render_record(ItemView("conversation", {"id": "c2", "messages": []}, None, None)) is None
