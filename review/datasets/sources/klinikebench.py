"""KlinikeBench episodes (`klinikebench`): JSONL or Parquet, one row per episode, streamed.

Read as the dataset card publishes them (FORMATS.md 2, and the conformance
files): a clinician agent interviews a simulated patient; each row carries
plain fields and four JSON *strings* - `transcript` (clinician <-> patient;
user = patient), `agent_steps` (the agent's ATIF trajectory, or a bare list of
its steps, checked by `review.datasets.sources.atif`), `gates` (the verifier's
detail) and `meta`. A JSON field may also arrive already parsed (a list or an
object), as a Parquet file with nested columns gives it. Rows are read one at
a time; nothing holds the file.

Uid: `kb:<subset>/<run>/<trial_name>` (a missing part is left out), dataset
`klinikebench`, case_id = task_id, model = clinician_model. Rows whose
`exception` is set are kept as failed items (failed = 1), with whatever
transcript and steps they have and no verifier or judge answers.

Scores. `reward`, `outcome_pass`, `diagnosis`, `required_tools`,
`parameterised_actions` and `must_ask` are verifier scores in 0..1 (null:
not measured, as when the episode raised). A pass flag may come as true /
false or 1 / 0. A score outside 0..1, or anything that is not a number, is
refused naming the field (`leaderboard.jsonl:3: field 'reward' must be a
score in 0..1, got 1.7`). The six are kept under the item's `meta.scores`.

Questions (rubric criteria bound to the episode, codebook `rubric`):
- `<uid>:gate:diagnosis`, `<uid>:gate:required_tools`,
  `<uid>:gate:parameterised_actions` - deterministic gates, answered by the
  reference rater `klinikebench-verifier`;
- `<uid>:gate:must_ask` - must-ask coverage, judged by an LLM: machine rater
  `klinikebench-judge:<judge_model>`;
- `<uid>:gate:<name>` for any other gate `gates` names (verifier);
- `<uid>:outcome` - all four gates pass (`outcome_pass`), verifier, with the
  episode's `reward` kept in the answer's extra;
- `<uid>:ask:<n>` - one per must-ask topic the judge's verdicts in `gates`
  name, answered by the judge.

A gate's verdict: its pass flag in `gates` where it has one (the verifier's
own rule, whatever its threshold), else its score against PASS_THRESHOLD.
The score comes from the row's score column; a file without that column
falls back on a score in the gate's detail. A null score is not measured: no
answer, whatever `gates` says; and a must-ask gate not measured (or a judge
that failed, `judge_ok` false) gives no per-topic verdicts either. The
score, the pass flag and the gate's other keys (missing tools, parameter
violations, the diagnosis recorded) are kept in the answer's extra, shown
with the verdict once revealed. What the task requires (the expected
diagnosis, the required tools and actions: `REQUIREMENTS`) is also put in
the item's meta (`diagnosis`, `required_tools`, `parameterised_actions`),
which the Trajectories screen shows beside the criteria before anyone answers.

The `gates` shape is unpublished beyond the conformance files
(`{gate: {passed, expected | required, missing_tools | violations | topics}}`),
so `read_gates` reads it defensively (a mapping or a list of gates; topic
verdicts as a list or a mapping) and the whole parsed object is kept in the
item's meta.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import orjson

from review.datasets.sources.atif import check_steps, check_trajectory
from review.datasets.sources.base import Format, ImportOptions, register
from review.datasets.sources.fields import id_length, quoted
from review.datasets.sources.harbor import (
    PASS_THRESHOLD,
    as_score,
    criterion_question,
    verdict_from_score,
)
from review.datasets.sources.readers import file_kind, mend_surrogates, read_jsonl, read_parquet
from review.reviewing.trajectory import trajectory_payload
from store.records import AnnotationRecord, ItemRecord, RaterRecord, Record, RunRecord
from store.writer import InputError

FAMILY = "klinikebench"
VERIFIER = "klinikebench-verifier"
JUDGE_PREFIX = "klinikebench-judge"
JSON_FIELDS = ("transcript", "agent_steps", "gates", "meta")
SCORE_FIELDS = ("reward", "outcome_pass", "diagnosis", "required_tools", "parameterised_actions",
                "must_ask")
"""The verifier's scores, 0..1 (null: not measured)."""
TIME_FIELDS = ("started_at", "finished_at")
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
REQUIREMENTS = {
    "diagnosis": ("expected", "expected_diagnosis", "reference", "reference_diagnosis", "gold"),
    "required_tools": ("required", "required_tools", "expected_tools"),
    "parameterised_actions": ("required", "required_actions", "expected_actions", "expected"),
}
"""Where a gate's detail names what the task requires (an assumption: the
conformance files write `expected` and `required`), by gate; the item's meta
keeps it under the gate's name for the Trajectories screen."""
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
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            value = _slow_json(value, name, where)
    elif not isinstance(value, (str, int, float, bool)):
        value = _plain(value)
    if value is not None and not isinstance(value, types):
        raise InputError(f"{where}: field {name!r} must be {what}, got {type(value).__name__}")
    return value


