"""An honest label budget: plan-labels' figure, made from a 40-label pilot, reaches its
target in at least 80% of pilots (the issue's study: 300 responses, a machine whose
correlation with the clinicians is about 0.73, a target of 0.08)."""

from __future__ import annotations

import numpy as np

from labels.ppi.budget import ASSURANCE, plan_model, uniform_design
from labels.ppi.finite import finite_ppi_mean, uniform_labels
from labels.ppi.readings import Readings


def population(rng, big_n: int = 300):
    y = (rng.random(big_n) < 0.5).astype(float)
    machine = np.where(rng.random(big_n) < 0.135, 1 - y, y)  # correlation about 0.73
    return y, machine


def true_half_width(y, machine, n, rng, replicates=150) -> float:
    """The mean half-width the estimate would have at n labels on this very population."""
    widths = []
    for _ in range(replicates):
        drawn = rng.choice(len(y), n, replace=False)
        widths.append(finite_ppi_mean(machine, uniform_labels(drawn, y[drawn], len(y)))
                      .half_width)
    return float(np.mean(widths))


def test_the_plan_reaches_its_target_in_at_least_80_percent_of_pilots():
    y, machine = population(np.random.default_rng(37))
    assert 0.72 < np.corrcoef(y, machine)[0, 1] < 0.75
    rng = np.random.default_rng(27)
    target, pilots = 0.08, 60
    reached, planned, cache = 0, [], {}
    for _ in range(pilots):
        pilot = rng.choice(len(y), 40, replace=False)
        readings = Readings("m", list(range(len(y))), [str(i) for i in range(len(y))],
                            list(machine), {int(i): float(y[i]) for i in pilot})
        need = plan_model(readings, target, [uniform_design()],
                          seed=int(rng.integers(1 << 30))).needs[0]
        assert need.assurance >= ASSURANCE - 0.01
        n = need.labels_needed
        planned.append(n)
        if n not in cache:
            cache[n] = true_half_width(y, machine, n, rng)
        reached += cache[n] <= target
    assert reached / pilots >= 0.8, (reached, sorted(planned))
    # and not by asking for everything: the typical plan is well short of all 300
    assert np.median(planned) < 200


def test_the_anytime_plan_asks_more_than_the_fixed_one():
    rng = np.random.default_rng(5)
    y, machine = population(rng, 2000)
    pilot = rng.choice(len(y), 60, replace=False)
    readings = Readings("m", list(range(len(y))), [str(i) for i in range(len(y))],
                        list(machine), {int(i): float(y[i]) for i in pilot})
    fixed, anytime = plan_model(readings, 0.05, [uniform_design(),
                                                 uniform_design(anytime=True)]).needs
    assert 1.8 < anytime.typical / fixed.typical < 2.8  # (1.55)^2, less the correction
