"""The leaderboard: each model scored under each *labelling*, and would the mapper have
changed it?

CARE-Bench scores a model by reading each of its responses as one escalation
label and comparing that with the prefix's reference label. Who reads the
response (the clinicians, or the mapper in one of its prompt versions) and
what the reference is (the dataset's gold label, or the clinicians' majority
on the prefix) are both choices; a *labelling* is one pair of them. A model may
also give its labels directly (a ``label-csv`` submission: a machine rater's labels
on the prefix question); those are its predictions under every reader.

Each labelling scores each model on everything it covers: every response the
reader labelled whose prefix has a reference label. Beside every metric,
coverage says what was not scored (``Coverage``): failed generations, responses
the reader did not label, prefixes without a reference label. A failed
generation (or a prefix a submission gave no label) is a *missing prediction*:
the CARE-Bench scorer's rule for it was not published, so the metrics it changes
are given both ways (``labels.triage.MISSING_RULES``): left out (the ranking's),
and counted against the model. ``common=True`` gives the older comparison
instead: only the responses every reader labelled and every reference covers,
so that a change of ranking comes from the labels alone.

Per labelling, each pair of models is also compared directly (``paired``): the
difference of the ranking metric with a paired bootstrap interval over cases,
McNemar's test for accuracy, and each model's probability of holding its rank.

Every "model" here is a run (``store.runs``): a model's runs under two protocols, or two
attempts, are ranked apart, each by its run's label (the model alone while it has one run).

Extending: a new per-model column is a new ``Labelling`` field keyed by model,
filled in :func:`_score_labelling` (``coverage`` and ``missing_as_wrong`` are
built that way).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from codebook import CAREBENCH, codebook
from labels.compare.answers import (
    CATEGORY_FIELDS,
    Answers,
    Filters,
    filters_from,
    load_answers,
    without_cannot_assess,
)
from labels.compare.collector import with_collector_paused
from labels.compare.paired import PairedComparison, paired_comparison
from labels.compare.questions import carebench_questions, question_set
from labels.compare.raters import MAJORITY, clinicians, columns_for, display_name, majority_labels
from labels.compare.raters import references as reference_raters
from labels.provenance import Digest, answers_digest
from labels.triage import (
    MISSING_SENSITIVE,
    RankCorrelation,
    RankedModel,
    TriageMetric,
    rank_correlation,
    rank_models,
    triage_metrics,
    triage_tables,
)
from store import Store

RESPONSES, DIRECT = "responses", "direct labels"
"""Where a model's predictions come from: its responses read by the reader, or the
labels it submitted directly (``label-csv``)."""


@dataclass(frozen=True)
class Coverage:
    """What one model's scores under one labelling rest on."""

    total: int
    """Responses of the model under the filters (a direct submission: the prefixes of
    the datasets it labelled)."""
    scored: int
    """With a prediction and a reference label: what the metrics are computed on."""
    failed: int
    """Failed generations (a submission: prefixes it gave no label): missing predictions."""
    unlabelled: int
    """Responses the reader gave no label (not scored; not held against the model)."""
    no_reference: int
    """Responses whose prefix has no reference label under this labelling."""

    @property
    def share(self) -> float | None:
        return self.scored / self.total if self.total else None

    def words(self) -> str:
        parts = [f"{self.scored} of {self.total} scored"]
        for n, what in ((self.failed, "failed"), (self.unlabelled, "unlabelled"),
                        (self.no_reference, "no reference label")):
            if n:
                parts.append(f"{n} {what}")
        return ", ".join(parts)


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
    """model -> metric key -> metric (missing predictions left out)."""
    ranking: list[RankedModel]
    n_responses: int
    """Responses (and directly labelled prefixes) scored, all models together."""
    coverage: dict[str, Coverage] = field(default_factory=dict)
    """model -> what its metrics rest on."""
    missing_as_wrong: dict[str, dict[str, TriageMetric]] = field(default_factory=dict)
    """model -> the metrics a missing prediction changes, with missing predictions counted
    against the model (only for models with a missing prediction)."""
    sources: dict[str, str] = field(default_factory=dict)
    """model -> "responses" | "direct labels"."""
    paired: PairedComparison | None = None
    """Every pair of models by the ranking metric, paired over cases."""


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
    """Responses left out of every labelling, by reason (the common-set comparison only)."""
    common: bool = False
    """Every labelling scored the same responses (``common=True``)."""
    n_boot: int = 1000
    seed: int = 0
    data: Digest | None = field(default=None, repr=False, compare=False)
    """The answers the report was computed from (for its provenance)."""
    database_file: str | None = None
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


