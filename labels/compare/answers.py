"""Loading the answers a comparison rests on: one read per question set and filters.

A *unit* is one thing that was answered: an item, a question about it, and the
part of the item answered (``target``: '' for the whole item, 'step:12' for
one step). For each unit and rater the answer used is the newest annotation
among those the phase allows (``labels.phases``): by default each clinician's
newest answer given before any machine or reference label was seen (blind, or
imported); ``phase="current"`` the newest whatever the phase. Machine and
reference raters are never filtered by phase.

"Cannot assess" is a missing rating unless ``include_cannot_assess`` is set,
when it becomes a category of its own; a skip is always missing.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from codebook import CANNOT_ASSESS
from labels.compare.collector import with_collector_paused
from labels.compare.questions import QuestionSet, question_set
from labels.phases import PHASES, describe_phase, normalise_phase, phase_condition
from labels.provenance import Digest, answers_digest
from labels.provenance import file_name as _file_name
from store import Store

__all__ = ["PHASES", "Answers", "Filters", "RaterInfo", "Unit", "compared_question_set",
           "filters_from", "load_answers", "without_cannot_assess"]

CATEGORY_FIELDS = ("category", "specialty_or_domain")
"""Where an item's category is read from, in order: the unit's own (the ``category`` an
answer to it carries in its extra: the HealthBench meta-evaluation's rows give one per
completion and criterion, kept with each physician's and the grader's answer, whichever
file came first), the item's meta, its parent's meta (a response takes its prefix's),
then the question's meta. CARE-Bench prefixes carry ``specialty_or_domain``."""


@dataclass(frozen=True)
class Filters:
    """Which units a comparison looks at. Empty fields do not filter."""

    dataset: str | None = None
    split: str | None = None
    model: str | None = None
    """The model that wrote a response, trajectory or completion (prefixes have none): a
    run's label, or a model's name, which takes every run of that model (`store.runs`)."""
    run: int | None = None
    """One run, by its number (`store.runs`)."""
    round_id: int | None = None
    """CARE-Bench round 1..3."""
    category: str | None = None
    """Item category (HealthBench category, CARE-Bench specialty); see CATEGORY_FIELDS."""
    phase: str | None = None
    """Which of the clinicians' answers (``labels.phases``): blind (the default; None
    means it too) | current | after_reveal | suggested | imported."""
    include_cannot_assess: bool = False
    """Count "cannot assess" as a category of its own instead of a missing rating."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", normalise_phase(self.phase))

    def describe(self, phase: bool = True) -> str:
        """The filters in words, the phase named, e.g. "split validation ·
        clinicians' blind answers (...)"; `phase` False: a screen that names the
        answers used on a line of their own."""
        parts = [
            f"{name} {value}"
            for name, value in (
                ("dataset", self.dataset),
                ("split", self.split),
                ("model", self.model),
                ("run", self.run),
                ("round", self.round_id),
                ("category", self.category),
            )
            if value not in (None, "")
        ]
        if self.include_cannot_assess:
            parts.append("'cannot assess' counted as an answer")
        return " · ".join([*(parts or ["all items"]), *([describe_phase(self.phase)] if phase else [])])

    def as_dict(self) -> dict:
        """The filters as set (empty ones left out), for a report's provenance."""
        return {k: v for k, v in self.__dict__.items() if v not in (None, "", False)}


def filters_from(values: Filters | Mapping | None) -> Filters:
    """Filters from a mapping such as argparse's (``round`` or ``round_id``; empty
    values ignored): the one place filters are read from a mapping, for the command
    line and the screen alike."""
    if values is None or isinstance(values, Filters):
        return values or Filters()
    given = {k: v for k, v in dict(values).items() if v not in (None, "")}
    if "round" in given:
        given["round_id"] = given.pop("round")
    if "round_id" in given:
        given["round_id"] = int(given["round_id"])
    if "run" in given:
        given["run"] = int(str(given["run"]).removeprefix("run ").strip())
    unknown = set(given) - set(Filters.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown filter(s): {', '.join(sorted(unknown))}")
    return Filters(**given)


@dataclass(frozen=True)
class Unit:
    """One answered thing: an item, a question about it, and the part answered."""

    item_uid: str
    item_kind: str
    question_key: str
    target: str = ""
    question_text: str = ""
    parent_uid: str | None = None
    dataset: str | None = None
    split: str | None = None
    round_id: int | None = None
    model: str | None = None
    """The run the item belongs to, by its label (`store.runs`: the model alone while it
    has one run), or the item's model where it belongs to none."""
    category: str | None = None
    axes: tuple[str, ...] = ()
    """Rubric axes of the criterion (HealthBench ``axis:...`` tags, or meta.axis)."""
    tags: tuple[str, ...] = ()
    case_id: str | None = None
    """The case the item belongs to (a CARE-Bench case's rounds and their responses, a
    HealthBench prompt's completions): the cluster a bootstrap resamples by."""
    failed: bool = False
    """The item records a failed generation (a response the model never gave)."""
    run_id: int | None = None
    """The run the item belongs to (None for prefixes, prompts, tasks)."""


@dataclass(frozen=True)
class RaterInfo:
    name: str
    kind: str
    """human | machine | reference"""
    role: str | None


@dataclass
class Answers:
    """Every rater's answer in force on every unit of a question set, under filters."""

    question_set: QuestionSet
    filters: Filters
    units: list[Unit]
    raters: dict[str, RaterInfo]
    values: dict[str, dict[int, str]]
    """rater name -> unit index -> answer code."""
    answer_ids: dict[str, dict[int, int]] = field(default_factory=dict)
    """rater name -> unit index -> annotation id (newer answers have larger ids)."""
    derived: dict = field(default_factory=dict, repr=False)
    """Labels derived once per read (e.g. the clinicians' majority), by name."""
    set_aside: dict[str, int] = field(default_factory=dict)
    """clinician name -> units whose latest answer is not of the phase compared (e.g.
    changed after the machine label was shown): the comparison uses their answer of
    that phase, or none. Empty under ``phase="current"``."""
    database_file: str | None = None
    """The database the answers were read from (its file name), for provenance."""

    def digest(self) -> Digest:
        """The answers used, as a :class:`labels.provenance.Digest` (content, not ids)."""
        return answers_digest(self)

    def of_kind(self, kind: str) -> list[str]:
        return sorted(n for n, r in self.raters.items() if r.kind == kind and self.values.get(n))


def _facets(meta: dict, parent_meta: dict, qmeta: dict) -> tuple[str | None, tuple, tuple]:
    category = None
    for source in (meta, parent_meta, qmeta):
        for name in CATEGORY_FIELDS:
            if source.get(name) not in (None, ""):
                category = str(source[name])
                break
        if category is not None:
            break
    tags = qmeta.get("tags") or []
    tags = tuple(str(t) for t in tags) if isinstance(tags, list) else ()
    axes = [t[5:] for t in tags if t.startswith("axis:")]
    if qmeta.get("axis") and str(qmeta["axis"]) not in axes:
        axes.append(str(qmeta["axis"]))
    return category, tuple(axes), tags


def compared_question_set(qs: QuestionSet, filters: Filters | None) -> QuestionSet:
    """The question set a comparison under these filters is computed on: with
    "cannot assess" counted as an answer, the set gains it as an unordered category
    and becomes nominal (so an ordinal set is then compared with nominal statistics).
    The one place this is decided: ``load_answers`` and the screen's statistic
    pickers both ask here."""
    return qs.with_cannot_assess() if filters and filters.include_cannot_assess else qs


def without_cannot_assess(answers: Answers, original: QuestionSet) -> tuple[Answers, int]:
    """The same answers with every "cannot assess" dropped (as if the filter had not
    counted them) and ``original`` as the question set; also how many were dropped."""
    values: dict[str, dict[int, str]] = {}
    ids: dict[str, dict[int, int]] = {}
    dropped = 0
    for name, column in answers.values.items():
        kept = {u: v for u, v in column.items() if v != CANNOT_ASSESS}
        dropped += len(column) - len(kept)
        if kept:
            values[name] = kept
            ids[name] = {u: i for u, i in answers.answer_ids.get(name, {}).items() if u in kept}
    filters = replace(answers.filters, include_cannot_assess=False)
    return (Answers(original, filters, answers.units, answers.raters, values, ids,
                    set_aside=dict(answers.set_aside), database_file=answers.database_file),
            dropped)


_READ: OrderedDict[tuple, Answers] = OrderedDict()
"""The last reads, by (database, its data version, question set, filters): the screen
asks for the same answers several times a run (rater pickers, facets, the comparison),
and every later session asks again until an answer, item or rater is added."""
_READ_LOCK = threading.Lock()
_READ_KEEP = 12


def _data_version(store: Store) -> tuple:
    """Changes whenever an answer, item, rater or question is added: rows are only ever
    added (annotations are append-only), so a read keyed on it is never stale. With it,
    what the connection is allowed to read: a reader's store (`review.team.access.
    open_as_viewer`) reads the answers through views of its own, whose definitions name
    the reader, so one reader's answers are never handed to another."""
    return tuple(store.conn.execute(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM main.annotations),"
        " (SELECT COALESCE(MAX(id), 0) FROM items), (SELECT COALESCE(MAX(id), 0) FROM raters),"
        " (SELECT COALESCE(MAX(id), 0) FROM questions),"
        " (SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_temp_master"
        "  WHERE type = 'view' ORDER BY name))").fetchone())


@with_collector_paused
def load_answers(store: Store, questions: QuestionSet | str, filters: Filters | None = None) -> Answers:
    """Read the answers in force for a question set under the filters (one query),
    or the same read made earlier on an unchanged database (the result is shared:
    callers read it, never change it)."""
    filters = filters or Filters()
    if isinstance(questions, str):  # one read whether the set was named or passed
        questions = question_set(store, questions)
    try:
        key = (str(store.path), _data_version(store), questions, filters)
        hash(key)
    except (TypeError, AttributeError):
        return _read_answers(store, questions, filters)
    with _READ_LOCK:
        if key in _READ:
            _READ.move_to_end(key)
            return _READ[key]
    answers = _read_answers(store, questions, filters)
    if str(store.path) != ":memory:":
        with _READ_LOCK:
            _READ[key] = answers
            while len(_READ) > _READ_KEEP:
                _READ.popitem(last=False)
    return answers


def run_clause(store: Store, filters: Filters, item: str = "i") -> tuple[str, list]:
    """The SQL condition (with its parameters) of the filters' model and run on items
    `item`: the items of the runs they name (`store.runs.runs_named`: a run's label or
    number, or every run of a model); '' when they name none. The one place a model
    filter is read, for every comparison."""
    from store.runs import runs_named

    runs = runs_named(store.conn, filters.model, filters.run)
    if runs is None:
        return "", []
    if not runs and filters.model and filters.run in (None, ""):
        return f"{item}.model = ?", [filters.model]  # an item of no run that names it
    return f"{item}.run_id IN ({', '.join(str(int(r.id)) for r in runs) or 'NULL'})", []


def run_labels_of(store: Store) -> dict[int, str]:
    """run id -> label, for units (`Unit.model`)."""
    from store.runs import run_label_map

    return run_label_map(store.conn)


def _unit_categories(store: Store, qs: QuestionSet) -> dict[tuple, str]:
    """(item id, question id, target) -> the category an answer to that unit carries (the
    HealthBench meta-evaluation's `category`, one per completion and criterion), for
    rubric criteria; the first answer's where several say."""
    if qs.kind != "criterion":
        return {}
    out: dict[tuple, str] = {}
    for item_id, question_id, target, category in store.conn.execute(
            f"SELECT a.item_id, a.question_id, a.target, json_extract(a.extra, '$.category')"
            f" FROM annotations a JOIN questions q ON q.id = a.question_id WHERE {qs.where}"
            " AND json_extract(a.extra, '$.category') IS NOT NULL ORDER BY a.id", qs.params):
        out.setdefault((item_id, question_id, target), str(category))
    return out


def _read_answers(store: Store, qs: QuestionSet, filters: Filters) -> Answers:
    qs = compared_question_set(qs, filters)
    item_where, params = [], list(qs.params)
    for column, value in (("i.split", filters.split), ("i.round_id", filters.round_id)):
        if value not in (None, ""):
            item_where.append(f"{column} = ?")
            params.append(value)
    clause, clause_params = run_clause(store, filters)
    if clause:
        item_where.append(clause)
        params.extend(clause_params)
    if filters.dataset:
        item_where.append("d.name = ?")
        params.append(filters.dataset)
    allowed, phase_params = phase_condition(filters.phase)
    where = f"{qs.where} {''.join(' AND ' + w for w in item_where)}"
    sql = f"""
WITH ranked AS (
    SELECT a.id, a.item_id, a.question_id, a.rater_id, a.target, a.status, a.value,
           ROW_NUMBER() OVER (PARTITION BY a.item_id, a.question_id, a.rater_id, a.target
                              ORDER BY a.id DESC) AS newest
    FROM annotations a
    JOIN questions q ON q.id = a.question_id
    JOIN items i ON i.id = a.item_id
    JOIN datasets d ON d.id = i.dataset_id
    JOIN raters r ON r.id = a.rater_id
    WHERE {where} AND {allowed}
)
SELECT x.id, x.status, x.value, x.target, r.name AS rater, r.kind AS rater_kind, r.role,
       i.uid, i.kind AS item_kind, i.split, i.round_id, i.model, i.meta, i.run_id,
       COALESCE(i.case_id, p.case_id) AS case_id, i.failed,
       d.name AS dataset, p.uid AS parent_uid, p.meta AS parent_meta,
       q.key AS question_key, q.text AS question_text, q.meta AS question_meta,
       x.item_id, x.question_id
FROM ranked x
JOIN raters r ON r.id = x.rater_id
JOIN items i ON i.id = x.item_id
JOIN datasets d ON d.id = i.dataset_id
JOIN questions q ON q.id = x.question_id
LEFT JOIN items p ON p.id = i.parent_id
WHERE x.newest = 1
ORDER BY x.item_id, x.question_id, x.target
"""
    unit_index: dict[tuple, int] = {}
    units: list[Unit] = []
    raters: dict[str, RaterInfo] = {}
    values: dict[str, dict[int, str]] = {}
    ids: dict[str, dict[int, int]] = {}
    meta_cache: dict[tuple, tuple] = {}
    labels = run_labels_of(store)
    unit_category = _unit_categories(store, qs)

    def facets(row) -> tuple:
        # Keyed on the meta texts themselves: items share them (every response of a
        # prefix its parent's, most items none), so each distinct text is read once.
        facet_key = (row["meta"], row["parent_meta"], row["question_meta"])
        if facet_key not in meta_cache:
            meta_cache[facet_key] = _facets(*(json.loads(m or "{}") for m in facet_key))
        return meta_cache[facet_key]

    for row in store.conn.execute(sql, [*params, *phase_params]):
        key = (row["item_id"], row["question_id"], row["target"])
        index = unit_index.get(key)
        if index is None:  # a unit's first row: its facets, once
            category, axes, tags = facets(row)
            category = unit_category.get(key, category)
            if filters.category and category != filters.category:
                unit_index[key] = -1  # not of the category: none of its rows
                continue
            index = unit_index[key] = len(units)
            units.append(Unit(
                item_uid=row["uid"], item_kind=row["item_kind"], question_key=row["question_key"],
                target=row["target"], question_text=row["question_text"],
                parent_uid=row["parent_uid"], dataset=row["dataset"], split=row["split"],
                round_id=row["round_id"], model=labels.get(row["run_id"], row["model"]),
                category=category, axes=axes, tags=tags, case_id=row["case_id"],
                failed=bool(row["failed"]), run_id=row["run_id"],
            ))
        elif index < 0:
            continue
        name = row["rater"]
        if name not in raters:
            raters[name] = RaterInfo(name, row["rater_kind"], row["role"])
        if row["status"] == "answered" and row["value"] is not None:
            value = row["value"]
        elif row["status"] == CANNOT_ASSESS and filters.include_cannot_assess:
            value = CANNOT_ASSESS
        else:
            continue
        values.setdefault(name, {})[index] = value
        ids.setdefault(name, {})[index] = row["id"]
    set_aside: dict[str, int] = {}
    if allowed != "1":  # the clinicians' latest answers of another phase: set aside
        of_latest, _ = phase_condition(filters.phase, "a", "r")
        latest = f"""
SELECT r.name AS rater, a.item_id, a.question_id, a.target, i.meta, p.meta AS parent_meta,
       q.meta AS question_meta
FROM annotations a
JOIN questions q ON q.id = a.question_id
JOIN items i ON i.id = a.item_id
JOIN datasets d ON d.id = i.dataset_id
JOIN raters r ON r.id = a.rater_id
LEFT JOIN items p ON p.id = i.parent_id
WHERE {where} AND r.kind = 'human' AND a.status != 'skipped' AND NOT {of_latest}
  AND a.id = (SELECT MAX(b.id) FROM annotations b WHERE b.item_id = a.item_id
              AND b.question_id = a.question_id AND b.rater_id = a.rater_id
              AND b.target = a.target)
"""
        for row in store.conn.execute(latest, [*params, *phase_params]):
            key = (row["item_id"], row["question_id"], row["target"])
            if filters.category and unit_category.get(key, facets(row)[0]) != filters.category:
                continue
            set_aside[row["rater"]] = set_aside.get(row["rater"], 0) + 1
    return Answers(qs, filters, units, raters, values, ids, set_aside=set_aside,
                   database_file=_file_name(store))
