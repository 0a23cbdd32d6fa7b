"""A metric read item by item, by the machine and by clinicians: what PPI estimates from.

Every metric here is a mean over items of a value each reader gives each item:

- the CARE-Bench triage shares (:data:`SHARE_KEYS`: accuracy, over- and
  under-triage, missed and unnecessary care, urgent false negative, false
  urgent escalation): an item is a model's response whose prefix has a
  reference (gold) label and which counts in the metric's denominator (missed
  care counts the responses to prefixes whose gold label escalates care); its
  value is 1 when the reader's label of the response meets the metric's
  condition against that gold label. Both are read off the scorer's own
  definition (``labels.triage.triage_metric_batch`` on the response's one-prefix
  table), so the two cannot drift;
- ``met_rate``: an item is an agent run or graded conversation; its value is
  the share of its criteria (of the chosen question set) the reader marked
  met. The machine's over the criteria it answered; a clinician's over those
  of them they answered;
- ``pass_rate``: 1 when the reader marked every criterion of the item met (a
  judge's pass rate); a clinician's reading counts only when they answered
  every criterion the machine answered;
- on a study's own label question (``question``, any codebook): ``mean_score``,
  an item's label as a number (its value on an interval scale, else its place
  1..K in the codebook's order); and where the codebook marks a risk order,
  ``action_rate`` (1 when the label calls for action: `action_from` or above)
  and ``urgent_rate`` (1 when it is the urgent label): "what share of this
  chatbot's conversations could do moderate harm or worse?".

A clinician's reading is one rater's answer or one derived label per item
(``group:majority``, ``group:adjudicated``). Which of their answers is decided
in ``labels.phases``: by default those given before any machine label was
seen (blind answers, and imported ones); ``phase="current"`` takes each
clinician's latest answer, and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from codebook import CAREBENCH, codebook
from labels.compare.answers import Answers, Filters, load_answers
from labels.compare.questions import QuestionSet, carebench_questions, question_set, question_sets
from labels.compare.raters import CLINICIANS, columns_for, normalise_spec, references
from labels.phases import BLIND, CURRENT, describe_phase
from labels.triage import (
    METRIC_KEYS,
    METRIC_NAMES,
    denominator_words,
    triage_metric_batch,
    triage_tables,
)
from store import Store

SHARE_KEYS = tuple(k for k in METRIC_KEYS if k not in ("macro_f1", "coverage"))
"""The triage metrics that are a mean over responses of a 0/1 reading."""
CRITERIA_METRICS = {
    "met_rate": "Criteria met (share of an item's criteria)",
    "pass_rate": "Pass rate (every criterion met)",
}
LABEL_METRICS = {
    "action_rate": "Calls for action (share)",
    "urgent_rate": "Urgent (share)",
    "mean_score": "Mean score",
}
"""Means over the items of a study's own label question (``question``)."""
METRICS = {**{k: METRIC_NAMES[k] for k in SHARE_KEYS}, **CRITERIA_METRICS, **LABEL_METRICS}
"""Every metric PPI estimates: key -> name."""
PHASES = {phase: describe_phase(phase) for phase in (BLIND, CURRENT)}
"""The clinicians' answers a reading may rest on (``labels.phases``)."""
MET = "met"


@dataclass
class Readings:
    """One model's items, each with the machine's value and, on some, a clinician's."""

    model: str
    item_ids: list[int] = field(default_factory=list)
    """Store ids of the items (the population), in a fixed order."""
    item_uids: list[str] = field(default_factory=list)
    machine: list[float] = field(default_factory=list)
    """The machine's value of each item."""
    human: dict[int, float] = field(default_factory=dict)
    """Position -> the clinicians' value, on the items they read."""
    rounds: dict[int, frozenset[int]] = field(default_factory=dict)
    """Position -> the review rounds the clinicians' answers on it were given in."""
    score: list[float | None] = field(default_factory=list)
    """The machine's own expectation of each item's value, where its answers carry a
    confidence (1-5) or a score (a verifier's 0..1): what a calibration reads
    (``labels.ppi.calibration``); None where they carry neither."""
    first_answer: dict[int, int] = field(default_factory=dict)
    """Position -> the earliest clinician's answer (annotation id) behind its value: the
    order labels given outside any round arrived in."""
    unsettled: set[int] = field(default_factory=set)
    """Positions clinicians answered whose reading is not settled (their majority ties,
    or a pass needs criteria they did not answer)."""

    @property
    def scored(self) -> bool:
        """Whether the machine gave a confidence or score on any item."""
        return any(x is not None for x in self.score)