def _datasets_answered(store: Store, prefix_q: str, response_q: str) -> list[str]:
    """The datasets that hold answers to the CARE-Bench questions, for saying what a
    dataset filter could have been."""
    found = {u.dataset for q in (prefix_q, response_q) for u in load_answers(store, q).units}
    return sorted(found - {None, ""})


def _escalation_answers(store: Store, question: str, filters: Filters) -> tuple[Answers, int]:
    """The question's answers with every "cannot assess" left out, and how many were."""
    qs = question_set(store, question)
    return without_cannot_assess(load_answers(store, qs, filters), qs)


@dataclass(frozen=True)
class _Scored:
    """One prediction a labelling scores: a response (or a directly labelled prefix)."""

    uid: str
    model: str
    prefix: str
    case: str
    failed: bool


def _responses(store: Store, filters: Filters) -> list[_Scored]:
    """Every response item under the filters (the model filter ignored), failed
    generations included: what a model was asked to answer. Each is scored as its run's
    (`store.runs`): two runs of one model (two protocols, two attempts) are two rows of
    the leaderboard, each named by its run's label."""
    from store.runs import run_label_map

    where, params = ["i.kind = 'response'"], []
    for column, value in (("i.split", filters.split), ("i.round_id", filters.round_id),
                          ("d.name", filters.dataset)):
        if value not in (None, ""):
            where.append(f"{column} = ?")
            params.append(value)
    rows = store.query(
        f"""SELECT i.uid, i.model, i.run_id, i.failed, p.uid AS prefix,
                   COALESCE(i.case_id, p.case_id, p.uid) AS case_id, p.meta AS prefix_meta
            FROM items i JOIN datasets d ON d.id = i.dataset_id
            JOIN items p ON p.id = i.parent_id
            WHERE {' AND '.join(where)} ORDER BY i.id""", params)
    labels = run_label_map(store.conn, "response")
    out = []
    for r in rows:
        if filters.category and _category(r["prefix_meta"]) != filters.category:
            continue
        model = labels.get(r["run_id"]) or r["model"] or "(no model)"
        out.append(_Scored(r["uid"], model, r["prefix"], r["case_id"], bool(r["failed"])))
    return out


def _category(meta: str | None) -> str | None:
    data = json.loads(meta or "{}")
    return next((str(data[f]) for f in CATEGORY_FIELDS if data.get(f) not in (None, "")), None)


def _direct_predictions(prefix_answers: Answers) -> tuple[dict[str, dict[str, str]], list]:
    """Direct-label submissions: machine raters' labels on the prefix question, per
    model; and every prefix unit (its uid, case and dataset) they could have labelled."""
    direct = {name: {prefix_answers.units[u].item_uid: v for u, v in col.items()
                     if prefix_answers.units[u].target == ""}
              for name in prefix_answers.of_kind("machine")
              for col in [prefix_answers.values[name]]}
    prefixes = [u for u in prefix_answers.units if u.target == ""]
    return direct, prefixes


