"""Harbor job and trial directories (`harbor`): one trajectory item per trial.

A trial directory holds `result.json`, `agent/trajectory.json` (ATIF, checked
by `review.datasets.sources.atif`), `verifier/reward.json` (or `reward.txt`) and
optionally `verifier/reward-details.json`; a job directory holds many trial
directories. Import either. Read as Harbor lays them out:

- a trial without `result.json` is still running (or was stopped: Harbor's own
  resume runs it again): it is left out, and named in the import's summary
  (`ImportOptions.left_out`); a trial that failed (`exception.txt`, no
  trajectory) is a failed run;
- the run is `agent/trajectory.json` joined with the continuation segments it
  names (`continued_trajectory_ref`: `trajectory.cont-1.json`, ..., their
  copied context left out), step ids renumbered 1..n; `payload.segments` says
  which file each stretch of steps came from;
- a multi-step trial (`steps/<name>/agent|verifier`) is one run, its steps'
  trajectories joined in order, each step's verifier reward its own criterion
  (see `_load_steps` for why one run);
- trajectory files the steps link to (`subagent_trajectory_ref` with a
  `trajectory_path`, relative to the referencing file; terminus-2's
  summarisation files `trajectory.summarization-*.json`) are read into the
  run's `subagent_trajectories` and opened by path on the screen
  (`payload.linked_trajectories`); only files inside the trial folder are read
  (a path out of it is refused); a linked file that is not there is listed in
  `payload.missing_trajectories` and shown as missing, as Harbor's own
  validator accepts it; the root's `session_id`, `trajectory_id` and `extra`
  are kept.

Uids: a trial is the item `harbor:<trial_name>` (trial_name from result.json,
else the directory name), whether it was imported alone or with its job.
Its verifier reward is the criterion question `harbor:<trial_name>:reward`
("Did the run pass the task's verifier?"), answered by the reference rater
`harbor-verifier` with met when reward >= PASS_THRESHOLD (the score is kept in
the annotation's extra); every other reward key in 0..1 is a check of its own
(`:reward:<key>`), and a multi-step trial's rewards are per step
(`:step:<name>:reward`). A reward key that is missing or null means "not
measured": no annotation, never 0.

Benchmarks run under Harbor add meaning through a `TrialProfile` (see
`review.datasets.sources.clinicare`): a profile that claims a trial may change its
item (dataset, answer, identifying fields) and add records.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from review.datasets.sources.atif import check_trajectory, read_json_file
from review.datasets.sources.base import Format, ImportOptions, present, register
from review.datasets.sources.fields import quoted
from review.reviewing.trajectory import trajectory_payload
from store.records import (
    AnnotationRecord,
    ItemRecord,
    QuestionRecord,
    RaterRecord,
    Record,
    RunRecord,
)
from store.writer import InputError

FAMILY = "harbor"
VERIFIER = "harbor-verifier"
RUBRIC = "rubric"
PASS_THRESHOLD = 1.0
"""A verifier score counts as a pass (met) at or above this. Harbor rewards are
usually 0 or 1; a partial reward is not a pass. An assumption kept here only."""


# -- scores as verdicts (shared by every verifier-backed importer) -----------

@dataclass(frozen=True)
class Measure:
    """A verifier or judge score that becomes a met / not met answer on a criterion."""

    key: str
    """Key in the source (reward.json key, gate name)."""
    suffix: str
    """Question key suffix: the question is `<item uid>:<suffix>`."""
    text: str
    """The criterion in clinicians' words."""
    rater: str
    threshold: float = PASS_THRESHOLD
    scale: float = 1.0
    """Divide the raw value by this first (100 for a percentage)."""
    group: str = "verifier"


