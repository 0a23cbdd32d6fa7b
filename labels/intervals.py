"""Intervals: Wilson's for a share, the percentile bootstrap for everything else, and the
words that say when an interval means little.

One place for each: ``labels.agreement`` (coefficients), ``labels.triage`` (the
scorer's shares), ``labels.healthbench_meta`` and ``labels.healthbench_score`` all
take their intervals from here.

The bootstrap resamples *clusters*: by default each unit is its own cluster (the
classic bootstrap over units); given ``clusters``, units of one cluster (a CARE-Bench
case's rounds, a prefix's responses) are drawn together, because they are
correlated and resampling them apart would make the interval too narrow.

This module imports numpy only: every ``carelens`` command may load it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
Z95 = 1.959963984540054
"""The standard normal quantile for a two-sided 95% interval."""
SMALL_N = 20
"""Below this many units (or clusters), an interval is flagged as resting on too few to
mean much: percentile bootstrap and normal-theory intervals are both unreliable there
(convention, not a theorem; the note says how many there were)."""
MAX_UNDEFINED_SHARE = 0.5
"""Above this share of undefined resamples no bootstrap interval is given."""


def wilson_interval(count: float, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for ``count`` successes in ``n`` (None when n is 0).

    It stays inside 0-1 and holds up at 0 or n successes, where the Wald interval
    collapses to a point."""
    if n <= 0:
        return None
    p = count / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class BootstrapInterval:
    """A percentile bootstrap interval and how many replicates it rests on."""

    low: float | None
    high: float | None
    replicates: int
    """Replicates drawn."""
    undefined_replicates: int
    """Replicates where the statistic was undefined (left out of the percentiles)."""
    note: str | None = None
    clusters: int = 0
    """What was resampled: units, or clusters of units (cases)."""

    @property
    def dropped_share(self) -> float | None:
        """The share of replicates left out as undefined (None when none were drawn)."""
        return self.undefined_replicates / self.replicates if self.replicates else None


def cluster_tables(unit_tables, clusters: Sequence | None) -> np.ndarray:
    """Units' additive tables summed per cluster (first-seen order); the units' own
    tables when ``clusters`` is None."""
    tables = np.asarray(unit_tables, dtype=float)
    if clusters is None:
        return tables
    if len(clusters) != len(tables):
        raise ValueError(f"{len(clusters)} cluster ids for {len(tables)} units")
    index: dict = {}
    ids = np.array([index.setdefault(c, len(index)) for c in clusters], dtype=np.int64)
    out = np.zeros((len(index),) + tables.shape[1:])
    np.add.at(out, ids, tables)
    return out


def _distinct_rows(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(flat, axis=0, return_inverse=True)``, in the same (lexicographic)
    order, fast for the tables units contribute (small whole counts): each row is read
    as one number in mixed radix, so one sort of integers replaces a sort of rows."""
    if flat.size and flat.min() >= 0 and np.array_equal(flat, np.floor(flat)):
        base = flat.max(axis=0).astype(np.int64) + 1
        if float(np.prod(base.astype(float))) < 2.0**62:
            place = np.ones(len(base), dtype=np.int64)
            for c in range(len(base) - 2, -1, -1):
                place[c] = place[c + 1] * base[c + 1]
            _, first, inverse = np.unique(flat.astype(np.int64) @ place, return_index=True,
                                          return_inverse=True)
            return flat[first], inverse.ravel()
    distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
    return distinct, inverse.ravel()


def bootstrap_ci(
    statistic: Callable[[np.ndarray], np.ndarray],
    unit_tables,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    clusters: Sequence | None = None,
) -> BootstrapInterval:
    """Percentile bootstrap interval of a statistic, resampling units (or, with
    ``clusters``, whole clusters of units) with replacement.

    ``unit_tables`` holds each unit's additive contribution to the statistic's
    sufficient table, shape (units, ...). ``statistic`` maps a batch of summed
    tables, shape (B, ...), to B values, NaN where undefined.

    Speed: a resample's table is the sum of its clusters' tables, which depends only
    on how many copies of each *distinct* cluster table were drawn. Those counts are
    multinomial(n, frequencies), so we draw them directly and take one matrix
    product per batch of replicates: no Python loop over units or replicates.
    """
    tables = cluster_tables(unit_tables, clusters)
    n = tables.shape[0] if tables.ndim else 0
    if n == 0 or n_boot < 1:
        return BootstrapInterval(None, None, 0, 0, "no units to resample" if n == 0 else None)
    flat = tables.reshape(n, -1)
    distinct, inverse = _distinct_rows(flat)
    freq = np.bincount(inverse.ravel(), minlength=len(distinct)) / n
    rng = np.random.default_rng(seed)
    batch = max(1, min(n_boot, 4_000_000 // len(distinct)))  # bound memory of the draws
    values = []
    for start in range(0, n_boot, batch):
        draws = rng.multinomial(n, freq, size=min(batch, n_boot - start))
        totals = (draws @ distinct).reshape((len(draws),) + tables.shape[1:])
        values.append(np.asarray(statistic(totals), dtype=float))
    vals = np.concatenate(values)
    ok = np.isfinite(vals)
    undefined = int((~ok).sum())
    size = n if clusters is not None else 0
    if undefined > n_boot * MAX_UNDEFINED_SHARE:
        return BootstrapInterval(
            None, None, n_boot, undefined,
            f"{undefined} of {n_boot} bootstrap resamples ({undefined / n_boot:.0%}) were "
            "undefined; no interval", size)
    tail = (1 - confidence) / 2
    low, high = np.quantile(vals[ok], [tail, 1 - tail])
    note = (
        f"{undefined} of {n_boot} bootstrap resamples ({undefined / n_boot:.1%}) were undefined "
        "and left out, so the interval describes the resamples where the statistic exists"
        if undefined
        else None
    )
    return BootstrapInterval(float(low), float(high), n_boot, undefined, note, size)


def degenerate_note(low: float | None, high: float | None, value: float | None) -> str | None:
    """Words for an interval of no width: it does not mean the value is certain."""
    if low is None or high is None or value is None or high - low > 1e-12:
        return None
    return (f"the interval has no width ({low:.2f} to {high:.2f}): every resample gave the "
            "same value (e.g. every unit agreed, or one answer was given throughout), so it "
            "says nothing about how far the value could move with other units")


def small_n_note(n: int, what: str = "units") -> str | None:
    """A warning when an interval rests on fewer than ``SMALL_N`` units or clusters."""
    if 0 < n < SMALL_N:
        return (f"only {n} {what}: below {SMALL_N}, an interval is rough and may be far too "
                "narrow")
    return None


def interval_warnings(value, low, high, n: int, clusters: int | None = None,
                      dropped: float | None = None, what: str = "units") -> tuple[str, ...]:
    """What makes an interval mean little, in words: no width, too few units (or cases),
    resamples where the statistic was undefined (``what``: what the units are). The one place every output (command
    text and ``--json``, screens) takes these words from."""
    out = [w for w in (degenerate_note(low, high, value),
                       small_n_note(clusters if clusters else n,
                                    "cases" if clusters else what)) if w]
    if dropped:
        out.append(f"{dropped:.1%} of the bootstrap resamples were undefined and left out")
    return tuple(out)
