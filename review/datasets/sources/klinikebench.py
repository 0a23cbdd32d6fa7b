"""KlinikeBench episodes (`klinikebench`): JSONL or Parquet, one row per episode, streamed.

A clinician agent interviews a simulated patient. Each row carries four JSON
*strings* - `transcript` (clinician <-> patient; user = patient),
`agent_steps` (the agent's ATIF steps, checked by `review.datasets.sources.atif`),
`gates` (verifier detail) and `meta` - beside plain fields (see FORMATS.md 2).
Rows are read one at a time; nothing holds the file.

Uid: `kb:<subset>/<run>/<trial_name>` (a missing part is left out), dataset
`klinikebench`, case_id = task_id, model = clinician_model. Rows whose
`exception` is set are kept as failed items (failed = 1), with whatever
transcript and steps they have and no verifier answers.

Questions (rubric criteria bound to the episode, codebook `rubric`):
- `<uid>:gate:diagnosis`, `<uid>:gate:required_tools`,
  `<uid>:gate:parameterised_actions` - deterministic gates, answered by the
  reference rater `klinikebench-verifier`;
- `<uid>:gate:must_ask` - must-ask coverage, judged by an LLM: machine rater
  `klinikebench-judge:<judge_model>`;
- `<uid>:gate:<name>` for any other gate the file names (verifier);
- `<uid>:outcome` - all four gates pass (`outcome_pass`), verifier, with the
  episode's `reward` kept in the answer's extra;
- `<uid>:ask:<n>` - one per must-ask topic (the row's `must_ask` list, then
  any further topic the judge's verdicts name), answered by the judge.

Gate scores are 0..1: a gate's explicit pass flag decides met / not met; else
its score against PASS_THRESHOLD; the score and every unrecognised key of the
gate are kept in the answer's extra. A gate or topic with no value is not
measured: no answer. The `gates` shape is unpublished, so `read_gates` reads
it defensively (a mapping or a list of gates; topic verdicts as a list or a
mapping) and keeps the whole parsed object in the item's meta.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from review.datasets.sources.atif import check_steps, check_trajectory
from review.datasets.sources.base import Format, ImportOptions, register
from review.datasets.sources.harbor import (
    PASS_THRESHOLD,
    as_score,
    criterion_question,
    verdict_from_score,
)
from review.datasets.sources.readers import file_kind, read_jsonl, read_parquet
from review.reviewing.trajectory import trajectory_payload
from store.records import AnnotationRecord, ItemRecord, RaterRecord, Record
from store.writer import InputError

FAMILY = "klinikebench"
VERIFIER = "klinikebench-verifier"
JUDGE_PREFIX = "klinikebench-judge"
JSON_FIELDS = ("transcript", "agent_steps", "gates", "meta")
LIST_FIELDS = ("must_ask", "required_tools", "parameterised_actions")
PARQUET_BATCH = 256
"""Rows per Parquet batch: episodes are large, so batches stay small."""

GATES = {
    "diagnosis": ("Did the agent reach the task's reference diagnosis?",
                  ("diagnosis", "diagnosis_gate", "dx", "diagnosis_correct")),
    "required_tools": ("Did the agent use every tool the task requires?",
                       ("required_tools", "tools", "tool_use", "required_tool_calls")),
    "parameterised_actions": ("Did the agent's actions carry the parameters the task requires?",
                              ("parameterised_actions", "parameterized_actions", "parameters",
                               "params", "actions")),
    "must_ask": ("Did the agent ask the patient about every essential topic?",
                 ("must_ask", "must_ask_coverage", "coverage", "history_taking")),
}
JUDGED_GATES = {"must_ask"}
"""Gates an LLM judges (the rest are deterministic verifier checks)."""
OUTCOME_TEXT = ("Did the episode pass all four gates (diagnosis, required tools, "
                "parameterised actions, must-ask coverage)?")
SCORE_KEYS = ("score", "value", "reward", "coverage", "fraction")
PASS_KEYS = ("passed", "pass", "ok", "met", "success", "outcome")
TOPIC_LIST_KEYS = ("topics", "per_topic", "verdicts", "topic_verdicts", "must_ask", "items",
                   "questions")
TOPIC_NAME_KEYS = ("topic", "name", "question", "item", "criterion")
TOPIC_VERDICT_KEYS = ("asked", "met", "covered", "passed", "pass", "verdict", "criteria_met",
                      "value", "result", "score")
EXPLANATION_KEYS = ("explanation", "rationale", "reason", "evidence", "justification")
YES = {"yes", "true", "met", "asked", "covered", "pass", "passed", "1"}
NO = {"no", "false", "not_met", "not met", "missed", "not_asked", "not asked", "fail", "failed", "0"}


@dataclass
class TopicVerdict:
    topic: str
    met: bool | None
    score: float | None = None
    explanation: str | None = None


@dataclass
class GateResult:
    name: str
    """Canonical gate name (see GATES), or the file's own name for others."""
    score: float | None = None
    passed: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    """Every key of the gate this reader did not interpret, kept as given."""
    topics: list[TopicVerdict] = field(default_factory=list)


