"""Prediction-powered estimates of a metric per model, from the store: what
``carelens ppi``, the Agreement screen's PPI panel and the leaderboard's PPI column show.

    report = ppi_report(store, "accuracy", human="Dr. Mei Tanaka", machine="demo:mapper@v2")
    print(ppi_json(report))        # or format_ppi_text(report)

For each model: the PPI++ estimate (machine labels on every item, corrected
by the clinicians' labels), the clinicians-only estimate and the machine-only
estimate, each with its 95% interval; how many items were labelled and how the
labels were sampled (``labels.ppi.sampling``). Labels drawn uniformly (or assumed
to be) use ``labels.ppi.estimators.ppi_mean`` and ``classical_mean`` (``ppi-python``'s
formulas); labels from a round with unequal inclusion probabilities use the
design estimators, weighting each label by 1/probability.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from labels.compare.answers import Filters
from labels.ppi.calibration import FOLDS, MIN_LABELS, cross_fitted
from labels.ppi.estimators import (
    MeanEstimate,
    classical_mean,
    design_classical_mean,
    design_ppi_mean,
    machine_mean,
    ppi_mean,
)
from labels.ppi.finite import Labelled, finite_ppi_mean
from labels.ppi.readings import METRICS, PHASES, MetricReadings, Readings, read_metric
from labels.ppi.sampling import MODES, Sampling, resolve_sampling, round_designs
from labels.ppi.sequential import ANYTIME_FROM, Anytime, Draws, sequential_ppi_mean
from labels.provenance import Digest, provenance
from store import Store

METHOD = ("PPI++ (Angelopoulos, Duchi & Zrnic 2023): the machine's reading of every item, "
          "corrected by the clinicians' labels, the machine's weight lambda power-tuned. The "
          "estimand is the mean over the items here (a finite population): labels weighted by "
          "1/probability within strata (Hajek), the variance the draw's own (finite-population "
          "correction), a Student t interval with Satterthwaite's degrees of freedom "
          "(labels.ppi.finite); an active round's labels in the order drawn "
          "(labels.ppi.sequential). --estimand superpopulation gives ppi-python 0.2.3's "
          "ppi_mean_ci and classical_mean_ci.")
MACHINE_ONLY_NOTE = ("the machine-only interval covers the sampling of items only, not the "
                     "machine's own errors: its centre is off by whatever the machine gets wrong")
ESTIMANDS = ("finite", "superpopulation")
CALIBRATIONS = ("auto", "off", "isotonic", "logistic")
DEFAULT_TARGET = 0.05
"""The half-width "enough" is measured against when none is given (nor set on the round)."""


@dataclass(frozen=True)
class AnytimeReading:
    """The interval valid at every look, and whether it is enough."""

    interval: Anytime | None
    target: float
    reason: str | None = None
    """Why there is none (too few answers in order, a design without a sequence)."""
    waiting: int = 0
    """Answers given out of order, waiting for an earlier draw's answer."""
    unsettled: int = 0
    """1 when the sequence stops at an item the clinicians answered without a settled value
    (their answers tie): adjudicating it lets the answers after it count."""

    @property
    def enough(self) -> bool:
        return self.interval is not None and self.interval.half_width <= self.target

    def words(self) -> str:
        """What the Rounds screen and ``carelens ppi --anytime`` say."""
        wait = (f" ({self.waiting} answers given out of order wait for an earlier one)"
                if self.waiting else "")
        if self.unsettled:
            wait += (" (the sequence waits at an item the clinicians answered without a "
                     "settled value: their answers tie; adjudicate it)")
        if self.interval is None:
            return f"no interval valid at every look yet: {self.reason}{wait}"
        a = self.interval
        if self.enough:
            return (f"enough for \u00b1 {a.half_width:.3f} at 95%: you may stop "
                    f"({a.answers} answers; valid whenever you look){wait}")
        return (f"\u00b1 {a.half_width:.3f} at 95% after {a.answers} answers (valid whenever you "
                f"look): not yet enough for \u00b1 {self.target:g}{wait}")


