"""How far raters agree: the coefficients, their intervals, and the disagreeing units.

Input model: a ratings table with one row per *unit* (an item + question pair)
and one column per rater; an entry is a category value or missing (``None``,
NaN or ``pandas.NA``). ``categories`` is the codebook's ordered list of allowed
values; the order is what "ordinal" and the weights mean. Two raters' answers
given as two sequences become a table through :func:`pair_table`; the
two-rater statistics (Cohen, F1, confusion matrix) take the two sequences.

Conventions every function here keeps:

- A coefficient that cannot be computed is returned with ``value=None`` and an
  ``undefined_reason`` in words; no bare NaN leaves this module.
- Chance-corrected coefficients need at least ``MIN_UNITS`` (2) units carrying
  two or more ratings: a single unit cannot separate agreement from chance.
- ``ci_low``/``ci_high`` are 95% percentile bootstrap limits over units
  (:func:`bootstrap_ci`, seeded, so the same data and seed give the same
  interval). ``analytic_ci`` is a closed-form 95% interval where one exists.
- Category weights for weighted kappa and AC2 use category *rank* (the
  categories are taken as equally spaced).

Where a well-kept library computes a coefficient, it is used (``krippendorff``
for the alpha point estimate). scikit-learn and statsmodels are test-only
dependencies here: our own Cohen and Fleiss implementations are checked against
them in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
from scipy.special import ndtri, stdtrit

from labels.intervals import (
    CONFIDENCE,
    bootstrap_ci,
    interval_warnings,
    wilson_interval,
)

LEVELS = ("nominal", "ordinal", "interval", "binary")
MIN_UNITS = 2
_TOL = 1e-12


@dataclass(frozen=True)
class Coefficient:
    """One agreement statistic, ready to show to a clinician."""

    name: str
    """Display name, e.g. "Cohen's kappa (quadratic)"."""
    key: str
    """Machine name, e.g. "cohen_kappa_quadratic"."""
    value: float | None
    """The estimate; None when undefined (see ``undefined_reason``)."""
    n: int
    """Units used in the computation."""
    ci_low: float | None = None
    """Lower 95% percentile-bootstrap limit (resampling units)."""
    ci_high: float | None = None
    """Upper 95% percentile-bootstrap limit."""
    analytic_ci: tuple[float, float] | None = None
    """Closed-form 95% interval, where a standard error formula exists."""
    undefined_reason: str | None = None
    """Why ``value`` is None, in words."""
    note: str | None = None
    """Anything the reader should know (units left out, method caveats)."""
    analytic_method: str | None = None
    """What ``analytic_ci`` is: "Wilson score", "Fleiss, Cohen & Everitt SE", ..."""
    resampled: str = "units"
    """What the bootstrap resampled: "units", or "cases" (clusters of correlated units)."""
    clusters: int | None = None
    """Cases resampled, when ``resampled`` is "cases"."""
    resamples_dropped: float | None = None
    """Share of bootstrap resamples where the statistic was undefined (left out)."""
    warnings: tuple[str, ...] = ()
    """When the interval means little, in words: no width, too few units, resamples
    dropped (see :func:`interval_warnings`)."""

    def shown_interval(self) -> tuple[float | None, float | None, str]:
        """The interval to quote and what it is: Wilson's where it exists (a share of
        independent units); else the bootstrap's (over cases where units are clustered:
        Wilson's would take correlated units as independent); the closed form where the
        bootstrap has no width."""
        if (self.analytic_ci and self.analytic_method == "Wilson score"
                and self.resampled == "units"):
            return (*self.analytic_ci, "Wilson score")
        if (self.analytic_ci and self.ci_low is not None and self.ci_high is not None
                and self.ci_high - self.ci_low <= 1e-12):
            return (*self.analytic_ci, self.analytic_method or "analytic")
        how = "bootstrap over cases" if self.resampled == "cases" else "bootstrap"
        return self.ci_low, self.ci_high, how


@dataclass(frozen=True)
class ConfusionMatrix:
    """Rater A (rows) against rater B (columns), in codebook order."""

    categories: list
    counts: list[list[int]]
    """counts[i][j]: units rater A put in categories[i] and rater B in categories[j]."""
    units: list[list[list[int]]]
    """units[i][j]: input positions of those units, so a page can open them."""
    n: int
    """Units rated by both raters."""
    skipped: list[int]
    """Input positions where either rating was missing."""

    def disagreements(self) -> list[int]:
        """Input positions of the units where the two raters differ, in input order."""
        k = len(self.categories)
        return sorted(u for i in range(k) for j in range(k) if i != j for u in self.units[i][j])


@dataclass(frozen=True)
class ClassScore:
    """Precision, recall and F1 of one category, rater A taken as the reference."""

    category: object
    support: int
    """Units rater A put in this category."""
    predicted: int
    """Units rater B put in this category."""
    true_positive: int
    precision: float | None
    """TP / predicted; None when rater B never used the category."""
    recall: float | None
    """TP / support; None when rater A never used the category."""
    f1: float | None
    """2TP / (support + predicted); None when neither rater used the category."""


# ---------------------------------------------------------------- input model


def pair_table(a: Sequence, b: Sequence) -> list[list]:
    """Two raters' answers, in the same unit order, as a units x 2 ratings table."""
    if len(a) != len(b):
        raise ValueError(f"the two raters answered {len(a)} and {len(b)} units; they must align")
    return [[x, y] for x, y in zip(a, b, strict=True)]


