"""Would the mapper have changed the leaderboard?

CARE-Bench scores a model by reading each of its responses as one escalation
label and comparing that with the prefix's reference label. Who reads the
response (the clinicians, or the mapper in one of its prompt versions) and
what the reference is (the dataset's gold label, or the clinicians' majority
on the prefix) are both choices; a *labelling* is one pair of them. For each
labelling this computes the triage metrics per model (``labels.triage``), the
model ranking, and the rank correlation with the baseline labelling (the
first reference, responses read by the clinicians).

Every labelling scores the same responses: those every reader labelled and
whose prefix has a label under every reference (a prefix with a tied clinician
vote has no majority label, so its responses are left out under the gold
reference too), so a difference in ranking comes from the labels, not from
coverage; the report counts the responses left out, by reason. Also: each
mapper version's own ordered over- and under-triage, with the clinicians'
reading of the same responses as the truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from codebook import CAREBENCH, codebook
from labels.compare.answers import Answers, Filters, load_answers, without_cannot_assess
from labels.compare.questions import carebench_questions, question_set
from labels.compare.raters import MAJORITY, clinicians, columns_for, display_name, majority_labels
from labels.compare.raters import references as reference_raters
from labels.triage import RankCorrelation, RankedModel, TriageMetric, rank_correlation, rank_models
from labels.triage import triage_metrics as _triage_metrics
from store import Store


@dataclass
class Labelling:
    reference: str
    """Rater spec giving each prefix its reference label."""
    reader: str
    """Rater spec reading each response as a label."""
    name: str
    """In words: "read by clinicians, scored against carebench-gold"."""
    short: str
    """For chart axes and table columns: "clinicians · carebench-gold"."""
    metrics: dict[str, dict[str, TriageMetric]]
    """model -> metric key -> metric."""
    ranking: list[RankedModel]
    n_responses: int


@dataclass(frozen=True)
class RankShift:
    model: str
    before: float | None
    """Rank under the baseline labelling (1 = best; None when not ranked)."""
    after: float | None


@dataclass
class RankAgreement:
    baseline: str
    other: str
    correlation: RankCorrelation
    same_order: bool
    """The two rankings put the models in the same order."""
    same_reference: bool
    """Only the reader differs from the baseline: the mapper standing in for clinicians."""
    shifts: list[RankShift] = field(default_factory=list)
    """Each model's rank before and after, baseline order."""
    swaps_within_noise: bool | None = None
    """Every pair of models the two rankings order differently has overlapping 95%
    intervals under both labellings: the sample does not settle their order
    either way. None when no pair is swapped or an interval is missing."""


def _overlap(a: RankedModel, b: RankedModel) -> bool | None:
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        return None
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


def swaps_within_noise(baseline: list[RankedModel], other: list[RankedModel]) -> bool | None:
    """Whether every pair of models ordered differently by the two rankings
    overlaps (95% intervals) in both; None if no pair is swapped or unknown."""
    before = {r.model: r for r in baseline if r.rank is not None}
    after = {r.model: r for r in other if r.rank is not None}
    models = sorted(before.keys() & after.keys())
    verdicts = []
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            d1 = before[a].rank - before[b].rank
            d2 = after[a].rank - after[b].rank
            if d1 * d2 < 0:
                first, second = _overlap(before[a], before[b]), _overlap(after[a], after[b])
                verdicts.append(None if first is None or second is None else first and second)
    if not verdicts or any(v is None for v in verdicts):
        return None
    return all(verdicts)


@dataclass
class TriageReport:
    filters: Filters
    rank_by: str
    labellings: list[Labelling]
    correlations: list[RankAgreement]
    mapper_triage: dict[str, dict[str, TriageMetric]]
    """machine reader -> metric key -> its triage metrics with the clinicians' reading as truth."""
    models: list[str]
    notes: list[str] = field(default_factory=list)
    explanation: str | None = None
    left_out: dict[str, int] = field(default_factory=dict)
    """Responses left out of every labelling, by reason (a response can have several)."""
    ppi: PPIColumn | None = None
    """The prediction-powered column (:func:`add_ppi_column`)."""

    def labelling(self, name: str) -> Labelling | None:
        return next((x for x in self.labellings if x.name == name), None)


def _labels(answers: Answers, spec: str) -> dict[str, str]:
    """item uid -> the spec's label (a single column spec)."""
    names, columns, _ = columns_for(answers, spec)
    if len(names) != 1:
        raise ValueError(f"{display_name(spec)} is a group of raters; give one label per item")
    return {answers.units[u].item_uid: v for u, v in columns[0].items()
            if answers.units[u].target == ""}


def _tied_prefixes(answers: Answers) -> set[str]:
    """Item uids of the prefixes whose clinician vote is tied (no majority label)."""
    _, ties = majority_labels(answers)
    return {answers.units[u].item_uid for u in ties if answers.units[u].target == ""}


def _reader_name(spec: str) -> str:
    return "clinicians" if spec == MAJORITY else display_name(spec)


def rank_shifts(baseline: Labelling, other: Labelling) -> list[RankShift]:
    """Each model's rank under the baseline and under the other labelling."""
    after = {r.model: r.rank for r in other.ranking}
    return [RankShift(r.model, r.rank, after.get(r.model)) for r in baseline.ranking]


