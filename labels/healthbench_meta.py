"""HealthBench meta-evaluation: an automated grader against physicians, next to the
physicians' own agreement (the human ceiling).

Metric (FORMATS.md section 5, as in OpenAI simple-evals ``healthbench_meta_eval``):
the grader is compared *pairwise with each physician label*, not with a consensus.
Every (row, physician label) pair contributes one (reference = physician,
prediction = grader) pair; pairs are pooled; the score is the mean of the F1 of
the "met" class and the F1 of the "not met" class. The human ceiling is the same
metric for each physician against each *other* physician on the same row
(leave-one-out), all ordered pairs pooled. Beside the grader it is computed on the
rows the grader gave a verdict on (:func:`grader_and_ceiling`), so the two numbers
describe the same rows.

F1 convention (HealthBench's): a class's F1 is undefined when its precision or its
recall is (the class was never predicted, or never in the reference), and then
the macro-F1 is undefined too; F1 is 0 when both are 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np

from labels.agreement import f1_per_category_batch
from labels.intervals import bootstrap_ci, interval_warnings

CLASSES = ("not met", "met")  # table index 0, 1


@dataclass(frozen=True)
class MetaRow:
    """One graded criterion: the grader's verdict and the physicians' labels."""

    grader_met: bool | None
    """The grader's verdict; None when it gave none (the row is left out of its score)."""
    physician_labels: Sequence[tuple[str, bool]]
    """(anonymized physician id, criterion met?) for each physician who labelled the row."""
    category: str | None = None
    criterion: str | None = None
    """The rubric criterion text."""
    prompt_id: str | None = None
    completion_id: str | None = None
    tags: tuple[str, ...] = field(default=())
    """Rubric tags such as "axis:accuracy", usable as groups in :func:`by_group`."""


@dataclass(frozen=True)
class MetaScore:
    """Pairwise macro-F1 of one rater (or pool of raters) against physician labels."""

    rater: str
    """"grader", "physicians" (the ceiling) or a physician id."""
    macro_f1: float | None
    f1_met: float | None
    f1_not_met: float | None
    n_pairs: int
    """(reference, prediction) label pairs pooled."""
    n_rows: int
    """Rows contributing at least one pair; the bootstrap resamples these."""
    ci_low: float | None = None
    """95% percentile bootstrap over rows (seeded)."""
    ci_high: float | None = None
    undefined_reason: str | None = None
    note: str | None = None
    warnings: tuple[str, ...] = ()
    """Why the interval means little, in words (``labels.intervals.interval_warnings``):
    few rows, no width, resamples dropped."""


@dataclass(frozen=True)
class GroupComparison:
    """The grader and the human ceiling on one group of rows."""

    group: str | None
    grader: MetaScore
    physicians: MetaScore


def meta_row(record: Mapping, grader_met: bool | None, tags: Iterable[str] = ()) -> MetaRow:
    """A :class:`MetaRow` from a published meta-evaluation row (``binary_labels``,
    ``anonymized_physician_ids``, ``category``, ``rubric``, ``prompt_id``,
    ``completion_id``) and the grader's verdict on it."""
    labels, ids = list(record["binary_labels"]), list(record["anonymized_physician_ids"])
    if len(labels) != len(ids):
        raise ValueError(
            f"row {record.get('completion_id')}: {len(labels)} labels but {len(ids)} physician ids"
        )
    return MetaRow(
        grader_met,
        tuple(zip(ids, (bool(x) for x in labels), strict=True)),
        record.get("category"),
        record.get("rubric"),
        record.get("prompt_id"),
        record.get("completion_id"),
        tuple(tags),
    )


def _f1_by_class(t: np.ndarray) -> np.ndarray:
    """F1 of "not met" and "met" for each (reference x prediction) 2x2 table, by
    HealthBench's convention: NaN when the class was never predicted or never in the
    reference (its precision or recall is undefined)."""
    ref, pred = t.sum(axis=2), t.sum(axis=1)
    return np.where((ref > 0) & (pred > 0), f1_per_category_batch(t), np.nan)


def healthbench_macro_f1_batch(t: np.ndarray) -> np.ndarray:
    """HealthBench's macro-F1 of each (reference x prediction) 2x2 table of a batch: the
    mean of the "met" and "not met" F1, undefined (NaN) when either class's F1 is, which
    is stricter than :func:`labels.agreement.macro_f1_batch` (that one averages over the
    classes either side used)."""
    return _f1_by_class(t).mean(axis=1)


def _why(total: np.ndarray, who: str) -> str:
    ref, pred = total.sum(axis=1), total.sum(axis=0)
    gaps = []
    for k in (1, 0):
        if pred[k] == 0:
            gaps.append(f"{who} never said '{CLASSES[k]}'")
        if ref[k] == 0 and who != "the physicians":  # the ceiling's table is symmetric
            gaps.append(f"no reference physician said '{CLASSES[k]}'")
    return "; ".join(gaps) + ", so that class's F1 is undefined and so is the macro-F1"


def _score(rater: str, tables: list[np.ndarray], n_boot: int, seed: int, note=None) -> MetaScore:
    if not tables:
        return MetaScore(
            rater, None, None, None, 0, 0, None, None, "no label pairs to compare", note
        )
    tables = np.asarray(tables, dtype=float)
    total = tables.sum(axis=0)
    f1_not, f1_met = (None if np.isnan(x) else float(x) for x in _f1_by_class(total[None])[0])
    n_pairs = int(total.sum())
    if f1_not is None or f1_met is None:
        who = {"grader": "the grader", "physicians": "the physicians"}.get(rater, rater)
        reason = _why(total, who)
        return MetaScore(
            rater, None, f1_met, f1_not, n_pairs, len(tables), None, None, reason, note
        )
    boot = bootstrap_ci(healthbench_macro_f1_batch, tables, n_boot=n_boot, seed=seed)
    notes = "; ".join(x for x in (note, boot.note) if x) or None
    macro = (f1_met + f1_not) / 2
    return MetaScore(
        rater, macro, f1_met, f1_not, n_pairs, len(tables), boot.low, boot.high, None, notes,
        interval_warnings(macro, boot.low, boot.high, len(tables), dropped=boot.dropped_share,
                          what="rows"),
    )


