"""Do the prediction-powered intervals hold, and which review design needs fewest labels?

Simulated CARE-Bench studies with known truth. Three models answer 400 prefixes
each; a reply names the gold action with probability 0.80 (model-a), 0.65
(model-b), 0.50 (model-c), so each model's true accuracy is known exactly.
Some replies are vague (15%, 25%, 40% of each model's: the weaker the model,
the vaguer), and the mapper reads vague replies badly: mapper v2 reads a reply
right 95% of the time, 60% when it is vague; an older mapper v1 errs
independently 10% of the time, 45% on vague replies, so the two versions
disagree mostly where v2 is likely wrong. The machine's accuracy reading is
therefore biased, and more for the weaker models: machine-dependent errors.

Per study and model, clinicians label n of the 400 replies by one of three
designs, as carelens rounds draw them (``review.team.designs``):

- uniform: a simple random sample;
- stratified by the mapper's label, in proportion (each stratum's probability
  n_h / N_h, recorded exactly, so the weighted estimator is used whenever
  rounding makes them unequal);
- weighted toward the replies where v1 and v2 disagree (size 0.5 + score:
  at most 3 times as often; systematic PPS draw).

and each model's accuracy is estimated as ``carelens ppi`` does
(``labels.ppi.estimators``): PPI++ and the clinicians alone (uniform: ppi-python's
formulas; unequal probabilities: the 1/probability-weighted estimators), and
the machine alone. Printed:

1. coverage of the truth by each 95% interval and its mean width, over
   ``--studies`` studies (default 600) at ``--labels`` labels per model (100);
2. the weighted design's bias (mean estimate minus truth) against its Monte
   Carlo error;
3. labels per model each design needs for a mean 95% half-width of at most
   ``--target`` (0.06), found by bisection over n (``--plan-studies`` studies at
   each n), for PPI and the clinicians alone;
4. what ``carelens plan-labels`` (``labels.ppi.budget``) predicts from one
   40-label uniform pilot per model, beside the simulated answer.

    .venv/bin/python bench/bench_ppi_simulation.py [--studies 600] [--labels 50] [--target 0.06]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labels.ppi.budget import PlanDesign, plan_model, uniform_design  # noqa: E402
from labels.ppi.estimators import (  # noqa: E402
    classical_mean,
    design_classical_mean,
    design_ppi_mean,
    machine_mean,
    ppi_mean,
)
from labels.ppi.readings import Readings  # noqa: E402
from review.team.designs import systematic_draw, weighted_probabilities  # noqa: E402

MODELS = {"model-a": (0.80, 0.15), "model-b": (0.65, 0.25), "model-c": (0.50, 0.40)}
"""model -> (accuracy = the truth, share of vague replies)."""
ITEMS = 400
GOLD_SHARES = [0.25, 0.30, 0.25, 0.20]
DESIGNS = ("uniform", "stratified", "weighted")
DESIGN_NAMES = {"uniform": "uniform", "stratified": "stratified by mapper label",
                "weighted": "weighted (mappers disagree)"}


OTHERS = np.array([[x for x in range(4) if x != c] for c in range(4)])
_W = np.array([[2.0 if abs(x - c) == 1 else 1.0 for x in OTHERS[c]] for c in range(4)])
CUMULATIVE = np.cumsum(_W / _W.sum(axis=1, keepdims=True), axis=1)


def _other(codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A different code, the adjacent ones twice as likely as the others."""
    pick = (rng.random(len(codes))[:, None] > CUMULATIVE[codes]).sum(axis=1)
    return OTHERS[codes, np.minimum(pick, 2)]


