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
from review.reviewing.trajectory import (
    BLIND_LOG,
    blind_to_agent,
    load_trajectory,
    subagent_view,
    trajectory_view,
)
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


# -- failures, agents without a trajectory, counts (issue 25, 7) ---------------------------
# Files as Harbor 0.26 writes them: `TrialResult` (harbor/models/trial/result.py: a
# multi-step trial records a step's handled failure on `step_results[i].exception_info`,
# `recorded_exceptions()` is the trial's and then the steps'), `TrialPaths`
# (harbor/models/trial/paths.py: `steps/<name>/agent|verifier`, `verifier/reward.txt` or
# `reward.json`), and the installed agents that only `tee` their console to
# `/logs/agent/<name>.txt` (harbor/agents/installed/aider.py). Every result.json below
# validates with Harbor's `TrialResult` (checked where Harbor is installed).

def harbor_result(task: str, trial: str, *, agent: str = "terminus-2",
                  model: str = "anthropic/claude-sonnet-4-5", rewards: dict | None = None,
                  step_results: list | None = None, exception_info: dict | None = None) -> dict:
    """A trial's result.json with the fields `TrialResult` dumps (nulls as Harbor writes them)."""
    return {
        "schema_version": 1, "id": "6c1b7d0e-5f1a-4c3e-9a0b-2d4e6f8a0c12", "task_name": task,
        "trial_name": trial, "trial_uri": f"file:///home/researcher/harbor/jobs/j1/{trial}",
        "task_id": {"path": f"tasks/{task}"}, "source": None, "task_checksum": "5f0c1e2d3b4a6978",
        "config": {"schema_version": 1, "task": {"path": f"tasks/{task}"}, "trial_name": trial,
                   "trials_dir": "/home/researcher/harbor/jobs/j1",
                   "agent": {"name": agent, "model_name": model}, "job_id": None},
        "agent_info": {"name": agent, "version": "0.86.1" if agent == "aider" else "2.0.0",
                       "model_info": {"name": model.split("/", 1)[1], "provider": model.split("/")[0]}},
        "agent_result": None if step_results else {
            "n_input_tokens": 5200, "n_cache_tokens": 0, "n_output_tokens": 610, "cost_usd": 0.0112,
            "model_usage": None, "rollout_details": None, "metadata": None},
        "verifier_result": None if rewards is None else {"rewards": rewards},
        "verifier_environment_mode": None, "exception_info": exception_info,
        "started_at": "2026-03-14T09:30:00Z", "finished_at": "2026-03-14T09:40:00Z",
        "environment_setup": None, "agent_setup": None, "agent_execution": None, "verifier": None,
        "step_results": step_results, "reward_valid": rewards is not None,
    }


TIMEOUT = {"exception_type": "AgentTimeoutError",
           "exception_message": "Agent execution timed out after 600.0 seconds",
           "exception_traceback": "Traceback (most recent call last):\n  ...\n"
                                  "harbor.trial.errors.AgentTimeoutError: Agent execution timed out"
                                  " after 600.0 seconds\n",
           "occurred_at": "2026-03-14T09:39:00Z"}


def harbor_step(name: str, reward: float, exception_info: dict | None = None) -> dict:
    return {"step_name": name, "agent_result": {"n_input_tokens": 100, "n_cache_tokens": None,
                                                "n_output_tokens": 10, "cost_usd": None,
                                                "model_usage": None, "rollout_details": None,
                                                "metadata": None},
            "verifier_result": {"rewards": {"reward": reward}}, "exception_info": exception_info,
            "agent_execution": None, "verifier": None}


def two_step_trial(job: Path, *, second_trajectory: bool = True) -> Path:
    """`intake__Ms1`: step 'history' passes; step 'plan' raised AgentTimeoutError after two
    steps of its own (or before writing any trajectory), its verifier graded what was there."""
    trial = job / "intake__Ms1"
    write(trial / "result.json", harbor_result(
        "intake", "intake__Ms1", step_results=[harbor_step("history", 1.0),
                                               harbor_step("plan", 0.0, TIMEOUT)]))
    for name, reward in (("history", 1.0), ("plan", 0.0)):
        if name == "history" or second_trajectory:
            doc = atif_doc(1 if name == "history" else 2)
            doc["steps"][-1]["message"] = f"the {name} step's last words"
            write(trial / "steps" / name / "agent" / "trajectory.json", doc)
        write(trial / "steps" / name / "verifier" / "reward.json", {"reward": reward})
    return trial