def _is_missing(x: object) -> bool:
    if x is None:
        return True
    if isinstance(x, float | np.floating) and math.isnan(x):
        return True
    return type(x).__name__ == "NAType"  # pandas.NA, without importing pandas


def _encode(ratings, categories: Sequence) -> np.ndarray:
    """Ratings table -> int array (units x raters) of category positions, -1 where missing."""
    if hasattr(ratings, "to_numpy"):  # a pandas DataFrame iterates over its column names
        ratings = ratings.to_numpy(dtype=object)
    index = {c: k for k, c in enumerate(categories)}
    if len(index) != len(categories):
        raise ValueError(f"categories must be distinct: {list(categories)}")
    rows = [list(row) for row in ratings]
    width = len(rows[0]) if rows else 0
    if rows and all(len(row) == width for row in rows):
        # The common case, one dictionary look-up per rating: None is missing, a category
        # its position. Anything else (NaN, pandas.NA, a value outside the categories, an
        # unhashable one) takes the rating-by-rating path below, which says what is wrong.
        try:
            fast = np.array([[-1 if x is None else index.get(x, -2) for x in row]
                             for row in rows], dtype=np.int64).reshape(len(rows), width)
        except TypeError:
            fast = None
        if fast is not None and not (fast == -2).any():
            return fast
    codes = np.full((len(rows), width), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"unit {i} has {len(row)} ratings; the table has {width} raters")
        for j, x in enumerate(row):
            if _is_missing(x):
                continue
            try:
                codes[i, j] = index[x]
            except (KeyError, TypeError):
                raise ValueError(
                    f"unit {i}, rater {j}: {x!r} is not one of the categories {list(categories)}"
                ) from None
    return codes


def _counts(codes: np.ndarray, k: int) -> np.ndarray:
    """Per-unit category counts, shape (units, k)."""
    return (codes[:, :, None] == np.arange(k)).sum(axis=1)