def as_score(value: Any, where: str) -> float | None:
    """A 0..1 score from a number or true/false; None for NaN, which is how
    a verifier that could not score writes "not measured" (never a fail); or
    InputError naming the place."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        if value != value:  # NaN
            return None
        if value in (float("inf"), float("-inf")):
            raise InputError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    raise InputError(f"{where}: expected a number or true/false, got {value!r}")


def verdict_from_score(score: float, threshold: float = PASS_THRESHOLD) -> str:
    """met when the score reaches the threshold, else not_met."""
    return "met" if score >= threshold else "not_met"


def measure_records(uid: str, values: Mapping[str, Any], measures: tuple[Measure, ...],
                    where: str, line: int | None = None) -> Iterator[Record]:
    """Question + annotation for each measure present in `values`; absent or null
    values are not measured and give nothing."""
    for m in measures:
        raw = values.get(m.key)
        if raw is None:
            continue
        score = as_score(raw, f"{where}: {m.key}")
        if score is None:
            continue
        score /= m.scale
        yield criterion_question(uid, m.suffix, m.text, {"group": m.group, "measure": m.key})
        yield AnnotationRecord(
            item_uid=uid, question_key=f"{uid}:{m.suffix}", rater=m.rater,
            value=verdict_from_score(score, m.threshold), line=line,
            extra={"score": score, "raw": raw, "threshold": m.threshold, "measure": m.key},
        )


def criterion_question(uid: str, suffix: str, text: str, meta: dict[str, Any],
                       points: float | None = None) -> QuestionRecord:
    """A rubric criterion bound to one item: key `<uid>:<suffix>`."""
    meta = {"must_not": bool(points is not None and points < 0), **meta}
    return QuestionRecord(key=f"{uid}:{suffix}", codebook=RUBRIC, kind="criterion", text=text,
                          item_uid=uid, points=points, meta=meta)


HARBOR_MEASURES = (
    Measure("reward", "reward", "Did the run pass the task's verifier?", VERIFIER),
)


# -- trials --------------------------------------------------------------------

@dataclass
class Segment:
    """One trajectory file of a run, as the run's steps take it in."""

    path: str
    """The file, relative to the trial folder."""
    first_step: int
    """The run's step id of this file's first step (1-based)."""
    steps: int
    """How many of the run's steps came from this file."""
    step_name: str | None = None
    """The Harbor step (`steps/<name>/`) of a multi-step trial."""
    session_id: str | None = None
    trajectory_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Trial:
    dir: Path
    label: str
    """How messages name the trial directory (its name, or job/trial)."""
    line: int
    """1-based position in the job: the 'row' of an import."""
    result: dict[str, Any]
    atif: dict[str, Any] | None
    """The run as one ATIF document: continuation segments and the steps of a
    multi-step trial joined, linked trajectory files appended to its
    `subagent_trajectories`."""
    rewards: dict[str, Any]
    reward_details: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    step_rewards: dict[str, dict[str, Any]] = field(default_factory=dict)
    """A multi-step trial's verifier rewards, by step name."""
    segments: list[Segment] = field(default_factory=list)
    linked: dict[str, int] = field(default_factory=dict)
    """`path:<trajectory_path as the reference writes it>` -> index of the file read
    into `subagent_trajectories` (how the screen opens a reference by path)."""
    missing: list[str] = field(default_factory=list)
    """Linked trajectory files named but not in the trial folder."""
    query: Callable[[str, tuple], list[Any]] | None = None
    """The database as the import sees it (`ImportOptions.query`), for profiles."""

    @property
    def trial_name(self) -> str:
        return str(self.result.get("trial_name") or self.dir.name)

    @property
    def task_name(self) -> str | None:
        name = self.result.get("task_name")
        return str(name) if name else None

    @property
    def uid(self) -> str:
        return f"harbor:{self.trial_name}"

    @property
    def model(self) -> str | None:
        agent = (self.result.get("config") or {}).get("agent") or {}
        model = agent.get("model_name") if isinstance(agent, dict) else None
        return model or ((self.atif or {}).get("agent") or {}).get("model_name")

    def where(self, relative: str) -> str:
        return f"{self.label}/{relative}"


@dataclass(frozen=True)
class TrialProfile:
    """What a benchmark run under Harbor adds to its trials."""

    name: str
    claims: Callable[[Trial], bool]
    extend: Callable[[Trial, ItemRecord, ImportOptions], Iterator[Record]]
    """May change the item before it is written, and yields further records."""


PROFILES: list[TrialProfile] = []
TRIAL_PARTS = ("agent", "verifier", "steps")
"""Folders only a trial has (a job holds trials; a trial, these)."""
TRIAL_FILES = ("trial.log", "exception.txt")


def _names_a_trial(path: Path) -> bool:
    """A result.json or config.json of a trial: it names the trial at its top
    (a job's names the job, and its trials only further in)."""
    if not path.is_file():
        return False
    try:
        doc = orjson.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(doc, dict) and "trial_name" in doc and "job_name" not in doc


def is_trial_dir(path: Path) -> bool:
    """A Harbor trial folder: its own parts, or a result or config that names it."""
    if not path.is_dir():
        return False
    return (any((path / d).is_dir() for d in TRIAL_PARTS)
            or any((path / f).is_file() for f in TRIAL_FILES)
            or _names_a_trial(path / "result.json") or _names_a_trial(path / "config.json"))