def test_a_step_that_raised_fails_its_trial_and_is_shown_on_that_step(store, tmp_path):
    two_step_trial(tmp_path / "job")
    make_trial(tmp_path / "job", "fine", rewards={"reward": 1.0})
    assert import_file(store, tmp_path / "job").items == 2
    run = item(store, "harbor:intake__Ms1")
    said = ("step 'plan' raised AgentTimeoutError: Agent execution timed out after 600.0 seconds")
    assert run["failed"] == 1 and run["payload"]["error"] == said
    assert run["payload"]["step_failures"] == [
        {"step_name": "plan", "exception_type": "AgentTimeoutError",
         "exception_message": "Agent execution timed out after 600.0 seconds",
         "occurred_at": "2026-03-14T09:39:00Z"}]
    assert run["meta"]["step_exceptions"]["plan"]["exception_traceback"].endswith("600.0 seconds\n")
    view = load_trajectory(store, "harbor:intake__Ms1")
    assert view.error == said and [(f.step_name, f.text) for f in view.step_failures] == [
        ("plan", said)]
    # history: 3 steps (system, task, one agent step); plan: 4 (system, task, two agent steps)
    failed = [s for s in view.steps if s.failure]
    assert [(s.step_id, s.message) for s in failed] == [(7, "the plan step's last words")]
    assert view.step_failures[0].step_index == failed[0].index
    assert item(store, "harbor:fine__abc")["failed"] == 0
    # the verdicts stand: the plan step's verifier graded what the agent left
    got = dict(store.query("SELECT q.key, a.value FROM annotations a JOIN questions q"
                           " ON q.id = a.question_id WHERE q.key LIKE 'harbor:intake%'"))
    assert got == {"harbor:intake__Ms1:step:history:reward": "met",
                   "harbor:intake__Ms1:step:plan:reward": "not_met"}


def test_a_step_that_raised_before_writing_a_trajectory_still_fails_the_trial(store, tmp_path):
    two_step_trial(tmp_path / "job", second_trajectory=False)
    import_file(store, tmp_path / "job")
    view = load_trajectory(store, "harbor:intake__Ms1")
    assert view.error.startswith("step 'plan' raised AgentTimeoutError")
    assert [(f.step_name, f.step_index) for f in view.step_failures] == [("plan", None)]
    assert not any(s.failure for s in view.steps) and len(view.steps) == 3


def test_the_trajectories_screen_shows_the_failed_step(tmp_path, monkeypatch):
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store
    from tests.helpers import open_app, shown

    db = tmp_path / "harbor.db"
    s = open_store(db)
    two_step_trial(tmp_path / "job")
    import_file(s, tmp_path / "job")
    ensure_reviewer(s, "Dr. Step Failure", "emergency medicine", "registrar")
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(db))
    said = "step 'plan' raised AgentTimeoutError: Agent execution timed out after 600.0 seconds"
    at = open_app("pages/trajectories.py", "Dr. Step Failure", item="harbor:intake__Ms1", step="7")
    assert said in [shown(e.value) for e in at.error]  # on the step it ended
    assert any("the run failed" in m.value for m in at.markdown)
    at = open_app("pages/trajectories.py", "Dr. Step Failure", item="harbor:intake__Ms1", step="3")
    assert said not in [shown(e.value) for e in at.error]  # not on the step that passed...
    assert said in [c.value for c in at.code]  # ...and the run's error is shown whole


def aider_trial(job: Path) -> Path:
    """aider writes no ATIF trajectory: its console `agent/aider.txt` and its chat
    history; the verifier passed it (reward.txt 1), nothing raised."""
    trial = job / "fix-typo__Ai1"
    write(trial / "result.json", harbor_result("fix-typo", "fix-typo__Ai1", agent="aider",
                                               model="openai/gpt-4.1", rewards={"reward": 1.0}))
    (trial / "agent").mkdir()
    (trial / "agent" / "aider.txt").write_text(
        "Aider v0.86.1\nModel: openai/gpt-4.1 with diff edit format\n"
        "Applied edit to README.md\nCommit 3f2a1b9 fix: the invented typo in the README\n",
        encoding="utf-8")
    (trial / "agent" / "aider.chat.history.md").write_text(
        "# aider chat started at 2026-03-14 09:31:10\n\n> Fix the typo in README.md\n",
        encoding="utf-8")
    (trial / "agent" / "setup").mkdir()
    (trial / "agent" / "setup" / "stdout.txt").write_text("installing aider\n", encoding="utf-8")
    (trial / "verifier").mkdir()
    (trial / "verifier" / "reward.txt").write_text("1\n", encoding="utf-8")
    return trial