def population(model: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One model's replies: the clinicians' accuracy reading (truth), the mapper v2's,
    whether v1 and v2 disagree, and v2's label."""
    accuracy, vague_share = MODELS[model]
    gold = rng.choice(4, size=ITEMS, p=GOLD_SHARES)
    right = rng.random(ITEMS) < accuracy
    said = np.where(right, gold, _other(gold, rng))
    vague = rng.random(ITEMS) < vague_share
    v2_wrong = rng.random(ITEMS) < np.where(vague, 0.40, 0.05)
    v2 = np.where(v2_wrong, _other(said, rng), said)
    v1_wrong = rng.random(ITEMS) < np.where(vague, 0.45, 0.10)
    v1 = np.where(v1_wrong, _other(said, rng), said)
    return {"y": (said == gold).astype(float), "f": (v2 == gold).astype(float),
            "score": (v1 != v2).astype(float), "label": v2}


def proportional(sizes: dict, n: int) -> dict:
    """n split across strata in proportion to their sizes (largest remainder)."""
    total = sum(sizes.values())
    shares = {k: n * s / total for k, s in sizes.items()}
    out = {k: int(v) for k, v in shares.items()}
    for k in sorted(shares, key=lambda k: out[k] - shares[k])[: n - sum(out.values())]:
        out[k] += 1
    return out


def draw(design: str, pop: dict, n: int, rng: np.random.Generator,
         py_rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """(mask of the labelled replies, every reply's inclusion probability)."""
    mask = np.zeros(ITEMS, dtype=bool)
    if design == "uniform":
        mask[rng.choice(ITEMS, size=n, replace=False)] = True
        return mask, np.full(ITEMS, n / ITEMS)
    if design == "stratified":
        strata = {k: np.flatnonzero(pop["label"] == k) for k in range(4)}
        take = proportional({k: len(v) for k, v in strata.items()}, n)
        pi = np.zeros(ITEMS)
        for k, members in strata.items():
            if len(members):
                mask[rng.choice(members, size=take[k], replace=False)] = True
                pi[members] = take[k] / len(members)
        return mask, pi
    probabilities = weighted_probabilities(dict(enumerate(pop["score"])), n)
    mask[systematic_draw(probabilities, py_rng)] = True
    return mask, np.array([probabilities[i] for i in range(ITEMS)])


def estimate(pop: dict, mask: np.ndarray, pi: np.ndarray):
    """(PPI, clinicians alone), as carelens estimates them: ppi-python's formulas when
    every reply had the same chance, the weighted ones otherwise."""
    y, f = pop["y"], pop["f"]
    if np.allclose(pi, pi[0], rtol=1e-9):
        return ppi_mean(y[mask], f[mask], f[~mask]), classical_mean(y[mask])
    return (design_ppi_mean(y[mask], f[mask], pi[mask], f[~mask]),
            design_classical_mean(y[mask], pi[mask], n_unlabeled=int((~mask).sum())))


def coverage_study(studies: int, n: int, seed: int) -> dict:
    rng, py_rng = np.random.default_rng(seed), random.Random(seed)
    out = {}  # (model, design, estimator) -> list of (value, low, high)
    for _ in range(studies):
        for model in MODELS:
            pop = population(model, rng)
            m = machine_mean(pop["f"])
            out.setdefault((model, "-", "machine only"), []).append((m.value, m.ci_low, m.ci_high))
            for design in DESIGNS:
                mask, pi = draw(design, pop, n, rng, py_rng)
                for name, e in zip(("PPI", "clinicians only"), estimate(pop, mask, pi),
                                   strict=True):
                    out.setdefault((model, design, name), []).append((e.value, e.ci_low, e.ci_high))
    return out


def mean_half_width(model: str, design: str, n: int, which: int, studies: int,
                    seed: int) -> float:
    rng, py_rng = np.random.default_rng(seed), random.Random(seed)
    widths = []
    for _ in range(studies):
        pop = population(model, rng)
        mask, pi = draw(design, pop, n, rng, py_rng)
        e = estimate(pop, mask, pi)[which]
        widths.append(e.half_width)
    return float(np.mean(widths))


def labels_needed(model: str, design: str, which: int, target: float, studies: int,
                  seed: int) -> int | None:
    low, high = 10, ITEMS
    if mean_half_width(model, design, high, which, studies, seed) > target:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if mean_half_width(model, design, middle, which, studies, seed) <= target:
            high = middle
        else:
            low = middle
    return high


def planner_prediction(model: str, target: float, seed: int) -> dict[str, int | None]:
    """What labels.ppi.budget predicts from one uniform pilot of 40 labels of this model."""
    rng = np.random.default_rng(seed)
    pop = population(model, rng)
    pilot = rng.choice(ITEMS, size=40, replace=False)
    readings = Readings(model, list(range(ITEMS)), [str(i) for i in range(ITEMS)],
                        list(pop["f"]), {int(i): float(pop["y"][i]) for i in pilot})
    scores = dict(enumerate(pop["score"]))
    def probabilities(n: int) -> np.ndarray:
        chance = weighted_probabilities(scores, n)
        return np.array([chance[i] for i in range(ITEMS)])

    weighted = PlanDesign("weighted", "weighted", probabilities, pop["score"])
    plan = plan_model(readings, target, [uniform_design(), weighted], seed=seed)
    return {need.design: need.labels_needed for need in plan.needs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=600)
    parser.add_argument("--labels", type=int, default=100, help="labels per model per study")
    parser.add_argument("--target", type=float, default=0.06, help="95%% half-width to reach")
    parser.add_argument("--plan-studies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    start = time.perf_counter()

    print(f"== {args.studies} simulated studies, {len(MODELS)} models x {ITEMS} replies, "
          f"{args.labels} clinician labels per model; truth = each model's accuracy")
    results = coverage_study(args.studies, args.labels, args.seed)
    print(f"{'model':9} {'design':28} {'estimate':16} {'coverage':>8} {'mean width':>10} "
          f"{'bias':>8} {'MC err':>7}")
    worst = 1.0
    for model, (truth, _) in MODELS.items():
        for key in [(model, "-", "machine only")] + [(model, d, e) for d in DESIGNS
                                                      for e in ("PPI", "clinicians only")]:
            rows = np.array(results[key], dtype=float)
            cover = float(np.mean((rows[:, 1] <= truth) & (truth <= rows[:, 2])))
            width = float(np.mean(rows[:, 2] - rows[:, 1]))
            bias = float(np.mean(rows[:, 0]) - truth)
            mc = float(np.std(rows[:, 0], ddof=1) / np.sqrt(len(rows)))
            if key[2] != "machine only":
                worst = min(worst, cover)
            design = DESIGN_NAMES.get(key[1], "(every reply, machine)")
            print(f"{model:9} {design:28} {key[2]:16} {cover:8.1%} {width:10.3f} "
                  f"{bias:+8.4f} {mc:7.4f}")
    print(f"lowest coverage of a PPI or clinicians-only interval: {worst:.1%} "
          f"(target >= 93%: {'met' if worst >= 0.93 else 'NOT MET'}; Monte Carlo error of a "
          f"coverage near 95%: {np.sqrt(0.95 * 0.05 / args.studies):.1%})")
    for model in MODELS:
        u = np.mean(np.diff(np.array(results[(model, "uniform", "clinicians only")])[:, 1:]))
        w = np.mean(np.diff(np.array(results[(model, "weighted", "clinicians only")])[:, 1:]))
        if w > u:
            print(f"{model}: the weighted design does NOT help the clinicians-only estimate: its "
                  f"interval is {w / u - 1:.0%} wider than uniform's (the weights cost variance;"
                  " only PPI, whose correction is where the machine errs, gains)")

    print("\n== the weighted design's PPI estimate: bias against Monte Carlo error")
    for model, (truth, _) in MODELS.items():
        rows = np.array(results[(model, "weighted", "PPI")], dtype=float)
        bias = float(np.mean(rows[:, 0]) - truth)
        mc = float(np.std(rows[:, 0], ddof=1) / np.sqrt(len(rows)))
        verdict = "within" if abs(bias) <= 2 * mc else "OUTSIDE"
        print(f"{model}: bias {bias:+.4f}, Monte Carlo error {mc:.4f} ({bias / mc:+.2f} errors:"
              f" {verdict} 2 errors)")

    print(f"\n== labels per model for a mean 95% half-width <= {args.target:g} "
          f"({args.plan_studies} studies at each n; of {ITEMS} replies)")
    print(f"{'model':9} " + " ".join(f"{DESIGN_NAMES[d] + ' PPI':>34}" for d in DESIGNS)
          + f" {'clinicians only (uniform)':>26}")
    needed = {}
    for model in MODELS:
        row = {d: labels_needed(model, d, 0, args.target, args.plan_studies, args.seed)
               for d in DESIGNS}
        row["classical"] = labels_needed(model, "uniform", 1, args.target, args.plan_studies,
                                         args.seed)
        needed[model] = row

        def show(x):
            return "unreachable" if x is None else str(x)

        print(f"{model:9} " + " ".join(f"{show(row[d]):>34}" for d in DESIGNS)
              + f" {show(row['classical']):>26}")
    for model, row in needed.items():
        u, w = row["uniform"], row["weighted"]
        if u is not None and w is not None:
            verdict = ("fewer" if w < u else "the same" if w == u else "MORE")
            print(f"{model}: weighted needs {verdict} labels than uniform ({w} vs {u}, "
                  f"ratio {w / u:.2f})")
        s_ = row["stratified"]
        if u is not None and s_ is not None and s_ > u:
            print(f"{model}: stratified by mapper label needs MORE than uniform ({s_} vs {u}):"
                  " its strata's shares differ by rounding, so the weighted estimator (t"
                  " quantile, n/(n-1)) is used, and proportional strata buy it nothing")

    print(f"\n== carelens plan-labels from one uniform pilot of 40 labels (target {args.target:g})")
    for model in MODELS:
        predicted = planner_prediction(model, args.target, args.seed + 7)
        print(f"{model}: predicted uniform {predicted['uniform']}, weighted "
              f"{predicted['weighted']}; simulated {needed[model]['uniform']}, "
              f"{needed[model]['weighted']}")
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
