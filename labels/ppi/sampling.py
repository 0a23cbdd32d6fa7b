"""How the clinicians' labels were sampled: the design an estimate may rely on.

A prediction-powered estimate is valid when the clinicians' items are a random
sample of the items with known inclusion probabilities. Review rounds record
theirs (``review.team.designs``, tables ``review_rounds.design`` and
``round_frame``); labels given outside any such round (free review, an
imported spreadsheet, a round created before designs were recorded) have none.

:func:`resolve_sampling` decides, for one model's readings, which labels an
estimate uses and with what probabilities (``mode``):

- ``auto`` (the default): if some labels were given in rounds with a recorded
  design, those only; the others are treated as unlabelled (they were not drawn
  by the design), and a note counts them. Otherwise every label is *assumed* to
  be a uniform random sample: ``sampling`` says ``assumed uniform`` and a
  warning names the assumption. Designed and undesigned labels are never mixed
  silently.
- ``assume-uniform``: every label, designed or not, as a uniform random sample
  (the assumption named the same way).
- ``design``: the designed labels only; none is an error.

With designed labels: an item's probability in a round is its recorded
inclusion probability times the share of the round's drawn items of its
stratum that have a clinician's label here (the round offers its items in a
random order, so those reviewed so far are a random part of those drawn:
missing at random within the stratum, an assumption the note states when a
round is unfinished). Over several rounds, drawn independently, an item's
probability of being labelled is 1 - prod(1 - p_round). Items no used round
could have drawn (outside every frame) are left out of the population, and
the estimate says how many: it is then about the rest.

How the labels were drawn also decides the variance (``labels.ppi.finite``):
one round's labels are a fixed number drawn without replacement in each of
its strata; labels from several rounds, drawn independently, are taken as
independent (Poisson) draws. An *active* round's labels are a sequence
(``round_sequence``: each draw with its chance among the items left), and the
estimate follows it in order (``labels.ppi.sequential``); so does the
interval that may be looked at after every answer, for an active round, a
uniform round without strata (its items offered in a random order are a
uniform sequence) and labels assumed uniform (taken in the order given).
With an active round among the rounds used, its sequence alone is used, and
a note says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from labels.ppi.finite import POISSON, WITHOUT_REPLACEMENT
from labels.ppi.readings import Readings
from store import Store

MODES = ("auto", "assume-uniform", "design")
ASSUMED_UNIFORM = "assumed uniform"
ASSUMPTION = ("the clinicians' labels were not drawn by a recorded sampling design (free review, "
              "an import, or a round from before designs were kept): they are treated as a "
              "uniform random sample of the items, which is an assumption; a review round "
              "with a design removes it")


@dataclass(frozen=True)
class RoundDesign:
    """One review round's recorded design."""

    round_id: int
    name: str
    design: dict
    probabilities: dict[int, float]
    """Candidate item id -> inclusion probability."""
    strata: dict[int, str]
    drawn: frozenset[int]
    order: list[int] = field(default_factory=list)
    """The round's items by position (the order offered)."""
    sequence: list[tuple[int, float, float]] = field(default_factory=list)
    """An active round's draws in order: (item id, chance at its turn, foreseen variance)."""

    @property
    def kind(self) -> str:
        return self.design.get("kind", "uniform")


@dataclass
class Sampling:
    """Which labels an estimate uses, and how they were drawn."""

    label: str
    """What the output's ``sampling`` says: ``assumed uniform``, ``uniform design``,
    ``stratified design``, ``weighted design``."""
    uniform: bool
    """Every item of the population had the same chance of being labelled."""
    population: list[int]
    """Positions (into the readings) of the items the estimate is about."""
    labelled: list[int]
    """Positions of the labelled items used (a subset of ``population``)."""
    probabilities: dict[int, float] = field(default_factory=dict)
    """Position -> probability of having been labelled (designed labels only)."""
    rounds: list[str] = field(default_factory=list)
    """The designed rounds the labels come from, by name."""
    notes: list[str] = field(default_factory=list)
    warning: str | None = None
    strata: dict[int, str] = field(default_factory=dict)
    """Position -> its stratum, for every item of the population (one round's strata)."""
    draw: str = WITHOUT_REPLACEMENT
    """How the labels were drawn, for the variance: without replacement (a fixed number in
    each stratum) or Poisson (independent draws: several rounds)."""
    sequence: Sequence | None = None
    """The labels as a sequence, where they are one (an active round; a uniform round or
    labels assumed uniform, for the anytime interval)."""
    planned: int | None = None
    """The answers the round plans (its limit): where the anytime interval is narrowest."""
    target: float | None = None
    """The half-width the round's lead aims for, where they set one."""


