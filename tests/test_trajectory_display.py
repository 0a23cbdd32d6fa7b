"""The display models of trajectories and graded conversations, the HealthBench score,
and the codebooks behind the trajectory screens. Payloads here are invented."""

from __future__ import annotations

import json

import pytest

from bench.gen_klinikebench import episode
from codebook import CodebookError, builtin_codebooks, parse_codebook
from review.datasets.sources import import_file
from review.reviewing.answers import normalise_value
from review.reviewing.trajectory import (
    PREVIEW_CHARS,
    criteria_score,
    criterion_view,
    graded_conversation_view,
    healthbench_score,
    load_step_marks,
    load_trajectory,
    parse_clinic_command,
    trajectory_payload,
    trajectory_view,
)
from tests.helpers import write_jsonl


def payload() -> dict:
    say = 'clinic say "Does the pain spread to your arm?"'
    return trajectory_payload({
        "schema_version": "ATIF-v1.5",
        "agent": {"name": "clinic-agent", "version": "2", "model_name": "vendor/model-z"},
        "steps": [
            {"step_id": 1, "source": "system", "message": "You are a careful clinician (invented).",
             "timestamp": "2026-03-01T09:00:00Z"},
            {"step_id": 2, "source": "user", "message": [{"type": "text", "text": "Chest pain since noon."}]},
            {"step_id": 3, "source": "agent", "message": "I will ask about radiation.",
             "reasoning_content": "Rule out cardiac pain.",
             "tool_calls": [{"tool_call_id": "a", "function_name": "bash",
                             "arguments": {"command": say}}],
             "observation": {"results": [{"source_call_id": "a", "content": "Yes, down the left arm."}]},
             "metrics": {"prompt_tokens": 200, "completion_tokens": 30, "cached_tokens": 50,
                         "cost_usd": 0.002}},
            {"step_id": 4, "source": "agent", "message": "Ordering an ECG.",
             "tool_calls": [
                 {"tool_call_id": "b", "function_name": "bash",
                  "arguments": {"keystrokes": "clinic call order_ecg '{\"leads\": 12}'\n"}},
                 {"tool_call_id": "c", "function_name": "lookup", "arguments": {"q": "troponin"}}],
             "observation": {"results": [{"source_call_id": "b", "content": "x" * (PREVIEW_CHARS + 10)},
                                         {"source_call_id": "c", "content": "no result yet"},
                                         {"source_call_id": None, "content": "environment note"}]},
             "metrics": {"prompt_tokens": 300, "completion_tokens": 40, "cost_usd": 0.003},
             "timestamp": "2026-03-01T09:02:30Z"},
            {"step_id": 5, "source": "agent", "message": "Call emergency services now."},
        ],
    }, transcript=[{"role": "assistant", "content": "Does the pain spread?"},
                   {"role": "user", "content": "Yes."}])


def test_steps_show_sources_messages_reasoning_calls_and_results():
    view = trajectory_view(payload())
    assert [s.source for s in view.steps] == ["system", "user", "agent", "agent", "agent"]
    assert [s.index for s in view.steps] == [0, 1, 2, 3, 4]
    assert view.steps[1].message == "Chest pain since noon."
    step = view.steps[2]
    assert step.reasoning == "Rule out cardiac pain."
    assert step.tool_calls[0].kind == "say" and step.said_to_patient == ["Does the pain spread to your arm?"]
    assert step.results[0].from_patient and step.results[0].source_call_id == "a"
    assert step.metrics == {"prompt_tokens": 200, "completion_tokens": 30, "cached_tokens": 50,
                            "cost_usd": 0.002}
    ecg, lookup = view.steps[3].tool_calls
    assert (ecg.kind, ecg.name, ecg.arguments) == ("clinic_tool", "order_ecg", {"leads": 12})
    assert (lookup.kind, lookup.name, lookup.arguments) == ("tool", "lookup", {"q": "troponin"})
    long, _, loose = view.steps[3].results
    assert long.truncated and len(long.preview) == PREVIEW_CHARS and len(long.content) == PREVIEW_CHARS + 10
    assert loose.source_call_id is None and not loose.from_patient
    assert view.final_answer.text == "Call emergency services now." and view.final_answer.step_index == 4
    assert view.agent == {"name": "clinic-agent", "version": "2", "model_name": "vendor/model-z"}
    assert [(t.speaker, t.text) for t in view.dialogue] == [("clinician", "Does the pain spread?"),
                                                            ("patient", "Yes.")]


