"""Active rounds: the next items are those whose clinician label would tell most.

A clinician's label shrinks a prediction-powered interval most where the
machine is likely wrong: where a judge said it was unsure, where two machine
raters disagree, where a model's answers have been misread before. An active
round draws its items one at a time, each next one among those not drawn yet
with probability proportional to its *size*, the spread of the machine's
error on it, sqrt(q (1 - q)) for its chance q of being wrong (Neyman's
allocation, the variance-optimal one of Zrnic & Candes's active statistical
inference), plus a floor so that no item is out of reach.

The round draws a batch (:data:`BATCH` items) when it is created and the next
whenever its places run low, each batch's chances q learnt afresh from the
clinicians' labels so far (a ridge logistic regression of "the clinicians'
answer differed from the machine's" on the item's signals, its run and the
machine's label, the prior below as its offset): what is known before each batch decides it, which keeps every
step of the sequence a fair draw. Every draw is recorded as it is made (table
``round_sequence``: its turn, its chance at that turn among the items left,
the error it was foreseen to add) and ``labels.ppi.sequential`` estimates from
that record, unbiased at every answer, with an interval the lead may read
after each one. ``round_frame`` keeps every candidate's approximate chance of
being drawn by the round's limit (Rosen's approximation for the first batch's
sizes) and the chance q it started with.

The round's items are offered in the order drawn, so the most telling come
first. Items the clinicians answered before may be drawn too: their answers
count (a reviewer who answered one is not given it again).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from review.team.designs import (
    DesignError,
    PlanningDesign,
    _busiest_machine,
    _ids_json,
    _machine_answers,
    planning_designs,
)
from store import Store, from_json, utcnow

BATCH = 20
"""Items an active round draws at a time (its chances learnt again before each batch)."""
MIN_LEARN = 20
"""Items with a clinician's answer before the chances are learnt from them."""
SIGNAL_WORDS = {"unsure": "the machine was unsure", "disagree": "machine raters disagree",
                "model": "per run", "label": "per machine label",
                "labels": "learnt from clinicians' answers"}


ACTIVE_FLOOR = 0.25
"""An active round's size of an item is ACTIVE_FLOOR x the mean spread + its own spread:
no item's chance falls below a fifth of the average one (a confident item the machine
gets wrong still has a fair chance to be seen, and no label carries an extreme weight)."""
PRIOR_WRONG = (0.05, 0.45)
"""Before any clinician's label: the chance the machine is wrong on an item it is sure of,
and on one it is wholly unsure of (or where the machines disagree)."""


def prior_error_chance(unsure: np.ndarray | None = None,
                       disagree: np.ndarray | None = None) -> np.ndarray | None:
    """How likely the machine is wrong on each item before any clinician's label, from
    its own uncertainty (0 sure .. 1 unsure: its confidence, or its score's distance
    from the threshold) and the machines' disagreement (0..1); None when neither is
    known."""
    signals = [np.asarray(x, dtype=float) for x in (unsure, disagree) if x is not None]
    if not signals:
        return None
    worst = np.clip(np.max(signals, axis=0), 0.0, 1.0)
    low, high = PRIOR_WRONG
    return low + (high - low) * worst


def learned_error_chance(features: np.ndarray, wrong: np.ndarray, labelled: np.ndarray,
                         prior: np.ndarray | None = None, ridge: float = 1.0) -> np.ndarray:
    """How likely the machine is wrong on each item, learnt from the clinicians' labels
    so far: a logistic regression of "the machine was wrong" on the items' features
    (uncertainty, disagreement, one column per model), ridge-penalised, with the prior's
    logit as an offset where there is one (so few labels move it little)."""
    x = np.column_stack([np.ones(len(features)), features])
    offset = (np.zeros(len(x)) if prior is None else
              np.log(np.clip(prior, 1e-3, 1 - 1e-3) / (1 - np.clip(prior, 1e-3, 1 - 1e-3))))
    xl, yl, ol = x[labelled], np.asarray(wrong, dtype=float), offset[labelled]
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], ridge)
    penalty[0] = 1e-3 if prior is None else ridge
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(xl @ beta + ol, -30, 30)))
        grad = xl.T @ (yl - p) - penalty * beta
        hess = (xl * (p * (1 - p))[:, None]).T @ xl + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.abs(step).max() < 1e-9:
            break
    return 1 / (1 + np.exp(-np.clip(x @ beta + offset, -30, 30)))