def score_field(row: Mapping[str, Any], name: str, where: str) -> float | None:
    """A verifier score in 0..1 (a pass flag as true / false or 1 / 0 too), or
    None when it is null or NaN (not measured); anything else is refused."""
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        if value != value:  # NaN: how a dataframe writes null
            return None
        if 0.0 <= value <= 1.0:
            return float(value)
        got = repr(value)
    elif isinstance(value, (list, dict)):
        got = f"a {'list' if isinstance(value, list) else 'JSON object'} (the published shape " \
              "gives a score here; the gate's detail is in 'gates')"
    else:
        got = quoted(value)
    raise InputError(f"{where}: field {name!r} must be a score in 0..1, got {got}")


def _slow_json(text: str, name: str, where: str) -> Any:
    """What orjson refused: Python's parser reads what it writes beyond JSON
    (NaN) and, for what neither reads, names the place."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: field {name!r} is not valid JSON: {exc.msg} "
                         f"(character {exc.pos} of the field)") from None
    except RecursionError:
        raise InputError(f"{where}: field {name!r}: a value nested too deeply to read") from None
    return mend_surrogates(value)


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

def _plain(value: Any) -> Any:
    """A value parsed by a Parquet reader as JSON keeps it: a timestamp as ISO 8601 text."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _requirements(gates: list[GateResult]) -> dict[str, Any]:
    """What the task required, as the gates' detail names it (see REQUIREMENTS)."""
    out: dict[str, Any] = {}
    for gate in gates:
        for key in REQUIREMENTS.get(gate.name, ()):
            value = gate.detail.get(key)
            if gate.name == "diagnosis" and isinstance(value, str) and value.strip():
                out[gate.name] = value
                break
            if gate.name != "diagnosis" and isinstance(value, list) and value:
                out[gate.name] = value
                break
    return out


@dataclass
class _Verdict:
    """One gate as answered: met / not met, and what it was read from."""

    gate: GateResult
    met: bool
    score: float | None


def _verdicts(row: Mapping[str, Any], gates: list[GateResult], where: str) -> list[_Verdict]:
    """The gates' verdicts: the pass flag where the gate has one, else the score
    (the row's score column; the gate's own score in a file without that column).
    A null score is not measured: no verdict."""
    by_name = {g.name: g for g in gates}
    for name in GATES:  # a scored gate that `gates` does not detail
        if name not in by_name and row.get(name) is not None:
            by_name[name] = GateResult(name)
    ordered = [by_name[n] for n in GATES if n in by_name] + [
        g for g in by_name.values() if g.name not in GATES]
    out = []
    for gate in ordered:
        if gate.name in GATES and gate.name in row:
            score = score_field(row, gate.name, where)
            if score is None:
                continue  # not measured, whatever the detail says
        elif gate.score is not None:
            score = as_score(gate.score, f"{where}: gates.{gate.name}.score")
        else:
            score = None
        if gate.passed is not None:
            met = gate.passed
        elif score is not None:
            met = verdict_from_score(score) == "met"
        else:
            continue
        out.append(_Verdict(gate, met, score))
    return out


def episode_run(row: Mapping[str, Any], dataset: str, attempt: int | None = None) -> RunRecord:
    """The run an episode belongs to (`store.runs`): its config (`subset`) and the `run`
    the dataset names, with the clinician model; a row that names no run is told apart by
    its patient model and its turn and step caps."""
    identity = {"model_requested": row.get("clinician_model"), "subset": row.get("subset"),
                "run": row.get("run"), "attempt": attempt}
    if row.get("run") in (None, ""):
        identity.update({k: row.get(k) for k in ("patient_model", "max_turns", "max_steps")})
    meta = {k: row[k] for k in ("patient_model", "judge_model", "task_dataset")
            if isinstance(row.get(k), (str, int, float)) and not isinstance(row.get(k), bool)}
    return RunRecord(dataset, "trajectory", identity, meta=meta)