def _complete_pairs(
    a: Sequence, b: Sequence, categories
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Codes of the units both raters answered, and the input positions of those skipped."""
    codes = _encode(pair_table(a, b), categories).reshape(-1, 2)
    both = (codes >= 0).all(axis=1)
    return codes[both, 0], codes[both, 1], np.flatnonzero(~both).tolist()


def _kept(clusters, n: int, skipped: list[int]):
    """The cluster ids of the units not skipped."""
    if clusters is None:
        return None
    keep = np.ones(n, dtype=bool)
    keep[skipped] = False
    return _sub(clusters, keep)


def agreement_weights(k: int, weights: str | None) -> np.ndarray:
    """Agreement weights on category ranks: 1 on the diagonal, falling with distance.

    ``None``: identity (unweighted). ``"linear"``: 1 - |i-j|/(k-1).
    ``"quadratic"``: 1 - ((i-j)/(k-1))^2 (Cohen 1968; Gwet 2014, ch. 3).
    """
    if weights is None:
        return np.eye(k)
    if not isinstance(weights, str):  # a codebook's own table (codebook.loader checks it)
        table = np.asarray(weights, dtype=float)
        if table.shape != (k, k):
            raise ValueError(f"a weights table for {k} categories is {k} x {k}, not "
                             f"{' x '.join(map(str, table.shape))}")
        return table
    if k < 2:
        return np.ones((k, k))
    dist = np.abs(np.subtract.outer(np.arange(k), np.arange(k))) / (k - 1)
    if weights == "linear":
        return 1 - dist
    if weights == "quadratic":
        return 1 - dist**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")


# ------------------------------------------------------------------ bootstrap


def _result(
    key,
    name,
    statistic,
    tables,
    n,
    *,
    reason_fn=None,
    analytic=None,
    note=None,
    n_boot=1000,
    seed=0,
    value=None,
    clusters=None,
    analytic_method=None,
) -> Coefficient:
    """Point estimate from the summed tables (unless given), plus the bootstrap interval
    (over ``clusters`` of units when given: one id per row of ``tables``)."""
    tables = np.asarray(tables, dtype=float)
    point = float(statistic(tables.sum(axis=0)[None])[0])
    if not np.isfinite(point):
        reason = reason_fn(tables.sum(axis=0)) if reason_fn else "the statistic is undefined"
        return Coefficient(name, key, None, n, undefined_reason=reason, note=note)
    clustered = clusters is not None and len(set(clusters)) < len(clusters)
    boot = bootstrap_ci(statistic, tables, n_boot=n_boot, seed=seed,
                        clusters=list(clusters) if clustered else None)
    notes = "; ".join(x for x in (note, boot.note) if x) or None
    if callable(analytic):  # intervals that need the estimate are computed here
        analytic = analytic(point)
    value = point if value is None else value
    groups = len(set(clusters)) if clustered else None
    return Coefficient(
        name=name,
        key=key,
        value=value,
        n=n,
        ci_low=boot.low,
        ci_high=boot.high,
        analytic_ci=analytic,
        note=notes,
        analytic_method=analytic_method if analytic else None,
        resampled="cases" if clustered else "units",
        clusters=groups,
        resamples_dropped=boot.dropped_share,
        warnings=interval_warnings(value, boot.low, boot.high, n, groups,
                                   boot.dropped_share),
    )


def _undefined(key, name, n, reason, note=None) -> Coefficient:
    return Coefficient(name, key, None, n, undefined_reason=reason, note=note)


def _too_few(units: int, what: str) -> str | None:
    if units == 0:
        return f"no unit was rated by {what}"
    if units < MIN_UNITS:
        return (
            f"only one unit was rated by {what}; a chance-corrected coefficient "
            f"needs at least {MIN_UNITS} units"
        )
    return None


def _units(n: int) -> str:
    return f"{n} unit" if n == 1 else f"{n} units"


def _clip(lo: float, hi: float) -> tuple[float, float]:
    return (max(-1.0, float(lo)), min(1.0, float(hi)))


def _only_category(total_counts: np.ndarray, categories) -> str:
    used = np.flatnonzero(total_counts > 0)
    return repr(categories[used[0]]) if len(used) == 1 else "a single category"


# ------------------------------------------------------- percent agreement, PABAK


def _pairwise_unit_agreement(counts: np.ndarray) -> np.ndarray:
    """Share of agreeing rater pairs within each unit with >= 2 ratings (Fleiss 1971 P_i)."""
    m = counts.sum(axis=1)
    return (counts * (counts - 1)).sum(axis=1) / (m * (m - 1))


def _sub(clusters, keep):
    """The cluster ids of the rows kept (None stays None)."""
    return None if clusters is None else np.asarray(clusters, dtype=object)[keep]


def _agreement_parts(codes, k):
    counts = _counts(codes, k)
    keep = counts.sum(axis=1) >= 2
    counts = counts[keep]
    pa = _pairwise_unit_agreement(counts) if len(counts) else np.zeros(0)
    return counts, np.column_stack([pa, np.ones(len(pa))]), keep


def _percent(codes, k, n_boot, seed, note=None, clusters=None) -> Coefficient:
    key, name = "percent_agreement", "Percent agreement"
    counts, tables, keep = _agreement_parts(codes, k)
    if len(counts) == 0:
        return _undefined(key, name, 0, "no unit was rated by two or more raters")
    analytic = None
    if (counts.sum(axis=1) == 2).all():  # two ratings a unit: a binomial proportion
        analytic = wilson_interval(tables[:, 0].sum(), len(counts))
    if not analytic:
        note = "; ".join(x for x in (note, "mean share of agreeing rater pairs per unit") if x)
    return _result(
        key,
        name,
        lambda t: t[:, 0] / t[:, 1],
        tables,
        len(counts),
        analytic=analytic,
        note=note,
        n_boot=n_boot,
        seed=seed,
        clusters=_sub(clusters, keep),
        analytic_method="Wilson score",
    )


def percent_agreement_batch(t: np.ndarray) -> np.ndarray:
    """Percent agreement of each K x K two-rater table in a batch (the share of units on
    the diagonal); NaN for an empty table. For two raters this is what
    :func:`percent_agreement` computes."""
    n = t.sum(axis=(1, 2))
    return np.where(n > 0, np.trace(t, axis1=1, axis2=2) / np.where(n > 0, n, 1), np.nan)


def percent_agreement(ratings, categories, *, n_boot=1000, seed=0,
                      clusters=None) -> Coefficient:
    """Observed agreement: over units with >= 2 ratings, the mean share of rater pairs
    that chose the same category (for two raters: the share of units they agree on).
    ``clusters``: one id per unit (its case); the bootstrap then resamples whole cases."""
    return _percent(_encode(ratings, categories), len(categories), n_boot, seed,
                    clusters=clusters)


def _pabak(codes, k, n_boot, seed, note=None, clusters=None) -> Coefficient:
    key, name = "pabak", "PABAK (prevalence- and bias-adjusted kappa)"
    counts, tables, keep = _agreement_parts(codes, k)
    if k < 2:
        return _undefined(key, name, len(counts), "the codebook lists fewer than two categories")
    if len(counts) == 0:
        return _undefined(key, name, 0, "no unit was rated by two or more raters")
    analytic = None
    if (counts.sum(axis=1) == 2).all():
        lo, hi = wilson_interval(tables[:, 0].sum(), len(counts))
        analytic = ((k * lo - 1) / (k - 1), (k * hi - 1) / (k - 1))
    return _result(
        key,
        name,
        lambda t: (k * t[:, 0] / t[:, 1] - 1) / (k - 1),
        tables,
        len(counts),
        analytic=analytic,
        note=note,
        n_boot=n_boot,
        seed=seed,
        clusters=_sub(clusters, keep),
        analytic_method="Wilson score",
    )


def pabak(ratings, categories, *, n_boot=1000, seed=0, clusters=None) -> Coefficient:
    """PABAK = (q * p_o - 1) / (q - 1), with p_o the percent agreement and q the number of
    categories; for a binary question 2 * p_o - 1 (Byrt, Bishop & Carlin 1993). For more
    categories or raters this is Brennan & Prediger's (1981) free-marginal kappa."""
    return _pabak(_encode(ratings, categories), len(categories), n_boot, seed,
                  clusters=clusters)


# ------------------------------------------------------------- Cohen's kappa


def cohen_kappa_batch(t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cohen's (weighted) kappa of each K x K table in a batch (rater A rows, rater B
    columns): (p_o - p_e) / (1 - p_e), ``w`` the agreement weights
    (:func:`agreement_weights`); NaN where undefined. The statistic
    :func:`cohen_kappa` resamples, public for paired comparisons."""
    n = t.sum(axis=(1, 2))
    p = t / np.where(n > 0, n, 1)[:, None, None]
    row, col = p.sum(axis=2), p.sum(axis=1)
    po = (w * p).sum(axis=(1, 2))
    pe = np.einsum("bk,kl,bl->b", row, w, col)
    ok = (n >= MIN_UNITS) & (1 - pe > _TOL)
    return np.where(ok, (po - pe) / np.where(ok, 1 - pe, 1), np.nan)


def _kappa_se(table: np.ndarray, w: np.ndarray, kappa: float) -> float:
    """Large-sample SE of (weighted) kappa, Fleiss, Cohen & Everitt (1969)."""
    n = table.sum()
    p = table / n
    row, col = p.sum(axis=1), p.sum(axis=0)
    pe = row @ w @ col
    w_row, w_col = w @ col, row @ w  # mean weight of row category i / column category j
    term = (p * (w - np.add.outer(w_row, w_col) * (1 - kappa)) ** 2).sum()
    var = (term - (kappa - pe * (1 - kappa)) ** 2) / (n * (1 - pe) ** 2)
    return math.sqrt(max(var, 0.0))


def _weighting(weights) -> str | None:
    """How a weighting is named in a key: None, "linear", "quadratic" or "codebook"."""
    if weights is None or isinstance(weights, str):
        return weights
    return "codebook"


def _cohen(ca, cb, categories, weights, n_boot, seed, note=None, clusters=None) -> Coefficient:
    k = len(categories)
    named = _weighting(weights)
    key = "cohen_kappa" + (f"_{named}" if named else "")
    name = "Cohen's kappa" + (f" ({named} weights)" if named == "codebook"
                              else f" ({named})" if named else "")
    w = agreement_weights(k, weights)
    reason = _too_few(len(ca), "both raters") or (
        "the codebook lists fewer than two categories" if k < 2 else None
    )
    if reason:
        return _undefined(key, name, len(ca), reason, note)
    tables = np.zeros((len(ca), k, k))
    tables[np.arange(len(ca)), ca, cb] = 1

    def why(total):
        return (
            f"only one category ({_only_category(total.sum(axis=1) + total.sum(axis=0), categories)}) "
            "was used by both raters, so chance agreement is 1 and kappa is undefined"
        )

    z = float(ndtri(1 - (1 - CONFIDENCE) / 2))

    def analytic(kappa):
        se = _kappa_se(tables.sum(axis=0), w, kappa)
        return _clip(kappa - z * se, kappa + z * se)

    return _result(
        key,
        name,
        lambda t: cohen_kappa_batch(t, w),
        tables,
        len(ca),
        reason_fn=why,
        analytic=analytic,
        note=note,
        n_boot=n_boot,
        seed=seed,
        clusters=clusters,
        analytic_method="Fleiss, Cohen & Everitt standard error",
    )


def cohen_kappa(
    a: Sequence, b: Sequence, categories, weights: str | None = None, *, n_boot=1000, seed=0,
    clusters=None,
) -> Coefficient:
    """Cohen's kappa (1960) between two raters, or weighted kappa (Cohen 1968) with
    ``weights`` "linear" or "quadratic": kappa = 1 - sum(d * O) / sum(d * E), d the
    disagreement weights, O observed and E chance (product-of-marginals) proportions.
    Units either rater left blank are skipped. ``analytic_ci``: Fleiss, Cohen & Everitt
    (1969) standard error, normal approximation, clipped to [-1, 1].

    Own implementation: sklearn is a test-only dependency (parity is tested)."""
    ca, cb, skipped = _complete_pairs(a, b, categories)
    note = f"{_units(len(skipped))} with a missing rating skipped" if skipped else None
    return _cohen(ca, cb, list(categories), weights, n_boot, seed, note,
                  clusters=_kept(clusters, len(a), skipped))


# --------------------------------------------------- Fleiss and Gwet (Gwet 2014)


def _chance_tables(counts: np.ndarray, w: np.ndarray):
    """Per-unit parts of Gwet's (2014) multi-rater formulas, which allow missing ratings.

    Units with >= 1 rating. Columns: p_a|i (weighted share of agreeing rater pairs,
    0 when the unit has one rating), [unit has >= 2 ratings], r_ik / r_i (K columns),
    1. Summed: p_a = col0 / col1 and the prevalence pi_k = col(2+k) / col(-1).
    """
    r = counts.sum(axis=1)
    keep = r >= 1
    counts, r = counts[keep], r[keep]
    pair = r >= 2
    weighted = counts @ w.T  # r*_ik = sum_l w_kl r_il
    pa_i = np.where(
        pair, (counts * (weighted - 1)).sum(axis=1) / np.where(pair, r * (r - 1), 1), 0.0
    )
    share = counts / r[:, None] if len(r) else np.zeros((0, counts.shape[1]))
    return counts, np.column_stack([pa_i, pair, share, np.ones(len(r))]), keep


def _pe(pi: np.ndarray, w: np.ndarray, kind: str) -> np.ndarray:
    """Chance agreement from prevalences pi (batch x K).

    Fleiss: sum_kl w_kl pi_k pi_l. Gwet AC1/AC2: T_w / (q(q-1)) * sum_k pi_k (1 - pi_k),
    T_w the sum of all weights (Gwet 2008; 2014)."""
    q = w.shape[0]
    if kind == "fleiss":
        return np.einsum("bk,kl,bl->b", pi, w, pi)
    return w.sum() / (q * (q - 1)) * (pi * (1 - pi)).sum(axis=1)


def _chance_corrected_batch(t: np.ndarray, w: np.ndarray, kind: str) -> np.ndarray:
    pa = t[:, 0] / np.where(t[:, 1] > 0, t[:, 1], 1)
    pi = t[:, 2:-1] / t[:, -1:]
    pe = _pe(pi, w, kind)
    ok = (t[:, 1] >= MIN_UNITS) & (1 - pe > _TOL)
    return np.where(ok, (pa - pe) / np.where(ok, 1 - pe, 1), np.nan)


def _linearised_ci(counts, tables, w, kind, value) -> tuple[float, float]:
    """95% interval from Gwet's (2014, ch. 5) linearised variance, t with n - 1 df:
    v = sum_i (k*_i - k)^2 / (n(n-1)), k*_i = k_i - 2(1-k)(pe_i - pe)/(1-pe),
    k_i = (n/n2)(pa_i - pe [r_i>=2]) / (1 - pe)."""
    n, q = len(counts), w.shape[0]
    total = tables.sum(axis=0)
    n2 = total[1]
    pi = total[2:-1] / total[-1]
    pe = float(_pe(pi[None], w, kind)[0])
    share = tables[:, 2:-1]
    k_i = (n / n2) * (tables[:, 0] - pe * tables[:, 1]) / (1 - pe)
    if kind == "fleiss":
        pe_i = share @ ((w @ pi + w.T @ pi) / 2)
    else:
        pe_i = w.sum() / (q * (q - 1)) * share @ (1 - pi)
    k_star = k_i - 2 * (1 - value) * (pe_i - pe) / (1 - pe)
    se = math.sqrt(((k_star - value) ** 2).sum() / (n * (n - 1)))
    half = float(stdtrit(n - 1, 1 - (1 - CONFIDENCE) / 2)) * se
    return _clip(value - half, value + half)


def _chance_corrected(codes, categories, w, kind, key, name, n_boot, seed, note=None,
                      clusters=None):
    k = len(categories)
    counts, tables, keep = _chance_tables(_counts(codes, k), w)
    n2 = int(tables[:, 1].sum())
    reason = _too_few(n2, "two or more raters") or (
        "the codebook lists fewer than two categories" if k < 2 else None
    )
    if reason:
        return _undefined(key, name, len(counts), reason, note)
    singles = len(counts) - n2
    if singles:
        extra = f"{_units(singles)} with one rating counted toward category prevalence only"
        note = f"{note}; {extra}" if note else extra

    def why(total):
        return (
            f"every rating is the same category ({_only_category(total[2:-1], categories)}), "
            f"so chance agreement is 1 and {name} is undefined"
        )

    return _result(
        key,
        name,
        lambda t: _chance_corrected_batch(t, w, kind),
        tables,
        len(counts),
        reason_fn=why,
        analytic=lambda v: _linearised_ci(counts, tables, w, kind, v),
        note=note,
        n_boot=n_boot,
        seed=seed,
        clusters=_sub(clusters, keep),
        analytic_method="Gwet's linearised variance",
    )


def _fleiss(codes, categories, n_boot, seed, note=None, clusters=None) -> Coefficient:
    w = np.eye(len(categories))
    return _chance_corrected(
        codes, categories, w, "fleiss", "fleiss_kappa", "Fleiss' kappa", n_boot, seed, note,
        clusters=clusters,
    )


def _ac(codes, categories, weights, n_boot, seed, note=None, clusters=None) -> Coefficient:
    w = agreement_weights(len(categories), weights)
    named = _weighting(weights)
    key, name = (
        ("gwet_ac1", "Gwet's AC1")
        if weights is None
        else (f"gwet_ac2_{named}", f"Gwet's AC2 ({named}{' weights' if named == 'codebook' else ''})")
    )
    return _chance_corrected(codes, categories, w, "gwet", key, name, n_boot, seed, note,
                             clusters=clusters)


def fleiss_kappa(ratings, categories, *, n_boot=1000, seed=0, clusters=None) -> Coefficient:
    """Fleiss' kappa (1971) for any number of raters: (P_a - P_e) / (1 - P_e), P_a the mean
    share of agreeing rater pairs per unit, P_e = sum_k pi_k^2. Missing ratings are allowed
    as in Gwet (2014): P_a over units with >= 2 ratings, pi_k the mean over rated units of
    each unit's share of category k (with no missing this is Fleiss' formula exactly).
    ``analytic_ci``: Gwet's linearised variance (see ``_linearised_ci``).

    Own implementation: statsmodels is a test-only dependency and has no missing-rating
    handling or standard error (parity is tested on complete data)."""
    return _fleiss(_encode(ratings, categories), list(categories), n_boot, seed,
                   clusters=clusters)


def gwet_ac1(ratings, categories, *, n_boot=1000, seed=0, clusters=None) -> Coefficient:
    """Gwet's AC1 (Gwet 2008): (P_a - P_e) / (1 - P_e) with P_e = sum_k pi_k (1 - pi_k) / (q - 1).
    Stays stable when one category dominates (the kappa paradox); perfect agreement on one
    category gives 1. Missing ratings allowed (Gwet 2014). ``analytic_ci``: Gwet's
    linearised variance. Own implementation: the one Python port (irrCAC) is pandas-bound,
    computes one table per call (too slow to bootstrap) and is not a dependency here;
    checked against Gwet's published values in the tests."""
    return _ac(_encode(ratings, categories), list(categories), None, n_boot, seed,
               clusters=clusters)