@dataclass
class ModelEstimate:
    """One model's three estimates of the metric."""

    model: str
    ppi: MeanEstimate
    classical: MeanEstimate
    machine_only: MeanEstimate
    n_labeled: int
    n_unlabeled: int
    sampling: Sampling
    prediction: str = "the machine's reading"
    """What PPI corrected: the machine's reading, or its confidence calibrated."""
    estimand: str = "finite"
    anytime: AnytimeReading | None = None

    @property
    def population_words(self) -> str:
        n = self.n_labeled + self.n_unlabeled
        if self.estimand == "superpopulation":
            return ("superpopulation: the model's rate on items like these (ppi-python's "
                    "estimand, no finite-population correction)")
        return f"the mean over these {n:,} items (finite population)"

    @property
    def design_words(self) -> str:
        how = {"without replacement": "a fixed number drawn without replacement"
               + (" in each stratum" if len(set(self.sampling.strata.values())) > 1 else ""),
               "Poisson": "independent draws (several rounds)"}
        if self.sampling.label == "active design":
            return "active: drawn one by one, followed in the order drawn"
        return f"{self.sampling.label}: {how.get(self.sampling.draw, self.sampling.draw)}"


@dataclass
class PPIReport:
    metric: str
    metric_name: str
    human: str
    machine: str
    question: str
    reference: str | None
    phase: str
    filters: Filters
    sampling_mode: str
    estimates: list[ModelEstimate]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)
    estimand: str = "finite"
    calibrate: str = "auto"


def _predictions(readings: Readings, sampling: Sampling, population: list[int],
                 labelled: list[int], calibrate: str):
    """(every item's prediction, the labelled items' own, words): the machine's reading, or
    its confidence or score calibrated against the labels, cross-fitted."""
    g = np.array([readings.machine[p] for p in population], dtype=float)
    g_lab = np.array([readings.machine[p] for p in labelled], dtype=float)
    if calibrate == "off" or not readings.scored:
        return g, g_lab, "the machine's reading", None
    if len(labelled) < MIN_LABELS:
        return g, g_lab, "the machine's reading", (
            f"the machine gives a confidence or score, but {len(labelled)} labels are too few "
            f"to calibrate it on (at least {MIN_LABELS}): its reading is used")
    scores = np.array([readings.score[p] if readings.score[p] is not None else readings.machine[p]
                       for p in population], dtype=float)
    where = {p: k for k, p in enumerate(population)}
    weights = [1 / sampling.probabilities[p] if p in sampling.probabilities else 1.0
               for p in labelled]
    fit = cross_fitted(scores, [where[p] for p in labelled],
                       [readings.human[p] for p in labelled], weights,
                       "auto" if calibrate == "auto" else calibrate)
    words = (f"the machine's confidence or score, calibrated against the clinicians "
             f"({fit.method}, cross-fitted over {FOLDS} folds)")
    return fit.population, fit.labelled, words, None


def _sequential(readings: Readings, sampling: Sampling, population: list[int],
                calibrate: str, planned: int | None, lam: float | None = None):
    where = {p: k for k, p in enumerate(population)}
    seq = sampling.sequence
    positions = np.array([where.get(p, -1) if p >= 0 else -1 for p in seq.positions], dtype=int)
    values = np.array([readings.human.get(p, np.nan) if p >= 0 else np.nan
                       for p in seq.positions], dtype=float)
    g = np.array([readings.machine[p] for p in population], dtype=float)
    scores = None
    if calibrate != "off" and readings.scored:
        scores = np.array([readings.score[p] if readings.score[p] is not None
                           else readings.machine[p] for p in population], dtype=float)
    return sequential_ppi_mean(g, [], [], Draws(positions, np.array(seq.probabilities),
                                                np.array(seq.variances)), values,
                               scores=scores, planned=planned, lam=lam,
                               calibration="logistic" if calibrate == "logistic" else "isotonic")


def _stuck_unsettled(readings: Readings, sampling: Sampling, run) -> int:
    """1 when the sequence stops at a draw whose clinicians' answers tie, else 0."""
    inside = [p for p in sampling.sequence.positions if p >= 0]
    if run.answered < len(inside):
        return int(inside[run.answered] in readings.unsettled)
    return 0


def _why_no_anytime(run, order: str) -> str:
    if run.answered < ANYTIME_FROM:
        return (f"{run.answered} answers in the order {order}; it is drawn from "
                f"{ANYTIME_FROM}")
    return ("every answer so far agrees with its correction: its width cannot be trusted "
            "yet")


