"""Harbor job and trial directories (`harbor`): one trajectory item per trial.

A trial directory holds `result.json`, `agent/trajectory.json` (ATIF, checked
by `review.datasets.sources.atif`), `verifier/reward.json` (or `reward.txt`) and
optionally `verifier/reward-details.json`; a job directory holds many trial
directories. Import either.

Uids: a trial is the item `harbor:<trial_name>` (trial_name from result.json,
else the directory name), whether it was imported alone or with its job.
Its verifier reward is the criterion question `harbor:<trial_name>:reward`
("Did the run pass the task's verifier?"), answered by the reference rater
`harbor-verifier` with met when reward >= PASS_THRESHOLD (the score is kept in
the annotation's extra). A reward key that is missing or null means "not
measured": no annotation, never 0.

Benchmarks run under Harbor add meaning through a `TrialProfile` (see
`review.datasets.sources.clinicare`): a profile that claims a trial may change its
item (dataset, answer, identifying fields) and add records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from review.datasets.sources.atif import check_trajectory, read_json_file
from review.datasets.sources.base import Format, ImportOptions, present, register
from review.reviewing.trajectory import trajectory_payload
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord, Record
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
class Trial:
    dir: Path
    label: str
    """How messages name the trial directory (its name, or job/trial)."""
    line: int
    """1-based position in the job: the 'row' of an import."""
    result: dict[str, Any]
    atif: dict[str, Any] | None
    rewards: dict[str, Any]
    reward_details: Any = None
    meta: dict[str, Any] = field(default_factory=dict)

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


def is_trial_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / "agent").is_dir() or (path / "verifier").is_dir()
        or (path / "agent" / "trajectory.json").is_file()
    )


def trial_dirs(path: Path) -> list[Path]:
    """The trial directories of a trial or job directory, in name order."""
    if is_trial_dir(path):
        return [path]
    return sorted(p for p in path.iterdir() if is_trial_dir(p)) if path.is_dir() else []


def load_trial(path: Path, label: str, line: int) -> Trial:
    """Read and check one trial directory; InputError names the file and JSON path."""
    result_path = path / "result.json"
    atif_path = path / "agent" / "trajectory.json"
    has_result = present(result_path, f"{label}/result.json")
    has_atif = present(atif_path, f"{label}/agent/trajectory.json")
    if not has_result and not has_atif:
        raise InputError(f"{label}: neither result.json nor agent/trajectory.json: not a Harbor trial")
    result: dict[str, Any] = {}
    if has_result:
        result = read_json_file(result_path, f"{label}/result.json")
        if not isinstance(result, dict):
            raise InputError(f"{label}/result.json: expected a JSON object")
    atif = None
    if has_atif:
        atif = check_trajectory(read_json_file(atif_path, f"{label}/agent/trajectory.json"),
                                f"{label}/agent/trajectory.json")
    trial = Trial(dir=path, label=label, line=line, result=result, atif=atif,
                  rewards=_rewards(path, label, result))
    details = path / "verifier" / "reward-details.json"
    if present(details, f"{label}/verifier/reward-details.json"):
        trial.reward_details = read_json_file(details, f"{label}/verifier/reward-details.json")
    return trial


def _rewards(path: Path, label: str, result: dict[str, Any]) -> dict[str, Any]:
    reward_json = path / "verifier" / "reward.json"
    if present(reward_json, f"{label}/verifier/reward.json"):
        rewards = read_json_file(reward_json, f"{label}/verifier/reward.json")
        if not isinstance(rewards, dict):
            raise InputError(f"{label}/verifier/reward.json: expected a JSON object of reward keys")
        return rewards
    reward_txt = path / "verifier" / "reward.txt"
    if present(reward_txt, f"{label}/verifier/reward.txt"):
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
        "agent_result": agent_result if isinstance(agent_result, dict) else None,
        "reward_details": trial.reward_details, "exception": exception or None,
        "started_at": trial.result.get("started_at"), "finished_at": trial.result.get("finished_at"),
    }
    return ItemRecord(
        uid=trial.uid, kind="trajectory", dataset=options.dataset or FAMILY,
        payload=trajectory_payload(trial.atif, error=error), case_id=trial.task_name,
        model=trial.model, failed=bool(exception) or trial.atif is None,
        meta={k: v for k, v in meta.items() if v is not None}, line=trial.line,
    )


def read_harbor(path: Path, options: ImportOptions, profile: str | None = None) -> Iterator[Record]:
    """Every trial of a job (or the one trial) as an item, its verifier results as
    annotations. With `profile`, that profile is applied to every trial."""
    dirs = trial_dirs(path)
    if not dirs:
        raise InputError(f"{path}: no Harbor trial directories (a trial holds result.json, "
                         "agent/trajectory.json and verifier/reward.json)")
    single = dirs == [path]
    announced: set[str] = set()
    for line, trial_dir in enumerate(dirs, start=1):
        label = trial_dir.name if single else f"{path.name}/{trial_dir.name}"
        trial = load_trial(trial_dir, label, line)
        item = trial_item(trial, options)
        chosen = next((p for p in PROFILES if p.name == profile or (profile is None and p.claims(trial))),
                      None)
        extra = list(chosen.extend(trial, item, options)) if chosen else []
        measured = list(measure_records(item.uid, trial.rewards, HARBOR_MEASURES,
                                        trial.where("verifier/reward.json"), line))
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
                        result={}, atif=None, rewards=_rewards(trial_dir, trial_dir.name, {}))
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
