"""A label budget: how many more clinician labels each sampling design needs.

Before a review round is drawn, a study lead wants to know how many items to
put in it: enough that (a) each model's prediction-powered interval and (b)
the judge-vs-clinician kappa interval are no wider than a target half-width,
and which design gets there with fewer labels. The answer is simulated from
the data at hand (:data:`METHOD` says how, and every plan carries it):

1. A simulated population. Every item keeps the machine's value; an item the
   clinicians have not labelled gets a clinician value drawn, anew in each
   replicate, from the labelled items with the same machine value and the same
   band (thirds) of each weighting score, with probability c / (c + 3) where
   c of them share it, else from those with the same machine value (else any).
   So the machine's observed errors, and how far the scores foretell them,
   carry over to the unlabelled items, a small pilot's cells shrunk toward the
   coarser ones.
2. Each design draws n items from it: *uniform*, a simple random sample;
   a *weighted* design, each item independently with its inclusion
   probability (``review.team.designs`` gives them; independent draws are a
   little noisier than the round's systematic draw of exactly n, so the plan
   errs toward more labels).
3. The estimate's 95% half-width is taken over :data:`REPLICATES` replicates:
   for PPI the larger of the mean of the intervals' half-widths (what a
   reader will see) and 1.96 times the spread of the estimates (a small
   sample's intervals can be narrower than that), for kappa 1.96 times the
   spread of the kappa estimates (weighted by 1/probability). The smallest n
   (from :data:`MIN_PILOT`) that reaches the target is found by bisection
   (the same random numbers at every n).

The labels so far are the pilot. A design's need is the total its round
would have to label; ``more`` subtracts the labels already given (exact for
a uniform design, whose new labels add to a uniform sample; a guide for the
others, whose round would be drawn afresh).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from labels.agreement import agreement_weights, cohen_kappa_batch
from labels.compare.answers import Filters
from labels.compare.questions import question_set
from labels.ppi.estimators import design_ppi_mean, ppi_mean, z_value
from labels.ppi.readings import Readings, item_ids_of, load_readings, one_column, read_metric
from labels.ppi.report import readings_digest
from labels.provenance import Digest
from store import Store

REPLICATES = 120
MIN_CELL = 3
MIN_PILOT = 10
"""Labelled items a plan needs to learn the machine's errors from."""
METHOD = (
    "simulated from the data at hand: each item the clinicians have not labelled gets a "
    "clinician value drawn from the labelled items with the same machine value and the same "
    "third of each weighting score (shrunk toward the same machine value alone when few share "
    "them); each design then draws n items "
    f"{REPLICATES} times (uniform: a simple random sample; weighted: each item independently "
    "with its inclusion probability), and the smallest n (at least 10) whose 95% half-width "
    "(PPI: the mean interval half-width, or 1.96 x the spread of the estimates if larger; "
    "kappa: 1.96 x the spread of the weighted kappa estimates) is at most the target is found "
    "by bisection"
)


@dataclass(frozen=True)
class PlanDesign:
    """A design to plan for: its inclusion probabilities for a sample of n items."""

    key: str
    name: str
    probabilities: Callable[[int], np.ndarray] | None = None
    """n -> each item's probability (summing to n); None: uniform."""
    scores: np.ndarray | None = None
    """The weighting score of each item (0..1), used to band the simulated population."""


@dataclass(frozen=True)
class DesignNeed:
    design: str
    name: str
    labels_needed: int | None
    """Labels the design's round needs for the target; None when unreachable."""
    more: int | None
    """Beyond the labels already given."""
    note: str | None = None


@dataclass
class ModelPlan:
    model: str
    n_items: int
    n_labeled: int
    needs: list[DesignNeed] = field(default_factory=list)
    reason: str | None = None
    """Why there is no plan for this model (too few labels)."""


@dataclass
class LabelPlan:
    target: float
    metric: str
    models: list[ModelPlan]
    kappa: ModelPlan | None
    method: str = METHOD
    notes: list[str] = field(default_factory=list)
    data: Digest | None = field(default=None, repr=False, compare=False)
    """The readings the plan was simulated from (for its provenance)."""


def uniform_design() -> PlanDesign:
    return PlanDesign("uniform", "uniform random sample")


def _bands(scores: np.ndarray) -> np.ndarray:
    """Each item's third (0, 1, 2) of a score; one band when the score barely varies."""
    cuts = np.quantile(scores, [1 / 3, 2 / 3])
    if cuts[0] == cuts[1] == scores.min() == scores.max():
        return np.zeros(len(scores), dtype=int)
    return np.searchsorted(np.unique(cuts), scores, side="left")


