"""Runs: which run an item belongs to, resolved once at import, and how runs are named.

A *run* (ARCHITECTURE.md, "Words") is one model, agent or grader run over a
benchmark: the model requested and the model served, its protocol and prompt
version, the attempt, and the file it came from. Every response, trajectory and
graded completion belongs to exactly one run (`items.run_id`); prefixes, prompts
and tasks belong to none. Two runs of one model (two protocols, two prompt
versions, two attempts, two HealthBench result files) are two runs everywhere: the
importers keep their items apart, and every per-model figure is per run.

The rule lives here, below both `review/` and `labels/`:
- **identity** (`run_key`): a run is known within its dataset and item kind by the
  fields its source says identify it (`IDENTITY` plus what a format adds, such as
  KlinikeBench's `subset` and `run` or a Harbor job's name), as one canonical text.
  Importing another file of the same run adds to it; a file of another run never
  merges into it. Migration m070 gave every item imported before runs existed the
  run its stored fields name, by the same key (`m070_key` there must equal
  `run_key` here; a test holds them equal).
- **resolution** (`RunResolver`): a file that labels items another file brought
  (CARE-Bench mapped responses, a judge's output naming a model) names its run by
  the submitter's alias, `model_requested` or `model_actual`. Each name is matched
  against the same field of each run first (requested with requested, alias with
  alias, served with served), narrowed by whatever else the row says (protocol,
  prompt version, provider, attempt); a name that still fits several runs is refused
  in one line naming them, never guessed.
- **naming** (`run_labels`): a run is shown by its model alone while no other run of
  that model (of the same kind) exists; beside another, by the fields that tell them
  apart (protocol, prompt version, provider, attempt, dataset, ...). Labels are worked
  out when shown, never stored: a run's label gains its protocol when a second
  protocol arrives. Commands take a run by its number or its label (`select_runs`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RUN_KINDS = ("response", "trajectory", "graded_conversation")
"""Item kinds whose items belong to a run (a graded conversation only as a
completion, i.e. with a parent prompt: the prompt itself belongs to none)."""

IDENTITY = ("model_requested", "provider", "protocol", "prompt_version", "attempt")
"""The fields every run may be identified by; a format adds its own (`extra`)."""

NO_MODEL = "(no model named)"
"""How a run whose source names no model is shown."""


def belongs_to_run(kind: str, parent: object) -> bool:
    """Whether an item of this kind (with or without a parent) belongs to a run."""
    return kind in ("response", "trajectory") or (kind == "graded_conversation"
                                                  and parent is not None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def run_key(identity: Mapping[str, Any]) -> str:
    """A run's identity as one canonical text: the fields given (None left out, the
    attempt left out when it is the first), each value as text, sorted by name."""
    fields = {k: _text(v) for k, v in identity.items()
              if v is not None and v != "" and not (k == "attempt" and v in (1, "1"))}
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Run:
    """A run as the database holds it, with what is worked out about it."""

    id: int
    dataset: str
    kind: str
    key: str
    model_requested: str | None
    model_actual: str | None
    provider: str | None
    protocol: str | None
    prompt_version: str | None
    attempt: int
    source: str | None
    meta: dict[str, Any]
    aliases: tuple[str, ...] = ()
    served: tuple[str, ...] = ()
    """Every model its items say served them (`model_actual`), the run's own first."""
    items: int = 0
    label: str = ""

    @property
    def model(self) -> str:
        return self.model_requested or NO_MODEL

    @property
    def identity(self) -> dict[str, Any]:
        return json.loads(self.key)

    def describe(self) -> str:
        """The run in one line: its number and label, and what identifies it."""
        return f"run {self.id} ({self.label}: {self.details()})"

    def details(self) -> str:
        """What identifies the run, in words."""
        parts = [f"dataset {self.dataset}"]
        if self.model_requested:
            parts.append(f"requested {self.model_requested}")
        if self.served and self.served != (self.model_requested,):
            parts.append("served " + ", ".join(self.served))
        if self.aliases:
            parts.append("alias " + ", ".join(self.aliases))
        for name in ("protocol", "prompt_version", "provider"):
            if getattr(self, name):
                parts.append(f"{name.replace('_', ' ')} {getattr(self, name)}")
        if self.attempt != 1:
            parts.append(f"attempt {self.attempt}")
        for name, value in sorted(self.identity.items()):
            if name not in IDENTITY:
                parts.append(f"{name} {value}")
        if self.source:
            parts.append(f"from {self.source}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """The run as `--json` outputs and exports give it."""
        return {"run_id": self.id, "run": self.label, "model": self.model_requested,
                "model_actual": self.model_actual, "served": list(self.served),
                "aliases": list(self.aliases), "provider": self.provider,
                "protocol": self.protocol, "prompt_version": self.prompt_version,
                "attempt": self.attempt, "dataset": self.dataset, "kind": self.kind,
                "source": self.source, "identity": self.identity, "items": self.items}


_DISTINGUISH = ("protocol", "prompt_version", "alias", "provider", "attempt", "dataset")


def _part(run: Run, name: str) -> str | None:
    if name == "alias":
        return "/".join(run.aliases) or None
    if name == "attempt":
        return f"attempt {run.attempt}"
    if name == "dataset":
        return run.dataset
    if name == "source":
        return run.source
    if name in IDENTITY:
        value = getattr(run, name)
        return None if value is None else str(value)
    value = run.identity.get(name)
    return None if value is None else str(value)


def run_labels(runs: Iterable[Run]) -> dict[int, str]:
    """Each run's label: its model, and where other runs of the same kind share the
    model, the fields that tell them apart, in the order protocol, prompt version,
    alias, provider, attempt, dataset, any other identifying field, the source file
    (and the run's number if nothing else does)."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.kind, run.model), []).append(run)
    labels: dict[int, str] = {}
    for (_, model), members in groups.items():
        if len(members) == 1:
            labels[members[0].id] = model
            continue
        extra = sorted({k for r in members for k in r.identity if k not in IDENTITY})
        chosen: list[str] = []
        for name in (*_DISTINGUISH, *extra, "source"):
            if len({_part(r, name) for r in members}) > 1:
                chosen.append(name)
                if len({tuple(_part(r, n) for n in chosen) for r in members}) == len(members):
                    break
        seen: dict[str, int] = {}
        for r in members:
            parts = [p for p in (_part(r, n) for n in chosen) if p]
            label = model + (" · " + " · ".join(parts) if parts else "")
            seen[label] = seen.get(label, 0) + 1
            labels[r.id] = label
        for r in members:
            if seen[labels[r.id]] > 1:
                labels[r.id] += f" · run {r.id}"
    return labels


def load_runs(conn: sqlite3.Connection, kind: str | None = None,
              dataset: str | None = None) -> list[Run]:
    """Every run (of one item kind, of one dataset), labelled, in id order. Labels are
    worked out among every run of the kind, whatever the dataset asked for."""
    rows = conn.execute(
        "SELECT r.id, d.name, r.kind, r.key, r.model_requested, r.model_actual, r.provider,"
        " r.protocol, r.prompt_version, r.attempt, r.source, r.meta,"
        " (SELECT COUNT(*) FROM items i WHERE i.run_id = r.id)"
        " FROM runs r JOIN datasets d ON d.id = r.dataset_id"
        + (" WHERE r.kind = ?" if kind else "") + " ORDER BY r.id",
        (kind,) if kind else ()).fetchall()
    aliases: dict[int, list[str]] = {}
    for run_id, alias in conn.execute("SELECT run_id, alias FROM run_aliases ORDER BY id"):
        aliases.setdefault(run_id, []).append(alias)
    served: dict[int, list[str]] = {}
    for run_id, model in conn.execute(
            "SELECT DISTINCT run_id, json_extract(meta, '$.model_actual') FROM items"
            " WHERE run_id IS NOT NULL AND json_extract(meta, '$.model_actual') IS NOT NULL"
            + (" AND kind = ?" if kind else ""), (kind,) if kind else ()):
        served.setdefault(run_id, []).append(str(model))
    runs = []
    for r in rows:
        own = [r[5]] if r[5] else []
        runs.append(Run(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
                        json.loads(r[11] or "{}"), tuple(aliases.get(r[0], ())),
                        tuple(dict.fromkeys(own + sorted(served.get(r[0], [])))), r[12]))
    # Told apart among the runs that hold items (a run whose placeholders another run's
    # file filled in holds none, and is no other run's namesake).
    labels = {**run_labels(runs), **run_labels([r for r in runs if r.items])}
    for run in runs:
        run.label = labels[run.id]
    return [r for r in runs if dataset in (None, "", r.dataset)]


def run_label_map(conn: sqlite3.Connection, kind: str | None = None) -> dict[int, str]:
    """run id -> label, for every run (of the kind)."""
    return {r.id: r.label for r in load_runs(conn, kind)}


class RunChoiceError(ValueError):
    """A run named on the command line or a screen that is not one run: none, or several
    (the message names them)."""


def _names(run: Run) -> set[str]:
    return {n for n in (run.model_requested, run.label, *run.aliases, *run.served) if n}


def select_runs(conn: sqlite3.Connection, kind: str | None = None, *, model: str | None = None,
                run: str | int | None = None, dataset: str | None = None) -> list[Run]:
    """The runs a command's `--run` and `--model` name (every run when neither is
    given). `run` is a run's number or its label; `model` is a model's name as
    requested, served or aliased (or a run's label), and may name several runs:
    the caller decides whether several are allowed (`one_run`). Naming nothing is a
    RunChoiceError listing what there is."""
    runs = load_runs(conn, kind, dataset)
    chosen = runs
    if run not in (None, ""):
        text = str(run).strip()
        chosen = [r for r in runs if str(r.id) == text.removeprefix("run ").strip()
                  or r.label == text]
        if not chosen:
            raise RunChoiceError(f"no run {text!r}" + _known(runs))
    if model not in (None, ""):
        mine = [r for r in chosen if model in _names(r)]
        if not mine:
            raise RunChoiceError(f"no run of model {model!r}"
                                 + (f" among run {run}" if run not in (None, "") else "")
                                 + _known(runs))
        chosen = mine
    return chosen


def runs_named(conn: sqlite3.Connection, model: str | None = None,
               run: str | int | None = None) -> list[Run] | None:
    """The runs a filter names (None: no filter), without refusing: `run` by number or
    label, `model` by any of its names; an unknown name names no run (an empty list)."""
    if model in (None, "") and run in (None, ""):
        return None
    try:
        return select_runs(conn, model=model, run=run)
    except RunChoiceError:
        return []


def one_run(runs: list[Run], what: str, pool: bool = False) -> list[Run]:
    """`runs` when it is one run (or `pool` asks for several together); else a
    RunChoiceError naming the runs, so that a single figure never pools runs unasked."""
    if len(runs) <= 1 or pool:
        return runs
    shown = "; ".join(r.describe() for r in runs[:6]) + (" ..." if len(runs) > 6 else "")
    raise RunChoiceError(f"{what} names {len(runs)} runs: {shown}; choose one with --run"
                         " (its number or label), or pool them with --pool")


def _known(runs: list[Run]) -> str:
    if not runs:
        return ": there is no run"
    shown = ", ".join(f"{r.id} ({r.label})" for r in runs[:12])
    return f"; runs: {shown}" + (" ..." if len(runs) > 12 else "")


# -- resolution at import --------------------------------------------------------------

NAME_FIELDS = ("model_requested", "model_alias", "model_actual", "model", "model_name")
"""Where a row names the model of the run it labels: the model requested, the
submitter's alias, the model served, or a name of unsaid kind."""
QUALIFIERS = ("protocol", "prompt_version", "provider", "attempt")
"""What else a row may say of its run, which narrows the runs its name fits."""


@dataclass
class RunNames:
    """What one row says of the run it refers to."""

    requested: str | None = None
    alias: str | None = None
    actual: str | None = None
    other: tuple[str, ...] = ()
    """Names of unsaid kind (`model`, `model_name`)."""
    qualifiers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunNames:
        def text(name: str) -> str | None:
            value = row.get(name)
            return None if value in (None, "") else str(value)

        return cls(text("model_requested"), text("model_alias"), text("model_actual"),
                   tuple(t for t in (text("model"), text("model_name")) if t),
                   {q: t for q in QUALIFIERS if (t := text(q)) is not None})

    def given(self) -> bool:
        return bool(self.requested or self.alias or self.actual or self.other)

    def words(self) -> str:
        parts = [f"{k} {v!r}" for k, v in (("model_requested", self.requested),
                                          ("model_alias", self.alias),
                                          ("model_actual", self.actual)) if v]
        parts += [f"model {v!r}" for v in self.other]
        parts += [f"{k} {v!r}" for k, v in self.qualifiers.items()]
        return ", ".join(parts)

    def key(self) -> tuple:
        return (self.requested, self.alias, self.actual, self.other,
                tuple(sorted(self.qualifiers.items())))


class RunResolver:
    """Which run a row's names refer to, among the runs of one item kind (in a
    dataset), each set of names resolved once (see the module's note). Reads the
    database through `query(sql, params)` as an import's transaction sees it."""

    def __init__(self, query, kind: str):
        self.query, self.kind = query, kind
        self._runs: dict[str | None, list[Run]] = {}
        self._done: dict[tuple, Run] = {}

    def runs(self, dataset: str | None) -> list[Run]:
        if dataset not in self._runs:
            conn = _QueryConnection(self.query)
            self._runs[dataset] = load_runs(conn, self.kind, dataset)  # type: ignore[arg-type]
        return self._runs[dataset]

    def resolve(self, names: RunNames, dataset: str | None, where: str) -> Run:
        """The one run the names refer to; else a ValueError of one line naming the
        names and the runs they fit (none, or several)."""
        key = (names.key(), dataset)
        if key in self._done:
            return self._done[key]
        runs = self.runs(dataset)
        fitting = [r for r in runs if all(
            _qualifier(r, q) in (None, v) for q, v in names.qualifiers.items())]
        tiers = (
            lambda r: names.requested is not None and names.requested == r.model_requested,
            lambda r: names.alias is not None and names.alias in r.aliases,
            lambda r: any(o in (r.model_requested, *r.aliases) for o in names.other),
            lambda r: names.actual is not None and names.actual in r.served,
            lambda r: bool({n for n in (names.requested, names.alias, names.actual,
                                        *names.other) if n} & _names(r)),
        )
        for fits in tiers:
            found = [r for r in fitting if fits(r)]
            if len(found) == 1:
                self._done[key] = found[0]
                return found[0]
            if found:
                shown = "; ".join(r.describe() for r in found[:6])
                raise ValueError(f"{where}: {names.words()} names {len(found)} runs ({shown}):"
                                 " a label belongs to one run; the row must say which (its"
                                 " model_requested, protocol, prompt_version)")
        known = ", ".join(f"{r.id} ({r.label})" for r in runs[:12]) or "none"
        raise ValueError(f"{where}: no run of {names.words()} has been imported"
                         f"{f' in dataset {dataset!r}' if dataset else ''} (runs: {known});"
                         " import its generations first (a label belongs to the run it was"
                         " given for)")


def _qualifier(run: Run, name: str) -> str | None:
    if name == "attempt":
        return str(run.attempt)
    value = getattr(run, name)
    return None if value is None else str(value)


class _QueryConnection:
    """`load_runs` over an import's query function (which returns lists of rows)."""

    def __init__(self, query):
        self.query = query

    def execute(self, sql: str, params: tuple = ()):
        return _Rows(self.query(sql, params))


class _Rows(list):
    def fetchall(self):
        return list(self)