def active_sizes(error_chance: np.ndarray) -> np.ndarray:
    """Each item's size in an active round: the spread of the machine's error on it,
    sqrt(q (1 - q)) for a chance q of being wrong (a clinician's label tells most where
    that is largest: Neyman's allocation, the variance-optimal one of Zrnic & Candes),
    plus a floor (:data:`ACTIVE_FLOOR`)."""
    q = np.clip(np.asarray(error_chance, dtype=float), 0.0, 1.0)
    spread = np.sqrt(q * (1 - q))
    return ACTIVE_FLOOR * max(float(spread.mean()), 1e-6) + spread


@dataclass(frozen=True)
class Succession:
    """A successive draw: each next item drawn, among those not drawn yet, with
    probability proportional to its size (sampling without replacement with unequal
    probabilities, one at a time; ``labels.ppi.sequential`` estimates from it)."""

    order: np.ndarray
    """Indices (into the sizes) in the order drawn."""
    probabilities: np.ndarray
    """Each draw's chance at its turn: its size over the sizes not drawn before it."""
    variances: np.ndarray
    """Each draw's expected contribution to the error, as foreseen when drawn: the sizes
    left times the sum over the items left of spread^2 / size (an item's spread the
    machine's chance of being wrong q as q (1 - q), or 1 when none is known). The
    estimate weights each draw by its inverse: a draw where the machine's errors are
    foreseen well counts more."""


def successive_draw(sizes: Sequence[float], rng: np.random.Generator, count: int | None = None,
                    error_chance: Sequence[float] | None = None) -> Succession:
    """The first ``count`` (default: every) items of a successive draw by size: the
    order of the exponential keys -log(U) / size (Efraimidis & Spirakis 2006), the same
    law as drawing one at a time with probability proportional to size."""
    s = np.asarray(sizes, dtype=float)
    if not len(s) or np.any(~(s > 0)):
        raise DesignError("every candidate needs a size above 0")
    count = len(s) if count is None else min(count, len(s))
    keys = -np.log(1 - rng.random(len(s))) / s
    if count < len(s):  # the count smallest keys, in order, without sorting them all
        first = np.argpartition(keys, count - 1)[:count]
        order = first[np.argsort(keys[first], kind="stable")]
    else:
        order = np.argsort(keys, kind="stable")
    if error_chance is None:
        spread = np.ones(len(s))
    else:
        q = np.clip(np.asarray(error_chance, dtype=float), 0.0, 1.0)
        spread = np.maximum(q * (1 - q), 1e-4)
    ratio = spread / s
    before = np.concatenate([[0.0], np.cumsum(s[order])[:-1]])
    before_ratio = np.concatenate([[0.0], np.cumsum(ratio[order])[:-1]])
    remaining = np.maximum(s.sum() - before, s[order])
    remaining_ratio = np.maximum(ratio.sum() - before_ratio, ratio[order])
    return Succession(order, s[order] / remaining, remaining * remaining_ratio)


def successive_inclusion(sizes: Sequence[float], n: int) -> np.ndarray:
    """Each item's approximate chance of being among the first n of a successive draw
    (Rosen 1997: 1 - exp(-size x tau), tau such that the chances sum to n)."""
    s = np.asarray(sizes, dtype=float)
    n = min(n, len(s))
    if n >= len(s):
        return np.ones(len(s))
    low, high = 0.0, 1.0
    while (1 - np.exp(-s * high)).sum() < n:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        if (1 - np.exp(-s * mid)).sum() < n:
            low = mid
        else:
            high = mid
    return np.clip(1 - np.exp(-s * high), 1e-9, 1.0)


# -- what the store tells about each candidate ------------------------------------------


