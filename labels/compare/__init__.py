"""Comparisons over the store: who agrees with whom, on which items, and what follows.

Plain functions over a :class:`store.Store`, no Streamlit: the Agreement screen,
the exports and the command line call the same ones, imported from here (the
modules beside this file hold the parts).

Any rater or group against any other, on the (item, question) units they
share — clinician vs clinician, mapper vs clinicians, judge vs physicians,
mapper vs gold — through one function, :func:`compare`, and the views built on
it. What the command line calls:

    report = agreement_report(store, "carebench.response_action",
                              "group:majority", "demo:mapper@v2", {"split": "validation"})
    print(format_report_text(report))       # or labels.report.report_json(report)

Rater specs: a rater's name, or ``group:clinicians`` (every clinician, one column
each), ``group:majority`` (their most frequent answer), ``group:adjudicated``
(the settled answer, else the majority).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from labels.compare.anchoring import AnchoringReport, anchoring
from labels.compare.answers import (
    PHASES,
    Filters,
    Unit,
    compared_question_set,
    filters_from,
    load_answers,
)
from labels.compare.collector import collector_paused, with_collector_paused
from labels.compare.leaderboard import TriageReport, triage_comparison
from labels.compare.machines import (
    MachineReport,
    judge_vs_clinicians_per_criterion,
    machines_vs_clinicians,
    mapper_vs_clinicians,
)
from labels.compare.meta_eval import MetaEvalReport, meta_eval
from labels.compare.pairs import (
    BOOTSTRAP_BY,
    BREAKDOWNS,
    ComparisonReport,
    compare,
    compare_answers,
    group_agreement,
    pairwise_answers,
    pairwise_matrix,
)
from labels.compare.questions import QuestionSet, question_set, question_sets
from labels.compare.raters import (
    ADJUDICATED,
    ADJUDICATED_RATER,
    CLINICIANS,
    MAJORITY,
    RaterChoice,
    RatingsTable,
    rater_choices,
    ratings_for,
)
from labels.compare.study_triage import QuestionTriage, question_triage
from labels.compare.text import format_report_text, format_triage_text, prevalence_note
from store import Store

__all__ = [
    "ADJUDICATED", "BOOTSTRAP_BY", "BREAKDOWNS", "CLINICIANS", "MAJORITY", "AnchoringReport", "ComparisonReport",
    "FacetChoices", "Filters", "PHASES", "MachineReport", "MetaEvalReport", "QuestionSet", "RaterChoice",
    "RatingsTable", "TriageReport", "Unit", "agreement_bundle", "agreement_report", "anchoring",
    "choices_for", "collector_paused", "compare", "compared_question_set", "data_version", "default_comparison",
    "default_raters", "facet_choices", "filters_from", "format_report_text", "format_triage_text",
    "group_agreement", "judge_vs_clinicians_per_criterion", "mapper_vs_clinicians", "meta_eval",
    "pairwise_matrix", "prevalence_note", "question_set", "question_sets", "rater_choices",
    "ratings_for", "triage_comparison", "QuestionTriage", "question_triage",
]


def agreement_report(
    store: Store,
    question: str,
    rater_a: str,
    rater_b: str | None = None,
    filters: Filters | Mapping | None = None,
    *,
    by: Sequence[str] = (),
    forest_key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    bootstrap_by: str = "auto",
) -> ComparisonReport:
    """What ``carelens agreement`` prints: rater (or group) A against B on a question set
    (a question key, ``criteria``, ``criteria:<codebook>`` or a key glob). Without B, A
    must be a group and its members' multi-rater agreement is reported. ``by`` adds
    breakdowns (category, round, split, model, dataset, criterion, axis) of
    ``forest_key`` (default: the level's first multi-rater coefficient). Raises
    ValueError with a message for the user on an unknown question set, rater or filter."""
    return compare(store, rater_a, rater_b, question, filters_from(filters), by=tuple(by),
                   forest_key=forest_key, n_boot=n_boot, seed=seed, bootstrap_by=bootstrap_by)


@with_collector_paused
def choices_for(store: Store, question: QuestionSet | str,
                filters: Filters | None = None) -> list[RaterChoice]:
    """The raters and groups that answered a question set, for the rater pickers."""
    return rater_choices(load_answers(store, question, filters))


def default_raters(choices: Sequence[RaterChoice]) -> tuple[str, str | None] | None:
    """The pair to show first on a question set: the clinicians' majority against the
    first machine rater, else a reference against the clinicians' majority, else the
    first two raters, else the clinicians among themselves; None when nobody answered."""
    groups = {c.spec for c in choices if c.kind == "group"}
    machines = [c.spec for c in choices if c.kind == "machine"]
    references = [c.spec for c in choices if c.kind == "reference" and c.spec != ADJUDICATED_RATER]
    singles = [c.spec for c in choices if c.kind != "group"]
    if MAJORITY in groups and machines:
        return MAJORITY, machines[0]
    if MAJORITY in groups and references:
        return references[0], MAJORITY
    if len(singles) >= 2:
        return singles[0], singles[1]
    return (CLINICIANS, None) if CLINICIANS in groups else None


@with_collector_paused
def default_comparison(store: Store) -> tuple[str, str, str | None] | None:
    """A first comparison worth showing: (question set key, A, B). Prefers a question
    set where a machine rater and clinicians both answered, then one with a reference
    and clinicians, then any set with two raters (see :func:`default_raters`)."""
    sets = question_sets(store)
    # The best a set can score needs a machine rater's answer: the sets that have one are
    # read first, in order, and the first that scores it is the one the ranking below
    # would choose, without reading every other set.
    for qs in sets:
        if _machine_answered(store, qs):
            choices = rater_choices(load_answers(store, qs))
            pair = default_raters(choices)
            if pair is not None and any(c.kind == "machine" for c in choices):
                return (qs.key, *pair)
    ranked = []
    for qs in sets:
        choices = rater_choices(load_answers(store, qs))
        pair = default_raters(choices)
        if pair is None:
            continue
        kinds = {c.kind for c in choices}
        score = (0 if "machine" in kinds else 1 if "reference" in kinds else 2)
        ranked.append((score, len(ranked), (qs.key, *pair)))
    return min(ranked)[2] if ranked else None


def _machine_answered(store: Store, qs: QuestionSet) -> bool:
    """Whether a machine rater answered a question of the set (one indexed look-up)."""
    return bool(store.query_one(
        "SELECT EXISTS (SELECT 1 FROM annotations a JOIN questions q ON q.id = a.question_id"
        " JOIN items i ON i.id = a.item_id JOIN datasets d ON d.id = i.dataset_id"
        " JOIN raters r ON r.id = a.rater_id"
        f" WHERE {qs.where} AND r.kind = 'machine' AND a.status = 'answered'"
        " AND a.value IS NOT NULL)", qs.params)[0])


@dataclass(frozen=True)
class FacetChoices:
    """The values the Agreement screen's filters can take for a question set."""

    datasets: list[str]
    splits: list[str]
    models: list[str]
    rounds: list[int]
    categories: list[str]


@with_collector_paused
def facet_choices(store: Store, question: QuestionSet | str) -> FacetChoices:
    """Distinct datasets, splits, models, rounds and categories of the answered units."""
    units = load_answers(store, question).units

    def distinct(attr: str) -> list:
        return sorted({getattr(u, attr) for u in units} - {None, ""})

    return FacetChoices(distinct("dataset"), distinct("split"), distinct("model"),
                        distinct("round_id"), distinct("category"))


def data_version(store: Store) -> tuple[int, int, int]:
    """Changes whenever an answer, item or rater is added (annotations are append-only),
    so a cached report can be keyed on it."""
    row = store.query_one(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM annotations),"
        " (SELECT COALESCE(MAX(id), 0) FROM items), (SELECT COALESCE(MAX(id), 0) FROM raters)"
    )
    return int(row[0]), int(row[1]), int(row[2])


