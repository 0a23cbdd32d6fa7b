"""Paired model comparisons on exactly the same prefixes (fix round F3, issue 17 point 6):
a pair is compared on the prefixes both models were scored on, with that n said, and each
bootstrap replicate draws the same cases for both."""

from __future__ import annotations

import numpy as np
import pytest

from labels.compare.paired import paired_comparison
from labels.triage import CAREBENCH_ORDER, triage_tables

A0, B0, A1, B1 = CAREBENCH_ORDER


def _tables(gold, *readings):
    """(prefixes, models, K, K+1); a model's None where it was not scored (no table)."""
    out = np.zeros((len(gold), len(readings), 4, 5))
    for j, said in enumerate(readings):
        for i, (g, p) in enumerate(zip(gold, said, strict=True)):
            if p is not None:
                out[i, j] = triage_tables([g], [p], CAREBENCH_ORDER)[0]
    return out


def test_a_pair_is_compared_on_the_prefixes_both_were_scored_on():
    # 40 prefixes in 20 cases; "full" read all 40, "half" only the first 20, where the two
    # said exactly the same. On the last 20 "full" is always wrong.
    gold = [CAREBENCH_ORDER[i % 4] for i in range(40)]
    half = [g if i % 3 else A0 for i, g in enumerate(gold[:20])] + [None] * 20
    full = half[:20] + [CAREBENCH_ORDER[(CAREBENCH_ORDER.index(g) + 1) % 4] for g in gold[20:]]
    cases = [i // 2 for i in range(40)]
    p = paired_comparison(_tables(gold, full, half), ["full", "half"], CAREBENCH_ORDER,
                          "accuracy", clusters=cases, n_boot=300, seed=5)
    (pair,) = p.pairs
    # the same answers on the same prefixes: no difference, in every replicate
    assert pair.difference == 0.0 and (pair.ci_low, pair.ci_high) == (0.0, 0.0)
    assert (pair.n_units, pair.n_cases) == (20, 10)
    assert pair.verdict.startswith("not settled")
    assert any("both were scored on" in n for n in p.notes)


def test_the_replicates_draw_the_same_cases_for_both_models():
    rng = np.random.default_rng(7)
    gold = [CAREBENCH_ORDER[i % 4] for i in range(60)]
    good = [g if rng.random() < 0.85 else A0 for g in gold]
    # two models that read every prefix alike: identical in every replicate only if each
    # replicate draws the same cases for both
    p = paired_comparison(_tables(gold, good, list(good)), ["good", "same"], CAREBENCH_ORDER,
                          "macro_f1", clusters=[i // 3 for i in range(60)], n_boot=200, seed=1)
    (pair,) = p.pairs
    assert (pair.difference, pair.ci_low, pair.ci_high) == (0.0, 0.0, 0.0)
    assert (pair.n_units, pair.n_cases) == (60, 20)


def test_the_leaderboard_states_each_pairs_n(demo):
    from labels.compare import triage_comparison
    from labels.compare.text import paired_lines

    report = triage_comparison(demo, n_boot=100, seed=0, rank_by="accuracy")
    x = report.labellings[0]
    assert x.paired is not None and x.paired.pairs
    for d in x.paired.pairs:
        assert 0 < d.n_cases <= d.n_units
        covered = [x.coverage[m].scored for m in (d.a, d.b)]
        assert d.n_units <= min(covered)
    lines = paired_lines(x)
    d = x.paired.pairs[0]
    assert any(f"on the {d.n_units} prefixes in {d.n_cases} cases both were scored on" in line
               for line in lines)


def test_a_pair_with_no_prefix_in_common_says_so():
    gold = [A0, B0, A1, B1]
    p = paired_comparison(_tables(gold, [A0, B0, None, None], [None, None, A1, B1]),
                          ["a", "b"], CAREBENCH_ORDER, "accuracy", n_boot=50)
    (pair,) = p.pairs
    assert pair.difference is None and "no prefix was scored for both" in pair.verdict
    assert pair.n_units == 0


@pytest.mark.parametrize(("missing", "shared"), [("left_out", 19), ("wrong", 20)])
def test_a_failed_generation_is_shared_only_when_it_counts_as_wrong(missing, shared):
    gold = [A0, B0, A1, B1] * 5
    failed_once = [None if i == 0 else g for i, g in enumerate(gold)]
    tables = np.stack([triage_tables(gold, said, CAREBENCH_ORDER)
                       for said in (gold, failed_once)], axis=1)
    p = paired_comparison(tables, ["a", "b"], CAREBENCH_ORDER, "accuracy", missing=missing,
                          n_boot=50)
    assert p.pairs[0].n_units == shared