def gwet_ac2(
    ratings, categories, weights: str = "quadratic", *, n_boot=1000, seed=0, clusters=None
) -> Coefficient:
    """Gwet's AC2: AC1 with agreement weights for ordered categories (Gwet 2014, ch. 3):
    P_a counts partial agreement r*_ik = sum_l w_kl r_il, and
    P_e = T_w / (q(q-1)) * sum_k pi_k (1 - pi_k), T_w the sum of all weights."""
    if isinstance(weights, str) and weights not in ("linear", "quadratic"):
        raise ValueError(f"AC2 weights must be 'linear', 'quadratic' or a table, not {weights!r}")
    return _ac(_encode(ratings, categories), list(categories), weights, n_boot, seed,
               clusters=clusters)


# -------------------------------------------------------- Krippendorff's alpha


def _interval_values(categories) -> tuple[np.ndarray, str | None]:
    """Numeric category values if every category is a number, else their ranks."""
    if all(isinstance(c, int | float | np.number) and not isinstance(c, bool) for c in categories):
        return np.asarray(categories, dtype=float), None
    ranks = np.arange(len(categories), dtype=float)
    return ranks, "categories are not numbers: their ranks were used"


def _alpha_batch(o: np.ndarray, level: str, values: np.ndarray) -> np.ndarray:
    """alpha = 1 - (n - 1) * sum(o * d) / sum(n_c n_k d) from coincidence matrices o
    (batch x K x K), Krippendorff (2011) metrics; NaN when expected disagreement is 0."""
    nv = o.sum(axis=2)
    n = nv.sum(axis=1)
    k = o.shape[1]
    if level == "ordinal":
        cum = np.cumsum(nv, axis=1)
        lo = np.minimum.outer(np.arange(k), np.arange(k))
        hi = np.maximum.outer(np.arange(k), np.arange(k))
        between = cum[:, hi] - cum[:, lo] + nv[:, lo]  # sum of n_g for g from lo to hi
        d = (between - (nv[:, :, None] + nv[:, None, :]) / 2) ** 2
    elif level == "interval":
        d = np.broadcast_to(np.subtract.outer(values, values) ** 2, o.shape)
    else:
        d = np.broadcast_to(1 - np.eye(k), o.shape)
    observed = (o * d).sum(axis=(1, 2))
    expected = (nv[:, :, None] * nv[:, None, :] * d).sum(axis=(1, 2))
    ok = expected > _TOL
    return np.where(ok, 1 - (n - 1) * observed / np.where(ok, expected, 1), np.nan)


