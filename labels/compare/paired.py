"""Two models on the same prefixes: the difference of a metric with a paired interval,
McNemar's test for accuracy, and each model's chance of holding its rank.

Ranking models on whether their intervals overlap throws away the pairing: every
model answered the same prefixes, so much of the noise is shared. Here every
bootstrap replicate draws the same *cases* for all models (a CARE-Bench case's
rounds, and each prefix's responses, are correlated: resampling them apart would
make intervals too narrow), and each model's metric is computed on its own scored
responses within those cases, so the difference of two models in one replicate is
paired. Input: per case, per model, the summed triage table of ``labels.triage``
(gold rows, predicted columns, a last column for a missing prediction); every number
comes from ``labels.triage.triage_metric_batch``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from labels.intervals import MAX_UNDEFINED_SHARE, cluster_tables, small_n_note
from labels.triage import LOWER_IS_BETTER, triage_metric_batch


@dataclass(frozen=True)
class PairDifference:
    """Model A's metric minus model B's, with a paired 95% interval."""

    a: str
    b: str
    key: str
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    """In words: which is better, or that the sample does not settle it."""
    mcnemar_p: float | None = None
    """Exact McNemar test of equal accuracy, whatever the metric compared, on the
    prefixes both models were scored on (it ignores the clustering by case); None
    without per-prefix correctness."""
    discordant: tuple[int, int] | None = None
    """(A right and B wrong, A wrong and B right) prefixes, for McNemar."""


@dataclass
class PairedComparison:
    """Every pair of models on one labelling, by one metric."""

    key: str
    models: list[str]
    cases: int
    """Clusters resampled (cases; prefixes where no case is known)."""
    n_boot: int
    seed: int
    pairs: list[PairDifference] = field(default_factory=list)
    rank_probability: dict[str, float | None] = field(default_factory=dict)
    """model -> share of replicates in which it holds the rank it has on the data."""
    notes: list[str] = field(default_factory=list)


def _ranks(values: np.ndarray, lower_is_better: bool) -> np.ndarray:
    """Ranks (1 = best, ties share the mean position) of each row; NaN stays NaN."""
    from scipy.stats import rankdata

    worst = np.inf if lower_is_better else -np.inf
    v = np.where(np.isnan(values), worst, values)
    ranks = rankdata(v if lower_is_better else -v, method="average", axis=1)
    return np.where(np.isnan(values), np.nan, ranks)


def mcnemar_exact(right_wrong: int, wrong_right: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of the discordant pairs
    against 1/2 (1.0 when there are none)."""
    n = right_wrong + wrong_right
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(min(right_wrong, wrong_right), n, 0.5).pvalue)


def paired_comparison(
    tables: np.ndarray,
    models: Sequence[str],
    order: Sequence[str],
    key: str = "macro_f1",
    *,
    clusters: Sequence | None = None,
    correct: dict[str, dict[str, bool]] | None = None,
    missing: str = "left_out",
    n_boot: int = 1000,
    seed: int = 0,
    unit_name: str = "prefixes",
) -> PairedComparison:
    """Every pair of ``models`` on metric ``key``. ``tables``: shape (units, models, K,
    K+1), each unit's triage table per model (zero where the model has nothing there);
    ``clusters``: each unit's case (None: units resampled one by one, ``unit_name``
    saying what they are); ``correct``:
    model -> prefix -> was the prediction right, for McNemar's test."""
    models = list(models)
    tables = np.asarray(tables, dtype=float)
    per_cluster = cluster_tables(tables, clusters)
    report = PairedComparison(key, models, len(per_cluster), n_boot, seed)
    if len(models) < 2 or not len(per_cluster):
        return report
    if note := small_n_note(len(per_cluster), "cases" if clusters is not None else unit_name):
        report.notes.append(note)
    lower = key in LOWER_IS_BETTER
    m = len(models)
    shape = per_cluster.shape[2:]

    def metric(t: np.ndarray) -> np.ndarray:  # (B, models, K, K+1) -> (B, models)
        flat = t.reshape((-1,) + shape)
        return triage_metric_batch(key, flat, order, missing=missing).reshape(t.shape[0], m)

    observed = metric(per_cluster.sum(axis=0)[None])[0]
    rng = np.random.default_rng(seed)
    c = len(per_cluster)
    flat = per_cluster.reshape(c, -1)
    # Each replicate draws c cases with replacement: how often each was drawn.
    picks = rng.integers(0, c, size=(n_boot, c))
    draws = np.bincount((np.arange(n_boot)[:, None] * c + picks).ravel(),
                        minlength=n_boot * c).reshape(n_boot, c).astype(float)
    replicates = metric((draws @ flat).reshape((len(draws), m) + shape))
    observed_rank = _ranks(observed[None], lower)[0]
    rank_rep = _ranks(replicates, lower) if n_boot else np.zeros((0, m))
    for j, model in enumerate(models):
        ok = np.isfinite(replicates[:, j]) if n_boot else np.zeros(0, bool)
        report.rank_probability[model] = (
            None if not ok.any() or np.isnan(observed_rank[j])
            else float((rank_rep[ok, j] == observed_rank[j]).mean()))
    for i in range(m):
        for j in range(i + 1, m):
            report.pairs.append(_pair(models[i], models[j], i, j, key, observed, replicates,
                                      lower, correct))
    return report


def _pair(a, b, i, j, key, observed, replicates, lower, correct) -> PairDifference:
    diff = observed[i] - observed[j]
    mcnemar, discordant = None, None
    if correct is not None:
        shared = correct.get(a, {}).keys() & correct.get(b, {}).keys()
        rw = sum(1 for p in shared if correct[a][p] and not correct[b][p])
        wr = sum(1 for p in shared if not correct[a][p] and correct[b][p])
        mcnemar, discordant = mcnemar_exact(rw, wr), (rw, wr)
    if not np.isfinite(diff):
        return PairDifference(a, b, key, None, None, None,
                              "cannot say: the metric is undefined for one of the two models",
                              mcnemar, discordant)
    d = replicates[:, i] - replicates[:, j]
    ok = np.isfinite(d)
    if not len(d) or (~ok).sum() > len(d) * MAX_UNDEFINED_SHARE:
        return PairDifference(a, b, key, float(diff), None, None,
                              f"{a} minus {b}: {diff:+.2f}; no interval", mcnemar, discordant)
    low, high = (float(x) for x in np.quantile(d[ok], [0.025, 0.975]))
    better, worse = (a, b) if (diff < 0) == lower else (b, a)
    if low > 0 or high < 0:
        verdict = f"{better} is better: the 95% interval of the difference excludes 0"
    else:
        verdict = "not settled: the 95% interval of the difference includes 0"
    return PairDifference(a, b, key, float(diff), low, high, verdict, mcnemar, discordant)
