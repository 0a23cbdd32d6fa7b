"""What a reviewer sees of an agent run or a rubric-graded conversation.

Two display models, each built from one item payload in one pass:

- `trajectory_view(payload)` -> `TrajectoryView`: the run as a list of
  `StepView` (one per ATIF step, in order: who spoke, the message, the agent's
  reasoning, tool calls with arguments, observations with the call they answer,
  subagent references, token and cost metrics), a compact `Timeline` of the
  whole run for orientation, the clinician-patient dialogue when the source
  has one, and the final answer.
- `graded_conversation_view(payload, criteria)` -> `GradedConversationView`:
  the conversation turns, the completion under review, and the rubric
  criteria (`CriterionView`) with their points.

`healthbench_score` is HealthBench's example score. `load_trajectory` and
`load_graded_conversation` read an item (and its criteria) from the store.

A trajectory payload (written by the importers through `trajectory_payload`)
keeps the ATIF steps as the source gave them, so nothing is lost, and holds
everything the screen needs in one JSON document:
`{schema_version, agent, steps, subagent_trajectories, final_metrics, notes,
transcript, final_answer, error, user_is_patient}` (absent keys mean empty),
and from a Harbor trial `segments` (which file, and which Harbor step of a
multi-step trial, each stretch of steps came from), `step_failures` (what a
Harbor step raised: shown on its last ATIF step, `StepView.failure`, and in
`TrajectoryView.step_failures`) and `logs` (the log files of an agent that
wrote no ATIF trajectory: each shown as a step of its own, source `log`, the
text as the agent wrote it).

KlinikeBench agents act through shell commands: `clinic say "..."` speaks to
the simulated patient and `clinic call <tool> '<json>'` uses a clinic tool.
The display model recognises them in tool-call arguments (and in a
Terminus-style JSON reply `{analysis, plan, commands}`), so a reviewer sees
"said to the patient" and the clinic tool with its arguments, and the
observation of a `say` as the patient's reply.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from codebook import STEP_ERROR_QUESTION
from labels.healthbench_score import Graded, example_score

PREVIEW_CHARS = 4000
"""Observations longer than this show a preview; the screen puts the rest in an expander."""
LABEL_CHARS = 60
"""Length of a timeline label."""
COMMAND_KEYS = ("keystrokes", "command", "cmd", "input", "script")
SAY_TOOLS = ("say", "clinic_say", "ask_patient", "talk_to_patient", "speak")
SAY_KEYS = ("text", "message", "utterance", "question", "content")
RUN_TOTALS = ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens",
              "total_cost_usd")
"""The run totals of ATIF `final_metrics` the timeline shows."""


# -- payload (written by importers) ------------------------------------------

def trajectory_payload(atif: Mapping[str, Any] | None = None, *,
                       steps: list[dict[str, Any]] | None = None,
                       transcript: list[dict[str, Any]] | None = None,
                       final_answer: dict[str, Any] | None = None,
                       error: str | None = None, user_is_patient: bool = False) -> dict[str, Any]:
    """The payload of a trajectory item: ATIF document parts plus dialogue and answer."""
    doc = atif or {}
    payload = {
        "schema_version": doc.get("schema_version"),
        "session_id": doc.get("session_id"),
        "trajectory_id": doc.get("trajectory_id"),
        "agent": doc.get("agent"),
        "steps": steps if steps is not None else doc.get("steps"),
        "subagent_trajectories": doc.get("subagent_trajectories"),
        "final_metrics": doc.get("final_metrics"),
        "notes": doc.get("notes"),
        "extra": doc.get("extra"),
        "transcript": transcript,
        "final_answer": final_answer,
        "error": error,
        "user_is_patient": user_is_patient or None,
    }
    return {k: v for k, v in payload.items() if v}


# -- trajectory display model ------------------------------------------------

@dataclass(slots=True)
class ToolCallView:
    call_id: str
    name: str
    """The function called; for `clinic call <tool>`, the clinic tool's name."""
    arguments: dict[str, Any] | str
    """Arguments as given (an object), or the raw text when they were not JSON."""
    kind: str = "tool"
    """tool (any tool) | say (words to the patient) | clinic_tool (`clinic call`)."""
    said: str | None = None
    """For kind `say`: the words said to the patient."""
    command: str | None = None
    """The shell command the call ran, when it ran one."""


SPEAKER_TAG = re.compile(r"\A\s*patient\s*:[ \t]*", re.IGNORECASE)
"""How a clinic tool's output names the patient as its speaker ("PATIENT: ...")."""