def test_timeline_summarises_the_run_and_shows_marked_steps():
    view = trajectory_view(payload(), marked={4: "wrong_tool"})
    tl = view.timeline
    assert [m.kind for m in tl.marks] == ["system", "task", "said", "tool", "answer"]
    assert tl.marks[3].label == "order_ecg, lookup" and tl.marks[3].marked == "wrong_tool"
    assert tl.counts == {"steps": 5, "agent_steps": 3, "tool_calls": 2, "said": 1,
                         "patient_replies": 1, "subagents": 0, "marked": 1}
    assert (tl.prompt_tokens, tl.completion_tokens, tl.cached_tokens) == (500, 70, 50)
    assert tl.cost_usd == pytest.approx(0.005) and tl.duration_s == 150.0
    assert all(len(m.label) <= 60 for m in tl.marks)


def test_terminus_replies_give_reasoning_plan_and_commands():
    reply = {"analysis": "The patient may be dehydrated.", "plan": "Ask about fluids.",
             "commands": [{"keystrokes": 'clinic say "How much have you drunk today?"\n'},
                          {"keystrokes": "ls -la\n"}], "task_complete": True}
    view = trajectory_view({"steps": [
        {"step_id": 1, "source": "user", "message": "Task."},
        {"step_id": 2, "source": "agent", "message": json.dumps(reply)}]})
    step = view.steps[1]
    assert step.message == "Ask about fluids." and step.reasoning == "The patient may be dehydrated."
    assert [c.kind for c in step.tool_calls] == ["say", "tool"] and step.done
    assert step.tool_calls[1].command == "ls -la"


@pytest.mark.parametrize("command,expected", [
    ('clinic say "Any fever?"', ("say", "say", {"text": "Any fever?"}, "Any fever?")),
    ("clinic call order_lab '{\"test\": \"FBC\"}'", ("clinic_tool", "order_lab", {"test": "FBC"}, None)),
    ("clinic call refer", ("clinic_tool", "refer", {}, None)),
    ("clinic call note 'not json'", ("clinic_tool", "note", "not json", None)),
    ("echo hello", None),
    ('clinic say "unbalanced', None),
])
def test_clinic_commands_parsed(command, expected):
    assert parse_clinic_command(command) == expected


def test_a_run_with_only_a_transcript_and_user_steps_as_patient():
    view = trajectory_view({"transcript": [{"role": "user", "content": "I feel dizzy."},
                                           {"role": "assistant", "content": "Since when?"}],
                            "error": "SimulatorTimeout"}, marked={2: "premature_conclusion"})
    assert [s.source for s in view.steps] == ["patient", "agent"] and view.error == "SimulatorTimeout"
    assert view.timeline.counts["patient_replies"] == 1 and view.timeline.counts["marked"] == 1
    assert view.timeline.marks[1].marked == "premature_conclusion"
    view = trajectory_view({"user_is_patient": True, "steps": [
        {"step_id": 1, "source": "user", "message": "Task."},
        {"step_id": 2, "source": "agent", "message": "Hello, what brings you in?"},
        {"step_id": 3, "source": "user", "message": "A cough."}]})
    assert [m.kind for m in view.timeline.marks] == ["task", "answer", "patient"]


def test_step_marks_of_a_rater_feed_the_timeline(store, tmp_path):
    from store.records import AnnotationRecord, RaterRecord
    from store.writer import RecordWriter

    import_file(store, write_jsonl(tmp_path / "one.jsonl", [episode(2, seed=4, steps=8)]))
    uid = store.scalar("SELECT uid FROM items")
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord("dr-invented", "human"))
        w.rater(RaterRecord("dr-other", "human"))
        w.annotation(AnnotationRecord(uid, "trajectory.step_error", "dr-invented", "wrong_tool",
                                      target="step:4", extra={"severity": 2}))
        w.annotation(AnnotationRecord(uid, "trajectory.step_error", "dr-invented", "unsafe_action",
                                      target="step:4"))  # a change of mind supersedes
        w.annotation(AnnotationRecord(uid, "trajectory.step_error", "dr-other", "no_error",
                                      target="step:5"))
    marks = load_step_marks(store, uid, "dr-invented")
    assert marks == {4: "unsafe_action"}
    view = load_trajectory(store, uid, marked=marks)
    assert [m.marked for m in view.timeline.marks if m.marked] == ["unsafe_action"]
    assert view.timeline.marks[3].step_id == 4 and view.timeline.counts["marked"] == 1


def test_a_200_step_trajectory_opens_whole(store, tmp_path):
    """Every step of a long run is there (how fast it opens is measured, not asserted:
    bench/bench_trajectory_open.py)."""
    row = episode(5, seed=1, steps=200)
    import_file(store, write_jsonl(tmp_path / "long.jsonl", [row]))
    uid = store.scalar("SELECT uid FROM items")
    view = load_trajectory(store, uid)
    assert len(view.steps) == len(json.loads(row["agent_steps"])["steps"]) >= 60


# -- graded conversations and the score ------------------------------------------