@dataclass
class Signals:
    """What is known about each candidate (in the order of ``ids``)."""

    ids: list[int]
    machine: str
    """The machine rater whose answers are judged."""
    unsure: np.ndarray | None = None
    """0 sure .. 1 unsure (its confidence 1-5, or its score's distance from the threshold)."""
    disagree: np.ndarray | None = None
    """The share of the item's questions where machine raters answered differently."""
    models: list[str] = field(default_factory=list)
    """The run each item belongs to (the model where it belongs to none)."""
    labels: list[str] = field(default_factory=list)
    """The machine's answer (a label question's label), '' elsewhere."""
    wrong: dict[int, float] = field(default_factory=dict)
    """Index -> the share of clinicians' answers on the item that differ from the
    machine's (items some clinician has answered)."""

    def words(self, learnt: bool) -> str:
        used = [w for k, w in SIGNAL_WORDS.items() if k in ("unsure", "disagree")
                and getattr(self, k) is not None]
        if learnt:
            used.append(SIGNAL_WORDS["labels"])
        return ", ".join(used)

    def features(self) -> np.ndarray:
        columns = [x for x in (self.unsure, self.disagree) if x is not None]
        for values in (self.models, self.labels):
            kinds = sorted(set(values))
            columns += [np.array([v == k for v in values], dtype=float) for k in kinds[1:]]
        if not columns:
            return np.zeros((len(self.ids), 0))
        return np.column_stack(columns)


def _uncertainty(row: sqlite3.Row) -> float | None:
    if row["confidence"] is not None:
        return (5 - float(row["confidence"])) / 4
    score = row["score"]
    if isinstance(score, (int, float)) and np.isfinite(score):
        threshold = row["threshold"] if isinstance(row["threshold"], (int, float)) else 0.5
        reach = max(threshold, 1 - threshold, 1e-9)
        return float(np.clip(1 - abs(float(score) - threshold) / reach, 0.0, 1.0))
    return None


def item_signals(store: Store, question_key: str, ids: Sequence[int],
                 machine: str | None = None) -> Signals:
    """Each candidate's signals: the machine's uncertainty, the machines' disagreement, the
    responding model, the machine's label, and where clinicians answered otherwise."""
    ids = [int(i) for i in ids]
    index = {item: k for k, item in enumerate(ids)}
    answers = _machine_answers(store, question_key, ids)
    name = _busiest_machine(answers, machine)
    signals = Signals(ids, name)
    unsure: dict[int, list[float]] = {}
    said: dict[tuple[int, int], set[str]] = {}
    mine: dict[tuple[int, int], str] = {}
    labels = [""] * len(ids)
    for row in answers:
        said.setdefault((row["item_id"], row["question_id"]), set()).add(row["value"])
        if row["rater"] != name:
            continue
        mine[(row["item_id"], row["question_id"])] = row["value"]
        if not question_key.startswith("criteria@"):
            labels[index[row["item_id"]]] = str(row["value"])
        u = _uncertainty(row)
        if u is not None:
            unsure.setdefault(row["item_id"], []).append(u)
    if unsure:
        mean = float(np.mean([np.mean(v) for v in unsure.values()]))
        signals.unsure = np.array([np.mean(unsure[i]) if i in unsure else mean for i in ids])
    if len({r["rater"] for r in answers}) > 1:
        per_item: dict[int, list[float]] = {}
        for (item, _), values in said.items():
            per_item.setdefault(item, []).append(float(len(values) > 1))
        signals.disagree = np.array([np.mean(per_item.get(i, [0.0])) for i in ids])
    models = dict(store.query(  # each run apart (store.runs), else the model
        "SELECT id, COALESCE('run ' || run_id, model, '') FROM items"
        " WHERE id IN (SELECT value FROM json_each(?))", (_ids_json(ids),)))
    signals.models = [models.get(i, "") for i in ids]
    signals.labels = labels
    differs: dict[int, list[float]] = {}
    for row in _clinicians_answers(store, question_key, ids):
        theirs = mine.get((row["item_id"], row["question_id"]))
        if theirs is not None:
            differs.setdefault(row["item_id"], []).append(float(row["value"] != theirs))
    signals.wrong = {index[i]: float(np.mean(v)) for i, v in differs.items()}
    return signals


def _clinicians_answers(store: Store, question_key: str, ids: Sequence[int]):
    """Clinicians' answers in force on the items (any phase: only for learning where the
    machine errs, never for an estimate)."""
    if question_key.startswith("criteria@"):
        which, params = "q.kind = 'criterion'", (_ids_json(ids),)
    else:
        which, params = "q.key = ?", (_ids_json(ids), question_key)
    return store.query(
        f"""SELECT c.item_id, c.question_id, c.value FROM current_annotations c
            JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id
            WHERE c.item_id IN (SELECT value FROM json_each(?1)) AND {which}
              AND r.kind = 'human' AND c.target = '' AND c.status = 'answered'""", params)