@dataclass(slots=True)
class SubagentRef:
    session_id: str | None
    trajectory_id: str | None
    path: str | None
    """`trajectory_path` as given (a file the source kept elsewhere)."""
    embedded_index: int | None
    """Index in the payload's `subagent_trajectories` (open with `subagent_view`), or None."""
    missing: bool = False
    """The reference names a file that was not in the run's folder when it was imported."""


@dataclass(slots=True)
class ResultView:
    source_call_id: str | None
    """The tool call this result answers, or None (not from a tool call)."""
    content: str
    preview: str
    """The first PREVIEW_CHARS characters: show this, the rest behind an expander."""
    truncated: bool
    from_patient: bool = False
    """True when this is the simulated patient's reply to something said."""
    subagents: list[SubagentRef] = field(default_factory=list)

    @property
    def said(self) -> str:
        """What the patient said: a reply without the clinic tool's speaker tag
        (`PATIENT: ...`), which a screen shows as a caption ("Patient replied")
        instead; any other result as it is."""
        return SPEAKER_TAG.sub("", self.content, count=1) if self.from_patient else self.content


@dataclass(slots=True)
class StepView:
    index: int
    """0-based position in the run (what previous/next and jump-to move through)."""
    step_id: int
    """ATIF step id (1-based); a step-level annotation targets `step:<step_id>`."""
    source: str
    """system | user | agent | patient."""
    message: str
    """The message as text (content parts joined; images and audio as placeholders)."""
    reasoning: str | None = None
    """The agent's reasoning (show collapsed)."""
    analysis: str | None = None
    """A Terminus-style reply's `analysis`, when the step also has `reasoning_content`
    (which is then `reasoning`); without it, the analysis is the reasoning."""
    timestamp: str | None = None
    model: str | None = None
    tool_calls: list[ToolCallView] = field(default_factory=list)
    results: list[ResultView] = field(default_factory=list)
    subagents: list[SubagentRef] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    """prompt_tokens, completion_tokens, cached_tokens, cost_usd, when given."""
    said_to_patient: list[str] = field(default_factory=list)
    done: bool = False
    """The agent declared the task complete at this step."""
    failure: str | None = None
    """What the Harbor step this step ends raised (`step_failure_text`), if it raised."""
    log_source: str | None = None
    """For a step of source `log`: which log file it is, in words (its path, and
    whether bytes that are not UTF-8 are shown as U+FFFD)."""


@dataclass(slots=True)
class TimelineMark:
    index: int
    step_id: int
    kind: str
    """system | task | user | patient | said | tool | message | answer | subagent | log."""
    label: str
    """A few words for a tooltip (at most LABEL_CHARS characters)."""
    marked: str | None = None
    """The error a reviewer marked at this step, if any (from `marked=`)."""


@dataclass(slots=True)
class Timeline:
    marks: list[TimelineMark]
    """One mark per step, in order."""
    counts: dict[str, int]
    """steps, agent_steps, tool_calls, said (to the patient), patient_replies, subagents, marked."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    unread: dict[str, Any] = field(default_factory=dict)
    """Run totals (`final_metrics`) given in a form that is not a number (e.g.
    "n/a"), as the file gives them; the steps' sums stand in for them."""


@dataclass(slots=True)
class Turn:
    index: int
    speaker: str
    """patient | clinician | system | user | assistant (as the source names them)."""
    text: str


@dataclass(slots=True)
class FinalAnswer:
    text: str
    verdict: str | None = None
    """The verdict parsed from the answer (CliniCARE), or None."""
    evidence: list[str] = field(default_factory=list)
    """Evidence ids the answer cites."""
    answer_line: str | None = None
    step_index: int | None = None
    """The step the answer was taken from, when it was taken from a step."""


@dataclass(slots=True)
class StepFailure:
    step_name: str
    """The Harbor step (`steps/<name>/` of a multi-step trial)."""
    text: str
    """`step_failure_text`: what it raised, in one line."""
    step_index: int | None
    """The run's step the failure is shown on (the Harbor step's last ATIF step or
    log), or None when that Harbor step left nothing to show."""


def step_failure_text(failure: Mapping[str, Any]) -> str:
    """A Harbor step's failure in one line: `step 'plan' raised AgentTimeoutError:
    Agent execution timed out after 600.0 seconds`."""
    what = ": ".join(str(failure[k]) for k in ("exception_type", "exception_message")
                     if failure.get(k))
    return f"step {str(failure.get('step_name'))!r} raised " + (what or "an exception")


@dataclass(slots=True)
class TrajectoryView:
    steps: list[StepView]
    timeline: Timeline
    dialogue: list[Turn]
    """The clinician-patient transcript when the source keeps one (KlinikeBench)."""
    final_answer: FinalAnswer | None
    agent: dict[str, Any]
    """name, version, model_name as the trajectory gives them."""
    subagent_count: int
    error: str | None
    """The exception that ended a failed run (a failed Harbor step's among them)."""
    schema_version: str | None
    step_failures: list[StepFailure] = field(default_factory=list)
    """What the Harbor steps of a multi-step trial raised, in step order."""