CRITERIA = [
    {"key": "k1", "text": "Advises rest.", "points": 5, "meta": json.dumps({"axis": "accuracy", "index": 0})},
    {"key": "k2", "text": "Asks about fever.", "points": 3, "meta": {"axis": "completeness", "index": 1}},
    {"key": "k3", "text": "Prescribes antibiotics.", "points": -4, "meta": {"index": 2}},
]


def test_healthbench_score_formula():
    points = [5, 3, -4]
    assert healthbench_score(points, [True, True, False]) == 1.0
    assert healthbench_score(points, [True, False, False]) == pytest.approx(5 / 8)
    assert healthbench_score(points, [True, False, True]) == pytest.approx(1 / 8)
    assert healthbench_score(points, [False, False, True]) == 0.0  # -0.5 clipped
    assert healthbench_score(points, [False, False, True], clip=False) == pytest.approx(-0.5)
    assert healthbench_score(points, [True, None, False]) is None  # unanswered: no score yet
    assert healthbench_score([-2], [True]) is None  # no positive points
    with pytest.raises(ValueError):
        healthbench_score(points, [True])


def test_graded_conversation_view_lists_criteria_with_points():
    view = graded_conversation_view(
        {"completion": "Rest and fluids.", "completion_source": "model"}, reversed(CRITERIA),
        parent_payload={"turns": [{"role": "user", "content": "I have a cold."}],
                        "ideal_completion": None}, model="m")
    assert [c.key for c in view.criteria] == ["k1", "k2", "k3"]
    assert view.max_points == 8 and view.criteria[2].must_not and not view.criteria[0].must_not
    assert view.turns[0].text == "I have a cold." and view.completion == "Rest and fluids."
    assert criteria_score(view.criteria, {"k1": "met", "k2": "not_met", "k3": "met"}) == pytest.approx(1 / 8)
    assert criteria_score(view.criteria, {"k1": "met"}) is None
    assert criterion_view(CRITERIA[1]).axis == "completeness"


# -- codebooks -------------------------------------------------------------------

def test_trajectory_codebooks_load_with_severity_and_rubric_labels(store):
    books = builtin_codebooks()
    errors = books["trajectory-errors"]
    assert errors.codes == ["unsafe_action", "missed_essential_question", "wrong_tool",
                            "wrong_parameters", "unsupported_claim", "premature_conclusion", "no_error"]
    assert [s["level"] for s in errors.severity] == [1, 2, 3, 4, 5]
    assert all(label.rules and label.definition for label in errors.labels)
    assert books["rubric"].kind == "rubric" and books["rubric"].codes == ["met", "not_met"]
    assert books["clinicare-verdict"].codes == ["YES", "NO", "INDETERMINATE_LACK_OF_DATA",
                                                "INDETERMINATE_MEDICAL_AMBIGUITY"]
    assert normalise_value("clinicare-verdict", "labelset", "yes") == "YES"
    with pytest.raises(ValueError):
        normalise_value("clinicare-verdict", "labelset", "INDETERMINATE")  # two codes match
    stored = json.loads(store.scalar(
        "SELECT content FROM codebook_versions WHERE codebook = 'trajectory-errors'"))
    assert len(stored["severity"]) == 5  # the database copy keeps the severity scale
    assert store.scalar("SELECT applies_to FROM questions WHERE key = 'trajectory.step_error'") == "trajectory"
    assert store.scalar("SELECT applies_to FROM questions WHERE key = 'clinicare.verdict'") == "trajectory"


def test_severity_levels_are_checked():
    data = builtin_codebooks()["trajectory-errors"].to_dict()
    data["severity"] = data["severity"][:2] + [{"level": 4, "name": "x", "definition": "y"}]
    with pytest.raises(CodebookError, match=r"severity\[2\].level: expected 3"):
        parse_codebook(data, "errors.toml")
    data["severity"] = [{"level": 1, "name": "x"}]
    with pytest.raises(CodebookError, match=r"severity\[0\].definition: missing required field"):
        parse_codebook(data, "errors.toml")


def test_the_tasks_requirements_are_read_in_words():
    from review.reviewing.trajectory import task_requirements

    meta = {"diagnosis": " stable angina ", "required_tools": ["check_vitals", "refer"],
            "parameterised_actions": [{"tool": "prescribe", "params": {
                "drug": "glyceryl trinitrate spray", "dose": "400 micrograms", "repeats": 2}},
                {"odd": ["shape"]}],
            "gates": {"diagnosis": {"passed": True}}}  # a verdict: never part of it
    assert task_requirements(meta) == [
        ("Reference diagnosis", ["stable angina"]),
        ("Required tools", ["check_vitals", "refer"]),
        ("Required actions, with their parameters",
         ["prescribe: drug glyceryl trinitrate spray, dose 400 micrograms, repeats 2",
          '{"odd": ["shape"]}'])]
    assert task_requirements({"diagnosis": "", "required_tools": "not a list"}) == []