def _alpha(codes, categories, level, n_boot, seed, note=None, clusters=None,
           values=None) -> Coefficient:
    level = "nominal" if level == "binary" else level
    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    k = len(categories)
    key, name = f"krippendorff_alpha_{level}", f"Krippendorff's alpha ({level})"
    counts = _counts(codes, k)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts, m = counts[keep], m[keep]
    reason = _too_few(len(counts), "two or more raters") or (
        "the codebook lists fewer than two categories" if k < 2 else None
    )
    if reason:
        return _undefined(key, name, len(counts), reason, note)
    if level == "interval" and values is not None:
        values, value_note = np.asarray(values, dtype=float), None
    else:
        values, value_note = (
            _interval_values(categories) if level == "interval" else (np.arange(k), None)
        )
    note = "; ".join(x for x in (note, value_note) if x) or None
    # Per-unit coincidences (Krippendorff 2011): (n_uc n_uk - [c=k] n_uc) / (m_u - 1).
    pairs = counts[:, :, None] * counts[:, None, :] - np.eye(k) * counts[:, None, :]
    tables = pairs / (m - 1)[:, None, None]
    total = tables.sum(axis=0)
    if not np.isfinite(_alpha_batch(total[None], level, values)[0]):
        only = _only_category(total.sum(axis=1), categories)
        reason = (
            f"every pairable rating is the same category ({only}), so expected "
            "disagreement is 0 and alpha is undefined"
        )
        return _undefined(key, name, len(counts), reason, note)
    # Point estimate from the krippendorff package; the bootstrap uses the batched
    # formula above (the package computes one table per call), parity tested.
    value = float(
        krippendorff.alpha(value_counts=counts, value_domain=values, level_of_measurement=level)
    )
    note = "; ".join(
        x for x in (note, "no closed-form interval: Krippendorff recommends the bootstrap") if x
    )
    return _result(
        key,
        name,
        lambda t: _alpha_batch(t, level, values),
        tables,
        len(counts),
        note=note,
        n_boot=n_boot,
        seed=seed,
        value=value,
        clusters=_sub(clusters, keep),
    )