@dataclass(frozen=True)
class Sequence:
    """Draws in order, as ``labels.ppi.sequential`` reads them."""

    positions: list[int]
    """Each draw's position in the readings, -1 for an item outside this population."""
    probabilities: list[float]
    """Each draw's chance at its turn among the items left."""
    variances: list[float]
    """Each draw's foreseen variance (the estimate weights it by the inverse)."""
    source: str
    """Where the order comes from, in words."""


def uniform_sequence(positions: list[int], frame: int, source: str) -> Sequence:
    """Draws uniform among the ``frame`` items left: chance 1 / (frame - t) at turn t."""
    left = np.arange(frame, frame - len(positions), -1, dtype=float)
    return Sequence(list(positions), list(1 / left), list(left ** 2), source)


def round_designs(store: Store) -> dict[int, RoundDesign]:
    """Every review round with a recorded design."""
    out = {}
    for r in store.query("SELECT id, name, design FROM review_rounds WHERE design IS NOT NULL"):
        frame = store.query("SELECT item_id, inclusion_probability, stratum FROM round_frame"
                            " WHERE round_id = ?", (r["id"],))
        order = [row[0] for row in store.query(
            "SELECT item_id FROM round_items WHERE round_id = ? ORDER BY position", (r["id"],))]
        sequence = [(row[0], row[1], row[2]) for row in store.query(
            "SELECT item_id, draw_probability, foreseen_variance FROM round_sequence"
            " WHERE round_id = ? ORDER BY position", (r["id"],))]
        out[r["id"]] = RoundDesign(
            r["id"], r["name"], json.loads(r["design"]),
            {f["item_id"]: f["inclusion_probability"] for f in frame},
            {f["item_id"]: f["stratum"] or "all" for f in frame}, frozenset(order), order,
            sequence)
    return out


def _assumed(readings: Readings, asked: bool) -> Sampling:
    positions = list(range(len(readings.item_ids)))
    notes = ["every clinician label used as a uniform random sample, as asked"] if asked else []
    arrived = sorted(readings.human, key=lambda p: (readings.first_answer.get(p, 0), p))
    return Sampling(ASSUMED_UNIFORM, True, positions, sorted(readings.human), notes=notes,
                    warning=ASSUMPTION, sequence=uniform_sequence(
                        arrived, len(positions), "the order the labels were given in, "
                        "assumed to be a random order"))


def _active(readings: Readings, d: RoundDesign, others: list[str]) -> Sampling:
    """The labels of an active round's sequence (see the module)."""
    where = {item: p for p, item in enumerate(readings.item_ids)}
    population = sorted(where[item] for item in d.probabilities if item in where)
    positions = [where.get(item, -1) for item, _, _ in d.sequence]
    labelled = [p for p in positions if p >= 0 and p in readings.human]
    notes = []
    if outside := len(readings.item_ids) - len(population):
        notes.append(f"{outside} of {len(readings.item_ids)} items are outside the round's "
                     f"candidates: the estimate is about the other {len(population)}")
    if others:
        notes.append("labels from the other rounds (" + ", ".join(others) + ") are not used: "
                     "the estimate follows the active round's sequence")
    return Sampling("active design", False, population, labelled, {}, [d.name], notes,
                    sequence=Sequence(positions, [q for _, q, _ in d.sequence],
                                      [v for _, _, v in d.sequence],
                                      f"the active round {d.name!r}, in the order drawn"),
                    planned=d.design.get("limit"), target=d.design.get("target_halfwidth"))


