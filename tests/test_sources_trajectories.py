"""Importers of agent runs: Harbor/ATIF directories, CliniCARE trials and cohort, KlinikeBench rows.

Every fixture here is invented.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bench.gen_klinikebench import write_jsonl as generate_jsonl
from bench.gen_klinikebench import write_parquet as generate_parquet
from review.datasets.sources import InputError, detect_format, import_file
from review.datasets.sources.base import ImportOptions
from review.datasets.sources.clinicare import cited_evidence, parse_verdict, trial_uid
from review.datasets.sources.klinikebench import read_gates, read_klinikebench
from tests.helpers import table_counts, write_jsonl

# -- builders ------------------------------------------------------------------

def atif_doc(n_agent: int = 3, version: str = "ATIF-v1.6") -> dict:
    steps = [
        {"step_id": 1, "source": "system", "message": "You answer questions about a chart (invented)."},
        {"step_id": 2, "source": "user", "message": "Has the invented patient had a fever this week?"},
    ]
    for _ in range(n_agent):
        sid = len(steps) + 1
        steps.append({
            "step_id": sid, "source": "agent", "timestamp": f"2026-02-01T10:00:{sid:02d}Z",
            "message": f"Looking at record {sid}.", "reasoning_content": "Check vitals first.",
            "tool_calls": [{"tool_call_id": f"call_{sid}", "function_name": "read_chart",
                            "arguments": {"section": "vitals", "page": sid}}],
            "observation": {"results": [{"source_call_id": f"call_{sid}",
                                         "content": f"Temperature 36.{sid} C [obs-{sid}]"}]},
            "metrics": {"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.001},
        })
    return {"schema_version": version, "session_id": "sess-1",
            "agent": {"name": "fake-agent", "version": "1.0", "model_name": "vendor/model-x"},
            "steps": steps}


def make_trial(root: Path, name: str, *, atif: dict | None = None, rewards: dict | None = None,
               result: dict | None = None, report: str | None = None,
               details: dict | None = None, raw_atif: str | None = None) -> Path:
    trial = root / name
    (trial / "agent").mkdir(parents=True)
    (trial / "verifier").mkdir()
    result = result if result is not None else {
        "task_name": f"task-{name}", "trial_name": f"{name}__abc",
        "config": {"agent": {"model_name": "vendor/model-x"}},
        "agent_result": {"n_input_tokens": 300, "n_output_tokens": 60, "cost_usd": 0.003},
    }
    (trial / "result.json").write_text(json.dumps(result))
    if raw_atif is not None:
        (trial / "agent" / "trajectory.json").write_text(raw_atif)
    elif atif is not False:
        (trial / "agent" / "trajectory.json").write_text(json.dumps(atif or atif_doc()))
    if rewards is not None:
        (trial / "verifier" / "reward.json").write_text(json.dumps(rewards))
    if report is not None:
        (trial / "agent" / "report.md").write_text(report)
    if details is not None:
        (trial / "verifier" / "reward-details.json").write_text(json.dumps(details))
    return trial


def annotations(store, item_uid: str | None = None) -> dict[tuple[str, str, str], dict]:
    """{(item uid, question key, rater): row} of current answers."""
    rows = store.query(
        "SELECT i.uid, q.key, r.name, r.kind, a.value, a.rationale, a.extra FROM current_annotations a"
        " JOIN items i ON i.id = a.item_id JOIN questions q ON q.id = a.question_id"
        " JOIN raters r ON r.id = a.rater_id" + (" WHERE i.uid = ?" if item_uid else ""),
        (item_uid,) if item_uid else (),
    )
    return {(r["uid"], r["key"], r["name"]): dict(r) for r in rows}


def item(store, uid: str) -> dict:
    row = store.query_one("SELECT * FROM items WHERE uid = ?", (uid,))
    assert row is not None, uid
    out = dict(row)
    out["payload"], out["meta"] = json.loads(out["payload"]), json.loads(out["meta"])
    return out


# -- Harbor --------------------------------------------------------------------

def test_harbor_job_imports_each_trial_and_missing_reward_is_not_zero(store, tmp_path):
    job = tmp_path / "job-1"
    make_trial(job, "trial-1", rewards={"reward": 1.0})
    make_trial(job, "trial-2", rewards={"reward": 0})
    make_trial(job, "trial-3", rewards={"runtime_s": 12.5})
    assert detect_format(job).name == "harbor"
    result = import_file(store, job)
    assert (result.rows, result.items, result.annotations) == (3, 3, 2)
    got = annotations(store)
    assert got[("harbor:trial-1__abc", "harbor:trial-1__abc:reward", "harbor-verifier")]["value"] == "met"
    zero = got[("harbor:trial-2__abc", "harbor:trial-2__abc:reward", "harbor-verifier")]
    assert zero["value"] == "not_met" and json.loads(zero["extra"])["score"] == 0.0
    assert zero["kind"] == "reference"
    assert not [k for k in got if k[0] == "harbor:trial-3__abc"]  # not measured: no answer
    first = item(store, "harbor:trial-1__abc")
    assert first["kind"] == "trajectory" and first["model"] == "vendor/model-x"
    assert first["case_id"] == "task-trial-1" and len(first["payload"]["steps"]) == 5
    before = table_counts(store)
    assert import_file(store, job).already_imported
    assert table_counts(store) == before


def test_a_trial_directory_alone_gets_the_same_uid(store, tmp_path):
    trial = make_trial(tmp_path / "job-2", "trial-7", rewards={"reward": 1})
    assert detect_format(trial).name == "harbor"
    import_file(store, trial)
    assert store.scalar("SELECT uid FROM items") == "harbor:trial-7__abc"


def test_reward_from_result_json_and_failed_trial_kept(store, tmp_path):
    job = tmp_path / "job-3"
    make_trial(job, "trial-1", result={"trial_name": "t1", "task_name": "task-a",
                                       "verifier_result": {"rewards": {"reward": 1}}})
    make_trial(job, "trial-2", atif=False, result={
        "trial_name": "t2", "task_name": "task-a",
        "exception_info": {"exception_type": "AgentTimeoutError", "exception_message": "agent timed out"}})
    import_file(store, job)
    assert annotations(store)[("harbor:t1", "harbor:t1:reward", "harbor-verifier")]["value"] == "met"
    failed = item(store, "harbor:t2")
    assert failed["failed"] == 1 and failed["payload"]["error"] == "agent timed out"


def _mutate(fn):
    doc = atif_doc(3)
    fn(doc)
    return json.dumps(doc)


BAD_TRAJECTORIES = [
    ("dangling source_call_id",
     _mutate(lambda d: d["steps"][4]["observation"]["results"][0].update(source_call_id="call_9")),
     "job/trial-3/agent/trajectory.json: steps[4].observation.results[0].source_call_id: "
     "'call_9' names no tool call of step 5"),
    ("truncated JSON", json.dumps(atif_doc())[:-40],
     "job/trial-3/agent/trajectory.json: not valid JSON:"),
    ("step ids out of order", _mutate(lambda d: d["steps"][3].update(step_id=7)),
     "job/trial-3/agent/trajectory.json: steps[3].step_id: expected 4 (step ids run 1..n in order), got 7"),
    ("arguments not an object",
     _mutate(lambda d: d["steps"][2]["tool_calls"][0].update(arguments="section=vitals")),
     "steps[2].tool_calls[0].arguments: expected a JSON object of arguments, got string"),
    ("message of the wrong type", _mutate(lambda d: d["steps"][1].update(message=42)),
     "steps[1].message: expected a string or a list of content parts, got int"),
    ("content part of unknown type",
     _mutate(lambda d: d["steps"][1].update(message=[{"type": "video", "source": "x.mp4"}])),
     "steps[1].message[0].type: expected one of text, image, audio, got 'video'"),
    ("missing agent", _mutate(lambda d: d.pop("agent")), "agent: missing required field"),
    ("missing source", _mutate(lambda d: d["steps"][0].pop("source")),
     "steps[0].source: missing required field"),
    ("unknown version", _mutate(lambda d: d.update(schema_version="ATIF-v2.0")),
     "schema_version: 'ATIF-v2.0' is not a version carelens reads"),
    ("no steps", _mutate(lambda d: d.update(steps=[])), "steps: a trajectory needs at least one step"),
    ("fractional tokens", _mutate(lambda d: d["steps"][2]["metrics"].update(prompt_tokens=1.5)),
     "steps[2].metrics.prompt_tokens: expected a whole number, got 1.5"),
]


@pytest.mark.parametrize("name,raw,message", BAD_TRAJECTORIES, ids=[b[0] for b in BAD_TRAJECTORIES])
def test_malformed_atif_gives_one_message_with_the_json_path_and_changes_nothing(
        store, tmp_path, name, raw, message):
    job = tmp_path / "job"
    make_trial(job, "trial-1", rewards={"reward": 1})
    make_trial(job, "trial-3", raw_atif=raw, rewards={"reward": 1})
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, job)
    assert message in str(err.value)
    assert str(err.value).count("\n") == 0
    assert table_counts(store) == before


def test_wrong_reward_type_names_the_key(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "trial-1", rewards={"reward": "high"})
    before = table_counts(store)
    with pytest.raises(InputError, match=r"job/trial-1/verifier/reward.json: reward: expected a number"):
        import_file(store, job)
    assert table_counts(store) == before


def test_content_parts_and_embedded_subagents_import_and_resolve(store, tmp_path):
    doc = atif_doc(2, version="ATIF-v1.7")
    doc["trajectory_id"] = "main"
    doc["steps"][1]["message"] = [{"type": "text", "text": "See the scan."},
                                  {"type": "image", "source": {"path": "scan.png", "media_type": "image/png"}}]
    doc["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "child-1"}]
    child = atif_doc(1, version="ATIF-v1.7")
    child["trajectory_id"] = "child-1"
    doc["subagent_trajectories"] = [child]
    make_trial(tmp_path / "job", "trial-1", atif=doc)
    import_file(store, tmp_path / "job")
    from review.reviewing.trajectory import load_trajectory, subagent_view

    view = load_trajectory(store, "harbor:trial-1__abc")
    assert view.steps[1].message == "See the scan.\n\n[image: scan.png]"
    ref = view.steps[2].subagents[0]
    assert (ref.trajectory_id, ref.embedded_index) == ("child-1", 0)
    assert view.subagent_count == 1 and view.timeline.marks[2].kind == "subagent"
    payload = item(store, "harbor:trial-1__abc")["payload"]
    assert len(subagent_view(payload, 0).steps) == 3

    bad = copy.deepcopy(doc)
    bad["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "ghost"}]
    make_trial(tmp_path / "job2", "trial-1", atif=bad)
    with pytest.raises(InputError, match=r"subagent_trajectory_ref\[0\].trajectory_id: 'ghost' names no "
                                         r"embedded subagent trajectory"):
        import_file(store, tmp_path / "job2")
    bad_child = copy.deepcopy(doc)
    bad_child["subagent_trajectories"][0]["steps"][2]["step_id"] = 9
    make_trial(tmp_path / "job3", "trial-1", atif=bad_child)
    with pytest.raises(InputError, match=r"subagent_trajectories\[0\].steps\[2\].step_id: expected 3"):
        import_file(store, tmp_path / "job3")


# -- CliniCARE -----------------------------------------------------------------

@pytest.mark.parametrize("report,verdict", [
    ("# Report\n\n## Answer: YES\n\nEvidence: [obs-1]", "YES"),
    ("## Answer: **NO** - the last value was normal", "NO"),
    ("### Answer: Indeterminate - lack of data", "INDETERMINATE_LACK_OF_DATA"),
    ("## Answer: INDETERMINATE_MEDICAL_AMBIGUITY", "INDETERMINATE_MEDICAL_AMBIGUITY"),
    ("## answer: indeterminate (medical ambiguity)", "INDETERMINATE_MEDICAL_AMBIGUITY"),
    ("## Answer: `yes`", "YES"),
    ("## Answer: NOT SURE", None),
    ("## Answer: maybe", None),
    ("Answer: YES (no heading)", None),
    ("no answer line at all", None),
])
def test_verdict_parsed_from_the_answer_line(report, verdict):
    assert parse_verdict(report)[0] == verdict


def test_cited_evidence_ids_in_order_without_links():
    text = "Fever [obs-12] and [Observation/42]; see [the guideline](http://x) and [obs-12] again."
    assert cited_evidence(text) == ["obs-12", "Observation/42"]


CLINICARE_REWARDS = {"score": 1, "outcome_label_parsed": True, "grounding_id_precision": 0.75,
                     "process_pct": 85.0, "report_present": True}


def clinicare_job(root: Path) -> Path:
    job = root / "cc-job"
    make_trial(job, "trial-1", rewards=CLINICARE_REWARDS,
               result={"task_name": "sc07-a1b2c3", "trial_name": "sc07-a1b2c3__x1",
                       "config": {"agent": {"model_name": "vendor/model-x"}}},
               report="# Findings\nNo fever recorded [obs-3].\n\n## Answer: NO\n",
               details={"process_rubric": [
                   {"criterion": "Reads the vitals before answering", "met": True},
                   {"criterion": "Invents a lab value", "type": "MUST-NOT", "met": False,
                    "explanation": "no invented values"}]})
    doc = atif_doc(2)
    doc["steps"][-1]["message"] = "Report\n\n## Answer: Indeterminate - lack of data\nSee [obs-4]."
    make_trial(job, "trial-2", atif=doc,
               rewards={"score": 0, "judge_failed": True, "report_present": True},
               result={"task_name": "sc09-ffee01", "trial_name": "sc09-ffee01__x2",
                       "config": {"agent": {"model_name": "vendor/model-x"}}})
    return job


def test_clinicare_trials_give_the_agent_verdict_and_verifier_answers(store, tmp_path):
    job = clinicare_job(tmp_path)
    assert detect_format(job).name == "clinicare"
    import_file(store, job)
    got = annotations(store)
    t1, t2 = trial_uid("sc07-a1b2c3__x1"), trial_uid("sc09-ffee01__x2")
    assert "sc07" not in t1 and t1.startswith("clinicare:")  # keys built on it leak no task id
    assert got[(t1, "clinicare.verdict", "agent:vendor/model-x")]["value"] == "NO"
    assert json.loads(got[(t1, "clinicare.verdict", "agent:vendor/model-x")]["extra"])["evidence"] == ["obs-3"]
    assert got[(t2, "clinicare.verdict", "agent:vendor/model-x")]["value"] == "INDETERMINATE_LACK_OF_DATA"
    assert got[(t1, f"{t1}:outcome", "clinicare-verifier")]["value"] == "met"
    assert got[(t2, f"{t2}:outcome", "clinicare-verifier")]["value"] == "not_met"
    assert got[(t1, f"{t1}:process", "clinicare-judge")]["value"] == "met"  # 85% >= 80%
    assert got[(t1, f"{t1}:process:2", "clinicare-judge")]["value"] == "not_met"
    must_not = store.query_one("SELECT meta FROM questions WHERE key = ?", (f"{t1}:process:2",))
    assert json.loads(must_not[0])["must_not"] is True
    assert not [k for k in got if k[0] == t2 and k[2] == "clinicare-judge"]  # judge failed
    trial = item(store, t1)
    assert trial["dataset_id"] and trial["case_id"] == "sc07-a1b2c3"
    assert trial["meta"]["identifying"] is True and trial["meta"]["scenario_id"] == "sc07"
    assert trial["payload"]["final_answer"]["verdict"] == "NO"
    task = item(store, "clinicare-task:sc07-a1b2c3")
    assert task["kind"] == "task" and task["meta"]["stub"] and task["meta"]["identifying"]
    assert trial["parent_id"] == task["id"]
    assert store.scalar("SELECT name FROM datasets WHERE id = ?", (trial["dataset_id"],)) == "clinicare"


def test_task_ids_stay_out_of_an_export_unless_asked(store, tmp_path):
    from review.datasets.export import export_annotations

    import_file(store, clinicare_job(tmp_path))
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,NO\n")
    import_file(store, cohort)
    out = tmp_path / "export.csv"
    assert export_annotations(store, out) >= 6
    text = out.read_text()
    assert "a1b2c3" not in text and "ffee01" not in text
    export_annotations(store, out, with_identifiers=True)
    assert "clinicare-task:sc07-a1b2c3" in out.read_text()


def test_cohort_gives_reference_labels_on_tasks_in_either_order(store, tmp_path):
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,no\n"
                      "sc09-ffee01,sc09,INDETERMINATE_MEDICAL_AMBIGUITY\n")
    assert detect_format(cohort).name == "clinicare-cohort"
    import_file(store, clinicare_job(tmp_path))
    import_file(store, cohort)
    got = annotations(store)
    label = got[("clinicare-task:sc07-a1b2c3", "clinicare.verdict", "clinicare-cohort")]
    assert label["value"] == "NO" and label["kind"] == "reference"
    task = item(store, "clinicare-task:sc07-a1b2c3")
    assert "stub" not in task["meta"] and task["meta"]["identifying"]
    # the other order: the cohort first, then trials that must not overwrite the task
    other = tmp_path / "other"
    other.mkdir()
    from review.workspace import open_store

    s2 = open_store(other / "b.db")
    import_file(s2, cohort)
    import_file(s2, clinicare_job(other))
    assert "stub" not in item(s2, "clinicare-task:sc09-ffee01")["meta"]
    assert item(s2, trial_uid("sc09-ffee01__x2"))["parent_id"] == item(s2, "clinicare-task:sc09-ffee01")["id"]
    s2.close()


def test_bad_cohort_label_names_file_and_line(store, tmp_path):
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,YES\nsc08-00,sc08,PERHAPS\n")
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"{cohort}:3: unknown label 'PERHAPS'"):
        import_file(store, cohort)
    assert table_counts(store) == before


# -- KlinikeBench --------------------------------------------------------------

def kb_steps() -> list[dict]:
    say = 'clinic say "When did the cough start?"\n'
    call = "clinic call order_lab '{\"test\": \"full blood count\"}'\n"
    return [
        {"step_id": 1, "source": "system", "message": "You are a clinician (invented)."},
        {"step_id": 2, "source": "user", "message": "A patient with a cough has arrived."},
        {"step_id": 3, "source": "agent", "message": json.dumps({
            "analysis": "Need onset.", "plan": "Ask about onset.",
            "commands": [{"keystrokes": say, "duration": 1}]}),
         "tool_calls": [{"tool_call_id": "c3", "function_name": "bash_command",
                         "arguments": {"keystrokes": say}}],
         "observation": {"results": [{"source_call_id": "c3", "content": "PATIENT: Two weeks ago."}]}},
        {"step_id": 4, "source": "agent", "message": "Ordering bloods.",
         "tool_calls": [{"tool_call_id": "c4", "function_name": "bash_command",
                         "arguments": {"keystrokes": call}}],
         "observation": {"results": [{"source_call_id": "c4", "content": "{\"status\": \"ok\"}"}]}},
    ]


def kb_row(**over) -> dict:
    gates = {
        "diagnosis": {"score": 1.0, "passed": True, "expected": "viral cough"},
        "required_tools": {"score": 0.5, "missing": ["check_vitals"]},
        "parameterised_actions": None,
        "must_ask": {"passed": False, "topics": [
            {"topic": "Onset of the cough", "asked": True, "explanation": "asked at step 3"},
            {"topic": "smoking", "asked": "no", "explanation": "never asked"},
            {"topic": "drug allergies"}]},
        "safety_net": {"passed": True, "note": "kept"},
    }
    row = {
        "subset": "leaderboard", "run": "r1", "trial_name": "kb-task-001__aa", "task_id": "kb-task-001",
        "split": "test", "clinician_model": "vendor/clin-1", "patient_model": "sim/p",
        "judge_model": "judgeco/j-2", "reward": 0.5, "outcome_pass": 0.0, "diagnosis": 1.0,
        "required_tools": 0.5, "parameterised_actions": None, "must_ask": 0.5,
        "judge_ok": True, "exception": None,
        "transcript": json.dumps([{"role": "assistant", "content": "When did the cough start?"},
                                  {"role": "user", "content": "Two weeks ago."}]),
        "agent_steps": json.dumps(kb_steps()), "gates": json.dumps(gates),
        "meta": json.dumps({"harness": "invented"}),
    }
    row.update(over)
    return row


UID = "kb:leaderboard/r1/kb-task-001__aa"


def test_klinikebench_gates_and_must_ask_topics_become_answers(store, tmp_path):
    path = write_jsonl(tmp_path / "episodes.jsonl", [kb_row()])
    assert detect_format(path).name == "klinikebench"
    import_file(store, path)
    got = annotations(store, UID)
    judge, verifier = "klinikebench-judge:judgeco/j-2", "klinikebench-verifier"
    assert got[(UID, f"{UID}:gate:diagnosis", verifier)]["value"] == "met"
    tools = got[(UID, f"{UID}:gate:required_tools", verifier)]
    assert tools["value"] == "not_met"  # score 0.5 below the pass threshold, no pass flag
    assert json.loads(tools["extra"])["detail"] == {"missing": ["check_vitals"]}
    assert (UID, f"{UID}:gate:parameterised_actions", verifier) not in got  # null: not measured
    assert got[(UID, f"{UID}:gate:must_ask", judge)]["kind"] == "machine"
    assert got[(UID, f"{UID}:gate:safety_net", verifier)]["value"] == "met"  # unknown gate kept
    assert got[(UID, f"{UID}:outcome", verifier)]["value"] == "not_met"
    assert json.loads(got[(UID, f"{UID}:outcome", verifier)]["extra"])["reward"] == 0.5
    onset = got[(UID, f"{UID}:ask:1", judge)]
    assert onset["value"] == "met" and onset["rationale"] == "asked at step 3"
    assert got[(UID, f"{UID}:ask:2", judge)]["value"] == "not_met"
    assert (UID, f"{UID}:ask:3", judge) not in got  # a topic with no verdict: asked, not answered
    q = store.query_one("SELECT text, meta FROM questions WHERE key = ?", (f"{UID}:ask:3",))
    assert q["text"] == "Did the agent ask the patient about: drug allergies?"
    rater = store.query_one("SELECT kind, model, role FROM raters WHERE name = ?", (judge,))
    assert tuple(rater) == ("machine", "judgeco/j-2", "judge")
    episode = item(store, UID)
    assert episode["model"] == "vendor/clin-1" and episode["case_id"] == "kb-task-001"
    assert episode["meta"]["gates"]["safety_net"]["note"] == "kept"
    assert episode["meta"]["meta"] == {"harness": "invented"}
    assert len(episode["payload"]["steps"]) == 4 and len(episode["payload"]["transcript"]) == 2


def test_exception_rows_are_kept_as_failed_episodes_without_verifier_answers(store, tmp_path):
    row = kb_row(exception="SimulatorTimeout: no reply", reward=None, outcome_pass=None, gates=None,
                 diagnosis=None, required_tools=None, must_ask=None, judge_ok=False,
                 agent_steps=json.dumps(kb_steps()[:2]))
    import_file(store, write_jsonl(tmp_path / "e.jsonl", [row]))
    episode = item(store, UID)
    assert episode["failed"] == 1 and episode["payload"]["error"].startswith("SimulatorTimeout")
    assert annotations(store, UID) == {}
    keys = {r[0] for r in store.query("SELECT key FROM questions WHERE key LIKE 'kb:%'")}
    assert f"{UID}:gate:diagnosis" in keys and f"{UID}:outcome" in keys  # reviewers can still answer
    assert not any(":ask:" in key for key in keys)  # a run that raised was never judged: no topics


def test_gates_read_defensively_from_other_shapes():
    gates = read_gates([
        {"name": "Diagnosis", "ok": 1},
        {"gate": "must-ask-coverage", "coverage": 0.75,
         "per_topic": {"fever": {"covered": True, "reason": "asked"}, "travel": False}},
        {"gate": "brand_new", "score": 0.2, "weights": [1, 2]},
    ])
    assert [g.name for g in gates] == ["diagnosis", "must_ask", "brand_new"]
    assert gates[0].passed is True and gates[1].score == 0.75
    assert [(t.topic, t.met, t.explanation) for t in gates[1].topics] == [
        ("fever", True, "asked"), ("travel", False, None)]
    assert gates[2].detail == {"weights": [1, 2]}
    assert read_gates("not gates") == [] and read_gates(None) == []


BAD_EPISODES = [
    ("agent_steps not JSON", {"agent_steps": "[{\"step_id\": 1,"},
     ":1: field 'agent_steps' is not valid JSON: Expecting"),
    ("transcript of the wrong type", {"transcript": json.dumps({"role": "user"})},
     ":1: field 'transcript' must be a list of {role, content}, got dict"),
    ("missing trial_name", {"trial_name": None}, ":1: missing required field 'trial_name'"),
    ("dangling source_call_id", {"agent_steps": json.dumps(
        kb_steps()[:3] + [dict(kb_steps()[3], observation={"results": [{"source_call_id": "c9"}]})])},
     ":1: agent_steps: steps[3].observation.results[0].source_call_id: 'c9' names no tool call of step 4"),
    ("outcome_pass not a score", {"outcome_pass": "sometimes"},
     ":1: field 'outcome_pass' must be a score in 0..1, got 'sometimes'"),
    ("a score above 1", {"reward": 1.7}, ":1: field 'reward' must be a score in 0..1, got 1.7"),
    ("a score below 0", {"diagnosis": -0.1},
     ":1: field 'diagnosis' must be a score in 0..1, got -0.1"),
    ("a list where the card gives a score", {"must_ask": ["onset"]},
     ":1: field 'must_ask' must be a score in 0..1, got a list"),
]


@pytest.mark.parametrize("name,over,message", BAD_EPISODES, ids=[b[0] for b in BAD_EPISODES])
def test_malformed_episode_gives_one_message_with_line_and_changes_nothing(
        store, tmp_path, name, over, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [kb_row(**over)])
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path, "klinikebench")
    assert f"{path}{message}" in str(err.value)
    assert table_counts(store) == before


def test_truncated_file_names_the_line_and_changes_nothing(store, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [kb_row(), kb_row(trial_name="x")])
    text = path.read_text()
    path.write_text(text[: len(text) - 200])
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"{path}:2: not valid JSON"):
        import_file(store, path)
    assert table_counts(store) == before


def test_rows_are_streamed_one_at_a_time(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [kb_row()])
    with path.open("a") as fh:
        fh.write("{broken\n")
    records = read_klinikebench(path, ImportOptions())
    first = next(records)
    assert first.uid == UID  # the first episode arrives before the broken line is read
    with pytest.raises(InputError, match=":2: not valid JSON"):
        list(records)


def test_generated_jsonl_and_parquet_import_the_same(store, tmp_path):
    jsonl, parquet = tmp_path / "g.jsonl", tmp_path / "g.parquet"
    generate_jsonl(jsonl, 60, seed=3)
    generate_parquet(parquet, 60, seed=3)
    assert detect_format(parquet).name == "klinikebench"
    first = import_file(store, jsonl)
    assert first.rows == 60 and first.items == 60 and first.annotations > 300
    again = import_file(store, parquet)
    assert (again.items, again.annotations) == (0, 0) and again.skipped == first.annotations
    failed = store.scalar("SELECT COUNT(*) FROM items WHERE failed = 1")
    assert failed == sum(1 for line in jsonl.open() if json.loads(line)["exception"])


def _labels(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "marks.csv"
    path.write_text("item_id,rater,value,question,target,severity,rationale\n"
                    + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_step_error_marks_come_in_from_a_spreadsheet(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "episodes.jsonl", [kb_row()]))
    path = _labels(tmp_path, [
        f"{UID},Dr. Marks,wrong_parameters,trajectory.step_error,step:4,3,ordered without a reason",
        f"{UID},Dr. Marks,no_error,trajectory.step_error,step:3,,",
        f"{UID},Dr. Marks,met,{UID}:ask:1,,,",
    ])
    result = import_file(store, path)
    assert result.format == "labels-long" and result.annotations == 3
    rows = {r["target"]: r for r in store.query(
        "SELECT a.target, a.value, a.extra, a.rationale FROM annotations a"
        " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'Dr. Marks'")}
    assert rows["step:4"]["value"] == "wrong_parameters"
    assert json.loads(rows["step:4"]["extra"]) == {"severity": 3}
    assert rows["step:4"]["rationale"] == "ordered without a reason"
    assert rows["step:3"]["value"] == "no_error" and json.loads(rows["step:3"]["extra"]) == {}
    assert rows[""]["value"] == "met"


@pytest.mark.parametrize("row, message", [
    (f"{UID},Dr. Marks,wrong_tool,trajectory.step_error,step:9,2,", "has no step 9 (4 steps)"),
    (f"{UID},Dr. Marks,wrong_tool,trajectory.step_error,step:2,,", "needs a severity, 1 to 5"),
    (f"{UID},Dr. Marks,wrong_tool,trajectory.step_error,step:2,7,", "severity must be 1 to 5"),
    (f"{UID},Dr. Marks,wrong_tool,trajectory.step_error,row 2,3,", "target must be empty"),
    (f"{UID},Dr. Marks,met,{UID}:ask:1,,3,", "severity is for step marks"),
    (f"{UID},Dr. Marks,typo_error,trajectory.step_error,step:2,3,", "typo_error"),
])
def test_a_bad_step_mark_names_the_line_and_changes_nothing(store, tmp_path, row, message):
    import_file(store, write_jsonl(tmp_path / "episodes.jsonl", [kb_row()]))
    before = table_counts(store)
    path = _labels(tmp_path, [f"{UID},Dr. Marks,no_error,trajectory.step_error,step:1,,", row])
    with pytest.raises(InputError) as err:
        import_file(store, path)
    assert f"{path}:3" in str(err.value) and message in str(err.value)
    assert table_counts(store) == before
