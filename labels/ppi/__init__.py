"""Few clinicians, valid numbers: prediction-powered estimates and the label budget.

A metric that is a mean over items (accuracy, missed care, a criterion's met
rate) is read by a machine on every item and by clinicians on a few; the
machine's reading, corrected by the clinicians', gives the metric with an
interval that stays valid whatever the machine's errors. The package reads
as a line, one module per step:

- ``readings``: the metric's value of each item, per model, as the machine and
  the clinicians read it (from the store);
- ``sampling``: how the clinicians' labels were drawn (the review rounds'
  recorded designs, an active round's sequence), so each estimate weights its
  labels rightly;
- the estimators themselves (no store): ``finite`` (the mean over these
  items, with the design's own variance: the default), ``sequential`` (an
  active round's draws in order, and the interval valid at every look),
  ``calibration`` (a judge's confidence or score calibrated, cross-fitted),
  ``estimators`` (PPI++ equal to ``ppi-python``, the superpopulation view);
- ``report``: what ``carelens ppi`` and the screens show, per run;
- ``budget``: how many more labels each design needs (``carelens plan-labels``),
  for pilots like the one at hand.

The public names are importable from here as from their modules.
"""

from labels.ppi.budget import LabelPlan, format_plan_text, label_plan, plan_dict
from labels.ppi.calibration import Calibration, cross_fitted, fit_calibration
from labels.ppi.estimators import (
    ALPHA,
    FEW_LABELS,
    MeanEstimate,
    classical_mean,
    design_classical_mean,
    design_ppi_mean,
    machine_mean,
    power_tuning,
    ppi_mean,
    z_value,
)
from labels.ppi.finite import Labelled, finite_ppi_mean, uniform_labels
from labels.ppi.readings import METRICS, MetricReadings, Readings, read_metric
from labels.ppi.report import PPIReport, format_ppi_text, ppi_dict, ppi_json, ppi_report
from labels.ppi.sampling import Sampling, resolve_sampling, round_designs
from labels.ppi.sequential import Anytime, Draws, SequentialEstimate, sequential_ppi_mean

__all__ = [
    "ALPHA", "FEW_LABELS", "METRICS", "Anytime", "Calibration", "Draws", "LabelPlan",
    "Labelled", "MeanEstimate", "MetricReadings", "PPIReport", "Readings", "Sampling",
    "SequentialEstimate", "classical_mean", "cross_fitted", "design_classical_mean",
    "design_ppi_mean", "finite_ppi_mean", "fit_calibration", "format_plan_text",
    "format_ppi_text", "label_plan", "machine_mean", "plan_dict", "power_tuning", "ppi_dict",
    "ppi_json", "ppi_mean", "ppi_report", "read_metric", "resolve_sampling", "round_designs",
    "sequential_ppi_mean", "uniform_labels", "z_value",
]
