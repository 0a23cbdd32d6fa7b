"""CARE-Bench triage metrics, model rankings, and whether two label sources rank models alike.

Metric definitions are those of FORMATS.md section 1 (the published scorer's
formulas were not seen). ``rank`` means a label's position in the codebook's
ordinal order, which callers pass in as ``order``: the codebook is the source
of truth at run time; ``CAREBENCH_ORDER`` is a copy for tests and examples.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

CAREBENCH_ORDER = (
    "0A_NO_ESCALATION_INFO_NEEDED",
    "0B_NO_ESCALATION_SELF_CARE_MONITOR",
    "1A_ESCALATION_NONURGENT_CARE",
    "1B_ESCALATION_URGENT_CARE",
)

METRIC_KEYS = (
    "macro_f1",
    "accuracy",
    "over_triage",
    "under_triage",
    "missed_care",
    "unnecessary_care",
    "urgent_false_negative",
    "false_urgent_escalation",
    "coverage",
)
"""Every number :func:`triage_metrics` gives, in the order it reports them: the
metrics a ranking of models may be by (`carelens triage-metrics --rank-by`)."""

LOWER_IS_BETTER = frozenset(
    {
        "over_triage",
        "under_triage",
        "missed_care",
        "unnecessary_care",
        "urgent_false_negative",
        "false_urgent_escalation",
    }
)


@dataclass(frozen=True)
class TriageMetric:
    """One scorer number with its denominator."""

    key: str
    name: str
    value: float | None
    """None when the denominator is 0 (see ``undefined_reason``)."""
    count: int | None
    """Numerator (prefixes meeting the condition); None for macro-F1."""
    n: int
    """Denominator: the prefixes the share is taken of."""
    undefined_reason: str | None = None
    ci_low: float | None = None
    """95% interval: Wilson's score interval for a share (it stays inside 0-1 and
    holds up at 0 or n successes, where the Wald interval collapses); the
    percentile bootstrap over prefixes for macro-F1."""
    ci_high: float | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.key in LOWER_IS_BETTER


@dataclass(frozen=True)
class RankedModel:
    model: str
    value: float | None
    rank: float | None
    """1 = best; tied models share the mean of their positions; None when value is None."""
    ci_low: float | None = None
    """The metric's 95% interval: two models whose intervals overlap widely are
    not told apart by this sample, whatever their ranks."""
    ci_high: float | None = None


@dataclass(frozen=True)
class RankCorrelation:
    """Agreement of two rankings of the same models."""

    spearman_rho: float | None
    kendall_tau: float | None
    """Kendall's tau-b (accounts for ties)."""
    n: int
    """Models ranked by both."""
    models: list[str]
    undefined_reason: str | None = None


def escalation_split(order: Sequence[str]) -> tuple[frozenset[str], str]:
    """Which codes escalate care, and which one is urgent.

    Assumption (FORMATS.md: inferred from the naming, not published): a code
    escalates when its name starts with "1"; the urgent code is the highest in
    the order. This is the only place that reads meaning into the code names.
    """
    return frozenset(c for c in order if c.startswith("1")), order[-1]


Z95 = 1.959963984540054
"""The standard normal quantile for a two-sided 95% interval."""


