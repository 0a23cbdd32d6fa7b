"""CliniCARE-Bench: verdicts of Harbor trials (`clinicare`) and the cohort CSV (`clinicare-cohort`).

An agent answers a question over one patient's chart and writes a report
whose `## Answer:` line carries one of four verdicts (codebook
`clinicare-verdict`). Trials run under Harbor: this module is a Harbor
`TrialProfile`, applied to any trial whose verifier wrote CliniCARE reward
keys (so `--format harbor` and `--format clinicare` give the same records).

Task ids (`<scenario_id>-<param-hash>`) identify a patient. They stay on this
machine: every item that carries one has `meta.identifying = true` (with the
fields named in `meta.identifying_fields`), and exports withhold those items'
ids unless asked.

Uids and questions:
- a trial is `clinicare:<first 16 hex digits of sha256(trial_name)>`, not
  `harbor:<trial_name>`: Harbor trial names begin with the task id, and the
  uid also prefixes the trial's question keys, which exports keep. Dataset
  `clinicare`, `case_id` = task id, parent = its task item;
- a task is `clinicare-task:<task_id>` (kind `task`); the cohort's expected
  label is the answer of the reference rater `clinicare-cohort` to
  `clinicare.verdict` on it. A trial imported first creates the task as a stub
  that the cohort import completes;
- the agent's own verdict is the answer of machine rater `agent:<model>` to
  `clinicare.verdict` on the trial (so a reviewer's verdict on the trial is
  compared with the agent's directly, and with the expected label through the
  parent task, as a CARE-Bench response is with its prefix's gold label);
- `<trial uid>:outcome` - "Is the agent's verdict the expected one?" - from
  the deterministic `score`, by reference rater `clinicare-verifier`;
- `<trial uid>:process` - from the LLM judges' `process_pct` (met at
  PROCESS_PASS), by machine rater `clinicare-judge`; and, when
  `verifier/reward-details.json` lists the process rubric's criteria,
  `<trial uid>:process:<n>` per criterion (MUST-NOT criteria flagged).
A missing reward key means "not measured": no annotation. When the judges
failed (`judge_failed`, `judge_launch_failed`, `rubrics_load_failed`), no
judge answers are recorded; the markers stay visible in the item's meta.

Assumptions, kept here only: the report is a `*report*.md` file in the trial
directory, else the last agent message or tool argument that holds an
`## Answer:` line; cited evidence ids are bracketed tokens containing a digit
(`[obs-123]`, `[Observation/42]`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from review.datasets.sources.base import Format, ImportOptions, register
from review.datasets.sources.fields import pick, require
from review.datasets.sources.harbor import (
    PROFILES,
    Measure,
    Trial,
    TrialProfile,
    criterion_question,
    looks_like_harbor,
    measure_records,
    read_harbor,
    sample_trials,
    trial_file,
)
from review.datasets.sources.readers import read_limited, read_rows
from review.datasets.sources.rules import OneReference
from store.records import AnnotationRecord, ItemRecord, RaterRecord, Record
from store.writer import InputError

FAMILY = "clinicare"
QUESTION = "clinicare.verdict"
VERDICTS = ("YES", "NO", "INDETERMINATE_LACK_OF_DATA", "INDETERMINATE_MEDICAL_AMBIGUITY")
COHORT = "clinicare-cohort"
VERIFIER = "clinicare-verifier"
JUDGE = "clinicare-judge"
PROCESS_PASS = 0.8
"""Share of the process rubric a run must meet to count as met (an assumption)."""
REWARD_KEYS = {
    "score", "outcome_label_parsed", "grounding_id_precision", "policy_file_f1", "evidence_calls",
    "evidence_calls_auth_error", "environment_degraded", "report_present", "process_pct",
    "policy_citation_support_rate", "policy_support_judged",
}
JUDGE_FAILURES = ("rubrics_load_failed", "judge_launch_failed", "judge_failed")
IDENTIFYING_FIELDS = ["uid", "case_id", "meta.task_id", "meta.trial_name", "meta.task_name"]
VERIFIER_MEASURES = (
    Measure("score", "outcome", "Is the agent's verdict the expected one?", VERIFIER,
            bounds=(0.0, 1.0)),
)
JUDGE_MEASURES = (
    Measure("process_pct", "process", "Did the agent follow the scenario's process rubric?",
            JUDGE, threshold=PROCESS_PASS, scale=100.0, group="process", bounds=(0.0, 100.0)),
)
"""`score` is 0 or 1 and `process_pct` a percentage (the README): a value outside
is refused, naming the trial and the key, not scored."""

ANSWER_LINE = re.compile(r"^[ \t]*#{1,6}[ \t]*\**[ \t]*Answer[ \t]*\**[ \t]*:(.*)$",
                         re.IGNORECASE | re.MULTILINE)
EVIDENCE = re.compile(r"\[([A-Za-z][\w\-./:]*\d[\w\-./:]*)\](?!\()")


def task_uid(task_id: str) -> str:
    return f"clinicare-task:{task_id}"


def trial_uid(trial_name: str) -> str:
    """A stable uid that does not spell out the task id the trial name begins with."""
    return "clinicare:" + hashlib.sha256(trial_name.encode("utf-8")).hexdigest()[:16]


def scenario_of(task_id: str) -> str:
    """`<scenario_id>-<param-hash>` -> scenario_id."""
    return task_id.rsplit("-", 1)[0] if "-" in task_id else task_id


# -- the report ------------------------------------------------------------------

def parse_verdict(report: str) -> tuple[str | None, str | None]:
    """(verdict code, the answer line) from a report; (None, line) when the
    line names no verdict, (None, None) when there is no `## Answer:` line."""
    match = ANSWER_LINE.search(report or "")
    if match is None:
        return None, None
    line = match.group(0).strip()
    text = match.group(1).replace("*", "").replace("`", "").strip().upper()
    joined = re.sub(r"[\s\-]+", "_", text)
    for code in VERDICTS[2:]:
        if code in joined:
            return code, line
    if joined.startswith("INDETERMINATE"):
        if "LACK" in joined or "DATA" in joined:
            return "INDETERMINATE_LACK_OF_DATA", line
        if "AMBIGU" in joined:
            return "INDETERMINATE_MEDICAL_AMBIGUITY", line
        return None, line
    word = re.match(r"^(YES|NO)\b", text)
    return (word.group(1) if word else None), line


def cited_evidence(report: str) -> list[str]:
    """Evidence ids cited in the report, in order of first citation."""
    return list(dict.fromkeys(EVIDENCE.findall(report or "")))


def find_report(trial: Trial) -> tuple[str, str] | None:
    """(report text, where it was found), or None."""
    files = sorted(p for p in trial.dir.rglob("*.md") if "report" in p.name.lower())
    for path in files:
        if not trial_file(trial.dir, path, trial.where(path.relative_to(trial.dir).as_posix())):
            continue
        text = read_limited(path, trial.where(path.relative_to(trial.dir).as_posix())).decode(
            "utf-8", errors="replace")
        if ANSWER_LINE.search(text):
            return text, str(path.relative_to(trial.dir))
    for step in reversed((trial.atif or {}).get("steps") or []):
        texts = [step.get("message")] + [
            v for call in step.get("tool_calls") or [] for v in (call.get("arguments") or {}).values()
        ]
        for text in texts:
            if isinstance(text, str) and ANSWER_LINE.search(text):
                return text, f"agent/trajectory.json step {step.get('step_id')}"
    return None


# -- the profile ---------------------------------------------------------------

def claims(trial: Trial) -> bool:
    """A CliniCARE trial: its verifier wrote CliniCARE reward keys; or, for one that
    wrote none (it failed before the verifier ran), its task is a cohort task the
    database holds, or its job's other trials are CliniCARE trials. So a trial
    imported alone keeps the identifying-id protection its job and cohort give."""
    if REWARD_KEYS & trial.rewards.keys():
        return True
    task = trial.task_name or trial.trial_name.split("__", 1)[0]
    if trial.query is not None and task and trial.query(
            "SELECT 1 FROM items WHERE uid = ?", (task_uid(task),)):
        return True
    return _job_is_clinicare(trial.dir)


SIBLINGS_READ = 20
"""Trials of the same job looked at to tell whether a trial without rewards is CliniCARE's."""


