"""HealthBench scores exactly as OpenAI's simple-evals computes them
(``healthbench_eval.py``: ``calculate_score``, ``grade_sample``, ``_compute_clipped_stats``),
for every rater that graded: the grader, each physician, each clinician.

- An *example* (one completion graded against its prompt's rubric) scores the points of
  its met criteria over the sum of its positive points. Met MUST-NOT criteria
  (negative points) subtract, so a raw score can be negative; it is not clipped.
- The *overall* score is the mean of the raw example scores, clipped to [0, 1].
  Its standard deviation is simple-evals' bootstrap: 1000 resamples of the examples
  with replacement, each resample's mean clipped to [0, 1], ``np.std`` (ddof 0). It is
  *seeded* here (``numpy.random.RandomState(seed)``, drawing as ``np.random.choice``
  does), so the same data and seed give the same figure; simple-evals draws from
  numpy's unseeded global state. The 95% interval is the percentile interval of the
  same clipped resample means.
- Per tag: an *example tag* (``theme:…``, ``physician_agreed_category:…``) takes the
  example's score; a *rubric tag* (``axis:…``, ``level:…``, ``cluster:…``) rescores the
  example on that tag's criteria alone (left out for an example whose tagged criteria
  have no positive points). Each tag's value is the clipped mean over the examples that
  have it.

An example is scored on the criteria it was graded on, as simple-evals does: a
simple-evals record (``healthbench-results``, ``healthbench-examples``) says how many
rubric items its example was graded on (a consensus or hard run grades part of its
prompt's criteria), and the grader's verdicts on that many criteria are the example;
any other rater's example is its prompt's every criterion. An example a rater has not
graded on every one of its criteria (or marked "cannot assess") has no score from them:
it is named in ``incomplete`` and left out of their figures.

Every figure is per rater and per **run** (``store.runs``): a grader that graded two
models' completions has two scores, one per run, as simple-evals gives one per sampled
model. Runs are pooled only when asked (``pool``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from labels.intervals import interval_warnings
from labels.phases import normalise_phase, phase_condition
from labels.provenance import Digest, file_name
from store import Store
from store.runs import Run, load_runs

RUBRIC_ITEMS = "rubric_items"
"""An answer's extra naming how many rubric items its example was graded on (written by
the simple-evals importers, `review.datasets.sources.healthbench.RUBRIC_ITEMS`)."""
NO_RUN = "(no run)"
"""The run label of what belongs to no run: a prompt's physician-written ideal completion,
a meta-evaluation completion no file names the model of."""
POOLED = "(runs pooled)"

N_BOOT = 1000
"""simple-evals' bootstrap resamples."""


@dataclass(frozen=True)
class Graded:
    """One rubric criterion as a rater graded it."""

    points: float
    met: bool
    tags: tuple[str, ...] = ()


def example_score(criteria: Sequence[Graded]) -> float | None:
    """simple-evals' ``calculate_score``: points of met criteria (negative ones included)
    over the sum of positive points; None when there are no positive points."""
    total = sum(c.points for c in criteria if c.points > 0)
    if total == 0:
        return None
    return sum(c.points for c in criteria if c.met) / total


def example_metrics(criteria: Sequence[Graded], example_tags: Iterable[str] = ()
                    ) -> dict[str, float]:
    """simple-evals' ``grade_sample`` metrics of one example: ``overall_score``, each
    example tag (the example's score) and each rubric tag (the score on that tag's
    criteria, left out when they have no positive points)."""
    overall = example_score(criteria)
    if overall is None:
        raise ValueError("an example's rubric needs a criterion with positive points")
    out = {"overall_score": overall}
    out.update({tag: overall for tag in example_tags})
    by_tag: dict[str, list[Graded]] = {}
    for c in criteria:
        for tag in c.tags:
            by_tag.setdefault(tag, []).append(c)
    for tag, items in by_tag.items():
        score = example_score(items)
        if score is not None:
            out[tag] = score
    return out


@dataclass(frozen=True)
class ClippedStats:
    """A HealthBench aggregate: the clipped mean, its bootstrap std and interval."""

    value: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    raw_mean: float | None = None
    """The mean before clipping (so a reader sees when the clip acted)."""
    warnings: tuple[str, ...] = ()
    """Why the interval means little, in words (``labels.intervals.interval_warnings``):
    too few examples, or no width."""


