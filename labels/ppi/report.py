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
from labels.ppi.estimators import (
    MeanEstimate,
    classical_mean,
    design_classical_mean,
    design_ppi_mean,
    machine_mean,
    ppi_mean,
)
from labels.ppi.readings import METRICS, PHASES, MetricReadings, Readings, read_metric
from labels.ppi.sampling import MODES, Sampling, resolve_sampling, round_designs
from labels.provenance import Digest, provenance
from store import Store

METHOD = ("PPI++ (Angelopoulos, Duchi & Zrnic 2023): the machine's labels on every item, "
          "corrected by the clinicians' labels, with the power-tuned weight lambda and a 95% "
          "normal interval; the same formulas as ppi-python 0.2.3's ppi_mean_ci and "
          "classical_mean_ci. Labels drawn with unequal probabilities are weighted by "
          "1/probability (Hajek), with a linearised standard error.")
MACHINE_ONLY_NOTE = ("the machine-only interval covers the sampling of items only, not the "
                     "machine's own errors: its centre is off by whatever the machine gets wrong")


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


def estimate_model(readings: Readings, sampling: Sampling) -> ModelEstimate:
    """The three estimates of one model's readings under its sampling."""
    population = sampling.population
    labelled = set(sampling.labelled)
    y = np.array([readings.human[p] for p in sampling.labelled])
    f_lab = np.array([readings.machine[p] for p in sampling.labelled])
    f_unl = np.array([readings.machine[p] for p in population if p not in labelled])
    machine = machine_mean([readings.machine[p] for p in population])
    if sampling.uniform:
        ppi = ppi_mean(y, f_lab, f_unl)
        classical = classical_mean(y, n_unlabeled=len(f_unl))
    else:
        pi = np.array([sampling.probabilities[p] for p in sampling.labelled])
        ppi = design_ppi_mean(y, f_lab, pi, f_unl)
        classical = design_classical_mean(y, pi, n_unlabeled=len(f_unl))
    return ModelEstimate(readings.model, ppi, classical, machine, len(y), len(f_unl), sampling)


def readings_digest(readings: MetricReadings) -> Digest:
    """The digest (``labels.provenance``) of every item's machine and clinician value a
    metric's estimates rest on."""
    digest = Digest()
    for model, r in readings.by_model.items():
        for position, uid in enumerate(r.item_uids):
            digest.add(readings.metric, model, uid, r.machine[position], r.human.get(position))
    return digest


def _provenance(readings: MetricReadings, filters: Filters, mode: str, store: Store) -> dict:
    """Where the figures come from (``labels.provenance``)."""
    return provenance(
        readings_digest(readings), store=store, phase=readings.phase, filters=filters,
        what=f"prediction-powered estimate of {readings.name.lower()} per model",
        metric=readings.metric, human=readings.human, machine=readings.machine,
        question=readings.question, reference=readings.reference, answers=PHASES[readings.phase],
        sampling_mode=mode, method=METHOD, interval="95%, normal approximation (CLT); t for "
                                                   "labels drawn with unequal probabilities")


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
) -> PPIReport:
    """The metric per model: PPI, clinicians-only and machine-only estimates with 95%
    intervals. ``human``: a clinician, ``group:majority`` or ``group:adjudicated``;
    ``machine``: a machine rater; ``phase``: ``blind`` (default: answers given before any
    machine label was seen) or ``current``; ``sampling``: auto | assume-uniform | design
    (``labels.ppi.sampling``). ValueError with a message for the user on bad input."""
    # The phase used is the one every output names (the filters' words included).
    filters = replace(filters or Filters(), phase=phase)
    if sampling not in MODES:
        raise ValueError(f"sampling is one of {', '.join(MODES)}, not {sampling!r}")
    readings = read_metric(store, metric, human, machine, filters, phase=phase,
                           reference=reference, question=question)
    designs = round_designs(store)
    report = PPIReport(metric, METRICS[metric], human, machine, readings.question,
                       readings.reference, phase, filters, sampling, [], list(readings.notes))
    for _, r in sorted(readings.by_model.items()):
        report.estimates.append(estimate_model(r, resolve_sampling(r, designs, sampling)))
    if not report.estimates:
        report.notes.append(f"{machine} read no item for this metric under these filters")
    if phase == "current":
        report.warnings.append("clinicians' latest answers are used, including answers changed "
                               "after a machine label was shown: they may lean toward it")
    for w in dict.fromkeys(e.sampling.warning for e in report.estimates if e.sampling.warning):
        report.warnings.append(w)
    report.notes.append(MACHINE_ONLY_NOTE)
    report.provenance = _provenance(readings, filters, sampling, store)
    return report


EDGE_NOTE = ("an interval runs past 0 or 1: the normal approximation is poor this near the "
             "edge (few events); read it as 'close to the edge', not as its exact limits")


def past_the_edge(*estimates: MeanEstimate) -> bool:
    """Whether an interval of a share runs below 0 or above 1."""
    return any(e.ci_low is not None and (e.ci_low < -1e-9 or e.ci_high > 1 + 1e-9)
               for e in estimates)


def _estimate_json(e: MeanEstimate) -> dict:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high}


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
            "sampling": e.sampling.label,
            "lambda": e.ppi.lam,
            "rounds": e.sampling.rounds,
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


def format_ppi_text(report: PPIReport) -> str:
    """The report as lines for a terminal."""
    lines = [f"{report.metric_name}: prediction-powered estimates per model",
             f"clinicians: {report.human}",
             f"machine: {report.machine}; question: {report.question}"
             + (f"; scored against {report.reference}" if report.reference else ""),
             f"filters: {report.filters.describe()}", ""]
    for e in report.estimates:
        lam = "" if e.ppi.lam is None else f", lambda {e.ppi.lam:.2f}"
        lines += [f"{e.model}  ({e.n_labeled} labelled, {e.n_unlabeled} machine-only; "
                  f"sampling: {e.sampling.label}{lam})",
                  f"  PPI            {_fmt(e.ppi)}",
                  f"  clinicians     {_fmt(e.classical)}",
                  f"  machine only   {_fmt(e.machine_only)}"]
        edge = [EDGE_NOTE] if past_the_edge(e.ppi, e.classical, e.machine_only) else []
        lines += [f"  note: {n}" for n in dict.fromkeys(
            [x for x in (e.ppi.note,) if x] + edge + e.sampling.notes)]
    lines.append("")
    lines += [f"warning: {w}" for w in report.warnings]
    lines += [f"note: {n}" for n in report.notes]
    lines.append("95% intervals (normal approximation).")
    return "\n".join(lines)
