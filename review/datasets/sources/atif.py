"""ATIF (Agent Trajectory Interchange Format, Harbor) v1.0-v1.8: reading and checking.

`check_trajectory` checks a whole ATIF document and `check_steps` a bare list
of steps (KlinikeBench's `agent_steps`). Each raises one `InputError` naming
the place and the JSON path of the first violation, e.g.

    trial-3/agent/trajectory.json: steps[4].observation.results[0].source_call_id:
    'call_9' names no tool call of step 5

What is checked (the rules a reviewer relies on to read a run correctly):
- the root has `schema_version` ATIF-v1.0 .. ATIF-v1.8, an `agent` with a
  `name`, and at least one step;
- step ids run 1..n in order; `source` is system, user or agent;
- `message` is a string or a list of content parts {type: text|image|audio};
- tool calls have an id, a function name and an object of arguments, ids
  unique within the step;
- every observation result's `source_call_id` names a tool call of the same
  step (null is allowed: a result of no tool call);
- token counts are whole numbers and costs are numbers;
- the agent's `version` and `model_name` are text or a number (`"version": 2`
  reads as "2"), and the run totals of `final_metrics` are numbers, text or
  null: a total given as text ("0.0123") is read as the number it spells,
  one that spells none ("n/a") is shown as given and the steps' sums stand
  in for it; a list, an object or true/false in either place is refused;
- embedded `subagent_trajectories` (v1.7+) are checked the same way; a
  `subagent_trajectory_ref` names its trajectory by `trajectory_id` or by
  `trajectory_path` (a file; Harbor's models accept either alone, and
  carelens also a `session_id` alone, as older files write), and one that
  gives a `trajectory_id` and no `trajectory_path` names one of them.

Unknown keys are kept, not rejected: trajectories from new agents carry extras
the reviewer may want to see.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from review.datasets.sources.readers import loads_strict, mend_surrogates, read_limited
from store.writer import InputError

VERSION = re.compile(r"^ATIF-v1\.(\d+)$")
NEWEST_MINOR = 8
SOURCES = ("system", "user", "agent")
PART_TYPES = ("text", "image", "audio")
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens")
RUN_TOTALS = ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens",
              "total_cost_usd", "total_steps")


def read_json_file(path: Path, where: str, strict: bool = True) -> Any:
    """A JSON file's content, or one InputError naming the file and the position.
    A byte-order mark (some editors write one) is skipped; lone surrogates are
    mended as in JSONL files (`readers.mend_surrogates`); a file past the import's
    byte limit is refused before it is read (`readers.read_limited`). With
    `strict` (a file whose content is kept: a trajectory, a verifier's rewards), a
    NaN or Infinity in it is refused naming its place (`readers.loads_strict`):
    the database would keep null. Harbor's own verifier refuses a non-finite
    reward too."""
    try:
        text = read_limited(path, where).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text") from None
    try:
        value = loads_strict(text, where) if strict else json.loads(text)
        return mend_surrogates(value) if "\\u" in text else value
    except RecursionError:
        raise InputError(f"{where}: a value nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{where}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def _fail(where: str, path: str, what: str) -> InputError:
    return InputError(f"{where}: {path}: {what}" if path else f"{where}: {what}")


def _type_name(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "true/false",
            type(None): "null"}.get(type(value), type(value).__name__)


def _expect(value: Any, typ: type | tuple[type, ...], where: str, path: str, what: str) -> None:
    if not isinstance(value, typ):
        raise _fail(where, path, f"expected {what}, got {_type_name(value)}")


def check_trajectory(doc: Any, where: str, path: str = "") -> dict[str, Any]:
    """Check one ATIF document (and its embedded subagent trajectories)."""
    dot = f"{path}." if path else ""
    _expect(doc, dict, where, path, "an ATIF trajectory object")
    version = doc.get("schema_version")
    if version is None:
        raise _fail(where, f"{dot}schema_version", "missing required field")
    match = VERSION.match(version) if isinstance(version, str) else None
    if match is None or int(match.group(1)) > NEWEST_MINOR:
        raise _fail(where, f"{dot}schema_version",
                    f"{version!r} is not a version carelens reads (ATIF-v1.0 to ATIF-v1.{NEWEST_MINOR})")
    agent = doc.get("agent")
    if agent is None:
        raise _fail(where, f"{dot}agent", "missing required field")
    _expect(agent, dict, where, f"{dot}agent", "an object {name, version, ...}")
    name = agent.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(where, f"{dot}agent.name", "missing required field" if name is None
                    else f"expected a non-empty string, got {_type_name(name)}")
    for key in ("version", "model_name"):
        _expect_scalar(agent.get(key), where, f"{dot}agent.{key}", "text or a number")
    for key in ("session_id", "trajectory_id"):
        if doc.get(key) is not None:
            _expect(doc[key], str, where, f"{dot}{key}", "a string")
    if "steps" not in doc:
        raise _fail(where, f"{dot}steps", "missing required field")
    subagents = doc.get("subagent_trajectories") or []
    _expect(subagents, list, where, f"{dot}subagent_trajectories", "a list of trajectories")
    embedded: set[str] = set()
    for i, sub in enumerate(subagents):
        check_trajectory(sub, where, f"{dot}subagent_trajectories[{i}]")
        embedded.update(str(sub[k]) for k in ("trajectory_id", "session_id") if sub.get(k))
    check_steps(doc["steps"], where, f"{dot}steps", embedded=embedded)
    metrics = doc.get("final_metrics")
    if metrics is not None:
        _expect(metrics, dict, where, f"{dot}final_metrics", "an object")
        for key in RUN_TOTALS:
            _expect_scalar(metrics.get(key), where, f"{dot}final_metrics.{key}", "a number")
    return doc


def _expect_scalar(value: Any, where: str, path: str, what: str) -> None:
    """Null, a number or text (read leniently by the display); nothing else."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
        raise _fail(where, path, f"expected {what}, got {_type_name(value)}")


def check_steps(steps: Any, where: str, path: str = "steps",
                embedded: set[str] | None = None) -> list[dict[str, Any]]:
    """Check a list of ATIF steps: ids 1..n in order, and each step's parts."""
    _expect(steps, list, where, path, "a list of steps")
    if not steps:
        raise _fail(where, path, "a trajectory needs at least one step")
    for i, step in enumerate(steps):
        if not _plainly_valid(step, i):
            _check_step(step, i, where, f"{path}[{i}]", embedded)
    return steps


_STRINGS = ("reasoning_content", "model_name", "timestamp")
_NUMBER = (int, float)


def _plainly_valid(step: Any, i: int) -> bool:
    """True when the step passes every check of `_check_step` in the common shape
    (a text message, tool calls, text results, metrics): decided without building
    the JSON paths an error would name, which cost more than the checks in a file
    of millions of steps. False sends the step to `_check_step`, which names what
    is wrong, or passes it (content parts, subagent references)."""
    if type(step) is not dict:
        return False
    get = step.get
    step_id = get("step_id")
    if type(step_id) is not int or step_id != i + 1 or get("source") not in SOURCES:
        return False
    message = get("message")
    if message is not None and type(message) is not str:
        return False
    for key in _STRINGS:
        value = get(key)
        if value is not None and type(value) is not str:
            return False
    calls = get("tool_calls")
    ids: set[str] = set()
    if calls is not None:
        if type(calls) is not list:
            return False
        for call in calls:
            if type(call) is not dict:
                return False
            call_id = call.get("tool_call_id")
            if type(call_id) is not str or call_id in ids or type(call.get("function_name")) is not str \
                    or type(call.get("arguments")) is not dict:
                return False
            ids.add(call_id)
    observation = get("observation")
    if observation is not None:
        results = observation.get("results") if type(observation) is dict else None
        if type(results) is not list:
            return False
        for result in results:
            if type(result) is not dict or result.get("subagent_trajectory_ref") is not None:
                return False
            source = result.get("source_call_id")
            if source is not None and (type(source) is not str or source not in ids):
                return False
            content = result.get("content")
            if content is not None and type(content) is not str:
                return False
    metrics = get("metrics")
    if metrics is not None:
        if type(metrics) is not dict:
            return False
        for key in TOKEN_FIELDS:
            value = metrics.get(key)
            if value is not None and type(value) is not int:
                return False
        cost = metrics.get("cost_usd")
        if cost is not None and type(cost) not in _NUMBER:
            return False
    return True


def _check_step(step: Any, i: int, where: str, path: str, embedded: set[str] | None) -> None:
    _expect(step, dict, where, path, "a step object")
    step_id = step.get("step_id")
    if step_id is None:
        raise _fail(where, f"{path}.step_id", "missing required field")
    if step_id != i + 1 or isinstance(step_id, bool) or not isinstance(step_id, int):
        raise _fail(where, f"{path}.step_id",
                    f"expected {i + 1} (step ids run 1..n in order), got {step_id!r}")
    source = step.get("source")
    if source not in SOURCES:
        raise _fail(where, f"{path}.source", "missing required field" if source is None
                    else f"expected one of {', '.join(SOURCES)}, got {source!r}")
    _check_message(step.get("message"), where, f"{path}.message")
    for key in ("reasoning_content", "model_name", "timestamp"):
        if step.get(key) is not None:
            _expect(step[key], str, where, f"{path}.{key}", "a string")
    call_ids = _check_tool_calls(step.get("tool_calls"), where, f"{path}.tool_calls")
    observation = step.get("observation")
    if observation is not None:
        _check_observation(observation, call_ids, step_id, where, f"{path}.observation", embedded)
    metrics = step.get("metrics")
    if metrics is not None:
        _expect(metrics, dict, where, f"{path}.metrics", "an object")
        for key in TOKEN_FIELDS:
            value = metrics.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise _fail(where, f"{path}.metrics.{key}", f"expected a whole number, got {value!r}")
        cost = metrics.get("cost_usd")
        if cost is not None and (not isinstance(cost, (int, float)) or isinstance(cost, bool)):
            raise _fail(where, f"{path}.metrics.cost_usd", f"expected a number, got {cost!r}")


def _check_message(message: Any, where: str, path: str) -> None:
    if message is None or isinstance(message, str):
        return
    _expect(message, list, where, path, "a string or a list of content parts")
    for j, part in enumerate(message):
        _check_part(part, where, f"{path}[{j}]")


def _check_part(part: Any, where: str, path: str) -> None:
    _expect(part, dict, where, path, "a content part {type, text | source}")
    kind = part.get("type")
    if kind not in PART_TYPES:
        raise _fail(where, f"{path}.type", f"expected one of {', '.join(PART_TYPES)}, got {kind!r}")
    if kind == "text":
        _expect(part.get("text"), str, where, f"{path}.text", "a string")
    elif part.get("source") is None:
        raise _fail(where, f"{path}.source", f"missing required field for a {kind} part")


def _check_tool_calls(calls: Any, where: str, path: str) -> set[str]:
    if calls is None:
        return set()
    _expect(calls, list, where, path, "a list of tool calls")
    ids: set[str] = set()
    for j, call in enumerate(calls):
        here = f"{path}[{j}]"
        _expect(call, dict, where, here, "a tool call {tool_call_id, function_name, arguments}")
        call_id = call.get("tool_call_id")
        if call_id is None:
            raise _fail(where, f"{here}.tool_call_id", "missing required field")
        _expect(call_id, str, where, f"{here}.tool_call_id", "a string")
        if call_id in ids:
            raise _fail(where, f"{here}.tool_call_id", f"{call_id!r} is used twice in this step")
        ids.add(call_id)
        if call.get("function_name") is None:
            raise _fail(where, f"{here}.function_name", "missing required field")
        _expect(call["function_name"], str, where, f"{here}.function_name", "a string")
        if "arguments" not in call:
            raise _fail(where, f"{here}.arguments", "missing required field")
        _expect(call["arguments"], dict, where, f"{here}.arguments", "a JSON object of arguments")
    return ids


def _check_observation(observation: Any, call_ids: set[str], step_id: int, where: str,
                       path: str, embedded: set[str] | None) -> None:
    _expect(observation, dict, where, path, "an object {results: [...]}")
    results = observation.get("results")
    if results is None:
        raise _fail(where, f"{path}.results", "missing required field")
    _expect(results, list, where, f"{path}.results", "a list of results")
    for j, result in enumerate(results):
        here = f"{path}.results[{j}]"
        _expect(result, dict, where, here, "a result object")
        call_id = result.get("source_call_id")
        if call_id is not None:
            _expect(call_id, str, where, f"{here}.source_call_id", "a string or null")
            if call_id not in call_ids:
                raise _fail(where, f"{here}.source_call_id",
                            f"{call_id!r} names no tool call of step {step_id}")
        content = result.get("content")
        if content is not None and not isinstance(content, str):
            _expect(content, list, where, f"{here}.content", "a string or a list of content parts")
            for k, part in enumerate(content):
                _check_part(part, where, f"{here}.content[{k}]")
        _check_refs(result.get("subagent_trajectory_ref"), where,
                    f"{here}.subagent_trajectory_ref", embedded)


def _check_refs(refs: Any, where: str, path: str, embedded: set[str] | None) -> None:
    if refs is None:
        return
    many = isinstance(refs, list)
    for k, ref in enumerate(refs if many else [refs]):
        here = f"{path}[{k}]" if many else path
        _expect(ref, dict, where, here, "a reference {trajectory_id | trajectory_path, ...}")
        names = [ref.get(key) for key in ("trajectory_id", "session_id", "trajectory_path")
                 if ref.get(key) is not None]
        if not names:
            raise _fail(where, here, "missing required field trajectory_id or trajectory_path")
        for name in names:
            _expect(name, str, where, here, "string ids and a string path")
        traj_id = ref.get("trajectory_id")
        if (traj_id is not None and not ref.get("trajectory_path")
                and traj_id not in (embedded or set())):
            raise _fail(where, f"{here}.trajectory_id",
                        f"{traj_id!r} names no embedded subagent trajectory")
