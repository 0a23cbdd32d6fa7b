"""CARE-Bench triage metrics, model rankings, and whether two label sources rank models alike.

Metric definitions are those of FORMATS.md section 1 (the published scorer's
formulas were not seen). ``rank`` means a label's position in the codebook's
ordinal order, which callers pass in as ``order``: the codebook is the source
of truth at run time; ``CAREBENCH_ORDER`` is a copy for tests and examples.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from labels.intervals import interval_warnings, wilson_interval

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
    """95% interval (``interval`` says which): where responses come in cases (a case's
    rounds and prefixes, several responses each), the percentile bootstrap resampling
    whole cases, since a case's responses are correlated and an interval that takes
    them as independent is too narrow; where each response is its own case, Wilson's
    score interval for a share (it stays inside 0-1 and holds up at 0 or n successes)
    and the bootstrap over prefixes for macro-F1."""
    ci_high: float | None = None
    interval: str | None = None
    """How the interval was computed, in words (:data:`CASE_BOOTSTRAP`, :data:`WILSON`,
    :data:`UNIT_BOOTSTRAP`)."""
    clusters: int | None = None
    """Cases the bootstrap resampled (None for Wilson's interval over responses)."""
    warnings: tuple[str, ...] = ()
    """Why the interval means little, in words (``labels.intervals.interval_warnings``)."""

    @property
    def lower_is_better(self) -> bool:
        return self.key in LOWER_IS_BETTER


CASE_BOOTSTRAP = "percentile bootstrap over cases"
"""A case's responses are drawn together: they are correlated."""
UNIT_BOOTSTRAP = "percentile bootstrap over prefixes"
WILSON = "Wilson score"
WILSON_CASES = "Wilson score on the number of cases"
"""For a share of 0 or 1 in clustered responses, where every bootstrap resample gives the
same share: Wilson's interval taking each case as one observation (a case's responses
are worth at least one independent one together), wider than over responses."""
INTERVAL_METHOD = ("95% intervals: where responses come in cases (several per case), the "
                   "percentile bootstrap resampling whole cases ({n_boot} resamples, seed "
                   "{seed}), for the shares and macro-F1 alike, because a case's responses are "
                   "correlated (a share of 0 or 1 there, where every resample agrees, takes "
                   "Wilson's score interval on the number of cases); where each response is "
                   "its own case, Wilson's score interval for a share and the bootstrap over "
                   "prefixes for macro-F1")
"""The method of every triage interval, said in each output's provenance."""


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


def escalation_split(order: Sequence[str], risk=None) -> tuple[frozenset[str], str]:
    """Which codes escalate care (call for action), and which one is urgent.

    A codebook that marks its risk order (`[risk]`: `codebook.Risk`, given as `risk`)
    says so itself: every code from `action_from` up acts, `urgent` is urgent.
    CARE-Bench's codebook marks none, and for it the assumption stands
    (FORMATS.md: inferred from the naming, not published): a code escalates when
    its name starts with "1"; the urgent code is the highest in the order. This is
    the only place that reads meaning into the code names."""
    if risk is not None:
        order = list(order)
        return frozenset(order[order.index(risk.action_from):]), risk.urgent
    return frozenset(c for c in order if c.startswith("1")), order[-1]


MISSING_RULES = ("left_out", "wrong")
"""How a missing prediction (a failed generation, a prefix a submission gave no label)
is scored. The CARE-Bench scorer's rule was not published (FORMATS.md), so both are
reported: ``left_out`` scores the predicted prefixes only (coverage says how many
were missed); ``wrong`` counts a missing prediction against the model (see
:func:`triage_tables`)."""
MISSING_SENSITIVE = ("macro_f1", "accuracy", "missed_care", "urgent_false_negative")
"""The metrics the two rules differ on. A missing prediction is no escalation and no
label: under ``wrong`` it is an error, a missed escalation and a missed urgent one.
It is neither an over- nor an under-triage nor an unnecessary or urgent escalation,
so those shares are taken of the predicted prefixes under both rules."""
METRIC_NAMES = {
    "macro_f1": "Macro-F1",
    "accuracy": "Accuracy",
    "over_triage": "Over-triage",
    "under_triage": "Under-triage",
    "missed_care": "Missed care",
    "unnecessary_care": "Unnecessary care",
    "urgent_false_negative": "Urgent false negative",
    "false_urgent_escalation": "False urgent escalation",
    "coverage": "Coverage (prefixes with a usable label)",
}


def triage_tables(gold: Sequence[str], predicted: Sequence[str | None],
                  order: Sequence[str]):
    """One (K x K+1) table per prefix: gold row, predicted column, the last column for a
    missing prediction. Every metric is a function of the sum of such tables
    (:func:`triage_metric_batch`), so a bootstrap or a paired comparison resamples them."""
    import numpy as np

    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    order = list(order)
    rank = {code: i for i, code in enumerate(order)}
    for label in (*gold, *predicted):
        if label is not None and label not in rank:
            raise ValueError(f"{label!r} is not in the codebook order {order}")
    if any(g is None for g in gold):
        raise ValueError("every prefix needs a gold label")
    k = len(order)
    tables = np.zeros((len(gold), k, k + 1))
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        tables[i, rank[g], k if p is None else rank[p]] = 1
    return tables


def _parts(key: str, t, order: Sequence[str], escalating: Collection[str] | None,
           missing: str, risk=None):
    """(numerator, denominator) arrays of a share metric on summed tables (B x K x K+1)."""
    import numpy as np

    k = len(order)
    esc_codes, urgent = escalation_split(list(order), risk)
    esc_codes = frozenset(escalating) if escalating is not None else esc_codes
    esc = np.array([c in esc_codes for c in order])
    urg = np.array([c == urgent for c in order])
    said, gone = t[:, :, :k], t[:, :, k]
    wrong = missing == "wrong"
    i, j = np.indices((k, k))
    diag = said[:, i == j].sum(axis=1)
    n_said = said.sum(axis=(1, 2))
    n_all = n_said + gone.sum(axis=1)
    if key == "accuracy":
        return diag, n_all if wrong else n_said
    if key == "over_triage":
        return said[:, j > i].sum(axis=1), n_said
    if key == "under_triage":
        return said[:, j < i].sum(axis=1), n_said
    if key == "missed_care":
        count = said[:, esc[i] & ~esc[j]].sum(axis=1) + (gone[:, esc].sum(axis=1) if wrong else 0)
        return count, said[:, esc].sum(axis=(1, 2)) + (gone[:, esc].sum(axis=1) if wrong else 0)
    if key == "unnecessary_care":
        return said[:, ~esc[i] & esc[j]].sum(axis=1), said[:, ~esc].sum(axis=(1, 2))
    if key == "urgent_false_negative":
        count = said[:, urg[i] & ~urg[j]].sum(axis=1) + (gone[:, urg].sum(axis=1) if wrong else 0)
        return count, said[:, urg].sum(axis=(1, 2)) + (gone[:, urg].sum(axis=1) if wrong else 0)
    if key == "false_urgent_escalation":
        return said[:, ~urg[i] & urg[j]].sum(axis=1), said[:, ~urg].sum(axis=(1, 2))
    if key == "coverage":
        return n_said, n_all
    raise ValueError(f"unknown triage metric {key!r}")


def _macro_f1_tables(t, k: int, missing: str):
    """Macro-F1 of summed tables over every one of the codebook's labels, a label that
    neither gold nor the predictions use counting 0 (scikit-learn's ``f1_score(...,
    labels=the codebook's labels, average="macro", zero_division=0)``): a model scored on
    a subset without one of the labels is averaged over the same four as every other,
    not over the three it has (which read 0.50 where the four give 0.375, and reordered
    the models). On the predicted prefixes (``left_out``), or with a missing prediction
    as a prediction that is never right (``wrong``: it lowers the recall of its gold
    label)."""
    import numpy as np

    from labels.agreement import macro_f1_batch

    if missing == "wrong":
        square = np.zeros((t.shape[0], k + 1, k + 1))
        square[:, :k, :] = t
        return macro_f1_batch(square, categories=k, every_category=True)
    return macro_f1_batch(t[:, :, :k], every_category=True)


def triage_metric_batch(key: str, t, order: Sequence[str],
                        escalating: Collection[str] | None = None, missing: str = "left_out",
                        risk=None):
    """One triage metric of each summed table in a batch (B x K x K+1), NaN where its
    denominator is 0: the one definition the point estimate, its bootstrap and the
    paired comparison of two models all use."""
    import numpy as np

    t = np.asarray(t, dtype=float)
    if key == "macro_f1":
        return _macro_f1_tables(t, len(order), missing)
    count, n = _parts(key, t, order, escalating, missing, risk)
    return np.where(n > 0, count / np.where(n > 0, n, 1), np.nan)


_WHAT = {  # what a metric's denominator counts, for the reason it is undefined
    "accuracy": "a prediction",
    "over_triage": "a prediction",
    "under_triage": "a prediction",
    "missed_care": "a gold label that escalates care",
    "unnecessary_care": "a gold label that does not escalate care",
    "coverage": "a gold label",
}


def denominator_words(key: str, order: Sequence[str], risk=None) -> str:
    """What a share's denominator counts, in words ("a gold label that escalates care");
    `risk`: a study codebook's risk order, which names its urgent label."""
    _, urgent = escalation_split(order, risk)
    return _WHAT.get(key) or (f"gold label {urgent}" if key == "urgent_false_negative"
                              else f"a gold label other than {urgent}")


def triage_metrics(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    order: Sequence[str],
    escalating: Collection[str] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    clusters: Sequence | None = None,
    missing: str = "left_out",
    risk=None,
    names: Mapping[str, str] | None = None,
) -> dict[str, TriageMetric]:
    """The CARE-Bench scorer's numbers for one model, keyed by metric, each with
    its 95% interval: given ``clusters`` (each response's case) where a case holds more
    than one response, a seeded bootstrap of ``n_boot`` resamples of whole cases for
    every metric; otherwise Wilson's for the shares and the bootstrap over prefixes for
    macro-F1 (no bootstrap interval when ``n_boot`` is 0).

    A None prediction (generation failed, no label given) is a *missing* prediction:
    ``missing="left_out"`` (the default) scores the predicted prefixes only and shows
    the missing ones in ``coverage``; ``missing="wrong"`` counts them against the model
    in the metrics of :data:`MISSING_SENSITIVE`. ``escalating`` overrides
    :func:`escalation_split`; ``risk`` is a codebook's own risk order (`codebook.Risk`:
    what acts and what is urgent on a study's scale); ``names`` the metrics' names
    in that study's words.

    - accuracy: predicted == gold, share of scored prefixes;
    - macro_f1: mean per-label F1 over the codebook's labels (one neither gold nor the
      predictions use counts 0);
    - over_triage / under_triage: predicted rank > / < gold rank, share of scored;
    - missed_care: gold escalates, predicted does not (share of gold escalating);
    - unnecessary_care: gold does not escalate, predicted does (share of gold non-escalating);
    - urgent_false_negative: gold urgent, predicted not (share of gold urgent);
    - false_urgent_escalation: predicted urgent, gold not (share of gold non-urgent).
    """
    if missing not in MISSING_RULES:
        raise ValueError(f"missing must be one of {MISSING_RULES}, not {missing!r}")
    order = list(order)
    tables = triage_tables(gold, predicted, order)
    total = tables.sum(axis=0)[None]
    if clusters is not None and len(set(clusters)) == len(tables):
        clusters = None  # every response its own case: nothing correlated to keep together
    out: dict[str, TriageMetric] = {}
    for key in METRIC_KEYS:
        name = (names or METRIC_NAMES).get(key, METRIC_NAMES[key])
        if key == "macro_f1":
            out[key] = _macro_f1_metric(tables, order, missing, n_boot, seed, clusters)
            continue
        count, n = (int(x[0]) for x in _parts(key, total, order, escalating, missing, risk))
        if n == 0:
            out[key] = TriageMetric(key, name, None, 0, 0,
                                    f"no scored prefix has {denominator_words(key, order, risk)}")
            continue
        if clusters is None or not n_boot:
            low, high = wilson_interval(count, n)
            out[key] = TriageMetric(key, name, count / n, count, n, ci_low=low, ci_high=high,
                                    interval=WILSON,
                                    warnings=interval_warnings(count / n, low, high, n))
            continue
        boot = _case_bootstrap(
            lambda t, key=key: triage_metric_batch(key, t, order, escalating, missing, risk),
            tables, clusters, n_boot, seed)
        low, high, how = boot.low, boot.high, CASE_BOOTSTRAP
        _, unit_n = _parts(key, tables, order, escalating, missing, risk)  # each response's
        cases = len({c for c, d in zip(clusters, unit_n.tolist(), strict=True) if d > 0})
        if count in (0, n) and low is not None and high - low <= 1e-12:
            low, high = wilson_interval(cases if count else 0, cases)
            how = WILSON_CASES
        out[key] = TriageMetric(key, name, count / n, count, n, ci_low=low, ci_high=high,
                                interval=how, clusters=boot.clusters,
                                warnings=interval_warnings(count / n, low, high, n, cases,
                                                           boot.dropped_share))
    return out


def _case_bootstrap(statistic, tables, clusters, n_boot: int, seed: int):
    """The bootstrap interval of a statistic of summed tables, whole cases resampled
    (``labels.intervals.bootstrap_ci``)."""
    from labels.intervals import bootstrap_ci

    return bootstrap_ci(statistic, tables, n_boot=n_boot, seed=seed, clusters=clusters)


def _macro_f1_metric(tables, order, missing, n_boot, seed, clusters) -> TriageMetric:
    k = len(order)
    said = tables[:, :, :k].sum(axis=(1, 2)) > 0
    keep = tables if missing == "wrong" else tables[said]
    kept = None if clusters is None else (
        list(clusters) if missing == "wrong"
        else [c for c, s in zip(clusters, said.tolist(), strict=True) if s])
    n = len(keep)
    value = _macro_f1_tables(keep.sum(axis=0)[None], k, missing)[0] if n else float("nan")
    name = METRIC_NAMES["macro_f1"]
    if not n or value != value:
        return TriageMetric("macro_f1", name, None, None, n, "no scored prefix has a prediction")
    boot = _case_bootstrap(lambda t: _macro_f1_tables(t, k, missing), keep, kept, n_boot,
                           seed) if n_boot else None
    low, high = (boot.low, boot.high) if boot else (None, None)
    cases = boot.clusters if boot and kept is not None else None
    return TriageMetric("macro_f1", name, float(value), None, n, ci_low=low, ci_high=high,
                        interval=None if boot is None else
                        CASE_BOOTSTRAP if kept is not None else UNIT_BOOTSTRAP,
                        clusters=cases,
                        warnings=interval_warnings(float(value), low, high, n, cases,
                                                   boot.dropped_share if boot else None))


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
