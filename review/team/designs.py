"""Review rounds as sampling designs: how a round draws its items, and each
candidate item's chance of being drawn.

An estimate that corrects the machine's labels with the clinicians' (the
prediction-powered estimates of ``labels.ppi.estimators``) is valid when the clinicians'
items are a random sample with known inclusion probabilities. Every round
records them (table ``round_frame``: every candidate item that matched the
round's filter, with its probability and stratum; ``review_rounds.design``:
the design in words), whatever the design:

- **uniform**: a simple random sample of the candidates (or every one of them
  when the round has no item limit); stratified by gold label, category,
  responding model, the machine's label, or case, the sample is drawn within
  each stratum in proportion to its size (each stratum gets one item first
  while the limit allows). An item's probability is its stratum's share
  drawn: n_h / N_h, exactly.
- **weighted**: toward the items where the machine is likely wrong: where
  machine raters disagree (two mapper versions, two judges) or where a machine
  rater said it was unsure (its confidence, 1-5). Each candidate gets a score
  s in [0, 1] and a size ``FLOOR + s``; its probability is n times its share
  of the sizes, capped at 1 (the excess shared among the others). So no
  candidate has a zero chance (a design with one cannot be corrected for),
  and one the machine is surely wrong on is drawn at most
  (FLOOR + 1) / FLOOR = 3 times as often as one it is surely right on: about
  the square-root allocation that minimises the variance when the machine
  errs some 40% of the time on the first and 5% on the second, and not so
  steep that a handful of heavily weighted labels carry the estimate (a
  steeper design's intervals undercover; bench/bench_ppi_simulation.py). The
  sample is drawn by systematic sampling with probability proportional to
  size over the candidates in a random order: exactly ``n`` items, each drawn
  with exactly its probability.

The drawn items are offered to reviewers in a random order (interleaved by
stratum), so the items reviewed so far in a half-done round are a random
part of those drawn; ``labels.ppi.sampling`` scales the probabilities by the share
reviewed, stratum by stratum.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from store import Store, from_json, to_json

DESIGNS = ("uniform", "weighted", "active")
MORE_STRATA = ("model", "machine_label", "case")
"""Strata beside the round's own (none, gold, category): the responding model, a
machine rater's label on the item (e.g. the mapper's), the CARE-Bench case."""
WEIGHT_BY = ("machine_disagreement", "machine_confidence")
FLOOR = 0.5
"""A weighted round's size of a candidate is FLOOR + its score (0..1)."""
DESIGN_WORDS = {
    "uniform": "uniform random sample (in proportion within strata)",
    "weighted": "weighted toward items where the machine is likely wrong",
    "active": "active: one batch at a time where a clinician's label tells most",
}
WEIGHT_WORDS = {
    "machine_disagreement": "machine raters disagree",
    "machine_confidence": "a machine rater was unsure",
}


class DesignError(ValueError):
    """A design that cannot be drawn; the message says why."""


@dataclass
class Draw:
    """A round's draw: the items in the order offered, and the design behind it."""

    order: list[tuple[int, str]]
    """Drawn items (item id, stratum) in the order reviewers are given them."""
    probabilities: dict[int, float]
    """Every candidate item (with a chance above 0) -> its inclusion probability."""
    strata: dict[int, str]
    """Every candidate item -> its stratum."""
    design: dict
    """What ``review_rounds.design`` records."""
    scores: dict[int, float] = field(default_factory=dict)
    """Weighted design: candidate -> how likely the machine is wrong on it (0..1)."""


def _ids_json(ids: Sequence[int]) -> str:
    return to_json([int(i) for i in ids])


def _machine_answers(store: Store, question_key: str, ids: Sequence[int]) -> list[sqlite3.Row]:
    """Machine raters' answers in force on these items: to the round's label question,
    or, for a round over every criterion of an item (``criteria@<kind>``), to each of its
    criteria."""
    if question_key.startswith("criteria@"):
        which, params = "q.kind = 'criterion'", (_ids_json(ids),)
    else:
        which, params = "q.key = ?", (_ids_json(ids), question_key)
    return store.query(
        f"""SELECT a.item_id, a.question_id, r.name AS rater, a.value, a.confidence,
                   json_extract(a.extra, '$.score') AS score,
                   json_extract(a.extra, '$.threshold') AS threshold
            FROM annotations a JOIN raters r ON r.id = a.rater_id
            JOIN questions q ON q.id = a.question_id
            WHERE a.item_id IN (SELECT value FROM json_each(?1)) AND {which}
              AND r.kind = 'machine' AND a.target = '' AND a.status = 'answered'
              AND a.id = (SELECT MAX(b.id) FROM annotations b WHERE b.item_id = a.item_id
                          AND b.question_id = a.question_id AND b.rater_id = a.rater_id
                          AND b.target = '')""",
        params)