@with_collector_paused
def triage_comparison(
    store: Store,
    filters: Filters | Mapping | None = None,
    *,
    references: list[str] | None = None,
    readers: list[str] | None = None,
    rank_by: str = "macro_f1",
    common: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> TriageReport:
    """Triage metrics per model under each labelling (reference x reader), the model
    ranking under each (by ``rank_by``), their rank correlation with the baseline and the
    paired comparison of every pair of models.

    Defaults: references = the reference raters of the prefix question (gold; not the
    settled answers, which cover only disputed prefixes), then the clinicians' majority;
    readers = the clinicians' majority on the response, then every machine rater of the
    response question. The model filter is ignored (a leaderboard needs every model).
    Each labelling scores each model on what it covers (``Labelling.coverage``); with
    ``common`` only on the responses every reader labelled and every reference covers.
    "Cannot assess" answers never enter (triage compares escalation labels), whatever
    ``include_cannot_assess`` says; a note counts them. ``filters`` may be a mapping
    (``{"dataset": "demo"}``); an unknown filter name is a ValueError."""
    filters = filters_from(filters)
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
    report = TriageReport(filters, rank_by, [], [], {}, [], notes, common=common, n_boot=n_boot,
                          seed=seed, data=answers_digest(prefix_answers, response_answers),
                          database_file=prefix_answers.database_file)
    if filters.dataset and not prefix_answers.units and not response_answers.units:
        known = _datasets_answered(store, prefix_q, response_q)
        report.explanation = (
            f"No CARE-Bench answers in dataset {filters.dataset!r}; "
            + (f"datasets with some: {', '.join(known)}." if known else "no dataset has any yet.")
        )
        return report
    direct, prefix_units = _direct_predictions(prefix_answers)
    if not references or not (readers or direct):
        missing = "no reference label on the prefixes" if not references else (
            "nobody has read the responses as labels")
        report.explanation = (
            f"Triage metrics need a reference label for each prefix and a label for each "
            f"response; {missing} yet."
        )
        return report
    read = {spec: _labels(response_answers, spec) for spec in readers}
    refs = {spec: _labels(prefix_answers, spec) for spec in references}
    responses = _responses(store, filters)
    if common:
        responses = _common_set(report, responses, read, refs, readers, references,
                                prefix_answers)
    elif any(r.failed for r in responses):
        n_failed = sum(r.failed for r in responses)
        notes.append(f"{n_failed} failed generation{'' if n_failed == 1 else 's'}: missing "
                     "predictions, shown in coverage and, where they change a metric, "
                     "scored both ways (left out; counted against the model)")
    scoped = _direct_scope(direct, prefix_units)
    for reference in references:
        for reader in readers or [None]:
            report.labellings.append(_score_labelling(
                reference, reader, refs[reference], read.get(reader, {}), responses,
                direct, scoped, order, rank_by, n_boot, seed, common))
    if direct:
        names = ", ".join(sorted(direct))
        notes.append(f"direct-label submission{'' if len(direct) == 1 else 's'} ({names}): "
                     "the model's own label of each prefix, the same under every reader")
    if MAJORITY in references:
        tied = _tied_prefixes(prefix_answers)
        if tied:
            notes.append(f"{len(tied)} prefix{'' if len(tied) == 1 else 'es'} with a tied "
                         "clinician vote ha" + ("s" if len(tied) == 1 else "ve")
                         + " no reference label from the clinicians' majority: their "
                         "responses are not scored under it (coverage counts them)")
    report.models = sorted({m for x in report.labellings for m in x.metrics})
    _correlations(report)
    if MAJORITY in readers:
        truth = read[MAJORITY]
        case_of = {r.uid: r.case for r in responses}
        for reader in readers:
            if reader == MAJORITY:
                continue
            both = [uid for uid in sorted(truth) if uid in read[reader]]
            report.mapper_triage[reader] = triage_metrics(
                [truth[u] for u in both], [read[reader][u] for u in both], order,
                n_boot=n_boot, seed=seed, clusters=[case_of.get(u, u) for u in both])
    report.notes = list(dict.fromkeys(notes))
    add_ppi_column(store, report)
    return report


def _direct_scope(direct: dict[str, dict[str, str]], prefix_units) -> dict[str, list]:
    """Each submission's prefixes: those of the datasets it labelled any prefix of."""
    out = {}
    for model, labels in direct.items():
        datasets = {u.dataset for u in prefix_units if u.item_uid in labels}
        out[model] = [u for u in prefix_units if u.dataset in datasets]
    return out


def _common_set(report, responses, read, refs, readers, references, prefix_answers):
    """The responses every reader labelled and every reference covers, with the notes
    and ``left_out`` of what was left out (the common-set comparison)."""
    notes = report.notes
    live = [r for r in responses if not r.failed]
    if failed := len(responses) - len(live):
        report.left_out["failed generations"] = failed
        notes.append(f"{failed} failed generations are left out")
    shared = [r for r in live if all(r.uid in read[s] for s in readers)]
    scored = [r for r in shared if all(r.prefix in refs[x] for x in references)]
    if unread := len(live) - len(shared):
        report.left_out["without a label from every reader"] = unread
        notes.append(f"{unread} responses without a label from every reader are left out")
    tied = _tied_prefixes(prefix_answers) if MAJORITY in references else set()
    for reference in references:
        missing = [r for r in shared if r.prefix not in refs[reference]]
        if not missing:
            continue
        why = f"no reference label from {_reference_name(reference)}"
        if reference == MAJORITY:
            n_tied = sum(1 for r in missing if r.prefix in tied)
            why += (f" ({n_tied} with a tied clinician vote on the prefix, "
                    f"{len(missing) - n_tied} with no clinician answer on it)")
        report.left_out[f"no reference label from {_reference_name(reference)}"] = len(missing)
        notes.append(f"{len(missing)} responses have {why}: left out under every labelling")
    if len(scored) < len(responses):
        notes.append(f"every labelling scores the same {len(scored)} of {len(responses)} "
                     "responses, so a change in ranking comes from the labels, not from which "
                     "responses were scored")
    return scored


def _score_labelling(reference, reader, ref, said, responses, direct, scoped, order, rank_by,
                     n_boot, seed, common) -> Labelling:
    """One labelling: each model's predictions against the reference, on what it covers."""
    import numpy as np

    rows: dict[str, list[tuple[str, str | None, str, str]]] = {}  # model -> (gold, pred, case, prefix)
    coverage: dict[str, list[int]] = {}  # model -> [total, failed, unlabelled, no_reference]
    sources: dict[str, str] = {}
    # Each prediction counts once: no reference label, else failed (missing), else not
    # labelled by the reader, else scored.
    for r in responses:
        counts = coverage.setdefault(r.model, [0, 0, 0, 0])
        sources[r.model] = RESPONSES
        counts[0] += 1
        if r.prefix not in ref:
            counts[3] += 1
            continue
        if r.failed:
            counts[1] += 1
        elif r.uid not in said:
            counts[2] += 1
            continue
        rows.setdefault(r.model, []).append(
            (ref[r.prefix], None if r.failed else said[r.uid], r.case, r.prefix))
    for model, labels in direct.items():
        sources[model] = DIRECT
        counts = coverage.setdefault(model, [0, 0, 0, 0])
        for unit in scoped[model]:
            counts[0] += 1
            prediction = labels.get(unit.item_uid)
            if unit.item_uid not in ref:
                counts[3] += 1
                continue
            if prediction is None:
                counts[1] += 1
                if common:
                    continue
            rows.setdefault(model, []).append(
                (ref[unit.item_uid], prediction, unit.case_id or unit.item_uid, unit.item_uid))
    metrics, wrong, cover = {}, {}, {}
    for model in sorted(coverage):
        mine = rows.get(model, [])
        gold, pred = [g for g, *_ in mine], [p for _, p, *_ in mine]
        cases = [c for *_, c, _ in mine]
        total, failed, unlabelled, no_ref = coverage[model]
        scored = sum(p is not None for p in pred)
        cover[model] = Coverage(total, scored, failed, unlabelled, no_ref)
        if not mine:
            continue
        metrics[model] = triage_metrics(gold, pred, order, n_boot=n_boot, seed=seed,
                                        clusters=cases)
        if any(p is None for p in pred):
            both = triage_metrics(gold, pred, order, n_boot=n_boot, seed=seed, clusters=cases,
                                  missing="wrong")
            wrong[model] = {k: both[k] for k in MISSING_SENSITIVE}
    reader_name = _reader_name(reader) if reader else "the models' own labels"
    name = f"read by {reader_name}, scored against {_reference_name(reference)}"
    ref_short = "clinicians' majority" if reference == MAJORITY else reference
    x = Labelling(reference, reader or "", name, f"{reader_name} · {ref_short}", metrics,
                  rank_models(metrics, rank_by) if metrics else [],
                  sum(c.scored for c in cover.values()), cover, wrong, sources)
    models = list(metrics)
    if len(models) >= 2 and rank_by != "coverage":
        # Per prefix (each model's responses to it), each prefix in its case: a pair of
        # models is compared on the prefixes both were scored on, resampled by case.
        case_of = {prefix: c for m in models for *_, c, prefix in rows[m]}
        prefixes = sorted(case_of)
        index = {p: i for i, p in enumerate(prefixes)}
        k = len(order)
        tables = np.zeros((len(prefixes), len(models), k, k + 1))
        correct: dict[str, dict[str, bool]] = {}
        for j, m in enumerate(models):
            mine = rows[m]
            unit_tables = triage_tables([g for g, *_ in mine], [p for _, p, *_ in mine], order)
            np.add.at(tables, ([index[p] for *_, p in mine], j), unit_tables)
            correct[m] = {prefix: g == p for g, p, _, prefix in mine if p is not None}
        x.paired = paired_comparison(tables, models, order, rank_by, correct=correct,
                                     clusters=[case_of[p] for p in prefixes],
                                     n_boot=n_boot, seed=seed)
    return x


def _correlations(report: TriageReport) -> None:
    if not report.labellings:
        return
    base = report.labellings[0]
    for other in report.labellings[1:]:
        corr = rank_correlation(base.ranking, other.ranking)
        same = [r.model for r in base.ranking] == [r.model for r in other.ranking]
        report.correlations.append(RankAgreement(
            base.name, other.name, corr, same, other.reference == base.reference,
            rank_shifts(base, other), swaps_within_noise(base.ranking, other.ranking),
        ))


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
    from labels.ppi_readings import SHARE_KEYS, default_machine
    from labels.ppi_report import ppi_report

    if report.explanation:
        return
    metric = report.rank_by if report.rank_by in SHARE_KEYS else "accuracy"
    filters = replace(report.filters, model=None, include_cannot_assess=False)
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