class _Imputer:
    """Draws a clinician value for every unlabelled item from labelled look-alikes: from
    those with the same machine value and score bands (its cell) with probability
    c / (c + MIN_CELL), c the cell's labelled items, else from those with the same
    machine value (else from any): a small cell is shrunk toward the coarser one
    rather than dropped, so a score that foretells the machine's errors keeps some of
    its say even in a small pilot."""

    def __init__(self, machine: np.ndarray, labelled: np.ndarray, values: np.ndarray,
                 designs: Sequence[PlanDesign]):
        self.labelled, self.values = labelled, values
        coarse = np.round(machine, 1)
        cells = np.stack([coarse] + [_bands(np.asarray(d.scores, dtype=float))
                                     for d in designs if d.scores is not None], axis=1)
        by_cell: dict[tuple, list[int]] = {}
        by_value: dict[float, list[int]] = {}
        for pilot, position in enumerate(labelled):
            by_cell.setdefault(tuple(cells[position]), []).append(pilot)
            by_value.setdefault(float(coarse[position]), []).append(pilot)
        every = list(range(len(labelled)))
        groups: dict[tuple, list[int]] = {}
        for position in range(len(machine)):
            fine = by_cell.get(tuple(cells[position]), [])
            broad = by_value.get(float(coarse[position]), [])
            if len(broad) < MIN_CELL:
                broad = every
            groups.setdefault((tuple(fine), tuple(broad)), []).append(position)
        self.groups = [(np.array(f, dtype=int), np.array(b, dtype=int), np.array(p))
                       for (f, b), p in groups.items()]
        self.size = len(machine)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One simulated population of clinician values (the labelled items keep theirs)."""
        out = np.empty(self.size)
        for fine, broad, positions in self.groups:
            pick = broad[rng.integers(len(broad), size=len(positions))]
            if len(fine):
                use_fine = rng.random(len(positions)) < len(fine) / (len(fine) + MIN_CELL)
                pick = np.where(use_fine, fine[rng.integers(len(fine), size=len(positions))],
                                pick)
            out[positions] = self.values[pick]
        out[self.labelled] = self.values
        return out


def _sample(design: PlanDesign, n: int, big_n: int, rng,
            chance: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(mask of the items drawn, their probabilities) for one replicate; ``chance``: the
    design's probabilities for n (None: uniform)."""
    if chance is None:
        mask = np.zeros(big_n, dtype=bool)
        mask[rng.choice(big_n, size=n, replace=False)] = True
        return mask, np.full(big_n, n / big_n)
    return rng.random(big_n) < chance, chance


def _ppi_half_width(design, n, machine, imputer, seed, replicates) -> float:
    """The larger of the mean reported 95% half-width and 1.96 x the spread of the
    estimates over replicates: a small sample's intervals can be narrower than its
    estimates' real spread (every label agreeing gives a zero-width interval)."""
    rng = np.random.default_rng(seed)
    widths, values = [], []
    chance = None if design.probabilities is None else np.asarray(design.probabilities(n))
    for _ in range(replicates):
        y = imputer.draw(rng)
        mask, pi = _sample(design, n, len(machine), rng, chance)
        if mask.sum() < 2:
            continue
        if design.probabilities is None:
            e = ppi_mean(y[mask], machine[mask], machine[~mask])
        else:
            e = design_ppi_mean(y[mask], machine[mask], pi[mask], machine[~mask])
        if e.half_width is not None:
            widths.append(e.half_width)
            values.append(e.value)
    if len(values) < replicates / 2:
        return float("inf")
    return max(float(np.mean(widths)), z_value() * float(np.std(values, ddof=1)))


def _smallest_n(half_width: Callable[[int], float], target: float, low: int,
                high: int) -> int | None:
    """The smallest n in [low, high] with half_width(n) <= target (None: not even high)."""
    if half_width(high) > target:
        return None
    if half_width(low) <= target:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if half_width(middle) <= target:
            high = middle
        else:
            low = middle
    return high


def plan_model(readings: Readings, target: float, designs: Sequence[PlanDesign], *,
               replicates: int = REPLICATES, seed: int = 0) -> ModelPlan:
    """Labels each design needs for this model's PPI half-width to reach ``target``."""
    machine = np.asarray(readings.machine, dtype=float)
    labelled = np.array(sorted(readings.human), dtype=int)
    plan = ModelPlan(readings.model, len(machine), len(labelled))
    if len(labelled) < MIN_PILOT:
        plan.reason = (f"only {len(labelled)} items labelled: a plan needs at least {MIN_PILOT} "
                       "to learn the machine's errors from (label a small uniform pilot first)")
        return plan
    values = np.array([readings.human[p] for p in labelled], dtype=float)
    imputer = _Imputer(machine, labelled, values, designs)
    _plan_needs(plan, designs, target, lambda design, n: _ppi_half_width(
        design, n, machine, imputer, seed, replicates))
    return plan