def _busiest_machine(answers: list[sqlite3.Row], wanted: str | None) -> str:
    names: dict[str, int] = {}
    for row in answers:
        names[row["rater"]] = names.get(row["rater"], 0) + 1
    if wanted:
        if wanted not in names:
            known = ", ".join(sorted(names)) or "none"
            raise DesignError(f"machine rater {wanted!r} has not answered these items; "
                              f"machine raters here: {known}")
        return wanted
    if not names:
        raise DesignError("no machine rater has answered these items: there is no machine "
                          "label to stratify or weight by")
    return min(names, key=lambda n: (-names[n], n))


def stratum_keys(store: Store, stratify_by: str, question_key: str, rows: Sequence[Mapping],
                 machine: str | None = None) -> dict[int, str]:
    """Each candidate's stratum (the one place a round's strata are decided). ``rows``:
    the candidates with ``id``, ``gold`` and ``category`` (what ``create_round`` reads);
    a candidate without a value for the stratum is in 'all'."""
    ids = [r["id"] for r in rows]
    if stratify_by in ("none", "gold", "category"):
        return {r["id"]: str({"gold": r["gold"], "category": r["category"]}.get(stratify_by)
                              or "all") for r in rows}
    if stratify_by in ("model", "case"):
        column = {"model": "model", "case": "case_id"}[stratify_by]
        found = dict(store.query(  # a response's case is its prefix's
            f"SELECT i.id, COALESCE(i.{column}, p.{column}) FROM items i"
            " LEFT JOIN items p ON p.id = i.parent_id"
            " WHERE i.id IN (SELECT value FROM json_each(?))", (_ids_json(ids),)))
        return {i: str(found.get(i) or "all") for i in ids}
    if stratify_by == "machine_label":
        if question_key.startswith("criteria@"):
            raise DesignError("a round over every criterion of an item has no one machine "
                              "label per item: stratify by model or category")
        answers = _machine_answers(store, question_key, ids)
        name = _busiest_machine(answers, machine)
        label = {r["item_id"]: r["value"] for r in answers if r["rater"] == name}
        return {i: str(label.get(i) or "no machine label") for i in ids}
    raise DesignError(f"stratify by one of none, gold, category, {', '.join(MORE_STRATA)}")


def machine_scores(store: Store, question_key: str, ids: Sequence[int], weight_by: str,
                   machine: str | None = None) -> dict[int, float]:
    """How likely the machine is wrong on each item, 0..1 (higher: draw it more often).

    - ``machine_disagreement``: the share of the item's questions (its label, or each
      of its criteria) on which the machine raters' answers differ;
    - ``machine_confidence``: (5 - confidence) / 4 of the machine rater's answers
      (confidence 1 = unsure gives 1), averaged over the item's questions; an item
      without a recorded confidence gets the mean score of the others.
    """
    answers = _machine_answers(store, question_key, ids)
    if weight_by == "machine_disagreement":
        raters = {r["rater"] for r in answers}
        if len(raters) < 2:
            only = f"only {next(iter(raters))} has" if raters else "no machine rater has"
            raise DesignError("weighting by machine disagreement needs two machine raters on "
                              f"these items (e.g. two mapper versions); {only} answered")
        said: dict[tuple[int, int], set[str]] = {}
        for r in answers:
            said.setdefault((r["item_id"], r["question_id"]), set()).add(r["value"])
        per_item: dict[int, list[float]] = {}
        for (item, _), values in said.items():
            per_item.setdefault(item, []).append(1.0 if len(values) > 1 else 0.0)
        return {i: sum(per_item[i]) / len(per_item[i]) if i in per_item else 0.0 for i in ids}
    if weight_by == "machine_confidence":
        name = _busiest_machine(answers, machine)
        per_item = {}
        for r in answers:
            if r["rater"] == name and r["confidence"] is not None:
                per_item.setdefault(r["item_id"], []).append((5 - r["confidence"]) / 4)
        if not per_item:
            raise DesignError(f"{name} recorded no confidence on these items: weight by machine "
                              "disagreement instead")
        scores = {i: sum(v) / len(v) for i, v in per_item.items()}
        mean = sum(scores.values()) / len(scores)
        return {i: scores.get(i, mean) for i in ids}
    raise DesignError(f"weight by one of {', '.join(WEIGHT_BY)}")