def error_chances(signals: Signals) -> tuple[np.ndarray, bool]:
    """Each candidate's chance that the machine is wrong on it, and whether it was learnt
    from clinicians' answers (at least :data:`MIN_LEARN` of them): the prior from the
    uncertainty and disagreement, moved by what the answers so far show (per model, per
    label, per signal); with nothing known, the same chance for every item (a uniform
    batch)."""
    prior = prior_error_chance(signals.unsure, signals.disagree)
    if len(signals.wrong) >= MIN_LEARN:
        labelled = np.array(sorted(signals.wrong))
        wrong = np.array([signals.wrong[k] for k in labelled])
        features = signals.features()
        return learned_error_chance(features, wrong, labelled, prior), True
    if prior is None:
        return np.full(len(signals.ids), 0.5), False
    return prior, False


# -- drawing and recording ----------------------------------------------------------------


@dataclass
class Batch:
    """One batch of an active round's draws."""

    items: list[int]
    probabilities: list[float]
    variances: list[float]
    chances: list[float]
    learnt: bool


def draw_batch(signals: Signals, drawn: set[int], count: int,
               rng: np.random.Generator) -> Batch:
    """The next ``count`` items of the sequence, among the candidates not drawn yet."""
    chance, learnt = error_chances(signals)
    rest = np.array([k for k, item in enumerate(signals.ids) if item not in drawn], dtype=int)
    if not len(rest):
        return Batch([], [], [], [], learnt)
    step = successive_draw(active_sizes(chance[rest]), rng, count, error_chance=chance[rest])
    chosen = rest[step.order]
    return Batch([signals.ids[k] for k in chosen], step.probabilities.tolist(),
                 step.variances.tolist(), chance[chosen].tolist(), learnt)


def record_batch(conn: sqlite3.Connection, round_id: int, batch: Batch, number: int,
                 start: int) -> None:
    conn.executemany(
        "INSERT INTO round_sequence (round_id, position, item_id, batch, draw_probability,"
        " foreseen_variance, error_chance, drawn_at) VALUES (?,?,?,?,?,?,?,?)",
        [(round_id, start + k, item, number, min(1.0, p), v, c, utcnow())
         for k, (item, p, v, c) in enumerate(zip(batch.items, batch.probabilities,
                                                 batch.variances, batch.chances, strict=True))])


def first_batch(store: Store, spec, frame: Sequence[int]) -> tuple[Batch, dict, dict]:
    """An active round's first batch, its design record and every candidate's
    approximate chance of being drawn by the round's limit (``spec``: a RoundSpec)."""
    if spec.stratify_by != "none":
        raise DesignError("an active round is not stratified as well: its chances already "
                          "follow the model and the machine's label")
    if not spec.limit:
        raise DesignError("an active round draws a sample: give the number of items")
    signals = item_signals(store, spec.question_key, frame, spec.machine)
    chance, learnt = error_chances(signals)
    rng = np.random.default_rng([int(spec.seed), 0])
    batch = draw_batch(signals, set(), min(BATCH, spec.limit), rng)
    limit = min(spec.limit, len(frame))
    reach = successive_inclusion(active_sizes(chance), limit)
    record = {"kind": "active", "stratify_by": "none", "machine": signals.machine,
              "frame": len(frame), "limit": limit, "batch": BATCH, "seed": spec.seed,
              "signals": signals.words(learnt), "target_halfwidth": spec.target_halfwidth,
              "method": ("successive sampling without replacement, probability proportional "
                         "to size = floor + sqrt(q (1 - q)), q the machine's chance of being "
                         f"wrong, relearnt before each batch of {BATCH}; round_frame holds "
                         "Rosen's approximate chance of being drawn by the limit")}
    chances = {item: (float(p), float(q)) for item, p, q in zip(signals.ids, reach, chance,
                                                                strict=True)}
    return batch, record, chances


def places_left(conn: sqlite3.Connection, round_id: int, needed_sql: str) -> int:
    """Places of the round not yet taken by a review or a live reservation."""
    now = utcnow()
    return conn.execute(
        f"""SELECT COALESCE(SUM(MAX(0, {needed_sql}
               - (SELECT COUNT(*) FROM round_reviews rr WHERE rr.round_id = ri.round_id
                  AND rr.item_id = ri.item_id)
               - (SELECT COUNT(*) FROM reservations r WHERE r.round_id = ri.round_id
                  AND r.item_id = ri.item_id AND r.released_at IS NULL AND r.expires_at > ?2
                  AND NOT EXISTS (SELECT 1 FROM round_reviews rr WHERE rr.round_id = r.round_id
                      AND rr.item_id = r.item_id AND rr.rater_id = r.rater_id)))), 0)
            FROM round_items ri WHERE ri.round_id = ?1""", (round_id, now)).fetchone()[0]