def _grader_tables(rows: Iterable[MetaRow]) -> tuple[list[np.ndarray], int]:
    tables, no_verdict = [], 0
    for row in rows:
        if row.grader_met is None:
            no_verdict += 1
            continue
        if not row.physician_labels:
            continue
        t = np.zeros((2, 2))
        for _, label in row.physician_labels:
            t[int(label), int(row.grader_met)] += 1
        tables.append(t)
    return tables, no_verdict


def _pair_table(prediction: bool, references: Iterable[bool]) -> np.ndarray:
    t = np.zeros((2, 2))
    for ref in references:
        t[int(ref), int(prediction)] += 1
    return t


def grader_vs_physicians(rows: Iterable[MetaRow], *, n_boot=1000, seed=0) -> MetaScore:
    """The grader's pairwise macro-F1 against every physician label (HealthBench's
    meta-evaluation metric), with a bootstrap interval over rows."""
    tables, no_verdict = _grader_tables(rows)
    rows_word = "row" if no_verdict == 1 else "rows"
    note = f"{no_verdict} {rows_word} without a grader verdict left out" if no_verdict else None
    return _score("grader", tables, n_boot, seed, note)


def human_ceiling(rows: Iterable[MetaRow], *, n_boot=1000, seed=0) -> MetaScore:
    """The same metric for physicians against one another (leave-one-out): on rows with
    >= 2 physicians, each physician's label is the prediction and each *other*
    physician's label on that row the reference; all ordered pairs pooled."""
    tables = []
    for row in rows:
        labels = [label for _, label in row.physician_labels]
        if len(labels) >= 2:
            tables.append(
                sum(_pair_table(x, labels[:i] + labels[i + 1 :]) for i, x in enumerate(labels))
            )
    return _score("physicians", tables, n_boot, seed)


def graded_rows(rows: Iterable[MetaRow]) -> list[MetaRow]:
    """The rows the grader gave a verdict on: the rows its score and the ceiling beside
    it are computed on."""
    return [row for row in rows if row.grader_met is not None]


def grader_and_ceiling(
    rows: Iterable[MetaRow], group: str | None = None, *, n_boot=1000, seed=0
) -> GroupComparison:
    """The grader and the human ceiling on the same rows: those the grader gave a verdict
    on. A row without one is left out of both, and both notes say how many."""
    rows = list(rows)
    scored = graded_rows(rows)
    grader = grader_vs_physicians(rows, n_boot=n_boot, seed=seed)  # notes the rows left out
    ceiling = human_ceiling(scored, n_boot=n_boot, seed=seed)
    if left_out := len(rows) - len(scored):
        said = (f"{left_out} {'row' if left_out == 1 else 'rows'} without a grader verdict left "
                "out, as from the grader's score")
        ceiling = replace(ceiling, note="; ".join(x for x in (said, ceiling.note) if x))
    return GroupComparison(group, grader, ceiling)


def physician_scores(rows: Iterable[MetaRow], *, n_boot=1000, seed=0) -> dict[str, MetaScore]:
    """Each physician against the other physicians on the rows they share (the
    per-physician breakdown of :func:`human_ceiling`)."""
    by_physician: dict[str, list[np.ndarray]] = {}
    for row in rows:
        if len(row.physician_labels) < 2:
            continue
        for i, (pid, label) in enumerate(row.physician_labels):
            others = [x for j, (_, x) in enumerate(row.physician_labels) if j != i]
            by_physician.setdefault(pid, []).append(_pair_table(label, others))
    return {pid: _score(pid, t, n_boot, seed) for pid, t in sorted(by_physician.items())}


def _group_fn(key: str | Callable[[MetaRow], object]) -> Callable[[MetaRow], list]:
    if callable(key):

        def groups(row):
            g = key(row)
            return list(g) if isinstance(g, list | tuple | set | frozenset) else [g]

        return groups
    if key in {f.name for f in fields(MetaRow)}:
        return lambda row: [getattr(row, key)]
    prefix = f"{key}:"  # a tag family, e.g. "axis" -> "axis:accuracy"
    return lambda row: [t[len(prefix) :] for t in row.tags if t.startswith(prefix)] or [None]


def by_group(
    rows: Iterable[MetaRow], key: str | Callable[[MetaRow], object], *, n_boot=1000, seed=0
) -> dict[str | None, GroupComparison]:
    """Grader and human ceiling per group, e.g. per ``"category"``, ``"criterion"``, a tag
    family such as ``"axis"`` (tags "axis:..."), or a function of the row. A row with
    several tags of the family counts in each; rows with none fall in group None. In each
    group both are computed on the rows the grader gave a verdict on
    (:func:`grader_and_ceiling`)."""
    group_of = _group_fn(key)
    groups: dict[object, list[MetaRow]] = {}
    for row in rows:
        for g in group_of(row):
            groups.setdefault(g, []).append(row)
    ordered = sorted(groups, key=lambda g: (g is None, str(g)))
    return {g: grader_and_ceiling(groups[g], g, n_boot=n_boot, seed=seed) for g in ordered}
