"""Machine raters against clinicians: the mapper's prompt versions side by side, and
the rubric judge criterion by criterion beside the clinicians' own agreement.

"Did v2 get closer?" is answered with a paired bootstrap: the units both
versions and the clinicians' majority answered are resampled together, so the
difference in agreement has its own 95% interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labels import agreement as ag
from labels.agreement import Coefficient
from labels.compare.answers import Answers, Filters, load_answers
from labels.compare.pairs import Breakdown, compare_answers, unit_clusters
from labels.compare.questions import QuestionSet
from labels.compare.raters import (
    ADJUDICATED,
    MAJORITY,
    adjudicated_labels,
    clinicians,
    columns_for,
    display_name,
    table_for,
)
from labels.compare.stats import coefficient, coefficient_name, headline_key
from store import Store


@dataclass
class MachineRow:
    """One machine rater against one clinician or clinician group."""

    machine: str
    reference: str
    """Rater spec of the clinician side."""
    reference_label: str
    headline: Coefficient
    """The level's pairwise headline (weighted kappa for ordinal labels, AC1 for criteria)."""
    percent: Coefficient
    """Percent agreement on the same units (no interval)."""


@dataclass
class VersionDifference:
    """Candidate minus baseline agreement with a reference, on the units all three share."""

    baseline: str
    candidate: str
    reference_label: str
    key: str
    name: str
    baseline_value: float | None
    candidate_value: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    verdict: str
    """In words: closer, further, or no clear difference (or why it cannot be said)."""
    undefined_reason: str | None = None


@dataclass
class MachineReport:
    question_set: QuestionSet
    filters: Filters
    machines: list[str]
    references: list[str]
    rows: list[MachineRow]
    differences: list[VersionDifference]
    notes: list[str]
    explanation: str | None = None
    """Why there is nothing to show, when there is nothing."""

    def row(self, machine: str, reference: str) -> MachineRow | None:
        return next(
            (r for r in self.rows if r.machine == machine and r.reference == reference), None
        )


def _one_table_statistic(key: str, k: int):
    """Batch statistic of K x K tables (reference rows, version columns): labels.agreement's
    own batched formula (the statistic its bootstrap resamples), so the paired difference
    and the single coefficients cannot drift."""
    if key == "percent_agreement":
        return ag.percent_agreement_batch
    weights = key[len("cohen_kappa_"):] if key != "cohen_kappa" else None
    w = ag.agreement_weights(k, weights)
    return lambda t: ag.cohen_kappa_batch(t, w)


def _paired_statistic(key: str, k: int):
    """Batch statistic on stacked (baseline, candidate) K x K tables: candidate - baseline."""
    one = _one_table_statistic(key, k)
    return lambda t: one(t[:, 1]) - one(t[:, 0])


def version_difference(
    answers: Answers, baseline: str, candidate: str, reference: str = MAJORITY,
    *, n_boot: int = 1000, seed: int = 0,
) -> VersionDifference:
    """How much closer ``candidate`` is to ``reference`` than ``baseline`` is, with a paired
    bootstrap interval over the units all three answered. The statistic is the pairwise
    Cohen's kappa of the level (quadratic weights for ordinal labels); for met / not met
    criteria, percent agreement (AC1 has no additive per-unit table to resample)."""
    qs = answers.question_set
    key = headline_key(qs.level, 2) if qs.level != "binary" else "percent_agreement"
    name = coefficient_name(key)
    label = display_name(reference)
    phrase = _phrase(reference)
    table = table_for(answers, [reference, baseline, candidate])
    complete = [i for i, r in enumerate(table.values) if all(v is not None for v in r)]
    rows = [table.values[i] for i in complete]
    clusters = unit_clusters([table.units[i] for i in complete])
    index = {c: i for i, c in enumerate(qs.categories)}
    k, n = len(qs.categories), len(rows)

    def undefined(reason: str) -> VersionDifference:
        return VersionDifference(baseline, candidate, label, key, name, None, None, None, None,
                                 None, n, f"cannot say: {reason}", reason)

    if n < ag.MIN_UNITS:
        return undefined(f"{n} units were answered by both versions and {phrase}")
    tables = np.zeros((n, 2, k, k))
    for u, (ref, base, cand) in enumerate(rows):
        tables[u, 0, index[ref], index[base]] = 1
        tables[u, 1, index[ref], index[cand]] = 1
    stat = _paired_statistic(key, k)
    total = tables.sum(axis=0)[None]
    diff = float(stat(total)[0])
    if not np.isfinite(diff):
        return undefined(f"{name} is undefined for one version on these units "
                         "(a single category was used)")
    base_value = _single(key, k, total[0, 0])
    cand_value = _single(key, k, total[0, 1])
    boot = ag.bootstrap_ci(stat, tables, n_boot=n_boot, seed=seed, clusters=clusters)
    if boot.low is None:
        verdict = f"{display_name(candidate)} differs by {diff:+.2f}; {boot.note or 'no interval'}"
    elif boot.low > 0:
        verdict = f"closer: {display_name(candidate)} agrees more with {phrase}"
    elif boot.high < 0:
        verdict = f"further: {display_name(candidate)} agrees less with {phrase}"
    else:
        verdict = "no clear difference: the 95% interval of the difference includes 0"
    return VersionDifference(baseline, candidate, label, key, name, base_value, cand_value, diff,
                             boot.low, boot.high, n, verdict)


