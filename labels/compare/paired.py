"""Two models on the same prefixes: the difference of a metric with a paired interval,
McNemar's test for accuracy, and each model's chance of holding its rank.

Ranking models on whether their intervals overlap throws away the pairing: every
model answered the same prefixes, so much of the noise is shared. A pair of models is
compared on exactly the same units: the prefixes *both* were scored on (the
intersection; a prefix one of them failed or was not read on is left out of that
pair, and the pair says how many it rests on). Every bootstrap replicate draws the same
*cases* for both models (a CARE-Bench case's rounds, and each prefix's responses, are
correlated: resampling them apart would make intervals too narrow), so the difference
of two models in one replicate is paired. Input: per prefix, per model, the triage
table of ``labels.triage`` (gold rows, predicted columns, a last column for a missing
prediction), and each prefix's case; every number comes from
``labels.triage.triage_metric_batch``.

Each model's chance of holding its rank is read off replicates that draw the same
cases for all models, each model scored on everything it covers in them (as the
leaderboard ranks them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

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
    n_units: int = 0
    """Units (prefixes) both models were scored on: the only ones the difference uses."""
    n_cases: int = 0
    """Cases those units fall in: what the bootstrap resampled for both models."""


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
    saying what they are); ``correct``: model -> prefix -> was the prediction right, for
    McNemar's test. Each pair is compared on the units both models were scored on."""
    models = list(models)
    tables = np.asarray(tables, dtype=float)
    per_cluster = cluster_tables(tables, clusters)
    report = PairedComparison(key, models, len(per_cluster), n_boot, seed)
    if len(models) < 2 or not len(per_cluster):
        return report
    what = "cases" if clusters is not None else unit_name
    if note := small_n_note(len(per_cluster), what):
        report.notes.append(note)
    lower = key in LOWER_IS_BETTER
    m = len(models)
    shape = per_cluster.shape[2:]

    def metric(t: np.ndarray) -> np.ndarray:  # (B, models, K, K+1) -> (B, models)
        flat = t.reshape((-1,) + shape)
        return triage_metric_batch(key, flat, order, missing=missing).reshape(t.shape[:2])

    observed = metric(per_cluster.sum(axis=0)[None])[0]
    replicates = metric(_replicate_tables(per_cluster, n_boot, seed))
    observed_rank = _ranks(observed[None], lower)[0]
    rank_rep = _ranks(replicates, lower) if n_boot else np.zeros((0, m))
    for j, model in enumerate(models):
        ok = np.isfinite(replicates[:, j]) if n_boot else np.zeros(0, bool)
        report.rank_probability[model] = (
            None if not ok.any() or np.isnan(observed_rank[j])
            else float((rank_rep[ok, j] == observed_rank[j]).mean()))
    k = len(order)
    scored = (tables[..., :k] if missing == "left_out" else tables).sum(axis=(2, 3)) > 0
    unit_clusters = None if clusters is None else np.asarray(list(clusters), dtype=object)
    for i in range(m):
        for j in range(i + 1, m):
            both = scored[:, i] & scored[:, j]
            shared = cluster_tables(tables[both][:, [i, j]],
                                    None if clusters is None else list(unit_clusters[both]))
            pair = _pair(models[i], models[j], key, metric, shared, n_boot, seed, lower,
                         correct)
            report.pairs.append(replace(pair, n_units=int(both.sum()), n_cases=len(shared)))
    if any(d.n_units < len(tables) for d in report.pairs):
        report.notes.append(
            f"each pair of models is compared on the {unit_name} both were scored on (the n "
            "beside each pair), not on everything each one covers")
    return report


def _replicate_tables(per_cluster: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the summed tables: each draws as many clusters
    as there are, with replacement, the same draws for every model (axis 1)."""
    rng = np.random.default_rng(seed)
    c = len(per_cluster)
    flat = per_cluster.reshape(c, -1)
    picks = rng.integers(0, c, size=(n_boot, c))
    draws = np.bincount((np.arange(n_boot)[:, None] * c + picks).ravel(),
                        minlength=n_boot * c).reshape(n_boot, c).astype(float)
    return (draws @ flat).reshape((n_boot,) + per_cluster.shape[1:])


def _pair(a, b, key, metric, shared, n_boot, seed, lower, correct) -> PairDifference:
    """A minus B on their shared units (``shared``: per case, both models' tables)."""
    mcnemar, discordant = None, None
    if correct is not None:
        common = correct.get(a, {}).keys() & correct.get(b, {}).keys()
        rw = sum(1 for p in common if correct[a][p] and not correct[b][p])
        wr = sum(1 for p in common if not correct[a][p] and correct[b][p])
        mcnemar, discordant = mcnemar_exact(rw, wr), (rw, wr)
    if not len(shared):
        return PairDifference(a, b, key, None, None, None,
                              "cannot say: no prefix was scored for both models",
                              mcnemar, discordant)
    observed = metric(shared.sum(axis=0)[None])[0]
    diff = observed[0] - observed[1]
    if not np.isfinite(diff):
        return PairDifference(a, b, key, None, None, None,
                              "cannot say: the metric is undefined for one of the two models "
                              "on the prefixes both were scored on", mcnemar, discordant)
    replicates = metric(_replicate_tables(shared, n_boot, seed))
    d = replicates[:, 0] - replicates[:, 1]
    ok = np.isfinite(d)
    if not len(d) or (~ok).sum() > len(d) * MAX_UNDEFINED_SHARE:
        return PairDifference(a, b, key, float(diff), None, None,
                              f"{a} minus {b}: {diff:+.2f}; no interval", mcnemar, discordant)
    low, high = (float(x) for x in np.quantile(d[ok], [0.025, 0.975]))
    better = a if (diff < 0) == lower else b
    if low > 0 or high < 0:
        verdict = f"{better} is better: the 95% interval of the difference excludes 0"
    else:
        verdict = "not settled: the 95% interval of the difference includes 0"
    return PairDifference(a, b, key, float(diff), low, high, verdict, mcnemar, discordant)