def episode_records(row: dict[str, Any], where: str, line: int, dataset: str,
                    announced: set[str], attempt: int | None = None) -> Iterator[Record]:
    """The item, its criteria and the verifier's and judge's answers for one episode."""
    trial_name = row.get("trial_name")
    task_id = row.get("task_id")
    for name, value in (("trial_name", trial_name), ("task_id", task_id)):
        if value in (None, ""):
            raise InputError(f"{where}: missing required field {name!r}")
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise InputError(f"{where}: field {name!r} must be text, got {type(value).__name__}")
        id_length(value, name, where)
    for name in ("subset", "run"):
        id_length(row.get(name), name, where)
    uid = episode_uid(row, str(trial_name))
    exception = row.get("exception")
    failed = exception not in (None, "", {}, [])
    transcript = _transcript(row, where)
    atif, steps = _agent_steps(row, where)
    gates_raw = json_field(row, "gates", where, (dict, list), "a JSON object of gates")
    meta_doc = json_field(row, "meta", where, dict, "a JSON object")
    scores = {name: score_field(row, name, where) for name in SCORE_FIELDS if name in row}
    meta = {k: v.isoformat() if isinstance(v, (datetime, date)) else v for k, v in row.items()
            if k not in JSON_FIELDS and k not in SCORE_FIELDS and v is not None}
    meta["scores"] = scores
    if meta_doc:
        meta["meta"] = meta_doc
    gates = read_gates(gates_raw)
    if gates_raw is not None:
        meta["gates"] = gates_raw
        meta.update(_requirements(gates))
    error = None
    if failed:
        error = exception if isinstance(exception, str) else json.dumps(exception, default=str)
    yield ItemRecord(
        uid=uid, kind="trajectory", dataset=dataset,
        payload=trajectory_payload(atif, steps=steps, transcript=transcript, error=error),
        case_id=str(task_id), split=row.get("split"), model=row.get("clinician_model"),
        failed=failed, meta=meta, line=line, run=episode_run(row, dataset, attempt),
    )
    judge = f"{JUDGE_PREFIX}:{row['judge_model']}" if row.get("judge_model") else JUDGE_PREFIX
    for name, (text, _) in GATES.items():
        yield criterion_question(uid, f"gate:{name}", text, {"group": "gate", "gate": name})
    yield criterion_question(uid, "outcome", OUTCOME_TEXT, {"group": "gate", "gate": "outcome"})
    for gate in gates:
        if gate.name not in GATES:
            yield criterion_question(uid, f"gate:{gate.name}", f"Did the episode pass the "
                                     f"'{gate.name}' gate?", {"group": "gate", "gate": gate.name})
    topics: dict[str, tuple[int, str]] = {}
    for gate in gates:
        for verdict in gate.topics:
            if _topic_key(verdict.topic) not in topics:
                topics[_topic_key(verdict.topic)] = (len(topics) + 1, verdict.topic)
    for n, text in topics.values():
        yield criterion_question(uid, f"ask:{n}", f"Did the agent ask the patient about: {text}?",
                                 {"group": "must_ask", "topic": text, "index": n})
    if failed:
        return
    verdicts = _verdicts(row, gates, where)
    outcome = scores.get("outcome_pass")
    if not verdicts and outcome is None:
        return
    yield from _raters(judge, row.get("judge_model"), announced)
    if outcome is not None:
        yield AnnotationRecord(item_uid=uid, question_key=f"{uid}:outcome", rater=VERIFIER,
                               value=verdict_from_score(outcome), line=line,
                               extra={"score": outcome, "reward": scores.get("reward")})
    judge_failed = row.get("judge_ok") is False or row.get("judge_ok") == 0
    for v in verdicts:
        gate = v.gate
        rater = judge if gate.name in JUDGED_GATES else VERIFIER
        yield AnnotationRecord(
            item_uid=uid, question_key=f"{uid}:gate:{gate.name}", rater=rater,
            value="met" if v.met else "not_met", line=line,
            extra={"score": v.score, "passed": gate.passed, "threshold": PASS_THRESHOLD,
                   **({"detail": gate.detail} if gate.detail else {})},
        )
        if gate.name in JUDGED_GATES and judge_failed:
            continue  # the judge's per-topic verdicts are not its answer
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
        yield from episode_records(row, f"{path}:{line}", line, dataset, announced,
                                   options.attempt)


register(Format(
    FAMILY, FAMILY, read_klinikebench,
    lambda p, f: "agent_steps" in f and ("trial_name" in f or "transcript" in f),
    "KlinikeBench episodes (JSONL or Parquet): trajectories, gates and must-ask verdicts",
))