def clipped_stats(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0
                  ) -> ClippedStats:
    """simple-evals' ``_compute_clipped_stats``: the mean clipped to [0, 1] and the
    standard deviation (ddof 0) of ``n_boot`` bootstrap means, each clipped; drawn as
    ``np.random.choice(values, len(values))`` per resample from a RandomState seeded
    with ``seed``. Also the 2.5 and 97.5 percentiles of those clipped means."""
    values = np.asarray(list(values), dtype=float)
    n = len(values)
    if n == 0:
        return ClippedStats(None, None, None, None, 0)
    raw = float(np.mean(values))
    value = float(np.clip(raw, 0, 1))
    if n_boot < 1:
        return ClippedStats(value, None, None, None, n, raw,
                            interval_warnings(value, None, None, n, what="examples"))
    rng = np.random.RandomState(seed)
    samples = rng.choice(values, (n_boot, n))  # the same stream as n_boot draws of size n
    means = np.clip(samples.mean(axis=1), 0, 1)
    low, high = (float(x) for x in np.quantile(means, [0.025, 0.975]))
    return ClippedStats(value, float(np.std(means)), low, high, n, raw,
                        interval_warnings(value, low, high, n, what="examples"))


# -- from the store ----------------------------------------------------------------------

@dataclass(frozen=True)
class ExampleScore:
    prompt_id: str
    completion_id: str | None
    """None for the prompt's own completion (the physician-written ideal)."""
    score: float
    """Raw: may be negative, never above 1."""
    item_uid: str = ""


@dataclass(frozen=True)
class Incomplete:
    """An example a rater did not grade on every criterion: left out of their score."""

    prompt_id: str
    completion_id: str | None
    graded: int
    """Criteria with a met / not met answer from the rater."""
    criteria: int
    item_uid: str = ""


@dataclass
class RaterScore:
    """One rater's scores on one run's completions (or on several runs, pooled)."""

    rater: str
    kind: str
    """machine | human | reference"""
    overall: ClippedStats
    examples: list[ExampleScore]
    by_tag: dict[str, ClippedStats]
    incomplete: list[Incomplete] = field(default_factory=list)
    run: str = NO_RUN
    """The run's label (`store.runs`), NO_RUN, or POOLED."""
    run_id: int | None = None
    model: str | None = None
    """The run's model (requested); None for NO_RUN or several pooled."""
    runs: tuple[int, ...] = ()
    """The runs pooled (with `pool`)."""


@dataclass
class HealthBenchScores:
    raters: list[RaterScore]
    """One entry per rater and run (per rater with `pool`)."""
    phase: str
    filters: dict
    n_boot: int
    seed: int
    notes: list[str] = field(default_factory=list)
    explanation: str | None = None
    data: Digest | None = field(default=None, repr=False, compare=False)
    database_file: str | None = None


@dataclass
class _Example:
    uid: str
    prompt_id: str
    completion_id: str | None
    example_tags: tuple[str, ...]
    criteria: dict[int, tuple[float | None, tuple[str, ...]]]
    """question id -> (points, rubric tags); points None when not known or not usable."""
    run_id: int | None = None
    odd_points: bool = False
    """A criterion's stored points are not a finite number (infinity, text), or their
    sum overflows: the example is not scored."""


def _examples(store: Store, dataset: str | None, split: str | None,
              runs: list[Run] | None = None) -> dict[int, _Example]:
    where, params = ["i.kind = 'graded_conversation'"], []
    for column, value in (("d.name", dataset), ("i.split", split)):
        if value not in (None, ""):
            where.append(f"{column} = ?")
            params.append(value)
    if runs is not None:
        where.append(f"i.run_id IN ({', '.join(str(int(r.id)) for r in runs) or 'NULL'})")
    rows = store.query(
        f"""SELECT i.id, i.uid, i.meta, i.run_id, p.meta AS parent_meta, q.id AS question_id,
                   q.points, q.meta AS question_meta
            FROM items i JOIN datasets d ON d.id = i.dataset_id
            LEFT JOIN items p ON p.id = i.parent_id
            JOIN questions q ON q.kind = 'criterion' AND q.item_id = COALESCE(i.parent_id, i.id)
            WHERE {' AND '.join(where)} ORDER BY i.id, q.id""", params)
    out: dict[int, _Example] = {}
    for r in rows:
        ex = out.get(r["id"])
        if ex is None:
            meta, parent = json.loads(r["meta"] or "{}"), json.loads(r["parent_meta"] or "{}")
            prompt_id = str(meta.get("prompt_id") or parent.get("prompt_id") or r["uid"])
            tags = parent.get("example_tags") or meta.get("example_tags") or []
            ex = out[r["id"]] = _Example(r["uid"], prompt_id, meta.get("completion_id"),
                                         tuple(str(t) for t in tags), {}, r["run_id"])
        qmeta = json.loads(r["question_meta"] or "{}")
        tags = qmeta.get("tags") if isinstance(qmeta.get("tags"), list) else []
        points = r["points"]
        if points is not None and not _finite_number(points):
            ex.odd_points, points = True, None
        ex.criteria[r["question_id"]] = (points, tuple(str(t) for t in tags))
    for ex in out.values():
        if not math.isfinite(sum(abs(p) for p, _ in ex.criteria.values() if p is not None)):
            ex.odd_points = True  # points so large their sum overflows
    return out


