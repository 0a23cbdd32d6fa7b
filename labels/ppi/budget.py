"""A label budget: how many more clinician labels each sampling design needs.

Before a review round is drawn, a study lead wants to know how many items to
put in it: enough that (a) each model's prediction-powered interval and (b)
the judge-vs-clinician kappa interval are no wider than a target half-width,
and which design gets there with fewer labels. The labels so far are the
pilot, and a plan is only as good as what the pilot shows: a small pilot's
machine-clinician agreement is itself uncertain (12 pilots of 40 labels once
read a correlation of 0.85 where the population's was 0.73, and half of their
plans fell short). So the plan (:data:`METHOD` says how, and every plan
carries it):

1. reads from the pilot the machine's errors: the clinicians' correction of
   the machine's reading, its spread overall and within cells of items alike
   (the machine's value, and a third of each design's score), shrunk toward
   the overall spread where a cell has few labels;
2. foresees each design's variance at n labels over this finite population,
   as ``labels.ppi.finite`` will compute it: sum (1 - pi) v / pi / N^2, v an
   item's spread and pi its chance of being labelled (uniform: n / N; a
   weighted or active round: its own chances for n), and the labels n whose
   95% half-width reaches the target; with the interval valid at every look
   (``labels.ppi.sequential``), the labels at which *it* does, about 1.5 times
   wider at the same n;
3. does so for :data:`PILOTS` resamplings of the pilot (the bootstrap: pilots
   as they might have come out), and gives the figure that suffices in
   :data:`ASSURANCE` of them, with the typical (median) one beside it.

The design's need is the total its round would have to label; ``more``
subtracts the labels already given. ``bench/bench_few_clinicians.py`` and
``tests/test_ppi_budget.py`` check on simulated pilots how often the figure
reaches the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import stdtrit

from labels.agreement import agreement_weights, cohen_kappa_batch
from labels.compare.answers import Filters
from labels.compare.questions import question_set
from labels.ppi.estimators import z_value
from labels.ppi.readings import Readings, item_ids_of, load_readings, one_column, read_metric
from labels.ppi.report import readings_digest
from labels.ppi.sequential import boundary
from labels.provenance import Digest
from store import Store

REPLICATES = 120
"""kappa plans: simulated studies per design and size."""
MIN_CELL = 3
MIN_PILOT = 10
"""Labelled items a plan needs to learn the machine's errors from."""
PILOTS = 200
"""Resamplings of the pilot a PPI plan is made over."""
ASSURANCE = 0.9
"""The share of the resampled pilots whose need the planned figure covers."""
METHOD = (
    "from the pilot (the labels so far): the spread of the clinicians' correction of the "
    "machine, overall and within cells of items alike (the machine's value, a third of each "
    "design's score; shrunk toward the overall where few labels fall), gives each design's "
    "variance at n labels over these items as the finite-population estimate computes it "
    "(sum (1 - pi) v / pi / N^2); the plan is the smallest n whose 95% half-width (Student t; "
    "for the interval valid at every look, the confidence sequence's) is at most the target, "
    f"found for {PILOTS} bootstrap resamplings of the pilot: the figure given suffices in "
    f"{ASSURANCE:.0%} of them, the typical one in half. Kappa: simulated from the pilot "
    f"({REPLICATES} studies per size, 1.96 x the spread of the kappa estimates)"
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
    anytime: bool = False
    """Planned for the interval valid at every look: the lead stops when it is narrow
    enough (a uniform or an active round)."""


@dataclass(frozen=True)
class DesignNeed:
    design: str
    name: str
    labels_needed: int | None
    """Labels the design's round needs for the target; None when unreachable."""
    more: int | None
    """Beyond the labels already given."""
    note: str | None = None
    typical: int | None = None
    """The need of the median resampled pilot (the figure given covers :data:`ASSURANCE`
    of them)."""
    assurance: float | None = None
    """The share of the resampled pilots whose need ``labels_needed`` covers."""


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


def uniform_design(anytime: bool = False) -> PlanDesign:
    if anytime:
        return PlanDesign("uniform:anytime", "uniform, stopping by the anytime interval",
                          anytime=True)
    return PlanDesign("uniform", "uniform random sample")


def anytime_design(design: PlanDesign) -> PlanDesign:
    """The same draws, the lead stopping when the interval valid at every look is narrow
    enough."""
    return PlanDesign(f"{design.key}:anytime", f"{design.name}, stopping by the anytime "
                      "interval", design.probabilities, design.scores, anytime=True)


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


def anytime_factor(alpha: float = 0.05) -> float:
    """How much wider the interval valid at every look is than the fixed one, at the number
    of answers it is tuned for (``labels.ppi.sequential.boundary``): about 1.55."""
    return float(boundary(np.array([100.0]), 100, alpha)[0] / z_value(alpha))


class _Spread:
    """The spread v of the clinicians' correction of the machine on every item, as a
    pilot leaves it uncertain (see the module): per cell of items alike, the clinicians'
    values in the cell are a draw from the posterior a Bayesian bootstrap gives (Rubin
    1981): Dirichlet weights, 1 on each of the cell's pilot values, :data:`MIN_CELL`
    spread over the values of the items with the same machine value (the cell shrunk
    toward them), and 1/2 on each end of the scale, 0 and 1 (Jeffreys': a pilot that
    saw the machine never err in a cell does not prove it never does)."""

    def __init__(self, machine: np.ndarray, labelled: np.ndarray, values: np.ndarray,
                 designs: Sequence[PlanDesign]):
        coarse = np.round(machine, 1)
        columns = [coarse] + [_bands(np.asarray(d.scores, dtype=float))
                              for d in designs if d.scores is not None]
        keys, self.cell = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        self.cell = self.cell.reshape(-1)
        self.machine, self.values = machine, values
        self.g = np.array([machine[self.cell == c].mean() for c in range(len(keys))])
        self.share = np.bincount(self.cell, minlength=len(keys)) / len(machine)
        self.g_var = float(np.var(machine))
        own = self.cell[labelled]
        broad_of = {float(k): np.flatnonzero(coarse[labelled] == k) for k in np.unique(coarse)}
        self.members = []
        for c, key in enumerate(keys):
            mine = np.flatnonzero(own == c)
            broad = broad_of.get(float(key[0]), np.array([], dtype=int))
            if not len(broad):
                broad = np.arange(len(labelled))
            self.members.append((mine, broad))

    def draw(self, rng: np.random.Generator | None) -> np.ndarray:
        """Every item's spread under one draw from the posterior (``rng`` None: the pilot
        as it is, each cell its own values shrunk toward the broad ones)."""
        k = len(self.members)
        mean, second = np.zeros(k), np.zeros(k)
        for c, (mine, broad) in enumerate(self.members):
            ends = np.array([0.0, 1.0])
            atoms = np.concatenate([self.values[mine], self.values[broad], ends])
            prior = np.concatenate([np.ones(len(mine)),
                                    np.full(len(broad), MIN_CELL / max(len(broad), 1)),
                                    np.full(2, 0.5)])
            w = prior / prior.sum() if rng is None else rng.dirichlet(prior)
            mean[c], second[c] = (w * atoms).sum(), (w * atoms ** 2).sum()
        # lambda, as the estimate will tune it: cov(y, g) / var(g) over the population
        cov = float((self.share * (mean - (self.share * mean).sum())
                     * (self.g - (self.share * self.g).sum())).sum())
        lam = float(np.clip(cov / self.g_var, 0, 1)) if self.g_var > 1e-15 else 0.0
        e_mean = mean - lam * self.g
        overall = float((self.share * e_mean).sum())
        within = np.maximum(second - mean ** 2, 0.0)
        # within-cell variance of y (g is near constant in a cell) and the cell's offset
        v = within + (e_mean - overall) ** 2
        return np.maximum(v[self.cell], 1e-12)


class _Chances:
    """A design's chances of being labelled for n labels, kept once computed."""

    def __init__(self, design: PlanDesign, big_n: int):
        self.design, self.big_n, self.cache = design, big_n, {}

    def __call__(self, n: int) -> np.ndarray:
        if n not in self.cache:
            if self.design.probabilities is None:
                self.cache[n] = np.full(self.big_n, n / self.big_n)
            else:
                self.cache[n] = np.clip(np.asarray(self.design.probabilities(n), dtype=float),
                                        1e-12, 1.0)
        return self.cache[n]


def _half_width(spread: np.ndarray, chances: np.ndarray, n: int, anytime: bool) -> float:
    """The 95% half-width at n labels: Student t times the finite-population standard
    error, sum (1 - pi) v / pi / N^2 (times the anytime interval's factor)."""
    big_n = len(spread)
    variance = float(((1 - chances) * spread / chances).sum()) / big_n ** 2
    quantile = float(stdtrit(max(n - 1, 1), 0.975))
    return quantile * np.sqrt(max(variance, 0.0)) * (anytime_factor() if anytime else 1.0)


def plan_model(readings: Readings, target: float, designs: Sequence[PlanDesign], *,
               replicates: int = PILOTS, seed: int = 0,
               assurance: float = ASSURANCE) -> ModelPlan:
    """Labels each design needs for this model's PPI half-width to reach ``target`` (see
    the module): the need of ``assurance`` of ``replicates`` resampled pilots."""
    machine = np.asarray(readings.machine, dtype=float)
    labelled = np.array(sorted(readings.human), dtype=int)
    plan = ModelPlan(readings.model, len(machine), len(labelled))
    if len(labelled) < MIN_PILOT:
        plan.reason = (f"only {len(labelled)} items labelled: a plan needs at least {MIN_PILOT} "
                       "to learn the machine's errors from (label a small uniform pilot first)")
        return plan
    values = np.array([readings.human[p] for p in labelled], dtype=float)
    spread = _Spread(machine, labelled, values, designs)
    rng = np.random.default_rng(seed)
    spreads = [spread.draw(rng) for _ in range(replicates)]
    big_n = len(machine)
    for design in designs:
        chances = _Chances(design, big_n)
        anytime = getattr(design, "anytime", False)
        needs = []
        for v in spreads:

            def width(n: int, v: np.ndarray = v, chances: _Chances = chances,
                      anytime: bool = anytime) -> float:
                return _half_width(v, chances(n), n, anytime)

            needed = _smallest_n(width, target, min(MIN_PILOT, big_n), big_n)
            needs.append(np.inf if needed is None else needed)
        needs = np.array(needs, dtype=float)
        planned = float(np.quantile(needs, assurance, method="higher"))
        typical = float(np.quantile(needs, 0.5, method="higher"))
        if not np.isfinite(planned):
            share = float(np.mean(np.isfinite(needs)))
            note = (f"labelling all {big_n} items reaches it in only {share:.0%} of the "
                    "resampled pilots")
            plan.needs.append(DesignNeed(design.key, design.name, None, None, note,
                                         None if not np.isfinite(typical) else int(typical),
                                         share))
            continue
        covered = float(np.mean(needs <= planned))
        plan.needs.append(DesignNeed(design.key, design.name, int(planned),
                                     max(0, int(planned) - plan.n_labeled), None, int(typical),
                                     covered))
    return plan


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
    pilots: int = PILOTS,
    assurance: float = ASSURANCE,
) -> LabelPlan:
    """What ``carelens plan-labels`` prints: per model, the labels each design needs
    for its PPI half-width to reach ``target`` (with the assurance of the module), and
    the same for the judge-vs-clinician kappa (label questions; ``replicates``
    simulated studies per size). ``designs_for(question key, item ids)``: the weighted
    and active designs those items allow (``review.team.active.plan_designs``); uniform
    is always planned, and uniform and active also stopping by the anytime interval.
    ValueError with a message for the user on bad input."""
    if not target > 0:
        raise ValueError("the target half-width must be a positive number, e.g. 0.05")
    if not 0.5 <= assurance < 1:
        raise ValueError("the assurance is a share between 0.5 and 1, e.g. 0.9")
    filters = filters or Filters()
    readings = read_metric(store, metric, human, machine, filters, phase=phase,
                           reference=reference, question=question)
    key = _design_key(store, readings.question)

    def designs(ids: Sequence[int]) -> list:
        more = list(designs_for(key, ids)) if designs_for else []
        return [uniform_design(), *more, uniform_design(anytime=True),
                *(anytime_design(d) for d in more if d.key == "active")]

    plan = LabelPlan(target, metric, [], None, notes=list(readings.notes),
                     data=readings_digest(readings))
    for _, r in sorted(readings.by_model.items()):
        plan.models.append(plan_model(r, target, designs(r.item_ids), replicates=pilots,
                                      seed=seed, assurance=assurance))
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
                            qs.categories, target,
                            [d for d in designs(item_ids) if not getattr(d, "anytime", False)],
                            ordinal=qs.level == "ordinal", replicates=replicates, seed=seed)
    plan.kappa.model = (f"{machine} vs {human}: Cohen's kappa"
                        + (" (quadratic)" if qs.level == "ordinal" else ""))
    return plan


def _need_dict(need: DesignNeed) -> dict:
    return {"design": need.design, "name": need.name, "labels_needed": need.labels_needed,
            "more": need.more, "typical": need.typical, "assurance": need.assurance,
            "note": need.note}


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
    if need.assurance is None:
        return f"    {need.name}: {need.labels_needed} labels ({need.more} more)"
    return (f"    {need.name}: {need.labels_needed} labels ({need.more} more); enough in "
            f"{need.assurance:.0%} of pilots like yours, {need.typical} in a typical one")


def format_plan_text(plan: LabelPlan) -> str:
    lines = [f"Labels needed for a 95% half-width of at most {plan.target:g}"
             f" ({plan.metric}, PPI per model)"]
    for part in [*plan.models, *([plan.kappa] if plan.kappa else [])]:
        lines.append(f"{part.model}: {part.n_labeled} of {part.n_items} items labelled so far")
        lines += [f"    {part.reason}"] if part.reason else [_need_text(n) for n in part.needs]
    lines += [f"note: {n}" for n in plan.notes]
    lines.append(f"method: {plan.method}")
    return "\n".join(lines)