def _reference_name(spec: str) -> str:
    return "the clinicians' majority" if spec == MAJORITY else display_name(spec)


def _as_filters(filters: Filters | Mapping | None) -> Filters:
    """The filters as the dataclass: a mapping such as the command line's
    ``{"dataset": "demo"}`` is read by ``labels.comparisons.filters_from``, the one
    place that reads filters from a mapping (imported here, when needed: that module
    imports this one)."""
    if filters is None or isinstance(filters, Filters):
        return filters or Filters()
    from labels.comparisons import filters_from

    return filters_from(filters)


def _datasets_answered(store: Store, prefix_q: str, response_q: str) -> list[str]:
    """The datasets that hold answers to the CARE-Bench questions, for saying what a
    dataset filter could have been."""
    found = {u.dataset for q in (prefix_q, response_q) for u in load_answers(store, q).units}
    return sorted(found - {None, ""})


def _escalation_answers(store: Store, question: str, filters: Filters) -> tuple[Answers, int]:
    """The question's answers with every "cannot assess" left out, and how many were."""
    qs = question_set(store, question)
    return without_cannot_assess(load_answers(store, qs, filters), qs)


def triage_comparison(
    store: Store,
    filters: Filters | Mapping | None = None,
    *,
    references: list[str] | None = None,
    readers: list[str] | None = None,
    rank_by: str = "macro_f1",
) -> TriageReport:
    """Triage metrics per model under each labelling (reference x reader), the model
    ranking under each (by ``rank_by``) and their rank correlation with the baseline.

    Defaults: references = the reference raters of the prefix question (gold; not the
    settled answers, which cover only disputed prefixes), then the clinicians' majority;
    readers = the clinicians' majority on the response, then every machine rater of the
    response question. The model filter is ignored (a leaderboard needs every model).
    Every labelling scores the same responses; ``left_out`` and the notes say how many
    were left out and why. "Cannot assess" answers never enter (triage compares
    escalation labels), whatever ``include_cannot_assess`` says; a note counts them.
    ``filters`` may be a mapping (``{"dataset": "demo"}``), as
    ``agreement_bundle`` takes it; an unknown filter name is a ValueError."""
    filters = _as_filters(filters)
    # Read with "cannot assess" counted, only to say how many are left out: triage
    # compares escalation labels, so they never enter it, whatever the filter says.
    model_free = replace(filters, model=None, include_cannot_assess=True)
    prefix_q, response_q = carebench_questions()
    order = list(codebook(CAREBENCH).codes)
    prefix_answers, cannot_prefix = _escalation_answers(store, prefix_q, model_free)
    response_answers, cannot_response = _escalation_answers(store, response_q, model_free)
    notes = []
    if filters.model:
        notes.append("the model filter is ignored here: a leaderboard ranks every model")
    if cannot := cannot_prefix + cannot_response:
        notes.append(
            f"{cannot} 'cannot assess' answer{'' if cannot == 1 else 's'} ({cannot_prefix} on "
            f"prefixes, {cannot_response} on responses) left out: triage compares escalation "
            "labels, and 'cannot assess' is not one"
            + ("; counting 'cannot assess' as an answer does not apply here"
               if filters.include_cannot_assess else ""))
    if references is None:
        references = reference_raters(prefix_answers)
        if clinicians(prefix_answers):
            references.append(MAJORITY)
    if readers is None:
        readers = ([MAJORITY] if clinicians(response_answers) else [])
        readers += response_answers.of_kind("machine")
    report = TriageReport(filters, rank_by, [], [], {}, [], notes)
    if filters.dataset and not prefix_answers.units and not response_answers.units:
        known = _datasets_answered(store, prefix_q, response_q)
        report.explanation = (
            f"No CARE-Bench answers in dataset {filters.dataset!r}; "
            + (f"datasets with some: {', '.join(known)}." if known else "no dataset has any yet.")
        )
        return report
    if not references or not readers:
        missing = "no reference label on the prefixes" if not references else (
            "nobody has read the responses as labels")
        report.explanation = (
            f"Triage metrics need a reference label for each prefix and a label for each "
            f"response; {missing} yet."
        )
        return report
    read = {spec: _labels(response_answers, spec) for spec in readers}
    refs = {spec: _labels(prefix_answers, spec) for spec in references}
    response_units = {u.item_uid: u for u in response_answers.units if u.target == ""}
    shared = [uid for uid in sorted(response_units) if all(uid in read[s] for s in readers)]
    # One response set for every labelling: a reference without a label on a prefix takes
    # its responses out of every labelling, not just its own.
    scored = [uid for uid in shared
              if all(response_units[uid].parent_uid in refs[r] for r in references)]
    if unread := len(response_units) - len(shared):
        report.left_out["without a label from every reader"] = unread
        notes.append(f"{unread} responses without a label from every reader are left out")
    tied = _tied_prefixes(prefix_answers) if MAJORITY in references else set()
    for reference in references:
        missing = [uid for uid in shared if response_units[uid].parent_uid not in refs[reference]]
        if not missing:
            continue
        why = f"no reference label from {_reference_name(reference)}"
        if reference == MAJORITY:
            n_tied = sum(1 for uid in missing if response_units[uid].parent_uid in tied)
            why += (f" ({n_tied} with a tied clinician vote on the prefix, "
                    f"{len(missing) - n_tied} with no clinician answer on it)")
        report.left_out[f"no reference label from {_reference_name(reference)}"] = len(missing)
        notes.append(f"{len(missing)} responses have {why}: left out under every labelling")
    if len(scored) < len(response_units):
        notes.append(f"every labelling scores the same {len(scored)} of "
                     f"{len(response_units)} responses, so a change in ranking comes from the "
                     "labels, not from which responses were scored")
    for reference in references:
        ref = refs[reference]
        for reader in readers:
            by_model: dict[str, tuple[list, list]] = {}
            for uid in scored:
                model = response_units[uid].model or "(no model)"
                gold, said = by_model.setdefault(model, ([], []))
                gold.append(ref[response_units[uid].parent_uid])
                said.append(read[reader][uid])
            metrics = {m: _triage_metrics(g, p, order) for m, (g, p) in sorted(by_model.items())}
            name = f"read by {_reader_name(reader)}, scored against {_reference_name(reference)}"
            ref_short = "clinicians' majority" if reference == MAJORITY else reference
            short = f"{_reader_name(reader)} · {ref_short}"
            report.labellings.append(Labelling(
                reference, reader, name, short, metrics,
                rank_models(metrics, rank_by) if metrics else [], len(scored),
            ))
    report.models = sorted({m for x in report.labellings for m in x.metrics})
    if report.labellings:
        base = report.labellings[0]
        for other in report.labellings[1:]:
            corr = rank_correlation(base.ranking, other.ranking)
            same = [r.model for r in base.ranking] == [r.model for r in other.ranking]
            report.correlations.append(RankAgreement(
                base.name, other.name, corr, same, other.reference == base.reference,
                rank_shifts(base, other), swaps_within_noise(base.ranking, other.ranking),
            ))
    if MAJORITY in readers:
        truth = read[MAJORITY]
        for reader in readers:
            if reader == MAJORITY:
                continue
            both = [uid for uid in sorted(truth) if uid in read[reader]]
            report.mapper_triage[reader] = _triage_metrics(
                [truth[u] for u in both], [read[reader][u] for u in both], order
            )
    report.notes = list(dict.fromkeys(notes))
    add_ppi_column(store, report)
    return report


