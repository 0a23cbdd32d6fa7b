"""All agreement coefficients with 2,000 bootstrap resamples, 10,000 items x 5 raters.

A seeded ordinal table: 10,000 units, 5 raters, 4 categories with skewed prevalence,
raters agreeing about as clinicians do (most errors one category off, each rater with
a lean), ~10% of ratings missing. Ours: ``agreement_table(level="ordinal",
n_boot=2000, seed=0)`` - percent agreement, Fleiss' kappa, Krippendorff's alpha
(nominal and ordinal), Gwet's AC1 and AC2, each with its 2,000-resample percentile
interval - median of 3 runs. Bar: under 2 s.

Reference: the same bootstrap (2,000 resamples of the units, with replacement) done by
calling the reference libraries in a Python loop: per resample, ``krippendorff.alpha``
(ordinal) on the resampled matrix and statsmodels' ``fleiss_kappa`` on its complete-case
units - two coefficients where ours computes six. With ``--ref-resamples`` under 2,000
the loop is timed on that many resamples and extrapolated to 2,000. Prints the ratio
reference / ours, and both alpha (ordinal) intervals as a check it is the same bootstrap.

    .venv/bin/python bench/bench_coefficients.py [--ref-resamples 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labels.agreement import agreement_table  # noqa: E402

UNITS, RATERS, CATEGORIES, MISSING = 10_000, 5, [0, 1, 2, 3], 0.10
N_BOOT, RUNS, BAR_S = 2000, 3, 2.0


def dataset(seed: int = 0) -> np.ndarray:
    """units x raters floats, NaN where missing."""
    rng = np.random.default_rng(seed)
    k = len(CATEGORIES)
    truth = rng.choice(k, size=UNITS, p=[0.45, 0.30, 0.17, 0.08])
    lean = rng.choice([-1, 0, 1], size=RATERS, p=[0.25, 0.5, 0.25])  # each rater's drift
    err = rng.random((UNITS, RATERS))
    step = np.where(err < 0.15, rng.choice([-1, 1], (UNITS, RATERS)), 0)  # one off
    step = np.where((err >= 0.15) & (err < 0.22), lean, step)  # the rater's lean
    step = np.where(err >= 0.97, rng.integers(-3, 4, (UNITS, RATERS)), step)  # careless
    table = np.clip(truth[:, None] + step, 0, k - 1).astype(float)
    table[rng.random((UNITS, RATERS)) < MISSING] = np.nan
    return table


def reference_bootstrap(table: np.ndarray, resamples: int, seed: int = 0):
    """Per resample: alpha (ordinal) from krippendorff, Fleiss' kappa from statsmodels."""
    rng = np.random.default_rng(seed)
    alphas, kappas = [], []
    for _ in range(resamples):
        sample = table[rng.integers(0, len(table), len(table))]
        alphas.append(
            krippendorff.alpha(
                reliability_data=sample.T, value_domain=CATEGORIES, level_of_measurement="ordinal"
            )
        )
        complete = sample[~np.isnan(sample).any(axis=1)].astype(int)
        kappas.append(fleiss_kappa(aggregate_raters(complete, n_cat=len(CATEGORIES))[0]))
    return np.asarray(alphas), np.asarray(kappas)


def main(ref_resamples: int) -> None:
    table = dataset()
    ratings = [[None if np.isnan(x) else int(x) for x in row] for row in table.tolist()]
    times, coefs = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        coefs = agreement_table(ratings, CATEGORIES, "ordinal", n_boot=N_BOOT, seed=0)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)

    t0 = time.perf_counter()
    alphas, kappas = reference_bootstrap(table, ref_resamples)
    ref_run = time.perf_counter() - t0
    ref = ref_run * N_BOOT / ref_resamples

    missing = np.isnan(table).mean()
    print(f"data: {UNITS:,} units x {RATERS} raters, {len(CATEGORIES)} ordinal categories, "
          f"{missing:.1%} of ratings missing; {N_BOOT:,} bootstrap resamples of units")
    print(f"ours, agreement_table ({len(coefs)} coefficients, each with its interval): "
          f"median {ours:.2f} s of {RUNS} runs ({', '.join(f'{t:.2f}' for t in times)})  "
          f"(bar: < {BAR_S:.0f} s)")
    if ref_resamples == N_BOOT:
        how = f"{ref:.1f} s for {N_BOOT:,} resamples"
    else:
        how = (f"{ref_run:.1f} s for {ref_resamples:,} resamples, extrapolated to "
               f"{ref:.1f} s for {N_BOOT:,}")
    print(f"reference loop (krippendorff.alpha ordinal + statsmodels fleiss_kappa on "
          f"complete cases, per resample): {how}")
    print(f"ratio reference / ours: {ref / ours:.0f}x  (the reference computes 2 of our "
          f"{len(coefs)} coefficients)")
    by_key = {c.key: c for c in coefs}
    alpha, fleiss = by_key["krippendorff_alpha_ordinal"], by_key["fleiss_kappa"]
    lo, hi = np.quantile(alphas, [0.025, 0.975])
    print(f"alpha (ordinal) {alpha.value:.4f}: 95% interval ours {alpha.ci_low:.4f}-"
          f"{alpha.ci_high:.4f}, reference loop {lo:.4f}-{hi:.4f} ({ref_resamples:,} resamples)")
    lo, hi = np.quantile(kappas, [0.025, 0.975])
    print(f"Fleiss' kappa {fleiss.value:.4f} (all units): 95% interval ours {fleiss.ci_low:.4f}-"
          f"{fleiss.ci_high:.4f}; reference loop, complete cases only: {lo:.4f}-{hi:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref-resamples", type=int, default=N_BOOT,
                    help="resamples the reference loop runs (extrapolated to 2,000)")
    main(ap.parse_args().ref_resamples)