def resolve_sampling(readings: Readings, designs: dict[int, RoundDesign],
                     mode: str = "auto", round_id: int | None = None) -> Sampling:
    """The labels and probabilities one model's estimate rests on (see the module);
    ``round_id``: that round's design alone (its labels only)."""
    if mode not in MODES:
        raise ValueError(f"sampling is one of {', '.join(MODES)}, not {mode!r}")
    if round_id is not None:
        if round_id not in designs:
            raise ValueError("that round has no recorded sampling design")
        designs, mode = {round_id: designs[round_id]}, "design"
    designed = {p: readings.rounds.get(p, frozenset()) & designs.keys() for p in readings.human}
    designed = {p: rounds for p, rounds in designed.items() if rounds}
    if mode == "assume-uniform" or (mode == "auto" and not designed):
        return _assumed(readings, asked=mode == "assume-uniform")
    if not designed:
        raise ValueError("no clinician label here was given in a review round with a recorded "
                         "sampling design; use --sampling auto or assume-uniform")
    used = sorted(set().union(*designed.values()))
    active = [r for r in used if designs[r].kind == "active"]
    if active:
        chosen = designs[max(active)]
        return _active(readings, chosen, [designs[r].name for r in used if r != chosen.round_id])
    item_of = readings.item_ids
    # Per round and stratum: drawn items of this population, and those labelled in the round.
    chance: dict[int, float] = {}
    unfinished = []
    per_round: dict[int, dict[int, float]] = {}
    for round_id in used:
        d = designs[round_id]
        drawn_in: dict[str, int] = {}
        labelled_in: dict[str, int] = {}
        for position, item in enumerate(item_of):
            if item in d.drawn:
                stratum = d.strata.get(item, "all")
                drawn_in[stratum] = drawn_in.get(stratum, 0) + 1
                if round_id in designed.get(position, ()):
                    labelled_in[stratum] = labelled_in.get(stratum, 0) + 1
        if sum(labelled_in.values()) < sum(drawn_in.values()):
            unfinished.append(f"{d.name!r} ({sum(labelled_in.values())} of "
                              f"{sum(drawn_in.values())} drawn items labelled)")
        per_round[round_id] = {
            position: d.probabilities[item] * labelled_in.get(d.strata.get(item, "all"), 0)
            / drawn_in[d.strata.get(item, "all")]
            for position, item in enumerate(item_of)
            if item in d.probabilities and drawn_in.get(d.strata.get(item, "all"))}
    for position in range(len(item_of)):
        missing = 1.0
        for probabilities in per_round.values():
            missing *= 1 - min(1.0, probabilities.get(position, 0.0))
        if missing < 1:
            chance[position] = 1 - missing
    population = sorted(chance)
    labelled = [p for p in population if p in designed]
    values = [chance[p] for p in population]
    uniform = bool(values) and math.isclose(min(values), max(values), rel_tol=1e-9)
    kinds = {designs[r].design.get("kind", "uniform") for r in used}
    label = ("uniform design" if uniform else "weighted design" if "weighted" in kinds
             else "stratified design")
    notes = []
    if outside := len(item_of) - len(population):
        notes.append(f"{outside} of {len(item_of)} items could not have been drawn by "
                     f"{'the round' if len(used) == 1 else 'these rounds'} (outside the frame, or "
                     "in a stratum with no label yet): the estimate is about the other "
                     f"{len(population)}")
    if undesigned := len(set(readings.human) - set(designed)):
        notes.append(f"{undesigned} clinician labels given outside the designed rounds are not "
                     "used (they were not drawn by the design); --sampling assume-uniform uses "
                     "every label as a uniform random sample")
    if unfinished:
        notes.append("unfinished round(s) " + ", ".join(unfinished) + ": the items labelled so "
                     "far are taken as a random part of those drawn in each stratum (the round "
                     "offers them in a random order)")
    if len(used) > 1:
        notes.append("labels from several rounds: taken as independent draws, an item's chance "
                     "is 1 - prod(1 - p) over the rounds")
    strata: dict[int, str] = {}
    sequence = None
    if len(used) == 1:
        d = designs[used[0]]
        strata = {p: d.strata.get(item_of[p], "all") for p in population}
        if d.kind == "uniform" and d.design.get("stratify_by", "none") == "none":
            where = {item: p for p, item in enumerate(item_of)}
            order = [where.get(item, -1) for item in d.order]
            sequence = uniform_sequence(order, len(d.probabilities),
                                        f"the round {d.name!r}, in the random order offered")
    return Sampling(label, uniform, population, labelled,
                    {p: chance[p] for p in labelled},
                    [designs[r].name for r in used], notes, strata=strata,
                    draw=WITHOUT_REPLACEMENT if len(used) == 1 else POISSON, sequence=sequence,
                    planned=len(designs[used[0]].order) if sequence else None,
                    target=designs[used[0]].design.get("target_halfwidth")
                    if len(used) == 1 else None)
