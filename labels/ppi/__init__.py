"""Few clinicians, valid numbers: prediction-powered estimates and the label budget.

A metric that is a mean over items (accuracy, missed care, a criterion's met
rate) is read by a machine on every item and by clinicians on a few; the
machine's reading, corrected by the clinicians', gives the metric with an
interval that stays valid whatever the machine's errors. The package reads
as a line, one module per step:

- ``readings``: the metric's value of each item, per model, as the machine and
  the clinicians read it (from the store);
- ``sampling``: how the clinicians' labels were drawn (the review rounds'
  recorded designs), so each estimate weights its labels rightly;
- ``estimators``: the estimators themselves (no store): PPI++ equal to
  ``ppi-python``, and the weighted (design) estimators;
- ``report``: what ``carelens ppi`` and the screens show, per model;
- ``budget``: how many more labels each design needs (``carelens plan-labels``).

The public names are importable from here as from their modules.
"""

from labels.ppi.budget import LabelPlan, format_plan_text, label_plan, plan_dict
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
from labels.ppi.readings import METRICS, MetricReadings, Readings, read_metric
from labels.ppi.report import PPIReport, format_ppi_text, ppi_dict, ppi_json, ppi_report
from labels.ppi.sampling import Sampling, resolve_sampling, round_designs

__all__ = [
    "ALPHA", "FEW_LABELS", "METRICS", "LabelPlan", "MeanEstimate", "MetricReadings",
    "PPIReport", "Readings", "Sampling", "classical_mean", "design_classical_mean",
    "design_ppi_mean", "format_plan_text", "format_ppi_text", "label_plan", "machine_mean",
    "plan_dict", "power_tuning", "ppi_dict", "ppi_json", "ppi_mean", "ppi_report",
    "read_metric", "resolve_sampling", "round_designs", "z_value",
]