def blind_to_agent(view: TrajectoryView) -> TrajectoryView:
    """The run as a reviewer kept blind to the agent reads it (`Sight.model_hidden`):
    no agent name, version or model, on the run or on any step, nor the name of a
    log file (installed agents name theirs after themselves: `aider.txt`)."""
    return replace(view, agent={}, steps=[
        replace(step, model=None, log_source=BLIND_LOG if step.log_source else None)
        for step in view.steps])


BLIND_LOG = "(its file name left out while you are blind to the agent)"
"""What a log step says of its file while the reviewer is blind to the agent."""


def task_requirements(meta: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """What the task required of the agent, as a run's gates ask about it
    (KlinikeBench: the reference diagnosis, the required tools, the actions with
    their parameters): (what, items) in words a reviewer can check the run
    against. The task's definition, not anyone's verdict: shown before answering."""
    out: list[tuple[str, list[str]]] = []
    diagnosis = meta.get("diagnosis")
    if isinstance(diagnosis, str) and diagnosis.strip():
        out.append(("Reference diagnosis", [diagnosis.strip()]))
    tools = meta.get("required_tools")
    if isinstance(tools, list) and tools:
        out.append(("Required tools", [_requirement(t) for t in tools]))
    actions = meta.get("parameterised_actions")
    if isinstance(actions, list) and actions:
        out.append(("Required actions, with their parameters", [_requirement(a) for a in actions]))
    return out


REQUIREMENT_GATES = {"Reference diagnosis": "diagnosis", "Required tools": "required_tools",
                     "Required actions, with their parameters": "parameterised_actions"}
"""Which gate asks about each of `task_requirements` (KlinikeBench's gate names)."""


def gate_of(question_key: str) -> str | None:
    """The gate a run's question asks about (`<uid>:gate:<name>`), or None."""
    head, sep, name = question_key.rpartition(":gate:")
    return name if sep and head else None


def gate_requirements(meta: Mapping[str, Any]) -> dict[str, str]:
    """gate name -> what the task required of it, in words ("Reference
    diagnosis: stable angina"): shown beside the gate that asks about it."""
    return {REQUIREMENT_GATES[what]: f"{what}: " + "; ".join(things)
            for what, things in task_requirements(meta) if what in REQUIREMENT_GATES}


def _requirement(value: Any) -> str:
    """One required tool or action in words: `prescribe: drug glyceryl trinitrate
    spray, dose 400 micrograms, route sublingual`; anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        tool = value.get("tool") or value.get("name")
        params = value.get("params") if isinstance(value.get("params"), Mapping) else None
        if isinstance(tool, str) and params is not None:
            words = ", ".join(f"{k} {v if isinstance(v, str) else json.dumps(v, default=str)}"
                              for k, v in params.items())
            return f"{tool}: {words}" if words else tool
    return json.dumps(value, default=str, ensure_ascii=False)


def trajectory_view(payload: Mapping[str, Any],
                    marked: Mapping[int, str] | None = None) -> TrajectoryView:
    """The run as the screen shows it. `marked` maps step_id -> error code marked so far."""
    marked = marked or {}
    subagents = payload.get("subagent_trajectories") or []
    embedded = _embedded_index(subagents, payload)
    user_is_patient = bool(payload.get("user_is_patient"))
    steps: list[StepView] = []
    marks: list[TimelineMark] = []
    counts = dict.fromkeys(("steps", "agent_steps", "tool_calls", "said", "patient_replies",
                            "subagents", "marked"), 0)
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    cost: float | None = None
    seen_user = False
    raw_steps = payload.get("steps") or []
    for index, raw in enumerate(raw_steps):
        step = _step_view(index, raw, embedded)
        is_task = step.source == "user" and not seen_user
        if step.source == "user":
            if seen_user and user_is_patient:
                step.source = "patient"
            seen_user = True
        steps.append(step)
        for key in totals:
            totals[key] += step.metrics.get(key) or 0
        if "cost_usd" in step.metrics:
            cost = (cost or 0.0) + step.metrics["cost_usd"]
        counts["steps"] += 1
        counts["agent_steps"] += step.source == "agent"
        counts["tool_calls"] += sum(c.kind != "say" for c in step.tool_calls)
        counts["said"] += len(step.said_to_patient)
        counts["patient_replies"] += sum(r.from_patient for r in step.results)
        counts["subagents"] += len(step.subagents)
        mark = _mark(step, first_user=is_task)
        mark.marked = marked.get(step.step_id)
        counts["marked"] += mark.marked is not None
        marks.append(mark)
    if not raw_steps:
        steps, marks = _steps_from_transcript(payload.get("transcript") or [])
        for mark in marks:
            mark.marked = marked.get(mark.step_id)
        counts.update(steps=len(steps), patient_replies=sum(s.source == "patient" for s in steps),
                      marked=sum(m.marked is not None for m in marks))
    log_steps = _log_steps(payload.get("logs"), len(steps))
    for step in log_steps:
        mark = TimelineMark(step.index, step.step_id, "log", "the agent's log",
                            marked.get(step.step_id))
        counts["marked"] += mark.marked is not None
        steps.append(step)
        marks.append(mark)
    counts["steps"] += len(log_steps)
    failures = _step_failures(payload, steps)
    final = _final_answer(payload, steps)
    if final is not None and final.step_index is not None and final.step_index < len(marks):
        marks[final.step_index].kind = "answer"
    metrics = payload.get("final_metrics")
    metrics = metrics if isinstance(metrics, Mapping) else {}
    given = {key: (_count if key.endswith("_tokens") else _number)(metrics.get(key))
             for key in RUN_TOTALS}
    total_cost = given["total_cost_usd"]
    timeline = Timeline(
        marks=marks, counts=counts,
        prompt_tokens=given["total_prompt_tokens"] or totals["prompt_tokens"],
        completion_tokens=given["total_completion_tokens"] or totals["completion_tokens"],
        cached_tokens=given["total_cached_tokens"] or totals["cached_tokens"],
        cost_usd=float(total_cost) if total_cost is not None else cost,
        unread={key: metrics[key] for key in RUN_TOTALS
                if metrics.get(key) is not None and given[key] is None},
    )
    stamps = [s.timestamp for s in steps if s.timestamp]
    if stamps:
        timeline.started_at, timeline.finished_at = stamps[0], stamps[-1]
        timeline.duration_s = _seconds_between(stamps[0], stamps[-1])
    agent = payload.get("agent")
    agent = agent if isinstance(agent, Mapping) else {}
    return TrajectoryView(
        steps=steps, timeline=timeline, dialogue=dialogue_turns(payload.get("transcript") or []),
        final_answer=final,
        agent={k: _text(agent.get(k)) for k in ("name", "version", "model_name")
               if _text(agent.get(k))},
        subagent_count=len(subagents), error=payload.get("error"),
        schema_version=payload.get("schema_version"), step_failures=failures,
    )


def _log_steps(logs: Any, after: int) -> list[StepView]:
    """An agent's log files (`payload.logs`) as steps after the run's own: what
    the reviewer reads of an agent that wrote no ATIF trajectory."""
    out = []
    for log in logs if isinstance(logs, list) else []:
        if not isinstance(log, Mapping) or not isinstance(log.get("text"), str):
            continue
        where = str(log.get("path") or "log")
        if log.get("step_name"):
            where += f" (Harbor step {str(log['step_name'])!r})"
        if log.get("not_utf8"):
            where += "; bytes that are not UTF-8 are shown as \ufffd"
        index = after + len(out)
        out.append(StepView(index=index, step_id=index + 1, source="log", message=log["text"],
                            log_source=where))
    return out


def _step_failures(payload: Mapping[str, Any], steps: list[StepView]) -> list[StepFailure]:
    """Each Harbor step's failure, put on the last of the run's steps that came
    from that Harbor step (`payload.segments`), or its last log."""
    failures = payload.get("step_failures")
    if not isinstance(failures, list) or not failures:
        return []
    by_id = {s.step_id: s for s in steps}
    last: dict[str, StepView] = {}
    for segment in payload.get("segments") or []:
        if not isinstance(segment, Mapping) or not segment.get("step_name"):
            continue
        try:
            end = int(segment["first_step"]) + int(segment["steps"]) - 1
        except (KeyError, TypeError, ValueError):
            continue
        if end in by_id:
            last[str(segment["step_name"])] = by_id[end]
    for log_step, log in zip([s for s in steps if s.source == "log"],
                             [g for g in payload.get("logs") or [] if isinstance(g, Mapping)
                              and isinstance(g.get("text"), str)], strict=False):
        if log.get("step_name"):
            last.setdefault(str(log["step_name"]), log_step)
    out = []
    for failure in failures:
        if not isinstance(failure, Mapping):
            continue
        name = str(failure.get("step_name"))
        text = step_failure_text(failure)
        step = last.get(name)
        if step is not None:
            step.failure = f"{step.failure}; {text}" if step.failure else text
        out.append(StepFailure(name, text, step.index if step is not None else None))
    return out


def subagent_view(payload: Mapping[str, Any], index: int) -> TrajectoryView:
    """An embedded subagent trajectory, shown like the main run."""
    sub = (payload.get("subagent_trajectories") or [])[index]
    return trajectory_view(trajectory_payload(sub))


def dialogue_turns(transcript: Iterable[Mapping[str, Any]]) -> list[Turn]:
    """A KlinikeBench transcript (`user` = the patient) as clinician/patient turns."""
    speakers = {"user": "patient", "assistant": "clinician", "clinician": "clinician",
                "patient": "patient", "system": "system"}
    turns = []
    for i, turn in enumerate(transcript):
        role = str(turn.get("role") or "unknown")
        turns.append(Turn(i, speakers.get(role, role), message_text(turn.get("content"))))
    return turns


def message_text(message: Any) -> str:
    """A message or content as plain text: content parts joined, media as placeholders."""
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        parts = []
        for part in message:
            if isinstance(part, Mapping):
                kind = part.get("type")
                if kind == "text" or "text" in part:
                    parts.append(str(part.get("text") or ""))
                else:
                    source = part.get("source")
                    where = source.get("path") or source.get("url") or source.get(
                        "media_type") if isinstance(source, Mapping) else source
                    parts.append(f"[{kind or 'part'}: {where or 'embedded'}]")
            else:
                parts.append(str(part))
        return "\n\n".join(p for p in parts if p)
    return json.dumps(message, ensure_ascii=False)


def subagent_owners(payload: Mapping[str, Any]) -> dict[int, int]:
    """{index in `subagent_trajectories`: step_id of the run's first step whose
    results refer to it}; a subagent run no step names (a summarisation file) has
    no owner."""
    subagents = payload.get("subagent_trajectories") or []
    if not isinstance(subagents, list) or not subagents:
        return {}
    embedded = _embedded_index(subagents, payload)
    owners: dict[int, int] = {}
    for index, raw in enumerate(payload.get("steps") or []):
        if not isinstance(raw, Mapping):
            continue
        observation = raw.get("observation")
        results = observation.get("results") if isinstance(observation, Mapping) else None
        for result in results if isinstance(results, list) else []:
            if not isinstance(result, Mapping):
                continue
            for ref in _refs(result.get("subagent_trajectory_ref"), embedded):
                if ref.embedded_index is not None and ref.embedded_index >= 0:
                    step_id = raw.get("step_id")
                    owners.setdefault(ref.embedded_index,
                                      step_id if isinstance(step_id, int) else index + 1)
    return owners


def _embedded_index(subagents: Sequence[Mapping[str, Any]],
                    payload: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Subagent runs by trajectory_id and session_id; linked files an importer read
    by `path:<trajectory_path>` (`linked_trajectories`); a linked file that was
    not there by `missing:<trajectory_path>` (-1)."""
    index = {}
    for i, sub in enumerate(subagents):
        for key in ("trajectory_id", "session_id"):
            if sub.get(key):
                index[str(sub[key])] = i
    linked = (payload or {}).get("linked_trajectories")
    if isinstance(linked, Mapping):
        index.update({str(k): v for k, v in linked.items()
                      if isinstance(v, int) and 0 <= v < len(subagents)})
    for path in (payload or {}).get("missing_trajectories") or []:
        index[f"missing:{path}"] = -1
    return index


def _step_view(index: int, raw: Mapping[str, Any], embedded: Mapping[str, int]) -> StepView:
    message = raw.get("message")
    reasoning = raw.get("reasoning_content")
    text = message_text(message)
    commands: list[str] = []
    done = False
    reply = _structured_reply(message)
    analysis = None
    if reply is not None:
        if reasoning:  # both: the reply's own analysis is shown beside the model's reasoning
            analysis = _text(reply.get("analysis"))
        else:
            reasoning = reply.get("analysis")
        text = str(reply.get("plan") or reply.get("message") or "")
        commands = _commands(reply.get("commands"))
        done = bool(reply.get("task_complete"))
    calls = [_tool_call(c) for c in raw.get("tool_calls") or []]
    if not calls and commands:
        calls = [_command_call(f"cmd-{raw.get('step_id')}-{k}", cmd) for k, cmd in enumerate(commands)]
    said_ids = {c.call_id for c in calls if c.kind == "say"}
    results = []
    refs_all: list[SubagentRef] = []
    for res in (raw.get("observation") or {}).get("results") or []:
        content = message_text(res.get("content"))
        refs = _refs(res.get("subagent_trajectory_ref"), embedded)
        refs_all.extend(refs)
        call_id = res.get("source_call_id")
        results.append(ResultView(
            source_call_id=call_id, content=content, preview=content[:PREVIEW_CHARS],
            truncated=len(content) > PREVIEW_CHARS, from_patient=call_id in said_ids,
            subagents=refs,
        ))
    metrics = raw.get("metrics")
    metrics = metrics if isinstance(metrics, Mapping) else {}
    numbers = {k: (_count if k.endswith("_tokens") else _number)(metrics.get(k))
               for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")}
    return StepView(
        index=index, step_id=int(raw.get("step_id") or index + 1),
        source=str(raw.get("source") or "agent"), message=text, reasoning=reasoning or None,
        analysis=analysis,
        timestamp=raw.get("timestamp"), model=raw.get("model_name"), tool_calls=calls,
        results=results, subagents=refs_all,
        metrics={k: v for k, v in numbers.items() if v is not None},
        said_to_patient=[c.said for c in calls if c.kind == "say" and c.said],
        done=done,
    )


def _number(value: Any) -> float | None:
    """A metric as a number: a number, or text that reads as one ("0.0123");
    None for anything else (null, true/false, "n/a", a list, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    """A token count as a whole number ("300" and 300.0 included); None otherwise."""
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


def _text(value: Any) -> str | None:
    """A name or version as text: `"version": 2` reads as "2"; None when empty."""
    if value is None or isinstance(value, bool) or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _structured_reply(message: Any) -> dict[str, Any] | None:
    """A Terminus-style agent reply `{analysis, plan, commands}` given as a JSON string."""
    if not isinstance(message, str) or not message.lstrip().startswith("{"):
        return None
    try:
        reply = json.loads(message)
    except ValueError:
        return None
    if isinstance(reply, dict) and ({"analysis", "plan", "commands"} & reply.keys()):
        return reply
    return None


def _commands(commands: Any) -> list[str]:
    out = []
    for cmd in commands or []:
        if isinstance(cmd, str):
            out.append(cmd)
        elif isinstance(cmd, Mapping):
            text = next((cmd[k] for k in COMMAND_KEYS if isinstance(cmd.get(k), str)), None)
            if text:
                out.append(text)
    return out


def _tool_call(raw: Mapping[str, Any]) -> ToolCallView:
    call_id = str(raw.get("tool_call_id") or "")
    name = str(raw.get("function_name") or "")
    args = raw.get("arguments")
    if not isinstance(args, Mapping):
        args = {} if args is None else args
    if name in SAY_TOOLS and isinstance(args, Mapping):
        said = next((str(args[k]) for k in SAY_KEYS if args.get(k)), None)
        return ToolCallView(call_id, name, dict(args), "say", said)
    command = next((args[k] for k in COMMAND_KEYS
                    if isinstance(args, Mapping) and isinstance(args.get(k), str)), None)
    if command is not None:
        clinic = parse_clinic_command(command)
        if clinic is not None:
            kind, tool, tool_args, said = clinic
            return ToolCallView(call_id, tool, tool_args, kind, said, command.strip())
        return ToolCallView(call_id, name, dict(args), "tool", None, command.strip())
    return ToolCallView(call_id, name, dict(args) if isinstance(args, Mapping) else args)


def _command_call(call_id: str, command: str) -> ToolCallView:
    clinic = parse_clinic_command(command)
    if clinic is None:
        return ToolCallView(call_id, "shell", {"command": command}, "tool", None, command.strip())
    kind, tool, args, said = clinic
    return ToolCallView(call_id, tool, args, kind, said, command.strip())


def parse_clinic_command(command: str) -> tuple[str, str, dict[str, Any] | str, str | None] | None:
    """`clinic say "..."` -> ("say", "say", {"text": ...}, text);
    `clinic call <tool> '<json>'` -> ("clinic_tool", tool, arguments, None); else None."""
    text = command.strip()
    if not text.startswith("clinic "):
        return None
    try:
        tokens = shlex.split(text)
    except ValueError:
        return None
    if len(tokens) >= 3 and tokens[1] == "say":
        said = " ".join(tokens[2:])
        return "say", "say", {"text": said}, said
    if len(tokens) >= 3 and tokens[1] == "call":
        raw = " ".join(tokens[3:])
        if not raw:
            return "clinic_tool", tokens[2], {}, None
        try:
            args = json.loads(raw)
        except ValueError:
            return "clinic_tool", tokens[2], raw, None
        return "clinic_tool", tokens[2], args if isinstance(args, dict) else {"value": args}, None
    return None


def _refs(raw: Any, embedded: Mapping[str, int]) -> list[SubagentRef]:
    if not raw:
        return []
    out = []
    for ref in raw if isinstance(raw, list) else [raw]:
        if not isinstance(ref, Mapping):
            continue
        traj, session, path = ref.get("trajectory_id"), ref.get("session_id"), ref.get("trajectory_path")
        where = embedded.get(str(traj)) if traj else None
        if where is None and path:
            where = embedded.get(f"path:{path}")
        if where is None and session:
            where = embedded.get(str(session))
        missing = where is None and bool(path) and f"missing:{path}" in embedded
        out.append(SubagentRef(session, traj, path, where, missing))
    return out


def _mark(step: StepView, first_user: bool) -> TimelineMark:
    if step.source == "system":
        kind, label = "system", step.message
    elif step.source == "user":
        kind, label = ("task" if first_user else "user"), step.message
    elif step.source == "patient":
        kind, label = "patient", step.message
    elif step.subagents:
        kind, label = "subagent", f"delegated to {len(step.subagents)} subagent(s)"
    elif step.said_to_patient:
        kind, label = "said", step.said_to_patient[0]
    elif step.tool_calls:
        kind = "tool"
        label = ", ".join(c.name for c in step.tool_calls)
    else:
        kind, label = "message", step.message
    return TimelineMark(step.index, step.step_id, kind, _label(label))


def _label(label: Any) -> str:
    """A few words for a timeline mark: one line, at most LABEL_CHARS characters."""
    label = " ".join(str(label or "").split())
    if len(label) > LABEL_CHARS:
        label = label[: LABEL_CHARS - 1] + "…"
    return label


def _steps_from_transcript(transcript: list[Mapping[str, Any]]) -> tuple[list[StepView], list[TimelineMark]]:
    """A run with a transcript but no agent steps (e.g. an episode that raised)."""
    steps, marks = [], []
    for turn in dialogue_turns(transcript):
        source = {"clinician": "agent", "patient": "patient"}.get(turn.speaker, turn.speaker)
        if source not in ("system", "user", "agent", "patient"):
            source = "user"
        step = StepView(index=turn.index, step_id=turn.index + 1, source=source, message=turn.text)
        steps.append(step)
        marks.append(_mark(step, first_user=False))
    return steps, marks


def _final_answer(payload: Mapping[str, Any], steps: list[StepView]) -> FinalAnswer | None:
    given = payload.get("final_answer")
    if isinstance(given, Mapping) and given.get("text") is not None:
        return FinalAnswer(text=str(given["text"]), verdict=given.get("verdict"),
                           evidence=list(given.get("evidence") or []),
                           answer_line=given.get("answer_line"), step_index=given.get("step_index"))
    for step in reversed(steps):
        if step.source == "agent" and step.message.strip():
            return FinalAnswer(text=step.message, step_index=step.index)
    return None


def _seconds_between(start: str, end: str) -> float | None:
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
        return (b - a).total_seconds()
    except (ValueError, TypeError):
        return None


# -- graded conversations ------------------------------------------------------

@dataclass(slots=True)
class CriterionView:
    key: str
    """Question key: what an answer to this criterion is stored under."""
    text: str
    points: float
    """Negative for a criterion the response must not meet."""
    must_not: bool
    axis: str | None = None
    tags: list[str] = field(default_factory=list)
    index: int = 0
    """Position in the source rubric."""
    group: str | None = None
    """healthbench | gate | must_ask | verifier | process."""


@dataclass(slots=True)
class GradedConversationView:
    turns: list[Turn]
    """The conversation before the completion (speaker = the source's role)."""
    completion: str | None
    """The text graded against the criteria; None when the source has none."""
    completion_source: str | None
    """model | ideal_completion (physician-written)."""
    model: str | None
    criteria: list[CriterionView]
    max_points: float
    """Sum of positive points: the denominator of the score."""
    ideal_completion: str | None = None
    """The physician-written ideal completion, as a reference (show after commit)."""


def graded_conversation_view(payload: Mapping[str, Any], criteria: Iterable[Any],
                             parent_payload: Mapping[str, Any] | None = None,
                             model: str | None = None) -> GradedConversationView:
    """The conversation, completion and criteria. `criteria` are question rows or
    dicts with key, text, points and meta; turns come from the parent prompt item
    when the completion's own payload has none."""
    parent = parent_payload or {}
    turns = payload.get("turns") or parent.get("turns") or []
    views = sorted((criterion_view(c) for c in criteria), key=lambda c: (c.index, c.key))
    ideal = payload.get("ideal_completion") or parent.get("ideal_completion")
    if ideal is None and parent.get("completion_source") == "ideal_completion":
        ideal = parent.get("completion")
    return GradedConversationView(
        turns=[Turn(i, str(t.get("role") or "user"), message_text(t.get("content")))
               for i, t in enumerate(turns)],
        completion=payload.get("completion"),
        completion_source=payload.get("completion_source"),
        model=model or payload.get("model"),
        criteria=views,
        max_points=sum(c.points for c in views if c.points > 0),
        ideal_completion=ideal if isinstance(ideal, str) else None,
    )


def criterion_view(row: Any) -> CriterionView:
    """A criterion question (a sqlite Row or a dict) as the checklist shows it."""
    if isinstance(row, CriterionView):
        return row
    get = row.__getitem__
    meta = get("meta")
    if isinstance(meta, str):
        meta = json.loads(meta or "{}")
    meta = meta or {}
    points = get("points")
    points = float(points) if points is not None else 1.0
    return CriterionView(
        key=get("key"), text=get("text"), points=points,
        must_not=bool(meta.get("must_not", points < 0)), axis=meta.get("axis"),
        tags=list(meta.get("tags") or []), index=int(meta.get("index") or 0),
        group=meta.get("group"),
    )


def healthbench_score(points: Sequence[float], met: Sequence[bool | None], *,
                      clip: bool = True) -> float | None:
    """HealthBench's example score: points of met criteria / sum of positive points
    (``labels.healthbench_score.example_score``, simple-evals' formula).

    Met negative criteria subtract. Clipped to 0..1 (as HealthBench reports it)
    unless `clip=False`. None when there are no positive points, or while any
    criterion is unanswered (None): a partial checklist has no score."""
    if len(points) != len(met):
        raise ValueError(f"{len(points)} criteria but {len(met)} verdicts")
    if any(m is None for m in met):
        return None
    score = example_score([Graded(p, m) for p, m in zip(points, met, strict=True)])
    if score is None:
        return None
    return min(1.0, max(0.0, score)) if clip else score


def criteria_score(criteria: Sequence[CriterionView], verdicts: Mapping[str, Any],
                   *, clip: bool = True) -> float | None:
    """`healthbench_score` for a checklist and a rater's answers {question key: met/not_met}."""
    met = [_as_met(verdicts.get(c.key)) for c in criteria]
    return healthbench_score([c.points for c in criteria], met, clip=clip)


def _as_met(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("met", "true", "yes"):
        return True
    if text in ("not_met", "not met", "false", "no"):
        return False
    return None


# -- reading from the store ----------------------------------------------------

def item_criteria(store: Any, item_id: int, parent_id: int | None = None) -> list[CriterionView]:
    """Criterion questions bound to an item or to its parent (a completion shares
    its prompt's rubric), in rubric order."""
    rows = store.query(
        "SELECT key, text, points, meta FROM questions WHERE kind = 'criterion'"
        " AND item_id IN (?, ?) ORDER BY id",
        (item_id, parent_id if parent_id is not None else item_id),
    )
    return sorted((criterion_view(r) for r in rows), key=lambda c: (c.index, c.key))


def load_trajectory(store: Any, uid: str,
                    marked: Mapping[int, str] | None = None) -> TrajectoryView | None:
    """The trajectory item `uid` as the screen shows it, or None."""
    row = store.query_one("SELECT payload FROM items WHERE uid = ?", (uid,))
    if row is None:
        return None
    return trajectory_view(json.loads(row[0]), marked)


def load_step_marks(store: Any, uid: str, rater: str) -> dict[int, str]:
    """{step_id: error code} of one rater's current step marks on a trajectory
    (answers to `trajectory.step_error` whose target is `step:<step_id>`), for
    `trajectory_view(..., marked=)`."""
    rows = store.query(
        "SELECT a.target, a.value FROM current_annotations a JOIN items i ON i.id = a.item_id"
        " JOIN questions q ON q.id = a.question_id JOIN raters r ON r.id = a.rater_id"
        " WHERE i.uid = ? AND r.name = ? AND q.key = ? AND a.target LIKE 'step:%'"
        " AND a.status = 'answered'",
        (uid, rater, STEP_ERROR_QUESTION),
    )
    return {int(target.split(":", 1)[1]): value for target, value in rows
            if target.split(":", 1)[1].isdigit()}


def load_graded_conversation(store: Any, uid: str) -> GradedConversationView | None:
    """The graded-conversation item `uid` with its criteria, or None."""
    row = store.query_one(
        "SELECT i.id, i.parent_id, i.payload, i.model, p.payload FROM items i"
        " LEFT JOIN items p ON p.id = i.parent_id WHERE i.uid = ?", (uid,))
    if row is None:
        return None
    item_id, parent_id, payload, model, parent = row
    return graded_conversation_view(
        json.loads(payload), item_criteria(store, item_id, parent_id),
        json.loads(parent) if parent else None, model=model,
    )