def krippendorff_alpha(
    ratings, categories, level: str = "nominal", *, n_boot=1000, seed=0, clusters=None
) -> Coefficient:
    """Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability")
    at the nominal, ordinal (rank-based metric) or interval level, any number of raters,
    missing ratings allowed. Interval uses the category values if numeric, else ranks."""
    return _alpha(_encode(ratings, categories), list(categories), level, n_boot, seed,
                  clusters=clusters)


# ----------------------------------------------------- confusion matrix and F1


def confusion_matrix(a: Sequence, b: Sequence, categories) -> ConfusionMatrix:
    """Cross-table of rater A (rows) against rater B (columns) in codebook order, with
    the input positions of the units in every cell."""
    categories = list(categories)
    codes = _encode(pair_table(a, b), categories).reshape(-1, 2)
    k = len(categories)
    units: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(k)]
    skipped = []
    for pos, (x, y) in enumerate(codes.tolist()):
        if x < 0 or y < 0:
            skipped.append(pos)
        else:
            units[x][y].append(pos)
    counts = [[len(cell) for cell in row] for row in units]
    return ConfusionMatrix(categories, counts, units, len(codes) - len(skipped), skipped)


def class_scores(a: Sequence, b: Sequence, categories) -> list[ClassScore]:
    """Per-category precision, recall and F1 with rater A as the reference (units either
    rater left blank are skipped). F1 = 2TP / (2TP + FP + FN)."""
    return class_scores_of(confusion_matrix(a, b, categories))