def estimate_model(readings: Readings, sampling: Sampling, *, estimand: str = "finite",
                   calibrate: str = "auto", target: float | None = None,
                   planned: int | None = None) -> ModelEstimate:
    """The three estimates of one model's readings under its sampling (and the interval
    valid at every look, where the labels are a sequence)."""
    population = sampling.population
    labelled = [p for p in sampling.labelled]
    labelled_set = set(labelled)
    y = np.array([readings.human[p] for p in labelled])
    machine = machine_mean([readings.machine[p] for p in population])
    note = None
    target = target or sampling.target or DEFAULT_TARGET
    planned = planned or sampling.planned
    anytime = None
    if sampling.label == "active design":
        words = "the machine's reading" + (
            ", its confidence calibrated along the way" if calibrate != "off"
            and readings.scored else "")
        run = _sequential(readings, sampling, population, calibrate, planned)
        clinicians = _sequential(readings, sampling, population, "off", planned, lam=0.0).fixed
        ppi = run.fixed
        anytime = AnytimeReading(run.anytime, target, None if run.anytime else
                                 _why_no_anytime(run, "drawn"), run.waiting,
                                 _stuck_unsettled(readings, sampling, run))
        n_lab = run.answered
        return ModelEstimate(readings.model, ppi, clinicians, machine, n_lab,
                             len(population) - n_lab, sampling, words, "finite", anytime)
    f_unl = np.array([readings.machine[p] for p in population if p not in labelled_set])
    g_pop, g_lab, words, note = _predictions(readings, sampling, population, labelled, calibrate)
    if estimand == "superpopulation":
        where = {p: k for k, p in enumerate(population)}
        unlabelled = np.array([g_pop[where[p]] for p in population if p not in labelled_set])
        if sampling.uniform:
            ppi = ppi_mean(y, g_lab, unlabelled)
            classical = classical_mean(y, n_unlabeled=len(f_unl))
        else:
            pi = np.array([sampling.probabilities[p] for p in labelled])
            ppi = design_ppi_mean(y, g_lab, pi, unlabelled)
            classical = design_classical_mean(y, pi, n_unlabeled=len(f_unl))
    else:
        where = {p: k for k, p in enumerate(population)}
        big_n = len(population)
        pi = np.array([sampling.probabilities.get(p, len(labelled) / max(big_n, 1))
                       for p in labelled]) if not sampling.uniform else np.full(
            len(labelled), len(labelled) / max(big_n, 1))
        strata = (np.array([sampling.strata.get(p, "all") for p in population])
                  if sampling.strata else None)
        labels = Labelled(np.array([where[p] for p in labelled], dtype=int), y, pi, strata,
                          sampling.draw)
        ppi = finite_ppi_mean(g_pop, labels, predicted_labelled=g_lab)
        classical = finite_ppi_mean(g_pop, labels, predicted_labelled=g_lab, lam=0.0)
        if sampling.sequence is not None:
            run = _sequential(readings, sampling, population, calibrate,
                              planned or len(labelled))
            anytime = AnytimeReading(run.anytime, target, None if run.anytime else
                                     _why_no_anytime(run, "offered"), run.waiting,
                                     _stuck_unsettled(readings, sampling, run))
        else:
            anytime = AnytimeReading(None, target, "the labels are not one sequence (a "
                                     "stratified or weighted round, or several rounds): the "
                                     "fixed interval holds for one look only")
    if note:
        ppi = replace(ppi, note="; ".join(x for x in (ppi.note, note) if x))
    return ModelEstimate(readings.model, ppi, classical, machine, len(y), len(f_unl), sampling,
                         words, estimand, anytime)


def readings_digest(readings: MetricReadings) -> Digest:
    """The digest (``labels.provenance``) of every item's machine and clinician value a
    metric's estimates rest on."""
    digest = Digest()
    for model, r in readings.by_model.items():
        for position, uid in enumerate(r.item_uids):
            digest.add(readings.metric, model, uid, r.machine[position], r.human.get(position))
    return digest