def _finite_number(value: object) -> bool:
    """Whether points read from the database can be scored: a finite number (an
    import refuses anything else; an older database or another program may not have)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def healthbench_scores(
    store: Store,
    *,
    dataset: str | None = None,
    split: str | None = None,
    phase: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    runs: list[Run] | None = None,
    pool: bool = False,
) -> HealthBenchScores:
    """Every rater's HealthBench score on each run's graded conversations (under
    ``dataset`` and ``split``; only ``runs`` when given, a model's or a chosen run's, see
    ``store.runs.select_runs``): per example, overall (clipped mean, bootstrap std and
    interval) and per tag, one entry per rater and run; with ``pool``, one per rater over
    every run chosen. A clinician's verdicts are those of ``phase`` (``labels.phases``: by
    default the ones given before any machine verdict was seen)."""
    examples = _examples(store, dataset, split, runs)
    allowed, allowed_params = phase_condition(phase, "a", "r")
    newest, newest_params = phase_condition(phase, "b", "rb")
    filters = {k: v for k, v in (("dataset", dataset), ("split", split)) if v}
    if runs is not None:
        filters["runs"] = [r.label for r in runs]
    if pool:
        filters["pooled"] = True
    report = HealthBenchScores([], normalise_phase(phase), filters, n_boot, seed,
                               database_file=file_name(store))
    if not examples:
        report.explanation = ("No graded conversation with rubric criteria yet: import "
                              "HealthBench rows, completions and grades to score them.")
        report.data = Digest()
        return report
    ids = ", ".join(str(i) for i in examples)
    rows = store.query(
        f"""SELECT a.item_id, a.question_id, a.value, a.status, r.name, r.kind,
                   json_extract(a.extra, '$.{RUBRIC_ITEMS}') AS graded_on
            FROM annotations a JOIN raters r ON r.id = a.rater_id
            WHERE a.item_id IN ({ids}) AND a.target = '' AND {allowed}
              AND a.id = (SELECT MAX(b.id) FROM annotations b JOIN raters rb ON rb.id = b.rater_id
                          WHERE b.item_id = a.item_id AND b.question_id = a.question_id
                            AND b.rater_id = a.rater_id AND b.target = '' AND {newest})
            ORDER BY a.id""", [*allowed_params, *newest_params])
    verdicts: dict[str, dict[int, dict[int, bool | None]]] = {}
    graded_on: dict[tuple[str, int], set] = {}
    """(rater, item) -> how many rubric items the example was graded on, as each of the
    rater's answers there says (a simple-evals record's; empty for anyone else)."""
    kinds: dict[str, str] = {}
    digest = Digest()
    for r in rows:
        example = examples[r["item_id"]]
        if r["question_id"] not in example.criteria:
            continue
        met = {"met": True, "not_met": False}.get(r["value"]) if r["status"] == "answered" \
            else None
        verdicts.setdefault(r["name"], {}).setdefault(r["item_id"], {})[r["question_id"]] = met
        graded_on.setdefault((r["name"], r["item_id"]), set()).add(r["graded_on"])
        kinds[r["name"]] = r["kind"]
        digest.add(example.uid, r["question_id"], r["name"], r["value"], r["status"],
                   r["graded_on"])
    for ex in examples.values():
        for qid, (points, tags) in ex.criteria.items():
            digest.add(ex.uid, qid, points, list(tags), list(ex.example_tags))
    report.data = digest
    odd_points = sum(1 for ex in examples.values() if ex.odd_points)
    if odd_points:
        report.notes.append(
            f"{odd_points} example{'' if odd_points == 1 else 's'} with a criterion whose points"
            " in the database are not a finite number (infinity or text; an import refuses"
            " them) or so large that their sum is not: not scored by anyone")
    unknown_points = sum(1 for ex in examples.values() if not ex.odd_points
                         and any(p is None for p, _ in ex.criteria.values()))
    if unknown_points:
        report.notes.append(
            f"{unknown_points} example{'' if unknown_points == 1 else 's'} with a criterion "
            "whose points are not known (a meta-evaluation row imported before its rubric): "
            "not scored by anyone")
    order = {"machine": 0, "reference": 1, "human": 2}
    known = {r.id: r for r in load_runs(store.conn, "graded_conversation")}
    for name in sorted(verdicts, key=lambda n: (order.get(kinds[n], 3), n)):
        by_run: dict[int | None, dict[int, dict[int, bool | None]]] = {}
        for item_id, answers in verdicts[name].items():
            run_id = None if pool else examples[item_id].run_id
            by_run.setdefault(run_id, {})[item_id] = answers
        for run_id in sorted(by_run, key=lambda i: (i is None, i or 0)):
            score = _rater_score(name, kinds[name], by_run[run_id], examples, n_boot, seed,
                                 graded_on)
            if pool:
                pooled = sorted({examples[i].run_id for i in by_run[run_id]} - {None})
                score.run, score.runs = POOLED, tuple(pooled)
                models = {known[i].model_requested for i in pooled if i in known}
                score.model = models.pop() if len(models) == 1 else None
            elif run_id is not None and run_id in known:
                run = known[run_id]
                score.run, score.run_id, score.model = run.label, run.id, run.model_requested
            report.raters.append(score)
    if not report.raters:
        report.explanation = ("Nobody has graded these conversations yet"
                              + (" with answers of this phase." if phase else "."))
    return report


def graded_criteria(ex: _Example, answers: Mapping[int, bool | None],
                    said: set | None) -> dict[int, tuple[float | None, tuple[str, ...]]]:
    """The criteria an example is scored on for one rater: where each of the rater's
    answers says how many rubric items the example was graded on (a simple-evals
    record), the criteria answered, so long as that many were; else every criterion
    of its prompt."""
    said = said or set()
    if len(said) == 1 and None not in said:
        (n,) = said
        if isinstance(n, int) and n == len(answers):
            return {q: ex.criteria[q] for q in answers}
    return ex.criteria


def _rater_score(name, kind, graded, examples, n_boot, seed, graded_on=None) -> RaterScore:
    scores, incomplete = [], []
    per_tag: dict[str, list[float]] = {}
    for item_id, answers in graded.items():
        ex = examples[item_id]
        rubric = graded_criteria(ex, answers, (graded_on or {}).get((name, item_id)))
        done = {q: m for q, m in answers.items() if m is not None and q in rubric}
        if len(done) < len(rubric) or ex.odd_points \
                or any(p is None for p, _ in rubric.values()):
            incomplete.append(Incomplete(ex.prompt_id, ex.completion_id, len(done),
                                         len(rubric), ex.uid))
            continue
        criteria = [Graded(float(p), done[q], tags) for q, (p, tags) in rubric.items()]
        if example_score(criteria) is None:
            incomplete.append(Incomplete(ex.prompt_id, ex.completion_id, len(done),
                                         len(rubric), ex.uid))
            continue
        metrics = example_metrics(criteria, ex.example_tags)
        if not all(math.isfinite(v) for v in metrics.values()):  # a quotient that overflows
            incomplete.append(Incomplete(ex.prompt_id, ex.completion_id, len(done),
                                         len(rubric), ex.uid))
            continue
        scores.append(ExampleScore(ex.prompt_id, ex.completion_id, metrics["overall_score"],
                                   ex.uid))
        for tag, value in metrics.items():
            if tag != "overall_score":
                per_tag.setdefault(tag, []).append(value)
    overall = clipped_stats([s.score for s in scores], n_boot=n_boot, seed=seed)
    by_tag = {tag: clipped_stats(values, n_boot=n_boot, seed=seed)
              for tag, values in sorted(per_tag.items())}
    return RaterScore(name, kind, overall, scores, by_tag, incomplete)


def scores_dict(report: HealthBenchScores, provenance: Mapping | None = None) -> dict:
    """``carelens healthbench-score --json``: ``{"raters": [{"rater", "overall": {"value",
    "ci_low", "ci_high", "std", "n"}, "examples": [{"prompt_id", "completion_id",
    "score"}], "by_tag": {TAG: {"value", "n"}}}], "provenance": {...}}``, with each
    rater's ``incomplete`` examples, the raw mean and the notes beside."""
    def stats(s: ClippedStats, full: bool = True) -> dict:
        out = {"value": s.value, "n": s.n}
        if full:
            out.update(ci_low=s.ci_low, ci_high=s.ci_high, std=s.std, raw_mean=s.raw_mean)
        else:
            out.update(std=s.std)
        out["warnings"] = list(s.warnings)
        return out

    return {
        "raters": [{
            "rater": r.rater, "kind": r.kind, "run": r.run, "run_id": r.run_id,
            "model": r.model, **({"runs": list(r.runs)} if r.runs else {}),
            "overall": stats(r.overall),
            "examples": [{"prompt_id": e.prompt_id, "completion_id": e.completion_id,
                          "score": e.score} for e in r.examples],
            "by_tag": {tag: stats(s, full=False) for tag, s in r.by_tag.items()},
            "incomplete": [{"prompt_id": i.prompt_id, "completion_id": i.completion_id,
                            "graded": i.graded, "criteria": i.criteria} for i in r.incomplete],
        } for r in report.raters],
        "method": METHOD.format(n_boot=report.n_boot, seed=report.seed),
        "notes": report.notes,
        "explanation": report.explanation,
        "provenance": dict(provenance or {}),
    }