def weighted_probabilities(scores: Mapping[int, float], n: int,
                           floor: float = FLOOR) -> dict[int, float]:
    """Inclusion probabilities summing to n, in proportion to ``floor + score``, none
    above 1 (the excess goes to the others, in proportion to their sizes)."""
    ids = list(scores)
    n = min(n, len(ids))
    size = {i: floor + max(0.0, float(scores[i])) for i in ids}
    fixed: dict[int, float] = {}
    while True:
        free = [i for i in ids if i not in fixed]
        budget = n - len(fixed)
        mass = sum(size[i] for i in free)
        over = [i for i in free if budget * size[i] / mass >= 1]
        if not over:
            return {**fixed, **{i: budget * size[i] / mass for i in free}}
        fixed.update({i: 1.0 for i in over})


def systematic_draw(probabilities: Mapping[int, float], rng: random.Random) -> list[int]:
    """Systematic sampling with unequal probabilities over a random order: the items
    drawn, each with exactly its probability (they must sum to a whole number n)."""
    ids = list(probabilities)
    rng.shuffle(ids)
    n = round(sum(probabilities.values()))
    start = rng.random()
    drawn, cumulative, k = [], 0.0, 0
    for position, i in enumerate(ids):
        cumulative += probabilities[i]
        if position == len(ids) - 1:
            cumulative = float(n)  # the sum's rounding never loses the last point
        while k < n and start + k < cumulative:
            drawn.append(i)
            k += 1
    return drawn


def sampling_design(store: Store, spec, keys: Mapping[int, str],
                    order: list[tuple[int, str]]) -> Draw:
    """The round's draw as a sampling design. ``keys``: every candidate's stratum;
    ``order``: what the uniform (stratified) draw of ``create_round`` gave. A weighted
    design draws its own items instead. ``spec`` is the round's ``RoundSpec``."""
    design = getattr(spec, "design", "uniform") or "uniform"
    if design not in DESIGNS:
        raise DesignError(f"design is one of {', '.join(DESIGNS)}")
    frame = len(keys)
    if design == "uniform":
        sizes: dict[str, int] = {}
        for stratum in keys.values():
            sizes[stratum] = sizes.get(stratum, 0) + 1
        drawn: dict[str, int] = {}
        for _, stratum in order:
            drawn[stratum] = drawn.get(stratum, 0) + 1
        probabilities = {i: drawn.get(s, 0) / sizes[s] for i, s in keys.items()
                         if drawn.get(s, 0)}
        kind = "uniform" if spec.stratify_by == "none" else "stratified"
        method = ("every candidate" if len(order) == frame else
                  "a simple random sample" + (f" within strata ({spec.stratify_by}), in "
                                               "proportion to their sizes"
                                               if spec.stratify_by != "none" else ""))
        record = {"kind": kind, "stratify_by": spec.stratify_by, "frame": frame,
                  "drawn": len(order), "seed": spec.seed,
                  "method": f"{method}: each item's probability is its stratum's share drawn"}
        return Draw(order, probabilities, dict(keys), record)
    weight_by = getattr(spec, "weight_by", None)
    if weight_by not in WEIGHT_BY:
        raise DesignError(f"a weighted round weights by one of {', '.join(WEIGHT_BY)}")
    if spec.stratify_by != "none":
        raise DesignError("a weighted round is not stratified as well: choose one")
    if not spec.limit:
        raise DesignError("a weighted round draws a sample: give the number of items")
    machine = getattr(spec, "machine", None)
    scores = machine_scores(store, spec.question_key, list(keys), weight_by, machine)
    n = min(spec.limit, frame)
    probabilities = weighted_probabilities(scores, n)
    rng = random.Random(spec.seed)
    chosen = systematic_draw(probabilities, rng)
    rng.shuffle(chosen)  # offered in a random order: a half-done round is a random part
    lowest = min(probabilities.values())
    record = {"kind": "weighted", "stratify_by": "none", "weight_by": weight_by,
              "machine": machine, "frame": frame, "drawn": len(chosen), "seed": spec.seed,
              "floor": FLOOR,
              "method": (f"systematic sampling with probability proportional to size, size = "
                         f"{FLOOR:g} + score, score = "
                         + ("share of the item's questions where machine raters disagree"
                            if weight_by == "machine_disagreement" else
                            "(5 - the machine's confidence) / 4")
                         + f"; capped at 1; lowest probability {lowest:.3g}")}
    return Draw([(i, "all") for i in chosen], probabilities, {i: "all" for i in keys}, record,
                scores)