def class_scores_of(matrix: ConfusionMatrix) -> list[ClassScore]:
    """:func:`class_scores` from a confusion matrix already made of the same two raters."""
    categories = matrix.categories
    table = np.asarray(matrix.counts, dtype=int).reshape(len(categories), -1)
    scores = []
    for k, category in enumerate(categories):
        tp, support, predicted = int(table[k, k]), int(table[k].sum()), int(table[:, k].sum())
        scores.append(
            ClassScore(
                category=category,
                support=support,
                predicted=predicted,
                true_positive=tp,
                precision=tp / predicted if predicted else None,
                recall=tp / support if support else None,
                f1=2 * tp / (support + predicted) if support + predicted else None,
            )
        )
    return scores


def f1_per_category_batch(t: np.ndarray) -> np.ndarray:
    """F1 of each category in each K x K table of a batch (rater A rows as the
    reference, rater B columns): 2TP / (support + predicted); NaN for a category
    neither rater used. The one F1 formula: macro-F1 here and HealthBench's variant
    (``labels.healthbench_meta.healthbench_macro_f1_batch``) both average it."""
    tp = np.diagonal(t, axis1=1, axis2=2)
    denom = t.sum(axis=2) + t.sum(axis=1)
    present = denom > 0
    return np.where(present, 2 * tp / np.where(present, denom, 1), np.nan)