METHOD = ("simple-evals' HealthBench scoring: raw example scores (met points over positive "
          "points, negative when a MUST-NOT criterion is met); overall and per-tag values are "
          "the mean clipped to [0, 1]; std is the standard deviation (ddof 0) of {n_boot} "
          "bootstrap means, each clipped, seeded with {seed} (simple-evals leaves it unseeded); "
          "ci_low and ci_high are their 2.5 and 97.5 percentiles")


def scores_provenance(report: HealthBenchScores) -> dict:
    """The provenance object of a HealthBench score report."""
    from labels.provenance import provenance

    return provenance(report.data, database_file=report.database_file, phase=report.phase,
                      filters=report.filters,
                      bootstrap={"resamples": report.n_boot, "seed": report.seed,
                                 "resampled": "examples"})


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def format_scores_text(report: HealthBenchScores) -> str:
    """The scores as text: each rater's overall score with its interval and std, how many
    examples it rests on and how many were left out; then, under each rater's name, why
    its interval means little (if it does), the examples left out and each tag."""
    if report.explanation:
        return report.explanation
    lines = ["HealthBench scores, computed as simple-evals computes them: per rater and run",
             f"Verdicts used: {describe(report)}", ""]
    width = max(len(r.rater) for r in report.raters)
    run_width = max(3, *(len(r.run) for r in report.raters))
    lines.append(f"{'rater':<{width}}  {'run':<{run_width}}  {'score':>6}  {'95% CI':>16}  "
                 f"{'std':>6}  {'n':>4}  left out")
    for r in report.raters:
        o = r.overall
        ci = "—" if o.ci_low is None else f"{o.ci_low:.3f} to {o.ci_high:.3f}"
        ci += "*" if o.warnings else ""
        lines.append(f"{r.rater:<{width}}  {r.run:<{run_width}}  {_num(o.value):>6}  {ci:>16}  "
                     f"{_num(o.std):>6}  {o.n:>4}  {len(r.incomplete)} not graded on every"
                     " criterion")
    if any(r.overall.warnings for r in report.raters):
        lines.append("* this interval means little: the warning is under the rater's name")
    for r in report.raters:
        block = [f"  warning: {w}" for w in r.overall.warnings]
        if r.incomplete:
            named = ", ".join(f"{i.prompt_id}/{i.completion_id or 'ideal'} ({i.graded} of "
                              f"{i.criteria})" for i in r.incomplete[:10])
            more = f" and {len(r.incomplete) - 10} more" if len(r.incomplete) > 10 else ""
            block.append(f"  left out, not graded on every criterion: {named}{more}")
        if r.by_tag:
            block.append("  by tag:")
            block += [f"    {tag}: {_num(s.value)} (n = {s.n})" for tag, s in r.by_tag.items()]
        if block:
            lines += ["", f"{r.rater} · {r.run}:", *block]
    lines += ["", *[f"Note: {n}" for n in report.notes],
              METHOD.format(n_boot=report.n_boot, seed=report.seed) + "."]
    return "\n".join(lines)


def describe(report: HealthBenchScores) -> str:
    from labels.phases import describe_phase

    where = ", ".join(f"{k} {v}" for k, v in report.filters.items())
    return (f"{where} · " if where else "") + describe_phase(report.phase)
