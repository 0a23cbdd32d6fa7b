"""Harbor jobs as Harbor lays them out, beyond the conformance corpus: continuation
segments, linked files (inside the trial folder only), trials still running,
multi-step trials, summarisation files no step names, a CliniCARE trial imported
alone; and every ATIF trajectory carelens itself writes (the demo, the bench
generators) checked with Harbor's own models. Every fixture here is invented.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from review.datasets.sources import InputError, detect_format, import_file
from review.reviewing.trajectory import load_trajectory, subagent_view, trajectory_view
from tests.helpers import table_counts
from tests.test_sources_trajectories import atif_doc, item, make_trial


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def segment(n: int, copied: int, session: str, next_ref: str | None) -> dict:
    """A linear-history segment: `copied` steps of copied context, then `n` of its own."""
    doc = atif_doc(n)
    doc["session_id"] = session
    steps = [{"step_id": i + 1, "source": "user", "message": f"copied {i + 1}",
              "is_copied_context": True} for i in range(copied)]
    for k, step in enumerate(doc["steps"]):
        steps.append({**step, "step_id": copied + k + 1})
    doc["steps"] = steps
    if next_ref:
        doc["continued_trajectory_ref"] = next_ref
    return doc


def test_continuation_segments_are_joined_without_their_copied_context(store, tmp_path):
    first = segment(2, 0, "s", "trajectory.cont-1.json")
    trial = make_trial(tmp_path / "job", "t1", atif=first, rewards={"reward": 1})
    write(trial / "agent" / "trajectory.cont-1.json", segment(3, 4, "s-cont-1", "trajectory.cont-2.json"))
    write(trial / "agent" / "trajectory.cont-2.json", segment(1, 9, "s-cont-2", "trajectory.cont-3.json"))
    import_file(store, tmp_path / "job")
    run = item(store, "harbor:t1__abc")
    steps = run["payload"]["steps"]
    assert len(steps) == 4 + 5 + 3 and [s["step_id"] for s in steps] == list(range(1, 13))
    assert not any(s.get("is_copied_context") for s in steps)
    assert [(g["path"], g["first_step"], g["steps"]) for g in run["payload"]["segments"]] == [
        ("agent/trajectory.json", 1, 4), ("agent/trajectory.cont-1.json", 5, 5),
        ("agent/trajectory.cont-2.json", 10, 3)]
    # the third segment names a fourth that is not there: the run ends where Harbor's reader does
    assert run["payload"]["missing_trajectories"] == ["trajectory.cont-3.json"]
    assert "continued_trajectory_ref" not in run["payload"]
    assert len(load_trajectory(store, "harbor:t1__abc").steps) == 12


@pytest.mark.parametrize("given", ["../../outside.json", "/etc/passwd", "../../t2/agent/trajectory.json"])
def test_a_linked_file_outside_the_trial_folder_is_refused(store, tmp_path, given):
    doc = atif_doc(1)
    doc["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [
        {"trajectory_path": given}]
    make_trial(tmp_path / "job", "t1", atif=doc, rewards={"reward": 1})
    make_trial(tmp_path / "job", "t2", rewards={"reward": 1})
    write(tmp_path / "outside.json", atif_doc(1))
    before = table_counts(store)
    with pytest.raises(InputError) as caught:
        import_file(store, tmp_path / "job")
    assert str(caught.value) == (
        "job/t1/agent/trajectory.json: steps[2].observation.results[0].subagent_trajectory_ref[0]"
        f".trajectory_path: {given!r} points outside the trial folder; carelens reads a trial's"
        " linked files only inside it")
    assert table_counts(store) == before


def test_a_link_that_escapes_through_a_symbolic_link_is_refused(store, tmp_path):
    doc = atif_doc(1)
    doc["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [
        {"trajectory_path": "sub/child.json"}]
    trial = make_trial(tmp_path / "job", "t1", atif=doc, rewards={"reward": 1})
    write(tmp_path / "elsewhere" / "child.json", atif_doc(1))
    (trial / "agent" / "sub").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="'sub/child.json' points outside the trial folder"):
        import_file(store, tmp_path / "job")


def test_linked_files_are_read_and_opened_by_their_path(store, tmp_path):
    doc = atif_doc(2, version="ATIF-v1.8")
    doc["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [
        {"trajectory_path": "subagents/helper.json"}]
    doc["steps"][3]["observation"]["results"][0]["subagent_trajectory_ref"] = [
        {"trajectory_path": "subagents/gone.json"}]
    trial = make_trial(tmp_path / "job", "t1", atif=doc, rewards={"reward": 1})
    helper = atif_doc(1)
    helper["steps"][-1]["message"] = "The helper's own finding."
    write(trial / "agent" / "subagents" / "helper.json", helper)
    import_file(store, tmp_path / "job")
    view = load_trajectory(store, "harbor:t1__abc")
    found, gone = view.steps[2].subagents[0], view.steps[3].subagents[0]
    assert found.embedded_index == 0 and not found.missing
    payload = item(store, "harbor:t1__abc")["payload"]
    assert subagent_view(payload, 0).steps[-1].message == "The helper's own finding."
    assert gone.embedded_index is None and gone.missing
    assert payload["missing_trajectories"] == ["subagents/gone.json"]


def test_summarisation_files_no_step_names_are_read_too(store, tmp_path):
    trial = make_trial(tmp_path / "job", "t1", rewards={"reward": 1})
    for kind in ("summary", "questions", "answers"):
        sub = atif_doc(1)
        sub["agent"]["name"] = f"terminus-2-summarization-{kind}"
        write(trial / "agent" / f"trajectory.summarization-1-{kind}.json", sub)
    import_file(store, tmp_path / "job")
    payload = item(store, "harbor:t1__abc")["payload"]
    names = [s["agent"]["name"] for s in payload["subagent_trajectories"]]
    assert sorted(names) == ["terminus-2-summarization-answers", "terminus-2-summarization-questions",
                             "terminus-2-summarization-summary"]
    assert trajectory_view(payload).subagent_count == 3


def test_a_trial_still_running_is_left_out_and_named(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "done", rewards={"reward": 1})
    running = make_trial(job, "running", rewards={"reward": 1})
    (running / "result.json").unlink()
    result = import_file(store, job)
    assert (result.rows, result.items) == (1, 1)
    assert result.left_out == ["running (still running, or stopped: no result.json)"]
    assert result.summary().endswith("; left out: running (still running, or stopped: no result.json)")
    with pytest.raises(InputError, match="no finished trial: Harbor writes a trial's result.json when"
                                         " it ends, and this one has one yet"):
        import_file(store, running)


def test_a_failed_trial_with_only_its_logs_is_a_failed_run(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "ok", rewards={"reward": 1})
    failed = job / "env-failed"
    failed.mkdir()
    write(failed / "result.json", {"trial_name": "env-failed__x", "task_name": "env",
                                   "exception_info": {"exception_type": "RuntimeError",
                                                      "exception_message": "docker failed"}})
    (failed / "exception.txt").write_text("RuntimeError: docker failed\n", encoding="utf-8")
    assert detect_format(job).name == "harbor"
    assert import_file(store, job).items == 2
    run = item(store, "harbor:env-failed__x")
    assert run["failed"] == 1 and run["payload"]["error"] == "docker failed"


def test_a_multi_step_trial_is_one_run_with_each_steps_verdict(store, tmp_path):
    trial = tmp_path / "job" / "ms"
    write(trial / "result.json", {"trial_name": "ms__1", "task_name": "ms",
                                  "step_results": [{"step_name": "second"}, {"step_name": "first"}]})
    for name, reward in (("first", 1.0), ("second", 0.0)):
        doc = atif_doc(1)
        doc["steps"][-1]["message"] = f"the {name} step"
        write(trial / "steps" / name / "agent" / "trajectory.json", doc)
        write(trial / "steps" / name / "verifier" / "reward.json", {"reward": reward, "safety": 1.0})
    import_file(store, tmp_path / "job")
    run = item(store, "harbor:ms__1")
    # in the order the result lists the steps
    assert [s["step_name"] for s in run["payload"]["segments"]] == ["second", "first"]
    assert [s["message"] for s in run["payload"]["steps"] if s["source"] == "agent"] == [
        "the second step", "the first step"]
    got = dict(store.query("SELECT q.key, a.value FROM annotations a JOIN questions q"
                           " ON q.id = a.question_id"))
    assert got == {"harbor:ms__1:step:first:reward": "met",
                   "harbor:ms__1:step:first:reward:safety": "met",
                   "harbor:ms__1:step:second:reward": "not_met",
                   "harbor:ms__1:step:second:reward:safety": "met"}


def test_a_terminus_reply_shows_its_analysis_beside_the_reasoning(store, tmp_path):
    doc = atif_doc(1)
    doc["steps"][2]["message"] = json.dumps({"analysis": "The chart says 38.2.", "plan": "Answer.",
                                             "commands": []})
    doc["steps"][2]["reasoning_content"] = "Thinking about fever thresholds."
    doc["extra"] = {"harness": "invented"}
    make_trial(tmp_path / "job", "t1", atif=doc, rewards={"reward": 1})
    import_file(store, tmp_path / "job")
    step = load_trajectory(store, "harbor:t1__abc").steps[2]
    assert (step.message, step.reasoning, step.analysis) == (
        "Answer.", "Thinking about fever thresholds.", "The chart says 38.2.")
    payload = item(store, "harbor:t1__abc")["payload"]
    assert (payload["session_id"], payload["extra"]) == ("sess-1", {"harness": "invented"})


def test_a_clinicare_trial_without_rewards_imported_alone_after_its_cohort(store, tmp_path):
    cohort = tmp_path / "cohort.csv"
    cohort.write_text("task_id,scenario_id,expected_label\nsc07-a1b2c3,sc07,YES\n", encoding="utf-8")
    import_file(store, cohort)
    trial = make_trial(tmp_path / "job", "sc07-a1b2c3__x9", atif=False, result={
        "task_name": "sc07-a1b2c3", "trial_name": "sc07-a1b2c3__x9",
        "exception_info": {"exception_type": "RuntimeError", "exception_message": "sidecar down"}})
    result = import_file(store, trial, "harbor")
    uids = [u for (u,) in store.query("SELECT uid FROM items WHERE kind = 'trajectory'")]
    assert result.items == 1 and len(uids) == 1 and uids[0].startswith("clinicare:")
    assert "sc07" not in uids[0]
    meta = json.loads(store.scalar("SELECT meta FROM items WHERE kind = 'trajectory'"))
    assert meta["identifying"] is True


# -- the ATIF carelens writes, checked with Harbor's own models ---------------------------

def harbor_trajectory():
    """Harbor's Trajectory model. It needs Python 3.12 to install normally; on 3.11:
    `pip install --no-deps --ignore-requires-python harbor` (the trajectory models
    need only pydantic). Skipped when it is not installed."""
    try:
        from harbor.models.trajectories import Trajectory
    except Exception:  # noqa: BLE001 - not installed, or not importable here
        pytest.skip("Harbor's models are not installed (pip install --no-deps "
                    "--ignore-requires-python harbor)")
    return Trajectory


def test_the_trajectories_carelens_writes_validate_with_harbors_models(tmp_path):
    from bench.gen_klinikebench import episode
    from review.datasets.demo_rubrics import build_runs

    trajectory = harbor_trajectory()
    written = [json.loads(episode(i, seed=3, steps=14)["agent_steps"]) for i in range(40)]
    written += [json.loads(run.row["agent_steps"]) for _, _, run in build_runs()]
    written.append(json.loads(episode(7, seed=11, steps=200)["agent_steps"]))
    for doc in written:
        trajectory.model_validate(doc)
    assert len(written) == 49


def test_the_conformance_job_validates_with_harbors_models_and_imports(store):
    from tests.conftest import SHARED_DATA

    trajectory = harbor_trajectory()
    job = SHARED_DATA / "conformance" / "harbor" / "jobs" / "2026-03-14__09-30-00"
    if not job.is_dir():
        pytest.skip("the conformance corpus is not beside the project")
    files = sorted(job.rglob("trajectory*.json"))
    for path in files:
        trajectory.model_validate(json.loads(path.read_text(encoding="utf-8")))
    assert len(files) == 8
    assert import_file(store, job).items == 7


def test_the_quick_step_check_passes_only_what_the_full_check_passes():
    """`_plainly_valid` (no JSON paths built) may send a good step to the full check,
    never pass a bad one: random changes to real steps, each kind of value in each place."""
    import random

    from bench.gen_klinikebench import episode
    from review.datasets.sources.atif import _check_step, _plainly_valid

    rng = random.Random(16)
    steps = json.loads(episode(3, seed=5, steps=12)["agent_steps"])["steps"]
    values = [None, True, 1, 1.5, "x", [], {}, ["x"], {"a": 1}, -1]
    places = [("step_id",), ("source",), ("message",), ("timestamp",), ("model_name",),
              ("reasoning_content",), ("tool_calls",), ("tool_calls", 0, "tool_call_id"),
              ("tool_calls", 0, "function_name"), ("tool_calls", 0, "arguments"),
              ("observation",), ("observation", "results"),
              ("observation", "results", 0, "source_call_id"),
              ("observation", "results", 0, "content"), ("metrics",),
              ("metrics", "prompt_tokens"), ("metrics", "cost_usd")]
    checked = passed_quickly = 0
    for _ in range(3000):
        i = rng.randrange(len(steps))
        step = json.loads(json.dumps(steps[i]))
        place, value = rng.choice(places), rng.choice(values)
        target = step
        try:
            for key in place[:-1]:
                target = target[key]
            target[place[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
        checked += 1
        if _plainly_valid(step, i):
            passed_quickly += 1
            _check_step(step, i, "w", f"steps[{i}]", set())  # must not raise
    assert checked > 1000 and 0 < passed_quickly < checked