def _provenance(readings: MetricReadings, filters: Filters, mode: str, store: Store,
                estimand: str, calibrate: str) -> dict:
    """Where the figures come from (``labels.provenance``)."""
    return provenance(
        readings_digest(readings), store=store, phase=readings.phase, filters=filters,
        what=f"prediction-powered estimate of {readings.name.lower()} per model",
        metric=readings.metric, human=readings.human, machine=readings.machine,
        question=readings.question, reference=readings.reference, answers=PHASES[readings.phase],
        sampling_mode=mode, estimand=estimand, calibrate=calibrate, method=METHOD,
        interval=("95%, Student t with Satterthwaite's degrees of freedom, the draw's own "
                  "variance with the finite-population correction" if estimand == "finite"
                  else "95%, normal approximation (CLT); t for labels drawn with unequal "
                       "probabilities"))


def ppi_report(
    store: Store,
    metric: str,
    human: str,
    machine: str,
    filters: Filters | None = None,
    *,
    phase: str = "blind",
    sampling: str = "auto",
    reference: str | None = None,
    question: str | None = None,
    estimand: str = "finite",
    calibrate: str = "auto",
    target: float | None = None,
    round_name: str | None = None,
) -> PPIReport:
    """The metric per model: PPI, clinicians-only and machine-only estimates with 95%
    intervals. ``human``: a clinician, ``group:majority`` or ``group:adjudicated``;
    ``machine``: a machine rater; ``phase``: ``blind`` (default: answers given before any
    machine label was seen) or ``current``; ``sampling``: auto | assume-uniform | design
    (``labels.ppi.sampling``); ``estimand``: finite (the mean over these items, the
    default) or superpopulation (ppi-python's); ``calibrate``: auto (calibrate the
    machine's confidence or score where it gives one) | off | isotonic | logistic;
    ``target``: the half-width the anytime interval is "enough" at (default: the round's,
    else 0.05); ``round_name``: the labels of that review round alone, drawn by its design.
    ValueError with a message for the user on bad input."""
    # The phase used is the one every output names (the filters' words included).
    filters = replace(filters or Filters(), phase=phase)
    if sampling not in MODES:
        raise ValueError(f"sampling is one of {', '.join(MODES)}, not {sampling!r}")
    if estimand not in ESTIMANDS:
        raise ValueError(f"the estimand is one of {', '.join(ESTIMANDS)}, not {estimand!r}")
    if calibrate not in CALIBRATIONS:
        raise ValueError(f"calibrate is one of {', '.join(CALIBRATIONS)}, not {calibrate!r}")
    if target is not None and not target > 0:
        raise ValueError("the target half-width must be a positive number, e.g. 0.05")
    readings = read_metric(store, metric, human, machine, filters, phase=phase,
                           reference=reference, question=question)
    designs = round_designs(store)
    round_id = None
    if round_name is not None:
        round_id = next((d.round_id for d in designs.values() if d.name == round_name), None)
        if round_id is None:
            known = ", ".join(sorted(repr(d.name) for d in designs.values())) or "none"
            raise ValueError(f"no review round named {round_name!r} with a recorded design "
                             f"(rounds with one: {known})")
    report = PPIReport(metric, METRICS[metric], human, machine, readings.question,
                       readings.reference, phase, filters, sampling, [], list(readings.notes),
                       estimand=estimand, calibrate=calibrate)
    for _, r in sorted(readings.by_model.items()):
        report.estimates.append(estimate_model(r, resolve_sampling(r, designs, sampling,
                                                                   round_id),
                                               estimand=estimand, calibrate=calibrate,
                                               target=target))
    if not report.estimates:
        report.notes.append(nothing_read(readings, machine))
    if phase == "current":
        report.warnings.append("clinicians' latest answers are used, including answers changed "
                               "after a machine label was shown: they may lean toward it")
    for w in dict.fromkeys(e.sampling.warning for e in report.estimates if e.sampling.warning):
        report.warnings.append(w)
    report.notes.append(MACHINE_ONLY_NOTE)
    report.provenance = _provenance(readings, filters, sampling, store, estimand, calibrate)
    return report


def nothing_read(readings: MetricReadings, machine: str) -> str:
    """Why no model has an estimate: what the readings left out, in words."""
    if readings.notes:
        return ("no item is left to estimate from: every one the machine read is left out, "
                "as the notes above say")
    return f"{machine} read no item for this metric under these filters"


EDGE_NOTE = ("an interval runs past 0 or 1: the normal approximation is poor this near the "
             "edge (few events); read it as 'close to the edge', not as its exact limits")


def past_the_edge(*estimates: MeanEstimate) -> bool:
    """Whether an interval of a share runs below 0 or above 1."""
    return any(e.ci_low is not None and (e.ci_low < -1e-9 or e.ci_high > 1 + 1e-9)
               for e in estimates)