def trial_dirs(path: Path) -> list[Path]:
    """The trial directories of a trial or job directory, in name order."""
    if is_trial_dir(path):
        return [path]
    return sorted(p for p in path.iterdir() if is_trial_dir(p)) if path.is_dir() else []


def is_finished(path: Path) -> bool:
    """Harbor writes a trial's result.json when the trial ends: without one it is
    still running, or was stopped (Harbor's own resume runs it again). A folder or a
    link to nothing in its place is refused (`present`), not taken for a running trial."""
    return trial_file(path, path / "result.json", f"{path.parent.name}/{path.name}/result.json")


def load_trial(path: Path, label: str, line: int) -> Trial:
    """Read and check one finished trial directory; InputError names the file and JSON path."""
    result = read_json_file(path / "result.json", f"{label}/result.json")
    if not isinstance(result, dict):
        raise InputError(f"{label}/result.json: expected a JSON object")
    trial = Trial(dir=path, label=label, line=line, result=result, atif=None,
                  rewards=_rewards(path, label, result, path))
    steps_dir = path / "steps"
    if steps_dir.is_dir() and not (path / "agent").is_dir():
        _load_steps(trial, steps_dir, result)
    else:
        _join(trial, [(None, _read_run(trial, path / "agent"))])
    details = path / "verifier" / "reward-details.json"
    if trial_file(path, details, f"{label}/verifier/reward-details.json"):
        trial.reward_details = read_json_file(details, f"{label}/verifier/reward-details.json")
    return trial


def _load_steps(trial: Trial, steps_dir: Path, result: dict[str, Any]) -> None:
    """A multi-step trial (`steps/<name>/agent|verifier`): one run, its steps in the
    order the result lists them (then any other, by name), each step's verifier
    rewards kept by step. A reviewer reads one attempt at the task by one agent,
    as Harbor counts it (one trial), not two runs that each lack the other's context."""
    listed = [s.get("step_name") for s in result.get("step_results") or []
              if isinstance(s, dict) and isinstance(s.get("step_name"), str)]
    found = sorted(p.name for p in steps_dir.iterdir() if p.is_dir())
    names = [n for n in listed if n in found] + [n for n in found if n not in listed]
    runs = []
    for name in names:
        here = steps_dir / name
        runs.append((name, _read_run(trial, here / "agent")))
        listed_result = next((s for s in result.get("step_results") or []
                              if isinstance(s, dict) and s.get("step_name") == name), {})
        rewards = _rewards(here, f"{trial.label}/steps/{name}", listed_result, trial.dir)
        if rewards:
            trial.step_rewards[name] = rewards
    _join(trial, runs)


MAX_SEGMENTS = 1000
"""Continuation segments followed at most (a reference loop is stopped sooner)."""