def _job_is_clinicare(trial_dir: Path) -> bool:
    job = trial_dir.parent
    looked = 0
    for sibling in sorted(job.iterdir()) if job.is_dir() else []:
        if sibling == trial_dir or not (sibling / "verifier" / "reward.json").is_file():
            continue
        looked += 1
        try:
            rewards = _sibling_rewards(sibling)
        except InputError:
            rewards = {}
        if REWARD_KEYS & rewards.keys():
            return True
        if looked >= SIBLINGS_READ:
            break
    return False


def _sibling_rewards(path: Path) -> dict[str, Any]:
    from review.datasets.sources.atif import read_json_file

    rewards = read_json_file(path / "verifier" / "reward.json", str(path))
    return rewards if isinstance(rewards, dict) else {}


def agent_rater(model: str | None) -> RaterRecord:
    model = model or "unknown"
    provider = model.split("/", 1)[0] if "/" in model else None
    return RaterRecord(name=f"agent:{model}", kind="machine", role="agent", provider=provider,
                       model=model, meta={"about": "the agent's own answer, parsed from its report"})


def extend_trial(trial: Trial, item: ItemRecord, options: ImportOptions) -> Iterator[Record]:
    """Make a Harbor trial a CliniCARE item and add its verdict and verifier answers."""
    task_id = trial.task_name or trial.trial_name.split("__", 1)[0]
    item.uid = trial_uid(trial.trial_name)
    item.dataset = options.dataset or FAMILY
    item.case_id = task_id
    item.parent_uid = task_uid(task_id)
    item.meta.update({"task_id": task_id, "scenario_id": scenario_of(task_id), "identifying": True,
                      "identifying_fields": IDENTIFYING_FIELDS})
    yield task_item(task_id, item.dataset, stub=True)
    found = find_report(trial)
    if found is not None:
        report, where = found
        verdict, line = parse_verdict(report)
        evidence = cited_evidence(report)
        item.payload["final_answer"] = {"text": report, "verdict": verdict, "answer_line": line,
                                        "evidence": evidence, "found_in": where}
        if verdict is not None:
            rater = agent_rater(item.model)
            yield rater
            yield AnnotationRecord(item_uid=item.uid, question_key=QUESTION, rater=rater.name,
                                   value=verdict, rationale=line, line=trial.line,
                                   extra={"evidence": evidence, "found_in": where})
    where = trial.where("verifier/reward.json")
    records = list(measure_records(item.uid, trial.rewards, VERIFIER_MEASURES, where, trial.line))
    if records:
        yield RaterRecord(name=VERIFIER, kind="reference", role="verifier",
                          meta={"about": "CliniCARE deterministic verifier"})
    judged = not any(trial.rewards.get(k) for k in JUDGE_FAILURES)
    if judged:
        judge = list(measure_records(item.uid, trial.rewards, JUDGE_MEASURES, where, trial.line))
        judge += list(_process_criteria(item.uid, trial.reward_details, trial.line))
        if judge:
            yield RaterRecord(name=JUDGE, kind="machine", role="judge",
                              meta={"about": "CliniCARE LLM judges of the process rubric"})
        records += judge
    yield from records