def _estimate_json(e: MeanEstimate) -> dict:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high}


def _anytime_json(a: AnytimeReading | None) -> dict | None:
    if a is None:
        return None
    if a.interval is None:
        return {"low": None, "high": None, "half_width": None, "answers": None,
                "target": a.target, "enough": False, "reason": a.reason, "words": a.words()}
    i = a.interval
    return {"low": i.low, "high": i.high, "half_width": i.half_width, "answers": i.answers,
            "planned": i.planned, "target": a.target, "enough": a.enough,
            "waiting": a.waiting, "words": a.words()}


def ppi_dict(report: PPIReport) -> dict:
    """The report as the JSON ``carelens ppi --json`` prints."""
    estimates = []
    for e in report.estimates:
        notes = [n for n in (e.ppi.undefined_reason, e.ppi.note, e.classical.note) if n]
        if past_the_edge(e.ppi, e.classical, e.machine_only):
            notes.append(EDGE_NOTE)
        estimates.append({
            "model": e.model,
            "metric": report.metric,
            "ppi": _estimate_json(e.ppi),
            "classical": _estimate_json(e.classical),
            "machine_only": _estimate_json(e.machine_only),
            "n_labeled": e.n_labeled,
            "n_unlabeled": e.n_unlabeled,
            "population": e.n_labeled + e.n_unlabeled,
            "estimand": e.population_words,
            "sampling": e.sampling.label,
            "design": e.design_words,
            "prediction": e.prediction,
            "lambda": e.ppi.lam,
            "rounds": e.sampling.rounds,
            "anytime": _anytime_json(e.anytime),
            "notes": list(dict.fromkeys(notes + e.sampling.notes)),
        })
    return {"estimates": estimates, "warnings": report.warnings, "notes": report.notes,
            "provenance": report.provenance}


def ppi_json(report: PPIReport) -> str:
    return json.dumps(ppi_dict(report), indent=2, ensure_ascii=False)


def _fmt(e: MeanEstimate) -> str:
    if e.value is None:
        return f"— ({e.undefined_reason})"
    return f"{e.value:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]"


def format_ppi_text(report: PPIReport, anytime: bool = False) -> str:
    """The report as lines for a terminal (``anytime``: with the interval valid at every
    look, and whether it is enough)."""
    lines = [f"{report.metric_name}: prediction-powered estimates per model",
             f"clinicians: {report.human}",
             f"machine: {report.machine}; question: {report.question}"
             + (f"; scored against {report.reference}" if report.reference else ""),
             f"filters: {report.filters.describe()}", ""]
    for e in report.estimates:
        lam = "" if e.ppi.lam is None else f", lambda {e.ppi.lam:.2f}"
        lines += [f"{e.model}  ({e.n_labeled} labelled, {e.n_unlabeled} machine-only; "
                  f"sampling: {e.sampling.label}{lam})",
                  f"  estimand: {e.population_words}",
                  f"  design: {e.design_words}; corrected: {e.prediction}",
                  f"  PPI            {_fmt(e.ppi)}",
                  f"  clinicians     {_fmt(e.classical)}",
                  f"  machine only   {_fmt(e.machine_only)}"]
        if anytime and e.anytime is not None:
            i = e.anytime.interval
            shown = f"[{i.low:.3f}, {i.high:.3f}]: " if i is not None else ""
            lines.append(f"  anytime 95%    {shown}{e.anytime.words()}")
        edge = [EDGE_NOTE] if past_the_edge(e.ppi, e.classical, e.machine_only) else []
        lines += [f"  note: {n}" for n in dict.fromkeys(
            [x for x in (e.ppi.note,) if x] + edge + e.sampling.notes)]
    lines.append("")
    lines += [f"warning: {w}" for w in report.warnings]
    lines += [f"note: {n}" for n in report.notes]
    lines.append("95% intervals: " + (
        "Student t, the draw's own variance with the finite-population correction."
        if report.estimand == "finite" else "normal approximation (ppi-python's)."))
    if anytime:
        lines.append("anytime: a confidence sequence (Waudby-Smith et al. 2024), valid however "
                     "often it is looked at; drawn from 60 answers in the order drawn or offered.")
    return "\n".join(lines)