# -- the PPI column (labels.ppi_report), kept apart: one call from triage_comparison ---------

@dataclass(frozen=True)
class PPICell:
    """One model's prediction-powered estimate on the leaderboard."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_labeled: int
    n_unlabeled: int
    sampling: str
    """How the clinicians' labels were sampled (``labels.sampling``)."""


@dataclass
class PPIColumn:
    """Each model's metric from the machine's reading of every response, corrected by
    the clinicians' blind reading of some (``carelens ppi``)."""

    metric: str
    human: str
    machine: str | None
    cells: dict[str, PPICell] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    explanation: str | None = None
    """Why there is no column (no machine reading, no clinician reading)."""


def add_ppi_column(store: Store, report: TriageReport) -> None:
    """The leaderboard's PPI column: the ranking metric (accuracy when it is not a share,
    as macro-F1 is not) estimated by PPI from the busiest machine reader and the
    clinicians' majority, blind answers, under the report's filters (not its phase:
    PPI uses blind answers)."""
    from labels.ppi_readings import default_machine
    from labels.ppi_report import ppi_report
    from labels.triage import SHARE_KEYS

    if report.explanation:
        return
    metric = report.rank_by if report.rank_by in SHARE_KEYS else "accuracy"
    filters = replace(report.filters, model=None, phase=None, include_cannot_assess=False)
    try:
        machine = default_machine(store, metric)
        ppi = ppi_report(store, metric, MAJORITY, machine, filters)
    except ValueError as exc:
        report.ppi = PPIColumn(metric, MAJORITY, None, explanation=str(exc))
        return
    report.ppi = PPIColumn(metric, MAJORITY, machine, {
        e.model: PPICell(e.ppi.value, e.ppi.ci_low, e.ppi.ci_high, e.n_labeled, e.n_unlabeled,
                         e.sampling.label) for e in ppi.estimates}, list(ppi.warnings))


def ppi_column_lines(column: PPIColumn | None) -> list[str]:
    """The PPI column as lines of text (``carelens triage-metrics``)."""
    if column is None:
        return []
    title = (f"PPI {column.metric}: read by {column.machine or 'no machine'}, corrected by "
             f"{display_name(column.human).lower()} (blind answers)")
    if column.explanation:
        return ["", title, f"  {column.explanation}"]
    lines = ["", title]
    for model, c in column.cells.items():
        value = "—" if c.value is None else f"{c.value:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"
        lines.append(f"  {model}: {value} ({c.n_labeled} labelled, {c.n_unlabeled} machine-only;"
                     f" {c.sampling})")
    return lines + [f"  warning: {w}" for w in column.warnings]