def episode_uid(row: Mapping[str, Any], trial_name: str) -> str:
    parts = [str(row[k]) for k in ("subset", "run") if row.get(k) not in (None, "")]
    return "kb:" + "/".join([*parts, trial_name])


def json_field(row: Mapping[str, Any], name: str, where: str,
               types: type | tuple[type, ...], what: str) -> Any:
    """A field that arrives as a JSON string (or already parsed), or None."""
    value = row.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: field {name!r} is not valid JSON: {exc.msg} "
                             f"(character {exc.pos} of the field)") from None
    if value is not None and not isinstance(value, types):
        raise InputError(f"{where}: field {name!r} must be {what}, got {type(value).__name__}")
    return value


def _list_field(row: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = row.get(name)
    if isinstance(value, str) and value.lstrip()[:1] not in ("[", "{"):
        return [value] if value.strip() else []
    value = json_field(row, name, where, (list, dict), "a list")
    if isinstance(value, dict):
        return [value]
    return list(value or [])


def _transcript(row: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    turns = json_field(row, "transcript", where, list, "a list of {role, content}") or []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str):
            raise InputError(f"{where}: transcript[{i}]: expected an object {{role, content}}, "
                             f"got {json.dumps(turn)[:60]}")
        content = turn.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InputError(f"{where}: transcript[{i}].content: expected text, "
                             f"got {type(content).__name__}")
    return turns


def _agent_steps(row: Mapping[str, Any], where: str) -> tuple[dict[str, Any] | None, list[Any]]:
    """(ATIF root when the field holds a whole document, the steps) - checked."""
    value = json_field(row, "agent_steps", where, (list, dict), "a list of ATIF steps")
    if isinstance(value, dict):
        check_trajectory(value, f"{where}: agent_steps")
        return value, value["steps"]
    if value:
        check_steps(value, f"{where}: agent_steps")
    return None, value or []


# -- gates ---------------------------------------------------------------------

_GATE_NAMES = {alias: name for name, (_, aliases) in GATES.items() for alias in aliases}


def gate_name(name: str) -> str:
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    return _GATE_NAMES.get(key, key)


def as_verdict(value: Any) -> bool | None:
    """True / False from a verdict given as bool, number (1 = met) or word; None if unknown."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return None if value != value else value >= PASS_THRESHOLD  # NaN: not measured
    text = str(value).strip().lower() if value is not None else ""
    return True if text in YES else False if text in NO else None


def read_gates(gates: Any) -> list[GateResult]:
    """Gates from the `gates` object: {name: detail} or [{name, ...}]."""
    if isinstance(gates, Mapping) and isinstance(gates.get("gates"), (Mapping, list)):
        gates = gates["gates"]
    if isinstance(gates, Mapping):
        items = list(gates.items())
    elif isinstance(gates, list):
        items = [(next((g[k] for k in ("name", "gate", "id") if isinstance(g, Mapping) and g.get(k)),
                       f"gate_{i + 1}"), g) for i, g in enumerate(gates)]
    else:
        return []
    return [_gate(gate_name(name), value) for name, value in items]


def _gate(name: str, value: Any) -> GateResult:
    gate = GateResult(name)
    if isinstance(value, bool):
        gate.passed = value
    elif isinstance(value, (int, float)):
        gate.score = float(value)
    elif isinstance(value, list):
        gate.topics = read_topics(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key in SCORE_KEYS and gate.score is None and isinstance(item, (int, float)) \
                    and not isinstance(item, bool):
                gate.score = float(item)
            elif key in PASS_KEYS and gate.passed is None and as_verdict(item) is not None:
                gate.passed = as_verdict(item)
            elif key in TOPIC_LIST_KEYS and isinstance(item, (list, Mapping)) and not gate.topics:
                gate.topics = read_topics(item)
            elif key not in ("name", "gate", "id"):
                gate.detail[key] = item
    elif value is not None:
        gate.detail["value"] = value
    return gate


def read_topics(value: Any) -> list[TopicVerdict]:
    """Per-topic verdicts from a list of {topic, asked, ...} or a mapping topic -> verdict."""
    pairs = list(value.items()) if isinstance(value, Mapping) else [(None, v) for v in value]
    out = []
    for name, raw in pairs:
        if isinstance(raw, Mapping):
            topic = name or next((raw[k] for k in TOPIC_NAME_KEYS if raw.get(k)), None)
            verdict = next((raw[k] for k in TOPIC_VERDICT_KEYS if k in raw), None)
            explanation = next((raw[k] for k in EXPLANATION_KEYS if raw.get(k)), None)
        else:
            topic, verdict, explanation = name, raw, None
            if name is None:  # a bare list of topic names: no verdicts
                topic, verdict = raw, None
        if not topic:
            continue
        score = float(verdict) if isinstance(verdict, (int, float)) and not isinstance(verdict, bool) else None
        out.append(TopicVerdict(str(topic), as_verdict(verdict), score,
                                str(explanation) if explanation is not None else None))
    return out


def _topic_key(topic: str) -> str:
    return " ".join(topic.split()).casefold()


def _topic_text(raw: Any) -> str | None:
    if isinstance(raw, Mapping):
        raw = next((raw[k] for k in TOPIC_NAME_KEYS if raw.get(k)), None)
    return str(raw).strip() if raw else None


# -- rows ------------------------------------------------------------------------

def episode_records(row: dict[str, Any], where: str, line: int, dataset: str,
                    announced: set[str]) -> Iterator[Record]:
    """The item, its criteria and the verifier's and judge's answers for one episode."""
    trial_name = row.get("trial_name")
    task_id = row.get("task_id")
    for name, value in (("trial_name", trial_name), ("task_id", task_id)):
        if value in (None, ""):
            raise InputError(f"{where}: missing required field {name!r}")
        if not isinstance(value, (str, int)):
            raise InputError(f"{where}: field {name!r} must be text, got {type(value).__name__}")
    uid = episode_uid(row, str(trial_name))
    exception = row.get("exception")
    failed = exception not in (None, "", {}, [])
    transcript = _transcript(row, where)
    atif, steps = _agent_steps(row, where)
    gates_raw = json_field(row, "gates", where, (dict, list), "a JSON object of gates")
    meta_doc = json_field(row, "meta", where, dict, "a JSON object")
    lists = {name: _list_field(row, name, where) for name in LIST_FIELDS}
    meta = {k: v for k, v in row.items() if k not in JSON_FIELDS and k not in LIST_FIELDS
            and v is not None}
    meta.update({k: v for k, v in lists.items() if v})
    if meta_doc:
        meta["meta"] = meta_doc
    if gates_raw is not None:
        meta["gates"] = gates_raw
    error = None
    if failed:
        error = exception if isinstance(exception, str) else json.dumps(exception, default=str)
    yield ItemRecord(
        uid=uid, kind="trajectory", dataset=dataset,
        payload=trajectory_payload(atif, steps=steps, transcript=transcript, error=error),
        case_id=str(task_id), split=row.get("split"), model=row.get("clinician_model"),
        failed=failed, meta=meta, line=line,
    )
    judge = f"{JUDGE_PREFIX}:{row['judge_model']}" if row.get("judge_model") else JUDGE_PREFIX
    for name, (text, _) in GATES.items():
        yield criterion_question(uid, f"gate:{name}", text, {"group": "gate", "gate": name})
    yield criterion_question(uid, "outcome", OUTCOME_TEXT, {"group": "gate", "gate": "outcome"})
    gates = [] if failed else read_gates(gates_raw)
    topics: dict[str, tuple[int, str]] = {}
    for raw in lists["must_ask"]:
        text = _topic_text(raw)
        if text and _topic_key(text) not in topics:
            topics[_topic_key(text)] = (len(topics) + 1, text)
    for gate in gates:
        for verdict in gate.topics:
            if _topic_key(verdict.topic) not in topics:
                topics[_topic_key(verdict.topic)] = (len(topics) + 1, verdict.topic)
    for n, text in topics.values():
        yield criterion_question(uid, f"ask:{n}", f"Did the agent ask the patient about: {text}?",
                                 {"group": "must_ask", "topic": text, "index": n})
    if failed:
        return
    yield from _raters(judge, row.get("judge_model"), announced)
    if row.get("outcome_pass") is not None and row["outcome_pass"] == row["outcome_pass"]:  # not NaN
        passed = as_verdict(row["outcome_pass"])
        if passed is None:
            raise InputError(f"{where}: field 'outcome_pass' must be true or false, "
                             f"got {row['outcome_pass']!r}")
        yield AnnotationRecord(item_uid=uid, question_key=f"{uid}:outcome", rater=VERIFIER,
                               value="met" if passed else "not_met", line=line,
                               extra={"reward": row.get("reward")})
    for gate in gates:
        rater = judge if gate.name in JUDGED_GATES else VERIFIER
        if gate.name not in GATES:
            yield criterion_question(uid, f"gate:{gate.name}", f"Did the episode pass the "
                                     f"'{gate.name}' gate?", {"group": "gate", "gate": gate.name})
        passed = gate.passed
        if passed is None and gate.score is not None:
            score = as_score(gate.score, where)
            passed = None if score is None else verdict_from_score(score) == "met"
        if passed is not None:
            yield AnnotationRecord(
                item_uid=uid, question_key=f"{uid}:gate:{gate.name}", rater=rater,
                value="met" if passed else "not_met", line=line,
                extra={"score": gate.score, "passed": gate.passed, "threshold": PASS_THRESHOLD,
                       **({"detail": gate.detail} if gate.detail else {})},
            )
        for verdict in gate.topics:
            if verdict.met is None:
                continue
            n, _ = topics[_topic_key(verdict.topic)]
            yield AnnotationRecord(
                item_uid=uid, question_key=f"{uid}:ask:{n}", rater=judge,
                value="met" if verdict.met else "not_met", rationale=verdict.explanation,
                line=line, extra={"score": verdict.score} if verdict.score is not None else {},
            )


def _raters(judge: str, judge_model: str | None, announced: set[str]) -> Iterator[Record]:
    if VERIFIER not in announced:
        announced.add(VERIFIER)
        yield RaterRecord(name=VERIFIER, kind="reference", role="verifier",
                          meta={"about": "KlinikeBench deterministic gates"})
    if judge not in announced:
        announced.add(judge)
        yield RaterRecord(name=judge, kind="machine", role="judge", model=judge_model,
                          prompt_version="klinikebench",
                          meta={"about": "KlinikeBench LLM judge of must-ask coverage"})


def read_klinikebench(path: Path, options: ImportOptions) -> Iterator[Record]:
    dataset = options.dataset or FAMILY
    rows = read_parquet(path, PARQUET_BATCH) if file_kind(path) == "parquet" else read_jsonl(path)
    announced: set[str] = set()
    for line, row in rows:
        yield from episode_records(row, f"{path}:{line}", line, dataset, announced)


register(Format(
    FAMILY, FAMILY, read_klinikebench,
    lambda p, f: "agent_steps" in f and ("trial_name" in f or "transcript" in f),
    "KlinikeBench episodes (JSONL or Parquet): trajectories, gates and must-ask verdicts",
))