def _plan_needs(plan: ModelPlan, designs: Sequence[PlanDesign], target: float,
                half_width: Callable[[PlanDesign, int], float]) -> None:
    """Each design's need, appended to ``plan``: the smallest number of labels (of
    ``plan.n_items``) whose simulated half-width, ``half_width(design, n)``, is at most
    ``target``, and how many more than ``plan.n_labeled`` that is."""
    n_items = plan.n_items
    for design in designs:
        cache: dict[int, float] = {}

        def width(n, design=design, cache=cache):
            if n not in cache:
                cache[n] = half_width(design, n)
            return cache[n]

        needed = _smallest_n(width, target, min(MIN_PILOT, n_items), n_items)
        note = None if needed is not None else (
            f"even labelling all {n_items} items leaves a half-width of {width(n_items):.3f}")
        plan.needs.append(DesignNeed(design.key, design.name, needed,
                                     None if needed is None else max(0, needed - plan.n_labeled),
                                     note))


def _kappa_half_width(design, n, machine_codes, imputer, k, weights, seed, replicates):
    """1.96 x the spread of the kappa estimates over replicates. Units are drawn with
    replacement (uniformly, or in proportion to the design's probabilities and weighted
    by their inverse), as the intervals' own large-sample view has it: no finite-population
    shrinking as n nears the number of items."""
    rng = np.random.default_rng(seed)
    values = []
    big_n = len(machine_codes)
    chance = None if design.probabilities is None else np.asarray(design.probabilities(n))
    for _ in range(replicates):
        human = imputer.draw(rng).astype(int)
        if chance is None:
            drawn, weight = rng.integers(big_n, size=n), np.ones(n)
        else:
            drawn = rng.choice(big_n, size=n, p=chance / chance.sum())
            weight = 1 / chance[drawn]
        table = np.zeros((k, k))
        np.add.at(table, (machine_codes[drawn], human[drawn]), weight * n / weight.sum())
        values.append(cohen_kappa_batch(table[None], agreement_weights(k, weights))[0])
    values = np.array(values)
    values = values[np.isfinite(values)]
    if len(values) < replicates / 2:
        return float("inf")
    return float(z_value() * values.std(ddof=1))


def plan_kappa(machine_labels: Sequence[str], human_labels: dict[int, str],
               categories: Sequence[str], target: float, designs: Sequence[PlanDesign], *,
               ordinal: bool = False, replicates: int = REPLICATES, seed: int = 0) -> ModelPlan:
    """Labels each design needs for the judge-vs-clinician kappa's 95% half-width (Cohen's
    kappa; quadratic weights for an ordinal label set) to reach ``target``. Positions of
    ``human_labels`` index ``machine_labels``."""
    index = {c: i for i, c in enumerate(categories)}
    keep = [p for p, c in enumerate(machine_labels) if c in index]
    codes = np.array([index[machine_labels[p]] for p in keep], dtype=int)
    where = {p: i for i, p in enumerate(keep)}
    labelled = np.array(sorted(where[p] for p, h in human_labels.items()
                               if p in where and h in index), dtype=int)
    plan = ModelPlan("kappa", len(codes), len(labelled))
    if len(labelled) < MIN_PILOT:
        plan.reason = (f"only {len(labelled)} items labelled by both: a plan needs at least "
                       f"{MIN_PILOT}")
        return plan
    back = {i: p for p, i in where.items()}
    values = np.array([index[human_labels[back[i]]] for i in labelled], dtype=float)
    kept = [PlanDesign(d.key, d.name, d.probabilities,
                       None if d.scores is None else np.asarray(d.scores)[keep]) for d in designs]
    imputer = _Imputer(codes.astype(float), labelled, values, kept)
    weights = "quadratic" if ordinal else None
    kept = [design if original.probabilities is None else
            PlanDesign(design.key, design.name,
                       lambda n, f=original.probabilities: np.asarray(f(n))[keep], design.scores)
            for design, original in zip(kept, designs, strict=True)]
    _plan_needs(plan, kept, target, lambda design, n: _kappa_half_width(
        design, n, codes, imputer, len(categories), weights, seed, replicates))
    return plan