@with_collector_paused
def agreement_bundle(
    store: Store,
    question: str,
    rater_a: str,
    rater_b: str | None = None,
    filters: Filters | Mapping | None = None,
    *,
    by: Sequence[str] = (),
    forest_key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    bootstrap_by: str = "auto",
) -> tuple[ComparisonReport, list]:
    """The comparison and every other view of the Agreement screen on the same question
    set and filters, for a full HTML or JSON export: the clinicians' pairwise matrix,
    machine raters against clinicians, anchoring, the triage leaderboard (CARE-Bench
    response questions) and the HealthBench meta-evaluation (rubric criteria)."""
    filters = filters_from(filters)
    answers = load_answers(store, question, filters)  # one read shared by the views below
    report = compare_answers(answers, rater_a, rater_b, by=tuple(by), forest_key=forest_key,
                             n_boot=n_boot, seed=seed, bootstrap_by=bootstrap_by)
    qs = report.question_set
    extras: list = []
    if len(report.ceiling_raters) >= 2 or report.a == CLINICIANS:
        extras.append(pairwise_answers(answers, n_boot=n_boot, seed=seed))
    extras.append(machines_vs_clinicians(answers, n_boot=n_boot, seed=seed))
    extras.append(anchoring(store, qs, filters))
    if qs.codebook == "carebench-escalation":
        extras.append(triage_comparison(store, filters, n_boot=n_boot, seed=seed))
    if qs.kind == "criterion":
        extras.append(meta_eval(store, None, qs, filters, n_boot=n_boot, seed=seed))
    return report, extras