def record_draw(conn: sqlite3.Connection, round_id: int, draw: Draw) -> None:
    """Inside the round's creating transaction: its design and every candidate's
    inclusion probability."""
    conn.execute("UPDATE review_rounds SET design = ? WHERE id = ?",
                 (to_json(draw.design), round_id))
    conn.executemany(
        "INSERT INTO round_frame (round_id, item_id, inclusion_probability, stratum, score)"
        " VALUES (?,?,?,?,?)",
        [(round_id, item, min(1.0, p), draw.strata.get(item), draw.scores.get(item))
         for item, p in sorted(draw.probabilities.items()) if p > 0])


def describe(design: Mapping | None) -> str:
    """A round's design in words."""
    if not design:
        return "no design recorded (drawn before designs were kept)"
    kind = design.get("kind", "uniform")
    if kind == "active":
        return (f"active: drawn a batch at a time where the machine is likely wrong "
                f"({design.get('signals') or 'nothing known yet: uniform'}), up to "
                f"{design.get('limit')} of {design.get('frame')} candidates")
    if kind == "weighted":
        return (f"weighted toward items where {WEIGHT_WORDS.get(design.get('weight_by'), '?')}:"
                f" {design.get('drawn')} of {design.get('frame')} candidates")
    strata = design.get("stratify_by", "none")
    return (("uniform" if kind == "uniform" else f"stratified by {strata.replace('_', ' ')}")
            + f": {design.get('drawn')} of {design.get('frame')} candidates")


@dataclass(frozen=True)
class PlanningDesign:
    """A weighted design to plan a round with (``labels.ppi.budget``): its inclusion
    probabilities over given items for a round of n, and the score behind them."""

    key: str
    name: str
    probabilities: Callable[[int], np.ndarray]
    scores: np.ndarray


def planning_designs(store: Store, question_key: str,
                     item_ids: Sequence[int]) -> list[PlanningDesign]:
    """The weighted designs these items allow (machine disagreement needs two machine
    raters; machine confidence a recorded confidence), with probabilities in the items'
    order. A uniform design is always possible and is not listed."""
    out = []
    distinct = list(dict.fromkeys(int(i) for i in item_ids))
    for weight_by in WEIGHT_BY:
        try:
            scores = machine_scores(store, question_key, distinct, weight_by)
        except DesignError:
            continue

        def probabilities(n: int, scores: dict[int, float] = scores) -> np.ndarray:
            chance = weighted_probabilities(scores, n)
            return np.array([chance[int(i)] for i in item_ids])

        out.append(PlanningDesign(f"weighted:{weight_by}", f"weighted: {WEIGHT_WORDS[weight_by]}",
                                  probabilities, np.array([scores[int(i)] for i in item_ids])))
    return out


def design_words(store: Store) -> dict[int, str]:
    """Each round's design in words, by round id (Rounds and people)."""
    return {r["id"]: describe(from_json(r["design"]) if r["design"] else None)
            for r in store.query("SELECT id, design FROM review_rounds")}


def round_record(store: Store, round_id: int) -> dict | None:
    """A round's recorded design (None before designs were kept)."""
    raw = store.scalar("SELECT design FROM review_rounds WHERE id = ?", (round_id,))
    return from_json(raw) if raw else None