def _design_key(store: Store, question: str) -> str:
    """The key review rounds use for a question set: a label question's own key, or
    ``criteria@<item kind>`` for a criteria set."""
    qs = question_set(store, question)
    if qs.kind == "criterion":
        return f"criteria@{qs.item_kinds[0]}" if qs.item_kinds else "criteria@"
    return qs.key


def label_plan(
    store: Store,
    metric: str,
    human: str,
    machine: str,
    target: float,
    filters: Filters | None = None,
    *,
    phase: str = "blind",
    question: str | None = None,
    reference: str | None = None,
    designs_for: Callable[[str, Sequence[int]], Sequence] | None = None,
    replicates: int = REPLICATES,
    seed: int = 0,
) -> LabelPlan:
    """What ``carelens plan-labels`` prints: per model, the labels each design needs
    for its PPI half-width to reach ``target``, and the same for the judge-vs-clinician
    kappa (label questions). ``designs_for(question key, item ids)``: the weighted designs
    those items allow (``review.team.designs.planning_designs``); uniform is always
    planned. ValueError with a message for the user on bad input."""
    if not target > 0:
        raise ValueError("the target half-width must be a positive number, e.g. 0.05")
    filters = filters or Filters()
    readings = read_metric(store, metric, human, machine, filters, phase=phase,
                           reference=reference, question=question)
    key = _design_key(store, readings.question)

    def designs(ids: Sequence[int]) -> list:
        return [uniform_design(), *(designs_for(key, ids) if designs_for else [])]

    plan = LabelPlan(target, metric, [], None, notes=list(readings.notes),
                     data=readings_digest(readings))
    for _, r in sorted(readings.by_model.items()):
        plan.models.append(plan_model(r, target, designs(r.item_ids), replicates=replicates,
                                      seed=seed))
    qs = question_set(store, readings.question)
    if qs.kind == "criterion":
        plan.notes.append("the kappa plan is for a label question: a round over criteria draws "
                          "items, and kappa counts criteria")
        return plan
    answers = load_readings(store, qs, replace(filters, include_cannot_assess=False), phase)
    said, _ = one_column(answers, machine, "machine")
    read, _ = one_column(answers, human, "human")
    units = sorted(u for u in said if answers.units[u].target == "")
    ids = item_ids_of(store, {answers.units[u].item_uid for u in units})
    item_ids = [ids[answers.units[u].item_uid] for u in units]
    position = {u: p for p, u in enumerate(units)}
    plan.kappa = plan_kappa([said[u] for u in units],
                            {position[u]: v for u, v in read.items() if u in position},
                            qs.categories, target, designs(item_ids),
                            ordinal=qs.level == "ordinal", replicates=replicates, seed=seed)
    plan.kappa.model = (f"{machine} vs {human}: Cohen's kappa"
                        + (" (quadratic)" if qs.level == "ordinal" else ""))
    return plan


def _need_dict(need: DesignNeed) -> dict:
    return {"design": need.design, "name": need.name, "labels_needed": need.labels_needed,
            "more": need.more, "note": need.note}


def _plan_part(part: ModelPlan) -> dict:
    return {"model": part.model, "n_items": part.n_items, "n_labeled": part.n_labeled,
            "designs": [_need_dict(n) for n in part.needs], "reason": part.reason}


def plan_dict(plan: LabelPlan, provenance: dict | None = None) -> dict:
    """The plan as the JSON ``carelens plan-labels --json`` prints."""
    return {"target_halfwidth": plan.target, "metric": plan.metric,
            "models": [_plan_part(m) for m in plan.models],
            "kappa": None if plan.kappa is None else _plan_part(plan.kappa),
            "method": plan.method, "notes": plan.notes, "provenance": provenance or {}}


def _need_text(need: DesignNeed) -> str:
    if need.labels_needed is None:
        return f"    {need.name}: not reachable ({need.note})"
    return f"    {need.name}: {need.labels_needed} labels ({need.more} more)"


def format_plan_text(plan: LabelPlan) -> str:
    lines = [f"Labels needed for a 95% half-width of at most {plan.target:g}"
             f" ({plan.metric}, PPI per model)"]
    for part in [*plan.models, *([plan.kappa] if plan.kappa else [])]:
        lines.append(f"{part.model}: {part.n_labeled} of {part.n_items} items labelled so far")
        lines += [f"    {part.reason}"] if part.reason else [_need_text(n) for n in part.needs]
    lines += [f"note: {n}" for n in plan.notes]
    lines.append(f"method: {plan.method}")
    return "\n".join(lines)