@dataclass
class MetricReadings:
    """A metric read by a machine and by clinicians, per model."""

    metric: str
    name: str
    human: str
    machine: str
    question: str
    """The question (set) the readings answer."""
    reference: str | None
    """The rater whose label each reading is scored against (triage metrics)."""
    phase: str
    by_model: dict[str, Readings]
    notes: list[str] = field(default_factory=list)


def load_readings(store: Store, qs: QuestionSet | str, filters: Filters,
                  phase: str) -> Answers:
    """The answers a reading rests on, the clinicians' of this phase (``labels.phases``)."""
    if phase not in PHASES:
        raise ValueError(f"phase is one of {', '.join(PHASES)}, not {phase!r}")
    return load_answers(store, qs, replace(filters, phase=phase))


def share_reading(metric: str, gold: str, label: str, order: list[str]) -> float | None:
    """A triage share's value of one response: 1 or 0, or None when the response does not
    count in the metric's denominator (missed care of a prefix whose gold label does not
    escalate). The scorer's own definition, on the response's one-prefix table."""
    value = triage_metric_batch(metric, triage_tables([gold], [label], order), order)[0]
    return None if value != value else float(value)  # NaN: not in the denominator


def one_column(answers: Answers, spec: str, side: str) -> tuple[dict[int, str], list[str]]:
    names, columns, notes = columns_for(answers, spec)
    if len(names) != 1 or normalise_spec(spec) == CLINICIANS:
        raise ValueError(f"{side} {spec!r} is several raters: give one rater, group:majority "
                         "or group:adjudicated (one reading per item)")
    return columns[0], notes


def _answer_rounds(store: Store, answers: Answers,
                   spec: str) -> tuple[dict[int, frozenset[int]], dict[int, int]]:
    """Unit -> the review rounds of the clinicians' answers behind the reading (a group's:
    its members'), and unit -> the earliest of those answers (annotation id)."""
    spec = normalise_spec(spec)
    names = [spec] if not spec.startswith("group:") else [
        n for n, r in answers.raters.items() if r.kind == "human"]
    wanted: dict[int, list[int]] = {}
    for name in names:
        for unit, annotation in answers.answer_ids.get(name, {}).items():
            wanted.setdefault(annotation, []).append(unit)
    first: dict[int, int] = {}
    for annotation, units in wanted.items():
        for unit in units:
            first[unit] = min(first.get(unit, annotation), annotation)
    out: dict[int, set[int]] = {}
    ids = list(wanted)
    for start in range(0, len(ids), 5000):
        chunk = ids[start:start + 5000]
        rows = store.query(
            "SELECT id, round_id FROM annotations WHERE id IN (SELECT value FROM json_each(?))"
            " AND round_id IS NOT NULL", (json.dumps(chunk),))
        for row in rows:
            for unit in wanted[row["id"]]:
                out.setdefault(unit, set()).add(row["round_id"])
    return {u: frozenset(r) for u, r in out.items()}, first


@dataclass
class MachineSureness:
    """What the machine said beside its answers, by unit."""

    scores: dict[int, float] = field(default_factory=dict)
    """A score kept with the answer (a verifier's 0..1: higher, the condition holds)."""
    sure: dict[int, float] = field(default_factory=dict)
    """How sure it was of its answer, from its confidence 1-5: 0.5 + confidence / 10."""

    def __contains__(self, unit: int) -> bool:
        return unit in self.scores or unit in self.sure

    def holds(self, unit: int, said: float) -> float:
        """Its expectation that the condition holds, where its answer ``said`` (1: holds)."""
        if unit in self.scores:
            return self.scores[unit]
        sure = self.sure[unit]
        return said * sure + (1 - said) * (1 - sure)