def _process_criteria(uid: str, details: Any, line: int) -> Iterator[Record]:
    """Per-criterion process-rubric verdicts, when reward-details lists them
    (read defensively: the shape is unpublished)."""
    if not isinstance(details, Mapping):
        return
    listed = next((details[k] for k in ("process_rubric", "process", "rubric", "criteria")
                   if isinstance(details.get(k), list)), None)
    for n, raw in enumerate(listed or [], start=1):
        if not isinstance(raw, Mapping):
            continue
        text = raw.get("criterion") or raw.get("text") or raw.get("description")
        met = next((raw[k] for k in ("met", "criteria_met", "passed", "verdict") if k in raw), None)
        if not text:
            continue
        must_not = bool(raw.get("must_not")) or str(raw.get("type", "")).upper().replace("-", "_") == "MUST_NOT"
        points = raw.get("points") if isinstance(raw.get("points"), (int, float)) else None
        yield criterion_question(uid, f"process:{n}", str(text),
                                 {"group": "process", "must_not": must_not, "index": n}, points)
        if isinstance(met, bool) or str(met).lower() in ("met", "not_met", "true", "false"):
            yield AnnotationRecord(item_uid=uid, question_key=f"{uid}:process:{n}", rater=JUDGE,
                                   value=met if isinstance(met, bool) else str(met).lower(),
                                   rationale=raw.get("explanation") or raw.get("rationale"),
                                   line=line)


PROFILES.append(TrialProfile(FAMILY, claims, extend_trial))


# -- tasks and the cohort ----------------------------------------------------------

def task_item(task_id: str, dataset: str, stub: bool = False, line: int | None = None) -> ItemRecord:
    meta: dict[str, Any] = {"task_id": task_id, "scenario_id": scenario_of(task_id),
                            "identifying": True, "identifying_fields": ["uid", "case_id", "meta.task_id"]}
    if stub:
        meta["stub"] = True
    return ItemRecord(uid=task_uid(task_id), kind="task", dataset=dataset,
                      payload={"task_id": task_id, "scenario_id": scenario_of(task_id)},
                      case_id=task_id, meta=meta, replace_stub=not stub, line=line)


def read_cohort(path: Path, options: ImportOptions) -> Iterator[Record]:
    """Cohort CSV `task_id,scenario_id,expected_label`: the expected verdict of each
    task. A task given twice with two verdicts is refused (`rules.OneReference`)."""
    dataset = options.dataset or FAMILY
    yield RaterRecord(name=COHORT, kind="reference", role="gold",
                      meta={"about": "CliniCARE cohort: the expected verdict of each task"})
    expected = OneReference("task", "expected label")
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        task_id = require(row, "task_id", where)
        label = require(row, "expected_label", where)
        expected.check(task_id, label, line, where)  # NO then YES: which is expected?
        item = task_item(task_id, dataset, line=line)
        scenario = pick(row, "scenario_id")
        if scenario:
            item.meta["scenario_id"] = item.payload["scenario_id"] = str(scenario)
        yield item
        yield AnnotationRecord(item_uid=item.uid, question_key=QUESTION, rater=COHORT,
                               value=label, line=line)


def read_clinicare(path: Path, options: ImportOptions) -> Iterator[Record]:
    return read_harbor(path, options, profile=FAMILY)


register(Format(
    "clinicare-cohort", FAMILY, read_cohort,
    lambda p, f: {"task_id", "expected_label"} <= f,
    "CliniCARE cohort CSV task_id,scenario_id,expected_label: the expected verdicts",
))
register(Format(
    FAMILY, FAMILY, read_clinicare,
    lambda p, f: looks_like_harbor(p) and any(claims(t) for t in sample_trials(p)),
    "CliniCARE trials (Harbor directory): the agent's verdict and the verifier's results",
    takes_directory=True,
))