def _phrase(spec: str) -> str:
    """A rater or group as the object of a sentence."""
    return {MAJORITY: "the clinicians' majority", ADJUDICATED: "the adjudicated answers"}.get(
        spec, spec
    )


def _single(key: str, k: int, table: np.ndarray) -> float | None:
    """The statistic of one K x K table (reference rows, version columns)."""
    value = float(_one_table_statistic(key, k)(table[None])[0])
    return value if np.isfinite(value) else None


def machines_vs_clinicians(
    answers: Answers, machines: list[str] | None = None, *, n_boot: int = 1000, seed: int = 0
) -> MachineReport:
    """Each machine rater against each clinician, the clinicians' majority and the
    adjudicated answer; and each later version against the first ("did v2 get closer?")."""
    qs = answers.question_set
    machines = list(machines) if machines else answers.of_kind("machine")
    members = clinicians(answers)
    settled = adjudicated_labels(answers)[0] if members else {}
    # Against the adjudicated answers only once some exist: before that the row would be
    # the majority's again under another name.
    references = [*members, MAJORITY, *([ADJUDICATED] if settled else [])] if members else []
    report = MachineReport(qs, answers.filters, machines, references, [], [], [])
    if members and not settled:
        report.notes.append("No adjudicated answer on this question set yet: nothing to compare "
                            "the machines with beyond the clinicians and their majority.")
    if not machines or not members:
        missing = "machine rater" if not machines else "clinician"
        report.explanation = (
            f"No {missing} has answered {qs.title!r} under these filters, so there is nothing "
            "to compare yet."
        )
        return report
    key = headline_key(qs.level, 2)
    for reference in references:
        _, _, notes = columns_for(answers, reference)
        report.notes += [f"{display_name(reference)}: {n}" for n in notes if n not in report.notes]
        for machine in machines:
            table = table_for(answers, [reference, machine])
            report.rows.append(MachineRow(
                machine, reference, display_name(reference),
                coefficient(key, table.values, table.categories, n_boot=n_boot, seed=seed,
                            clusters=unit_clusters(table.units)),
                # shown beside the headline without an interval: no bootstrap needed
                coefficient("percent_agreement", table.values, table.categories, n_boot=0),
            ))
    report.notes = list(dict.fromkeys(report.notes))
    for candidate in machines[1:]:
        report.differences.append(
            version_difference(answers, machines[0], candidate, MAJORITY, n_boot=n_boot, seed=seed)
        )
    return report


def mapper_vs_clinicians(
    store: Store,
    questions: QuestionSet | str,
    filters: Filters | None = None,
    mappers: list[str] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> MachineReport:
    """The mapper's prompt versions (default: every machine rater on the question set),
    each against every clinician, the clinicians' majority and the adjudicated answer,
    side by side, with the paired difference of each later version from the first."""
    answers = load_answers(store, questions, filters)
    return machines_vs_clinicians(answers, mappers, n_boot=n_boot, seed=seed)


def judge_vs_clinicians_per_criterion(
    store: Store,
    judge: str,
    questions: QuestionSet | str = "criteria",
    filters: Filters | None = None,
    *,
    reference: str = MAJORITY,
    key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> Breakdown:
    """A rubric judge against the clinicians (their majority by default), one row per
    criterion (criteria with the same text pooled), with the clinicians' own agreement on
    the same units beside it. Default statistic: Gwet's AC1."""
    answers = load_answers(store, questions, filters)
    report = compare_answers(answers, reference, judge, by=("criterion",), forest_key=key,
                             n_boot=n_boot, seed=seed)
    return report.breakdowns[0]