def test_an_agent_without_a_trajectory_is_not_a_failure_and_its_log_is_read(store, tmp_path):
    from review.browse.search import search

    aider_trial(tmp_path / "job")
    assert import_file(store, tmp_path / "job").items == 1
    run = item(store, "harbor:fix-typo__Ai1")
    assert run["failed"] == 0 and "error" not in run["payload"]
    assert [(g["path"], g["text"][:13]) for g in run["payload"]["logs"]] == [
        ("agent/aider.chat.history.md", "# aider chat "), ("agent/aider.txt", "Aider v0.86.1")]
    view = load_trajectory(store, "harbor:fix-typo__Ai1")
    assert view.error is None and [(s.step_id, s.source, s.log_source) for s in view.steps] == [
        (1, "log", "agent/aider.chat.history.md"), (2, "log", "agent/aider.txt")]
    assert view.steps[1].message.endswith("fix: the invented typo in the README\n")
    assert [m.kind for m in view.timeline.marks] == ["log", "log"]
    blind = blind_to_agent(view)  # the log's file name names the agent: not while blind
    assert [s.log_source for s in blind.steps] == [BLIND_LOG, BLIND_LOG]
    assert not any("aider" in m.label for m in view.timeline.marks)
    got = dict(store.query("SELECT q.key, a.value FROM annotations a JOIN questions q"
                           " ON q.id = a.question_id"))
    assert got == {"harbor:fix-typo__Ai1:reward": "met"}
    hits = search(store, '"invented typo"').hits
    assert [(h.uid, h.target) for h in hits] == [("harbor:fix-typo__Ai1", "step:2")]
    assert search(store, "installing").total == 0  # the install's output is not the run


def test_a_log_that_is_not_utf8_is_kept_and_says_so(store, tmp_path):
    trial = aider_trial(tmp_path / "job")
    (trial / "agent" / "aider.txt").write_bytes(b"progress \xe2\x96\x88\xe2 cut\n")
    import_file(store, tmp_path / "job")
    view = load_trajectory(store, "harbor:fix-typo__Ai1")
    assert view.steps[1].message == "progress \u2588\ufffd cut\n"
    assert view.steps[1].log_source == ("agent/aider.txt; bytes that are not UTF-8 are shown"
                                        " as \ufffd")


def test_the_trajectories_screen_shows_the_agents_log(tmp_path, monkeypatch):
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store
    from tests.helpers import open_app, shown

    db = tmp_path / "harbor.db"
    s = open_store(db)
    aider_trial(tmp_path / "job")
    import_file(s, tmp_path / "job")
    ensure_reviewer(s, "Dr. Log Reader", "emergency medicine", "registrar")
    s.close()
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = open_app("pages/trajectories.py", "Dr. Log Reader", item="harbor:fix-typo__Ai1", step="2")
    text = shown("\n".join(m.value for m in at.markdown))
    # blind to the agent (the default, before answering): the log, not its file's name
    assert f"the agent wrote no trajectory; its log {BLIND_LOG}" in text
    assert "aider.txt" not in text and "Applied edit to README.md" in text
    assert not any("the run failed" in m.value for m in at.markdown)


def test_whole_numbers_in_reward_json_are_counts_not_checks(store, tmp_path):
    trial = tmp_path / "job" / "pytest-suite__Ct1"
    rewards = {"reward": 1, "tests_passed": 1, "tests_total": 1, "tests_failed": 0,
               "pass_rate": 1.0, "coverage": 0.5, "duration_sec": 12.5}
    write(trial / "result.json", harbor_result("pytest-suite", "pytest-suite__Ct1", rewards=rewards))
    write(trial / "agent" / "trajectory.json", atif_doc(1))
    write(trial / "verifier" / "reward.json", rewards)
    import_file(store, tmp_path / "job")
    got = dict(store.query("SELECT q.key, a.value FROM annotations a JOIN questions q"
                           " ON q.id = a.question_id"))
    uid = "harbor:pytest-suite__Ct1"
    assert got == {f"{uid}:reward": "met", f"{uid}:reward:pass_rate": "met",
                   f"{uid}:reward:coverage": "not_met"}
    assert item(store, uid)["meta"]["rewards"] == rewards  # every key kept as written


def test_these_result_files_validate_with_harbors_models(tmp_path):
    """Skipped where Harbor is not installed (it needs Python 3.12; see
    `harbor_trajectory`); run where it is, these files are what Harbor writes."""
    try:
        from harbor.models.trial.result import TrialResult
    except Exception:  # noqa: BLE001 - not installed, or not importable here
        pytest.skip("Harbor's models are not installed")
    trajectory = harbor_trajectory()
    for trial in (two_step_trial(tmp_path / "a"), aider_trial(tmp_path / "b")):
        result = TrialResult.model_validate_json((trial / "result.json").read_text())
        assert result.trial_name == trial.name
        for path in trial.rglob("trajectory.json"):
            trajectory.model_validate_json(path.read_text())
    assert len(TrialResult.model_validate_json(
        (tmp_path / "a" / "intake__Ms1" / "result.json").read_text()).recorded_exceptions()) == 1
