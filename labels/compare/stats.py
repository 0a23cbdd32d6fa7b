"""Which statistic for which data, by name: the one place a comparison picks them.

Every number comes from ``labels.agreement``; this module only chooses and
names. Keys are the machine names of :class:`labels.agreement.Coefficient`;
``PUBLIC_NAMES`` maps them to the fixed vocabulary of ``carelens agreement
--json``.
"""

from __future__ import annotations

from labels import agreement as ag
from labels.agreement import Coefficient

MULTI_RATER_KEYS = (
    "percent_agreement",
    "fleiss_kappa",
    "krippendorff_alpha_nominal",
    "krippendorff_alpha_ordinal",
    "gwet_ac1",
    "gwet_ac2_quadratic",
    "pabak",
)
"""Coefficients defined for any number of raters: usable for a pair, a group,
and a human ceiling beside a pair."""

PUBLIC_NAMES = {"gwet_ac2_quadratic": "gwet_ac2"}
"""``carelens agreement --json`` names (issue 4's fixed vocabulary) where they differ."""


def headline_key(level: str, raters: int = 2) -> str:
    """The one coefficient to lead with: weighted kappa (ordinal) or kappa (nominal) for a
    pair, Krippendorff's alpha for a group, and Gwet's AC1 for met / not met criteria at
    any size (kappa collapses when nearly every criterion is "not met")."""
    if level == "binary":
        return "gwet_ac1"
    if raters == 2:
        return "cohen_kappa_quadratic" if level == "ordinal" else "cohen_kappa"
    return f"krippendorff_alpha_{'ordinal' if level == 'ordinal' else 'nominal'}"


def forest_keys(level: str) -> list[str]:
    """Coefficients a per-group (forest) view may show, first the default. All are
    multi-rater coefficients, so the clinicians' ceiling can stand beside a pair."""
    if level == "ordinal":
        return ["krippendorff_alpha_ordinal", "gwet_ac2_quadratic", "percent_agreement"]
    if level == "binary":
        return ["gwet_ac1", "pabak", "percent_agreement", "krippendorff_alpha_nominal"]
    return ["krippendorff_alpha_nominal", "gwet_ac1", "percent_agreement"]


def coefficient(key: str, values, categories, *, n_boot: int = 1000, seed: int = 0,
                clusters=None) -> Coefficient:
    """One coefficient, by key, on a units x raters table (Cohen's kappa and macro-F1
    need exactly two columns). With two columns only the units both answered count, as
    in ``agreement_table``, so every pairwise number describes the same units.
    ``clusters``: one id per unit (its case), for a bootstrap over cases."""
    categories = list(categories)
    values = [list(r) for r in values]
    if values and len(values[0]) == 2:  # tables from raters.table_for mark missing as None
        keep = [r[0] is not None and r[1] is not None for r in values]
        values = [r for r, k in zip(values, keep, strict=True) if k]
        if clusters is not None:
            clusters = [c for c, k in zip(clusters, keep, strict=True) if k]
    boot = dict(n_boot=n_boot, seed=seed, clusters=clusters)
    if key == "percent_agreement":
        return ag.percent_agreement(values, categories, **boot)
    if key == "fleiss_kappa":
        return ag.fleiss_kappa(values, categories, **boot)
    if key.startswith("krippendorff_alpha_"):
        level = key.rsplit("_", 1)[1]
        return ag.krippendorff_alpha(values, categories, level, **boot)
    if key == "gwet_ac1":
        return ag.gwet_ac1(values, categories, **boot)
    if key.startswith("gwet_ac2_"):
        return ag.gwet_ac2(values, categories, key.rsplit("_", 1)[1], **boot)
    if key == "pabak":
        return ag.pabak(values, categories, **boot)
    a, b = _two_columns(key, values)
    if key.startswith("cohen_kappa"):
        weights = key[len("cohen_kappa_"):] if key != "cohen_kappa" else None
        return ag.cohen_kappa(a, b, categories, weights, **boot)
    if key == "macro_f1":
        return ag.macro_f1(a, b, categories, **boot)
    raise ValueError(f"unknown coefficient {key!r}")


def _two_columns(key: str, values) -> tuple[list, list]:
    rows = [list(r) for r in values]
    if rows and len(rows[0]) != 2:
        raise ValueError(f"{key} compares exactly two raters, not {len(rows[0])}")
    return [r[0] for r in rows], [r[1] for r in rows]


def coefficient_name(key: str) -> str:
    """A coefficient's display name, e.g. "Krippendorff's alpha (ordinal)"."""
    names = {
        "percent_agreement": "Percent agreement",
        "fleiss_kappa": "Fleiss' kappa",
        "gwet_ac1": "Gwet's AC1",
        "pabak": "PABAK",
        "cohen_kappa": "Cohen's kappa",
        "macro_f1": "Macro-F1",
    }
    if key in names:
        return names[key]
    if key.startswith("krippendorff_alpha_"):
        return f"Krippendorff's alpha ({key.rsplit('_', 1)[1]})"
    if key.startswith("gwet_ac2_"):
        return f"Gwet's AC2 ({key.rsplit('_', 1)[1]})"
    if key.startswith("cohen_kappa_"):
        return f"Cohen's kappa ({key.rsplit('_', 1)[1]})"
    return key


def public_name(key: str) -> str:
    return PUBLIC_NAMES.get(key, key)