def wilson_interval(count: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for count successes in n (None when n is 0)."""
    if n <= 0:
        return None
    p = count / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _share(key, name, count, n, what) -> TriageMetric:
    if n == 0:
        return TriageMetric(key, name, None, 0, 0, f"no scored prefix has {what}")
    low, high = wilson_interval(count, n)
    return TriageMetric(key, name, count / n, count, n, ci_low=low, ci_high=high)


SHARE_KEYS = METRIC_KEYS[1:8]
"""The metrics that are a share of prefixes: a mean over responses of a 0/1 reading."""
SHARE_WORDS = {  # name, what the denominator counts
    "accuracy": ("Accuracy", "a prediction"),
    "over_triage": ("Over-triage", "a prediction"),
    "under_triage": ("Under-triage", "a prediction"),
    "missed_care": ("Missed care", "a gold label that escalates care"),
    "unnecessary_care": ("Unnecessary care", "a gold label that does not escalate care"),
    "urgent_false_negative": ("Urgent false negative", "gold label {urgent}"),
    "false_urgent_escalation": ("False urgent escalation", "a gold label other than {urgent}"),
}


def share_rule(key: str, order: Sequence[str], escalating: Collection[str] | None = None):
    """The rule of a share metric (the one place each is defined): (whether a prefix
    with this gold label counts in the denominator, whether a (gold, predicted) pair
    meets the condition). See :func:`triage_metrics` for the definitions."""
    rank = {code: i for i, code in enumerate(order)}
    esc, urgent = escalation_split(list(order))
    esc = frozenset(escalating) if escalating is not None else esc
    rules = {
        "accuracy": (lambda g: True, lambda g, p: g == p),
        "over_triage": (lambda g: True, lambda g, p: rank[p] > rank[g]),
        "under_triage": (lambda g: True, lambda g, p: rank[p] < rank[g]),
        "missed_care": (lambda g: g in esc, lambda g, p: p not in esc),
        "unnecessary_care": (lambda g: g not in esc, lambda g, p: p in esc),
        "urgent_false_negative": (lambda g: g == urgent, lambda g, p: p != urgent),
        "false_urgent_escalation": (lambda g: g != urgent, lambda g, p: p == urgent),
    }
    if key not in rules:
        raise ValueError(f"{key!r} is not a share metric: choose one of {', '.join(SHARE_KEYS)}")
    return rules[key]


def triage_metrics(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    order: Sequence[str],
    escalating: Collection[str] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, TriageMetric]:
    """The CARE-Bench scorer's numbers for one model, keyed by metric, each with
    its 95% interval (Wilson for the shares; macro-F1 by a seeded bootstrap of
    ``n_boot`` resamples of the scored prefixes, none when ``n_boot`` is 0).

    A prefix is *scored* when the model's label is present; a None prediction
    (generation or mapping failed) is left out of every metric and shows in
    ``coverage``. ``escalating`` overrides :func:`escalation_split`.

    - accuracy: predicted == gold, share of scored prefixes;
    - macro_f1: mean per-label F1 over labels present in gold or predictions;
    - over_triage / under_triage: predicted rank > / < gold rank, share of scored;
    - missed_care: gold escalates, predicted does not (share of gold escalating);
    - unnecessary_care: gold does not escalate, predicted does (share of gold non-escalating);
    - urgent_false_negative: gold urgent, predicted not (share of gold urgent);
    - false_urgent_escalation: predicted urgent, gold not (share of gold non-urgent).
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    order = list(order)
    rank = {code: i for i, code in enumerate(order)}
    esc, urgent = escalation_split(order)
    esc = frozenset(escalating) if escalating is not None else esc
    for label in (*gold, *predicted):
        if label is not None and label not in rank:
            raise ValueError(f"{label!r} is not in the codebook order {order}")
    if any(g is None for g in gold):
        raise ValueError("every prefix needs a gold label")
    pairs = [(g, p) for g, p in zip(gold, predicted, strict=True) if p is not None]
    n = len(pairs)

    # local import: labels.agreement loads scipy, and every `carelens` command reads
    # METRIC_KEYS from this module
    from labels.agreement import macro_f1

    f1 = macro_f1([g for g, _ in pairs], [p for _, p in pairs], order, n_boot=n_boot, seed=seed)
    no_prefix = "no scored prefix has a prediction" if f1.value is None else None
    out = {"macro_f1": TriageMetric("macro_f1", "Macro-F1", f1.value, None, n, no_prefix,
                                    ci_low=f1.ci_low, ci_high=f1.ci_high)}
    for key in SHARE_KEYS:
        counts, condition = share_rule(key, order, esc)
        name, what = SHARE_WORDS[key]
        scored = [(g, p) for g, p in pairs if counts(g)]
        out[key] = _share(key, name, sum(1 for g, p in scored if condition(g, p)), len(scored),
                          what.format(urgent=urgent))
    out["coverage"] = _share(
        "coverage", "Coverage (prefixes with a usable label)", n, len(gold), "a gold label"
    )
    return out


def rank_models(
    metrics_by_model: Mapping[str, Mapping[str, TriageMetric]], key: str = "macro_f1"
) -> list[RankedModel]:
    """Models ordered best first on one metric (lower is better for the error rates).

    Ties share the mean of their positions; models whose metric is undefined come
    last with rank None. A key that is not one of :data:`METRIC_KEYS` is a ValueError.
    """
    if key not in METRIC_KEYS:
        raise ValueError(f"cannot rank by {key!r}: choose one of {', '.join(METRIC_KEYS)}")
    lower = key in LOWER_IS_BETTER
    scored = [(m, metrics[key].value) for m, metrics in metrics_by_model.items()]
    ci = {m: (metrics[key].ci_low, metrics[key].ci_high) for m, metrics in metrics_by_model.items()}
    defined = sorted(
        (x for x in scored if x[1] is not None), key=lambda x: (x[1] if lower else -x[1], x[0])
    )
    ranked, i = [], 0
    while i < len(defined):
        j = i
        while j + 1 < len(defined) and defined[j + 1][1] == defined[i][1]:
            j += 1
        ranked += [RankedModel(m, v, (i + j) / 2 + 1, *ci[m]) for m, v in defined[i : j + 1]]
        i = j + 1
    return ranked + [RankedModel(m, None, None) for m, v in sorted(scored) if v is None]


def _as_scores(ranking) -> dict[str, float]:
    if isinstance(ranking, Mapping):
        return {m: float(v) for m, v in ranking.items() if v is not None}
    return {r.model: float(r.rank) for r in ranking if r.rank is not None}


def rank_correlation(ranking_a, ranking_b) -> RankCorrelation:
    """Spearman's rho and Kendall's tau-b between two rankings of the same models.

    Each ranking is a list of :class:`RankedModel` (its ranks are used) or a mapping
    model -> score or rank (higher and lower both work as long as both rankings use
    the same direction). Only models present and defined in both count.
    """
    a, b = _as_scores(ranking_a), _as_scores(ranking_b)
    models = sorted(set(a) & set(b))
    xs, ys = [a[m] for m in models], [b[m] for m in models]
    if len(models) < 3:
        reason = f"rank correlation needs at least 3 models ranked by both; there are {len(models)}"
        return RankCorrelation(None, None, len(models), models, reason)
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        reason = "all models tie in one ranking, so the correlation is undefined"
        return RankCorrelation(None, None, len(models), models, reason)
    from scipy import stats  # local import: scipy.stats takes ~0.3 s to load

    rho = stats.spearmanr(xs, ys).statistic
    tau = stats.kendalltau(xs, ys).statistic
    return RankCorrelation(float(rho), float(tau), len(models), models)