def _read_run(trial: Trial, agent_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """The trajectory files of one agent folder, in order: `trajectory.json`, then
    the continuation segments it names (`continued_trajectory_ref`, relative to
    the folder), each checked. A segment named but missing ends the run there
    and is listed as missing (Harbor's reader stops there too)."""
    main = agent_dir / "trajectory.json"
    # A trajectory that is a folder or a link to nothing is refused, not read as a
    # run without steps (an agent failure): `present` says which.
    if not trial_file(trial.dir, main, f"{trial.label}/{_relative(trial, main)}"):
        return []
    out = [(_relative(trial, main), _read_atif(trial, main))]
    seen = {main.resolve()}
    while len(out) < MAX_SEGMENTS:
        rel, doc = out[-1]
        ref = doc.get("continued_trajectory_ref")
        if not ref:
            break
        where = f"{trial.label}/{rel}: continued_trajectory_ref"
        if not isinstance(ref, str):
            raise InputError(f"{where}: expected a file name, got {type(ref).__name__}")
        path = _inside(trial, agent_dir / ref, where, ref)
        if path.resolve() in seen:
            break
        if not path.is_file():
            trial.missing.append(ref)
            break
        seen.add(path.resolve())
        out.append((_relative(trial, path), _read_atif(trial, path)))
    return out


def _read_atif(trial: Trial, path: Path) -> dict[str, Any]:
    where = trial.where(_relative(trial, path))
    return check_trajectory(read_json_file(path, where), where)


def _relative(trial: Trial, path: Path) -> str:
    try:
        return path.relative_to(trial.dir).as_posix()
    except ValueError:
        return path.as_posix()


def _inside(trial: Trial, path: Path, where: str, given: str) -> Path:
    """`path` if it stays inside the trial folder (links followed); else InputError."""
    root = trial.dir.resolve()
    if not path.resolve().is_relative_to(root):
        raise InputError(f"{where}: {quoted(given)} points outside the trial folder; carelens "
                         "reads a trial's linked files only inside it")
    return path


def trial_file(root: Path, path: Path, where: str) -> bool:
    """Whether a file a trial may hold is there (`present`), refusing one that is a
    link pointing outside the trial folder `root`: a trial's files are read only
    inside it (a link to /etc/passwd, or to another study's runs, is not imported)."""
    if not present(path, where):
        return False
    if not path.resolve().is_relative_to(root.resolve()):
        target = os.readlink(path) if path.is_symlink() else path.resolve()
        raise InputError(f"{where}: points outside the trial folder (a link to"
                         f" {quoted(str(target))}); carelens reads a trial's files only inside it")
    return True


def _join(trial: Trial, runs: list[tuple[str | None, list[tuple[str, dict[str, Any]]]]]) -> None:
    """The run as one document: the files' steps in order, renumbered 1..n (a
    continuation's copied context, `is_copied_context`, left out: it repeats
    what came before), their embedded subagents together, and each linked
    trajectory file the steps name read into `subagent_trajectories`."""
    files = [(name, rel, doc) for name, segments in runs for rel, doc in segments]
    if not files:
        return
    first = files[0][2]
    steps: list[dict[str, Any]] = []
    subagents: list[dict[str, Any]] = []
    read: set[Path] = set()
    for name, rel, doc in files:
        own = [s for s in doc["steps"] if not (steps and s.get("is_copied_context") is True)]
        base = len(steps)
        segment = Segment(rel, base + 1, len(own), name, doc.get("session_id"),
                          doc.get("trajectory_id"))
        trial.segments.append(segment)
        for k, step in enumerate(own):
            steps.append(step if step.get("step_id") == base + k + 1 else
                         {**step, "step_id": base + k + 1})
        subagents.extend(doc.get("subagent_trajectories") or [])
        _read_linked(trial, (trial.dir / rel).parent, rel, own, subagents, read)
    _read_unlinked_summaries(trial, {(trial.dir / rel).parent for _, rel, _ in files}, subagents,
                             read)
    joined = {k: v for k, v in first.items() if k not in ("steps", "subagent_trajectories")}
    joined["steps"] = steps
    if subagents:
        joined["subagent_trajectories"] = subagents
    if len(files) > 1:
        joined.pop("continued_trajectory_ref", None)
        joined.pop("final_metrics", None)  # each file's totals are its own: the steps are summed
    trial.atif = joined


def _read_linked(trial: Trial, base: Path, rel: str, steps: list[dict[str, Any]],
                 subagents: list[dict[str, Any]], read: set[Path]) -> None:
    """Read the trajectory files the steps' subagent references name by path
    (relative to the referencing file), once each. A reference also naming an
    embedded trajectory is that one; a URL is left as named; a file outside the
    trial folder is refused; a missing one is listed as missing."""
    embedded = {str(s.get("trajectory_id")) for s in subagents if s.get("trajectory_id")}
    for i, step in enumerate(steps):
        for j, result in enumerate((step.get("observation") or {}).get("results") or []):
            refs = result.get("subagent_trajectory_ref") or []
            for k, ref in enumerate(refs if isinstance(refs, list) else [refs]):
                given = ref.get("trajectory_path") if isinstance(ref, dict) else None
                if not isinstance(given, str) or not given or f"path:{given}" in trial.linked:
                    continue
                if ref.get("trajectory_id") in embedded or "://" in given:
                    continue
                where = (f"{trial.label}/{rel}: steps[{i}].observation.results[{j}]"
                         f".subagent_trajectory_ref[{k}].trajectory_path")
                path = _inside(trial, base / given, where, given)
                if not path.is_file():
                    if given not in trial.missing:
                        trial.missing.append(given)
                    continue
                trial.linked[f"path:{given}"] = len(subagents)
                read.add(path.resolve())
                subagents.append(_read_atif(trial, path))


SUMMARIES = "trajectory.summarization-*.json"
"""terminus-2 writes each context summarisation's sub-trajectories (summary,
questions, answers) to files of this name beside `trajectory.json`."""


def _read_unlinked_summaries(trial: Trial, folders: set[Path], subagents: list[dict[str, Any]],
                             read: set[Path]) -> None:
    """Summarisation sub-trajectories no step names (Harbor's own exporter reads
    them by name): read too, kept with the run's subagents."""
    for folder in sorted(folders):
        for path in sorted(folder.glob(SUMMARIES)):
            if not path.is_file() or path.resolve() in read:
                continue
            _inside(trial, path, trial.where(_relative(trial, path)), path.name)
            read.add(path.resolve())
            trial.linked.setdefault(f"path:{path.name}", len(subagents))
            subagents.append(_read_atif(trial, path))


def _rewards(path: Path, label: str, result: dict[str, Any], root: Path) -> dict[str, Any]:
    """The verifier's rewards of a trial (or of one step of it, in folder `path`);
    `root` is the trial folder, outside which no file is read."""
    reward_json = path / "verifier" / "reward.json"
    if trial_file(root, reward_json, f"{label}/verifier/reward.json"):
        rewards = read_json_file(reward_json, f"{label}/verifier/reward.json")
        if not isinstance(rewards, dict):
            raise InputError(f"{label}/verifier/reward.json: expected a JSON object of reward keys")
        return rewards
    reward_txt = path / "verifier" / "reward.txt"
    if trial_file(root, reward_txt, f"{label}/verifier/reward.txt"):
        text = reward_txt.read_text(encoding="utf-8").strip()
        try:
            return {"reward": float(text)} if text else {}
        except ValueError:
            raise InputError(f"{label}/verifier/reward.txt: expected a number, got {text[:40]!r}") from None
    verifier = result.get("verifier_result") or {}
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    return dict(rewards) if isinstance(rewards, dict) else {}


def trial_item(trial: Trial, options: ImportOptions) -> ItemRecord:
    """The trajectory item of a trial, before any profile changes it."""
    exception = trial.result.get("exception_info")
    error = None
    if exception:
        error = (exception.get("exception_message") or exception.get("exception_type")
                 if isinstance(exception, dict) else str(exception))
        error = str(error or exception)
    agent_result = trial.result.get("agent_result")
    meta = {
        "source": "harbor", "trial_name": trial.trial_name, "task_name": trial.task_name,
        "job": trial.dir.parent.name, "rewards": trial.rewards,
        "step_rewards": trial.step_rewards or None,
        "agent_result": agent_result if isinstance(agent_result, dict) else None,
        "reward_details": trial.reward_details, "exception": exception or None,
        "started_at": trial.result.get("started_at"), "finished_at": trial.result.get("finished_at"),
    }
    payload = trajectory_payload(trial.atif, error=error)
    if len(trial.segments) > 1 or any(s.step_name for s in trial.segments):
        payload["segments"] = [s.as_dict() for s in trial.segments]
    if trial.linked:
        payload["linked_trajectories"] = trial.linked
    if trial.missing:
        payload["missing_trajectories"] = trial.missing
    return ItemRecord(
        uid=trial.uid, kind="trajectory", dataset=options.dataset or FAMILY,
        payload=payload, case_id=trial.task_name,
        model=trial.model, failed=bool(exception) or trial.atif is None,
        meta={k: v for k, v in meta.items() if v is not None}, line=trial.line,
    )


def trial_run(trial: Trial, item: ItemRecord, options: ImportOptions) -> RunRecord:
    """The run a trial belongs to (`store.runs`): its job (the folder Harbor wrote it
    in), its agent and the model the agent was given; the model the provider served
    and the provider as the trial's `agent_info` names them."""
    config = (trial.result.get("config") or {}).get("agent") or {}
    agent = config.get("name") if isinstance(config, dict) else None
    agent = agent or ((trial.atif or {}).get("agent") or {}).get("name")
    info = trial.result.get("agent_info")
    info = info if isinstance(info, dict) else {}
    model_info = info.get("model_info") if isinstance(info.get("model_info"), dict) else {}
    job_id = (trial.result.get("config") or {}).get("job_id")
    meta = {k: v for k, v in (("agent_version", info.get("version")), ("job_id", job_id),
                              ("provider", model_info.get("provider"))) if v not in (None, "")}
    return RunRecord(item.dataset, "trajectory",
                     {"model_requested": item.model, "job": item.meta.get("job"),
                      "agent": agent, "attempt": options.attempt},
                     model_actual=model_info.get("name"), meta=meta)


def reward_measures(rewards: Mapping[str, Any], prefix: str = "", what: str = "the run") -> \
        tuple[Measure, ...]:
    """The verifier's checks of a run: `reward` (a number, or refused), and every
    other key whose value is a score in 0..1 (a count or a time is not a check)."""
    out = [Measure("reward", f"{prefix}reward", f"Did {what} pass the task's verifier?", VERIFIER)]
    for key, value in rewards.items():
        if key == "reward" or isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 <= value <= 1:
            continue
        out.append(Measure(key, f"{prefix}reward:{key}",
                           f"Did {what} pass the verifier's '{key}' check?", VERIFIER))
    return tuple(out)


def _verifier_records(trial: Trial, uid: str, generic: bool) -> list[Record]:
    """The verifier's answers: the trial's reward (every check of it, unless a
    profile reads the keys), and each step's of a multi-step trial."""
    measures = reward_measures(trial.rewards) if generic else HARBOR_MEASURES
    out = list(measure_records(uid, trial.rewards, measures, trial.where("verifier/reward.json"),
                               trial.line))
    for name, rewards in trial.step_rewards.items():
        out += measure_records(uid, rewards, reward_measures(rewards, f"step:{name}:",
                                                             f"step '{name}' of the run"),
                               trial.where(f"steps/{name}/verifier/reward.json"), trial.line)
    return out


def read_harbor(path: Path, options: ImportOptions, profile: str | None = None) -> Iterator[Record]:
    """Every finished trial of a job (or the one trial) as an item, its verifier
    results as annotations; trials still running are left out and named
    (`options.left_out`). With `profile`, that profile is applied to every trial."""
    dirs = trial_dirs(path)
    if not dirs:
        raise InputError(f"{path}: no Harbor trial directories (a trial holds result.json, "
                         "agent/trajectory.json and verifier/reward.json)")
    single = dirs == [path]
    running = [d for d in dirs if not is_finished(d)]
    if len(running) == len(dirs):
        names = ", ".join(d.name for d in running[:5]) + (" ..." if len(running) > 5 else "")
        raise InputError(f"{path}: no finished trial: Harbor writes a trial's result.json when it"
                         f" ends, and {'this one has' if single else 'none has'} one yet"
                         + ("" if single else f" (still running: {names})"))
    for d in running:
        options.left_out.append(f"{d.name} (still running, or stopped: no result.json)")
    announced: set[str] = set()
    line = 0
    for trial_dir in dirs:
        if not is_finished(trial_dir):
            continue
        line += 1
        label = trial_dir.name if single else f"{path.name}/{trial_dir.name}"
        trial = load_trial(trial_dir, label, line)
        trial.query = options.query
        item = trial_item(trial, options)
        chosen = next((p for p in PROFILES if p.name == profile or (profile is None and p.claims(trial))),
                      None)
        extra = list(chosen.extend(trial, item, options)) if chosen else []
        item.run = trial_run(trial, item, options)
        measured = _verifier_records(trial, item.uid, generic=chosen is None)
        if measured and VERIFIER not in announced:
            announced.add(VERIFIER)
            yield RaterRecord(name=VERIFIER, kind="reference", role="verifier",
                              meta={"about": "Harbor task verifier (reward)"})
        # parents and raters a profile adds come before the item that needs them
        yield from (r for r in extra if isinstance(r, (ItemRecord, RaterRecord)))
        yield item
        yield from measured
        yield from (r for r in extra if not isinstance(r, (ItemRecord, RaterRecord)))


def looks_like_harbor(path: Path) -> bool:
    return bool(trial_dirs(path))


def sample_trials(path: Path, n: int = 5) -> Iterator[Trial]:
    """A few trials of a directory, read leniently (for format detection)."""
    for line, trial_dir in enumerate(trial_dirs(path)[:n], start=1):
        try:
            yield Trial(dir=trial_dir, label=trial_dir.name, line=line,
                        result={}, atif=None,
                        rewards=_rewards(trial_dir, trial_dir.name, {}, trial_dir))
        except InputError:
            continue


def claimed_by_profile(path: Path) -> bool:
    return any(p.claims(t) for t in sample_trials(path) for p in PROFILES)


register(Format(
    "harbor", FAMILY, read_harbor,
    lambda p, f: looks_like_harbor(p) and not claimed_by_profile(p),
    "Harbor job or trial directory: ATIF trajectories (checked) and verifier rewards",
    takes_directory=True,
))