def _machine_scores(store: Store, answers: Answers, machine: str) -> MachineSureness:
    """The machine's score or confidence on each unit it answered, where it gave one."""
    ids = answers.answer_ids.get(normalise_spec(machine), {})
    by_annotation = {a: u for u, a in ids.items()}
    out = MachineSureness()
    keys = list(by_annotation)
    for start in range(0, len(keys), 5000):
        chunk = keys[start:start + 5000]
        for row in store.query(
                "SELECT id, confidence, json_extract(extra, '$.score') AS score FROM annotations"
                " WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(chunk),)):
            score = row["score"]
            if isinstance(score, (int, float)) and 0 <= score <= 1:
                out.scores[by_annotation[row["id"]]] = float(score)
            elif row["confidence"] is not None:
                out.sure[by_annotation[row["id"]]] = 0.5 + float(row["confidence"]) / 10
    return out


def _answered_by_clinicians(answers: Answers, unit: int) -> bool:
    return any(unit in answers.values.get(name, {}) for name, rater in answers.raters.items()
               if rater.kind == "human")


def item_ids_of(store: Store, uids: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    ordered = sorted(uids)
    for start in range(0, len(ordered), 5000):
        chunk = ordered[start:start + 5000]
        out.update(dict(store.query(
            "SELECT uid, id FROM items WHERE uid IN (SELECT value FROM json_each(?))",
            (json.dumps(chunk),))))
    return out


def _triage_readings(store, metric, human, machine, filters, phase, reference):
    prefix_q, response_q = carebench_questions()
    order = list(codebook(CAREBENCH).codes)
    responses = load_readings(store, response_q, replace(filters, include_cannot_assess=False),
                              phase)
    prefixes = load_answers(store, prefix_q, Filters(dataset=filters.dataset, split=filters.split,
                                                     phase=phase))
    refs = references(prefixes)
    reference = reference or (refs[0] if refs else None)
    if reference is None:
        raise ValueError("the triage metrics score each response against its prefix's "
                         "reference (gold) label, and no prefix has one")
    gold_column, _ = one_column(prefixes, reference, "reference")
    gold = {prefixes.units[u].item_uid: v for u, v in gold_column.items()
            if prefixes.units[u].target == ""}
    said, _ = one_column(responses, machine, "machine")
    read, notes = one_column(responses, human, "human")
    rounds, first = _answer_rounds(store, responses, human)
    sure = _machine_scores(store, responses, machine)
    result = MetricReadings(metric, METRICS[metric], human, machine, response_q, reference,
                            phase, {}, list(notes))
    uids = {responses.units[u].item_uid for u in said}
    ids = item_ids_of(store, uids)
    without_gold = outside_codebook = outside_denominator = 0
    for unit_index in sorted(said, key=lambda u: responses.units[u].item_uid):
        unit = responses.units[unit_index]
        if unit.target != "":
            continue
        g = gold.get(unit.parent_uid or "")
        if g is None:
            without_gold += 1
            continue
        if g not in order or said[unit_index] not in order:
            outside_codebook += 1
            continue
        machine_value = share_reading(metric, g, said[unit_index], order)
        if machine_value is None:  # not in this metric's denominator
            outside_denominator += 1
            continue
        model = unit.model or "(no model)"  # the run's label: each run apart (store.runs)
        r = result.by_model.setdefault(model, Readings(model))
        position = len(r.item_ids)
        r.item_ids.append(ids[unit.item_uid])
        r.item_uids.append(unit.item_uid)
        r.machine.append(machine_value)
        # sure of its label: as sure that the metric's reading from it is right
        r.score.append(sure.holds(unit_index, machine_value) if unit_index in sure else None)
        if unit_index in read and read[unit_index] in order:
            r.human[position] = share_reading(metric, g, read[unit_index], order)
            r.rounds[position] = rounds.get(unit_index, frozenset())
            r.first_answer[position] = first.get(unit_index, 0)
        elif _answered_by_clinicians(responses, unit_index):
            r.unsettled.add(position)
    if without_gold:
        result.notes.append(f"{without_gold} responses the machine read have no reference label "
                            f"on their prefix from {reference}: left out")
    if outside_codebook:
        result.notes.append(f"{outside_codebook} labels outside the codebook left out")
    if outside_denominator:
        counted = sum(len(r.item_ids) for r in result.by_model.values())
        result.notes.append(
            f"{outside_denominator} responses do not count in {METRICS[metric].lower()}: it is "
            f"over the responses to prefixes with {denominator_words(metric, order)}"
            + ("" if counted else f", and no prefix's reference label ({reference}) is one"))
    return result


def default_criteria_set(store: Store, machine: str) -> str:
    """The first criteria question set the machine rater answered."""
    for qs in question_sets(store):
        if qs.kind == "criterion" and machine in load_answers(store, qs).values:
            return qs.key
    raise ValueError(f"{machine!r} has answered no rubric criteria: give --question-set")


def _criteria_readings(store, metric, human, machine, filters, phase, question):
    question = question or default_criteria_set(store, machine)
    qs = question_set(store, question)
    if qs.kind != "criterion":
        raise ValueError(f"{metric} is a rate of rubric criteria: {question!r} is a label "
                         "question (give a criteria set, e.g. criteria:rubric@graded_conversation)")
    answers = load_readings(store, qs, replace(filters, include_cannot_assess=False), phase)
    said, _ = one_column(answers, machine, "machine")
    read, notes = one_column(answers, human, "human")
    rounds, first = _answer_rounds(store, answers, human)
    sure = _machine_scores(store, answers, machine)
    items: dict[str, dict] = {}
    for unit_index, value in said.items():
        unit = answers.units[unit_index]
        if unit.target != "":
            continue
        entry = items.setdefault(unit.item_uid, {"model": unit.model or "(no model)",
                                                 "machine": [], "human": [], "rounds": set(),
                                                 "sure": [], "first": None})
        entry["machine"].append(value == MET)
        # its expectation that the criterion is met: a score as it is, a confidence in
        # its verdict turned toward it; none: its verdict
        met = float(value == MET)
        entry["sure"].append(sure.holds(unit_index, met) if unit_index in sure else met)
        entry["scored"] = entry.get("scored", False) or unit_index in sure
        if unit_index in read:
            entry["human"].append(read[unit_index] == MET)
            entry["rounds"] |= rounds.get(unit_index, frozenset())
            if unit_index in first:
                entry["first"] = min(entry["first"] or first[unit_index], first[unit_index])
    result = MetricReadings(metric, METRICS[metric], human, machine, qs.key, None, phase, {},
                            list(notes))
    ids = item_ids_of(store, set(items))
    partial = 0
    for uid in sorted(items):
        entry = items[uid]  # the filters' model and run chose the items (load_answers)
        r = result.by_model.setdefault(entry["model"], Readings(entry["model"]))
        position = len(r.item_ids)
        r.item_ids.append(ids[uid])
        r.item_uids.append(uid)
        m, h = entry["machine"], entry["human"]
        r.machine.append(sum(m) / len(m) if metric == "met_rate" else float(all(m)))
        r.score.append(None if not entry.get("scored") else
                       float(np.mean(entry["sure"])) if metric == "met_rate"
                       else float(np.prod(entry["sure"])))
        complete = len(h) == len(m)
        if h and (complete or metric == "met_rate"):
            r.human[position] = sum(h) / len(h) if metric == "met_rate" else float(all(h))
            r.rounds[position] = frozenset(entry["rounds"])
            r.first_answer[position] = entry["first"] or 0
        if h and not complete:
            partial += 1
        if h and position not in r.human:
            r.unsettled.add(position)
    if partial:
        result.notes.append(
            f"{partial} items have a clinician's verdict on only some of the criteria the "
            "machine answered: "
            + ("their rate is over the criteria the clinician answered" if metric == "met_rate"
               else "they count as not read by a clinician (a pass needs every criterion)"))
    return result


def label_values(book, metric: str) -> dict[str, float]:
    """Each code's value under a label metric (`LABEL_METRICS`) of this codebook; a
    ValueError in words when the codebook cannot give it (no risk order)."""
    codes = list(book.codes)
    if metric == "mean_score":
        numbers = book.values or tuple(float(n) for n in range(1, len(codes) + 1))
        return dict(zip(codes, numbers, strict=True))
    if book.risk is None:
        raise ValueError(f"{metric} needs a risk order: {book.title} ({book.key}) marks none "
                         "([risk] action_from = \"CODE\" in its next version)")
    from labels.triage import escalation_split

    acting, urgent = escalation_split(codes, book.risk)
    if metric == "action_rate":
        return {c: float(c in acting) for c in codes}
    return {c: float(c == urgent) for c in codes}


def _label_readings(store, metric, human, machine, filters, phase, question):
    """A study's label question read item by item (`LABEL_METRICS`), per model."""
    from labels.compare.questions import codebook_for

    if not question:
        raise ValueError(f"{metric} is a mean over the items of a label question: give "
                         "--question-set, e.g. harm.severity")
    qs = question_set(store, question)
    if qs.kind != "labelset":
        raise ValueError(f"{metric} is for a label question; {question!r} is a set of rubric "
                         "criteria (met_rate or pass_rate there)")
    value_of = label_values(codebook_for(store, qs.codebook), metric)
    answers = load_readings(store, qs, replace(filters, include_cannot_assess=False), phase)
    said, _ = one_column(answers, machine, "machine")
    read, notes = one_column(answers, human, "human")
    rounds, first = _answer_rounds(store, answers, human)
    result = MetricReadings(metric, METRICS[metric], human, machine, qs.key, None, phase, {},
                            list(notes))
    ids = item_ids_of(store, {answers.units[u].item_uid for u in said})
    outside = 0
    for unit_index in sorted(said, key=lambda u: answers.units[u].item_uid):
        unit = answers.units[unit_index]
        if unit.target != "":
            continue
        if said[unit_index] not in value_of:
            outside += 1
            continue
        model = unit.model or "(no model)"
        if filters.model and model != filters.model:
            continue
        r = result.by_model.setdefault(model, Readings(model))
        position = len(r.item_ids)
        r.item_ids.append(ids[unit.item_uid])
        r.item_uids.append(unit.item_uid)
        r.machine.append(value_of[said[unit_index]])
        r.score.append(None)  # a label's value carries no confidence to calibrate
        if read.get(unit_index) in value_of:
            r.human[position] = value_of[read[unit_index]]
            r.rounds[position] = rounds.get(unit_index, frozenset())
            r.first_answer[position] = first.get(unit_index, 0)
    if outside:
        result.notes.append(f"{outside} labels outside the codebook left out")
    return result


def read_metric(
    store: Store,
    metric: str,
    human: str,
    machine: str,
    filters: Filters | None = None,
    *,
    phase: str = "blind",
    reference: str | None = None,
    question: str | None = None,
) -> MetricReadings:
    """The metric's value of each item, per model, as the machine and the clinicians
    (``human``: a clinician or a one-label group) read it. ``reference``: the rater the
    triage metrics score against (default: the prefixes' first reference, the gold
    label); ``question``: the criteria set of ``met_rate`` / ``pass_rate`` (default:
    the first the machine answered). ValueError with a message for the user on an
    unknown metric, rater or question set."""
    filters = filters or Filters()
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    if metric in CRITERIA_METRICS:
        return _criteria_readings(store, metric, human, machine, filters, phase, question)
    if metric in LABEL_METRICS:
        return _label_readings(store, metric, human, machine, filters, phase, question)
    return _triage_readings(store, metric, human, machine, filters, phase, reference)


def default_machine(store: Store, metric: str, question: str | None = None) -> str:
    """The machine rater a metric is read by when none is named: the one that answered
    the most of its question (set), the later name first on a tie (mapper@v2 before v1)."""
    if metric in CRITERIA_METRICS:
        rows = store.query(
            "SELECT r.name, COUNT(*) AS n FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " JOIN questions q ON q.id = a.question_id WHERE r.kind = 'machine'"
            " AND q.kind = 'criterion' GROUP BY r.name")
        if question:
            answered = load_answers(store, question).values
            rows = [r for r in rows if r["name"] in answered]
    else:
        key = question if metric in LABEL_METRICS and question else carebench_questions()[1]
        rows = store.query(
            "SELECT r.name, COUNT(*) AS n FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " JOIN questions q ON q.id = a.question_id WHERE r.kind = 'machine' AND q.key = ?"
            " GROUP BY r.name", (key,))
    if not rows:
        raise ValueError(f"no machine rater has read anything {metric} is computed from: "
                         "name one with --machine")
    return max(rows, key=lambda r: (r["n"], r["name"]))["name"]