def macro_f1_batch(t: np.ndarray, categories: int | None = None, *,
                   every_category: bool = False) -> np.ndarray:
    """Mean F1 over the categories either rater used (as sklearn's f1_score(average="macro")),
    for each K x K table of a batch; NaN when no category was used. ``categories``: average
    over the first that many only (the last rows and columns then stand for something that
    is not a label, e.g. a missing prediction: it lowers recall but has no F1 of its own).
    ``every_category``: over every one of them, a category neither rater used counting 0
    (sklearn's f1_score with ``labels=`` the codebook's, ``zero_division=0``): a model's
    subset that lacks a label is then scored on the same labels as every other."""
    f1 = f1_per_category_batch(t)[:, :categories]
    used = np.isfinite(f1).sum(axis=1)
    total = np.where(np.isfinite(f1), f1, 0.0).sum(axis=1)
    if every_category:
        return np.where(used > 0, total / f1.shape[1], np.nan)
    return np.where(used > 0, total / np.where(used > 0, used, 1), np.nan)


def macro_f1(a: Sequence, b: Sequence, categories, *, n_boot=1000, seed=0,
             clusters=None) -> Coefficient:
    """Macro-F1 of rater B against rater A as the reference: the unweighted mean of
    per-category F1 over the categories either rater used."""
    key, name = "macro_f1", "Macro-F1 (rater A as reference)"
    categories = list(categories)
    ca, cb, skipped = _complete_pairs(a, b, categories)
    note = f"{_units(len(skipped))} with a missing rating skipped" if skipped else None
    if len(ca) == 0:
        return _undefined(key, name, 0, "no unit was rated by both raters", note)
    k = len(categories)
    tables = np.zeros((len(ca), k, k))
    tables[np.arange(len(ca)), ca, cb] = 1
    return _result(key, name, macro_f1_batch, tables, len(ca), note=note, n_boot=n_boot,
                   seed=seed, clusters=_kept(clusters, len(a), skipped))


# ------------------------------------------------------------ the whole table


def agreement_table(ratings, categories, level: str, *, n_boot=1000, seed=0,
                    clusters=None, values=None, weights=None) -> list[Coefficient]:
    """The statistics that suit the data type, all with seeded bootstrap intervals:

    - nominal: percent agreement, Cohen's kappa (2 raters) or Fleiss' kappa (more),
      Krippendorff's alpha (nominal), Gwet's AC1;
    - ordinal: those, plus weighted kappa (linear, quadratic; 2 raters),
      Krippendorff's alpha (ordinal), Gwet's AC2 (quadratic);
    - binary: the nominal set plus PABAK;
    - interval: percent agreement (exact match) and Krippendorff's alpha (interval).

    With exactly two raters, only the units both answered are used, so every
    coefficient describes the same units. The same seed resamples the same units
    for every coefficient; with ``clusters`` (one id per unit, e.g. its case) the
    bootstrap resamples whole clusters. A codebook's scale adds to them: ``values`` (the
    categories' numbers on an interval scale) Krippendorff's alpha (interval) on those
    numbers; ``weights`` (its own K x K agreement table) weighted kappa and Gwet's AC2 with
    those weights.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    categories = list(categories)
    if level == "binary" and len(categories) != 2:
        raise ValueError(f"a binary question has two categories, not {len(categories)}")
    codes = _encode(ratings, categories)
    raters, note = codes.shape[1] if codes.ndim == 2 else 0, None
    if raters == 2:
        both = (codes >= 0).all(axis=1)
        if not both.all():
            note = f"{_units(int((~both).sum()))} answered by only one of the two raters left out"
        codes = codes[both]
        clusters = _sub(clusters, both)
    k = len(categories)
    args = dict(n_boot=n_boot, seed=seed, note=note, clusters=clusters)
    out = [_percent(codes, k, **args)]
    if level == "interval":
        return out + [_alpha(codes, categories, "interval", values=values, **args)]
    if raters == 2:
        ca, cb = codes[:, 0], codes[:, 1]
        weightings = (None, "linear", "quadratic") if level == "ordinal" else (None,)
        weightings += (weights,) if weights is not None else ()
        out += [_cohen(ca, cb, categories, w, **args) for w in weightings]
    else:
        out.append(_fleiss(codes, categories, **args))
    out.append(_alpha(codes, categories, "nominal", **args))
    if level == "ordinal":
        out.append(_alpha(codes, categories, "ordinal", **args))
    if values is not None:
        out.append(_alpha(codes, categories, "interval", values=values, **args))
    out.append(_ac(codes, categories, None, **args))
    if level == "ordinal":
        out.append(_ac(codes, categories, "quadratic", **args))
    if weights is not None:
        out.append(_ac(codes, categories, weights, **args))
    if level == "binary":
        out.append(_pabak(codes, k, **args))
    return out