def keep_drawing(store: Store, conn: sqlite3.Connection, round_id: int,
                 needed_sql: str) -> int:
    """Inside a reservation's transaction: the round's next batch, when it is active, has
    not reached its limit and has fewer free places than half a batch (``needed_sql``:
    the rounds' expression of an item's places). Returns the items added."""
    row = conn.execute("SELECT design, question_key, reviewers_per_item FROM review_rounds"
                       " WHERE id = ?", (round_id,)).fetchone()
    design = from_json(row[0]) if row and row[0] else None
    if not design or design.get("kind") != "active":
        return 0
    if places_left(conn, round_id, needed_sql) >= max(1, int(design.get("batch", BATCH)) // 2):
        return 0
    reviewers_per_item = int(row[2])
    drawn = [r[0] for r in conn.execute(
        "SELECT item_id FROM round_sequence WHERE round_id = ? ORDER BY position", (round_id,))]
    room = int(design["limit"]) - len(drawn)
    if room <= 0:
        return 0
    frame = [r[0] for r in conn.execute(
        "SELECT f.item_id FROM round_frame f JOIN items i ON i.id = f.item_id"
        " WHERE f.round_id = ? AND i.failed = 0 ORDER BY f.item_id", (round_id,))]
    signals = item_signals(store, row[1], frame, design.get("machine"))
    number = int(conn.execute("SELECT COALESCE(MAX(batch), -1) + 1 FROM round_sequence"
                              " WHERE round_id = ?", (round_id,)).fetchone()[0])
    rng = np.random.default_rng([int(design.get("seed") or 0), number])
    batch = draw_batch(signals, set(drawn), min(int(design.get("batch", BATCH)), room), rng)
    if not batch.items:
        return 0
    start = int(conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM round_items"
                             " WHERE round_id = ?", (round_id,)).fetchone()[0])
    record_batch(conn, round_id, batch, number, start)
    conn.executemany(
        "INSERT INTO round_items (round_id, item_id, answers_needed, stratum, position)"
        " VALUES (?,?,?,?,?)",
        [(round_id, item, reviewers_per_item, "all", start + k)
         for k, item in enumerate(batch.items)])
    store.audit("system", "draw_batch", "round_sequence", round_id, None,
                {"round_id": round_id, "batch": number, "items": len(batch.items),
                 "learnt": batch.learnt})
    return len(batch.items)


@dataclass(frozen=True)
class SequenceRow:
    position: int
    item_id: int
    draw_probability: float
    foreseen_variance: float


def round_sequence(store: Store, round_id: int) -> list[SequenceRow]:
    """An active round's draws in order."""
    return [SequenceRow(r["position"], r["item_id"], r["draw_probability"],
                        r["foreseen_variance"]) for r in store.query(
        "SELECT position, item_id, draw_probability, foreseen_variance FROM round_sequence"
        " WHERE round_id = ? ORDER BY position", (round_id,))]


def plan_designs(store: Store, question_key: str, item_ids: Sequence[int]) -> list:
    """The designs a label budget plans beside uniform (``labels.ppi.budget``): the
    weighted ones the items allow (``review.team.designs.planning_designs``) and the
    active round, its chances learnt from the answers so far (its probabilities for n
    labels: Rosen's approximation of the successive draw)."""
    out = list(planning_designs(store, question_key, item_ids))
    distinct = list(dict.fromkeys(int(i) for i in item_ids))
    try:
        signals = item_signals(store, question_key, distinct)
    except DesignError:
        return out
    chance, learnt = error_chances(signals)
    index = {item: k for k, item in enumerate(signals.ids)}
    order = np.array([index[int(i)] for i in item_ids])
    sizes = active_sizes(chance)[order]

    def probabilities(n: int, sizes: np.ndarray = sizes) -> np.ndarray:
        return successive_inclusion(sizes, n)

    out.append(PlanningDesign("active", "active: where a clinician's label tells most",
                              probabilities, chance[order]))
    return out
