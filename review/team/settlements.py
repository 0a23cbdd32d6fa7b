"""Settlements: the settled answer on a unit where clinicians answered alike or differently.

A *unit* is what one settled answer answers: an item's answer to a question
(a label, a rubric criterion, an outcome verdict) or one step of an agent run
(its step mark). A settled answer is an annotation by the reference rater
`adjudicated`, its reason and adjudicator in its extra fields. It is made by
an adjudicator (a ruling) or by the tool where the unit's clinicians agree
(reason 'unanimous'); a settlement made on its own is withdrawn (reason
REOPENED, status 'skipped') when a later answer breaks the agreement it
rested on.

This module reads them, as typed records: the clinicians' answers in force on
each unit (`UnitAnswer`, per kind of unit: `label_answers`, `rubric_answers`,
`step_marks`), what they agree on (`Family.agreed`), the settlement in force
(`Settlement`, `settlements_in_force`) and the settlements an answer breaks
(`broken_settlements`). Writing them is the commit path's
(`review.reviewing.commit`); the queues and the rulings are
`review.team.adjudication`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from codebook import RUBRIC_KINDS, STEP_ERROR_QUESTION
from codebook.vocabulary import SETTLED_RATER
from review.team.reviewers import people_sql
from store import Store, from_json, to_json, utcnow

ADJUDICATED = SETTLED_RATER
"""The reference rater whose answers are the settled ones."""
UNANIMOUS = "unanimous"
"""The reason of a settlement made on its own: its clinicians agreed."""
REOPENED = "reopened"
"""The reason recorded when a settlement made on its own is withdrawn."""
ELSEWHERE = "unanimous elsewhere"
"""How a settlement made on its own in one scope (a round, or all clinicians'
answers outside rounds) is seen from another: settled; it answers to the
scope it was made in (`Settlement.reason_in`)."""
TAKEN_BACK = "taken_back"
"""The reason recorded when an adjudicator takes back their own ruling within
the undo window (`review.team.adjudication.take_back`): the unit is open again."""
REOPENED_ELSEWHERE = "reopened elsewhere"
"""How a settlement withdrawn in one scope is seen from another: nothing is
settled, but it was not this scope's agreement that broke."""
SEVERITY_SPREAD = 1
"""Marks naming the same error whose severities lie further apart than this
are a disagreement for an adjudicator (critical against negligible is not an
agreement); within it they settle on their own."""


@dataclass(frozen=True)
class Unit:
    """What one settled answer answers."""

    item_id: int
    question_id: int
    target: str = ""
    """'' for the item as a whole; 'step:<n>' for one step of an agent run."""

    @property
    def step(self) -> int | None:
        return int(self.target[5:]) if self.target.startswith("step:") else None


def step_target(target: str) -> str | None:
    """A step's target in one spelling (`step:03` and `step:3` are one step,
    databases from before targets were one spelling hold both); None if it
    names no step."""
    if target.startswith("step:") and target[5:].isdigit():
        return f"step:{int(target[5:])}"
    return None


@dataclass(frozen=True)
class UnitAnswer:
    """A clinician's answer (or step mark) in force on a unit."""

    annotation_id: int
    rater_id: int
    reviewer: str
    """The clinician's name (queues show a letter in its place unless asked)."""
    status: str
    """answered | cannot_assess"""
    value: str | None
    rationale: str | None
    confidence: int | None = None
    severity: int | None = None
    """A step mark's severity, 1 (negligible) to 5 (critical); None for other answers."""


Agreement = tuple[str | None, int | None]
"""What a unit's clinicians agree on: (value, severity; None but for step marks)."""


@dataclass(frozen=True)
class Settlement:
    """The settled answer (or withdrawn settlement) in force on a unit."""

    annotation_id: int
    unit: Unit
    status: str
    """answered, or skipped: withdrawn (REOPENED by a later answer, or TAKEN_BACK
    by its adjudicator)."""
    value: str | None
    reason: str | None
    """A reason of `review.team.adjudication.REASONS`, UNANIMOUS, REOPENED or TAKEN_BACK."""
    adjudicator: str | None
    """Who ruled; None when it settled on its own."""
    severity: int | None
    note: str | None
    round_id: int | None
    """The scope it was made in: a review round, or None (all clinicians' answers)."""

    @property
    def agreement(self) -> Agreement:
        return self.value, self.severity

    @property
    def ruled(self) -> bool:
        """An adjudicator's ruling in force (never withdrawn by a later answer)."""
        return self.status == "answered" and self.reason not in (UNANIMOUS, REOPENED)

    def reason_in(self, scope: int | None) -> str | None:
        """Its reason as seen from `scope` (a round, or None): a settlement made
        on its own answers to the scope it was made in. A round counts its own
        reviewers' answers, whatever others answered outside it, and all
        clinicians' agreement is not undone by a round's settlement."""
        if self.round_id != scope and self.reason == UNANIMOUS:
            return ELSEWHERE
        if self.round_id != scope and self.reason == REOPENED:
            return REOPENED_ELSEWHERE
        return self.reason

    def reopened_in(self, scope: int | None) -> bool:
        """It had settled on its own in this scope; a later answer broke that agreement."""
        return self.reason_in(scope) == REOPENED


def is_open(settled: Settlement | None, agreed: Agreement | None, scope: int | None) -> bool:
    """Whether a unit still needs settling, seen from `scope`: nothing settled
    yet, a settlement withdrawn (REOPENED), or settled on its own while what
    its raters agree on has changed since, or while they no longer agree
    (`agreed` None): a later answer can undo an agreement, never an
    adjudicator's ruling."""
    if settled is None or settled.status != "answered":
        return True  # withdrawn: reopened by a later answer, or taken back by its adjudicator
    reason = settled.reason_in(scope)
    if reason in (REOPENED, REOPENED_ELSEWHERE):
        return True
    return reason == UNANIMOUS and settled.agreement != agreed


def _settlement(row) -> Settlement:
    extra = from_json(row["extra"] or "{}")
    severity = extra.get("severity")
    try:
        severity = None if severity is None else int(severity)
    except (TypeError, ValueError):
        severity = None
    target = step_target(row["target"]) or row["target"]
    return Settlement(row["id"], Unit(row["item_id"], row["question_id"], target), row["status"],
                      row["value"], extra.get("reason"), extra.get("adjudicator"), severity,
                      row["rationale"], row["round_id"])


_COLUMNS = "a.id, a.item_id, a.question_id, a.target, a.status, a.value, a.rationale, a.extra, a.round_id"


def settlements_in_force(store: Store, *, question_id: int | None = None, steps: bool = False,
                item_id: int | None = None) -> dict[Unit, Settlement]:
    """unit -> the settlement in force on it: on whole items (or, `steps`, on
    steps of agent runs, `step:03` and `step:3` read as one step, the newer in
    force), of one question and one item when given."""
    where = ["r.name = ?", "a.target GLOB 'step:[0-9]*'" if steps else "a.target = ''"]
    params: list = [ADJUDICATED]
    for column, value in (("a.question_id", question_id), ("a.item_id", item_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    out: dict[Unit, Settlement] = {}
    for row in store.query(f"SELECT {_COLUMNS} FROM current_annotations a"
                           " JOIN raters r ON r.id = a.rater_id WHERE " + " AND ".join(where)
                           + " ORDER BY a.id", params):
        settled = _settlement(row)
        out[settled.unit] = settled
    return out


def settlement_on(store: Store, unit: Unit) -> Settlement | None:
    """The settlement in force on one unit (its step in either spelling)."""
    return settlements_in_force(store, question_id=unit.question_id, steps=unit.step is not None,
                       item_id=unit.item_id).get(unit)


def adjudicated_rater(conn) -> int:
    """The id of the rater `adjudicated`, created the first time (inside the caller's transaction)."""
    row = conn.execute("SELECT id FROM raters WHERE name = ?", (ADJUDICATED,)).fetchone()
    if row:
        return row["id"]
    return conn.execute(
        "INSERT INTO raters (name, kind, role, meta, created_at) VALUES (?, 'reference', 'adjudicated', ?, ?)",
        (ADJUDICATED, to_json({"about": "settled answers from adjudication"}), utcnow()),
    ).lastrowid


# -- the clinicians' answers in force, by kind of unit -----------------------------------

def _answer(row) -> UnitAnswer:
    keys = row.keys()
    severity = row["severity"] if "severity" in keys else None
    try:
        severity = None if severity is None else int(severity)
    except (TypeError, ValueError):
        severity = None
    return UnitAnswer(row["annotation_id"], row["rater_id"], row["name"], row["status"],
                      row["value"], row["rationale"],
                      row["confidence"] if "confidence" in keys else None, severity)


def label_answers(store: Store, round_id: int | None, question_id: int,
                  item_id: int | None = None) -> dict[Unit, list[UnitAnswer]]:
    """Items whose answers to the question are all in, with those answers
    (newest per reviewer); `item_id`: that item only.

    In a round: the round's answers, once as many as it asks for are in.
    Outside rounds (round_id None): every item that two or more clinicians
    answered, with their current answers (of an agent run or graded
    conversation, the people who review: not, say, imported HealthBench
    physicians, as `rubric_answers`)."""
    only, only_params = ("", ()) if item_id is None else (" AND i.id = ?", (item_id,))
    by_item: dict[Unit, list[UnitAnswer]] = {}
    if round_id is None:
        rows = store.query(
            f"""SELECT c.item_id, c.rater_id, r.name, c.status, c.value, c.rationale,
                       c.confidence, c.id AS annotation_id
                FROM current_annotations c JOIN raters r ON r.id = c.rater_id
                JOIN items i ON i.id = c.item_id
                WHERE c.question_id = ? AND r.kind = 'human' AND c.target = ''
                  AND (i.kind NOT IN ({','.join('?' * len(RUBRIC_KINDS))}) OR {people_sql('r')})
                  AND c.status IN ('answered', 'cannot_assess'){only}
                ORDER BY c.item_id, c.id""", (question_id, *RUBRIC_KINDS, *only_params))
        for r in rows:
            by_item.setdefault(Unit(r["item_id"], question_id), []).append(_answer(r))
        return {u: a for u, a in by_item.items() if len(a) >= 2}
    rows = store.query(
        """SELECT ri.item_id, ri.answers_needed, a.rater_id, r.name, a.status, a.value, a.rationale,
                  a.confidence, a.id AS annotation_id
           FROM round_items ri
           JOIN annotations a ON a.round_id = ri.round_id AND a.item_id = ri.item_id
                AND a.question_id = ? AND a.target = '' AND a.status IN ('answered', 'cannot_assess')
                AND a.id = (SELECT MAX(b.id) FROM annotations b WHERE b.round_id = a.round_id
                            AND b.item_id = a.item_id AND b.rater_id = a.rater_id
                            AND b.question_id = a.question_id AND b.target = '')
           JOIN raters r ON r.id = a.rater_id JOIN items i ON i.id = ri.item_id
           WHERE ri.round_id = ?""" + only + " ORDER BY ri.position, a.id",
        (question_id, round_id, *only_params),
    )
    needed: dict[Unit, int] = {}
    for r in rows:
        unit = Unit(r["item_id"], question_id)
        by_item.setdefault(unit, []).append(_answer(r))
        needed[unit] = r["answers_needed"]
    return {u: a for u, a in by_item.items() if len(a) >= needed[u]}


def rubric_answers(store: Store) -> dict[Unit, list[UnitAnswer]]:
    """(item, question) -> the clinicians' current answers, for the questions of
    agent runs and graded conversations that two or more clinicians answered."""
    rows = store.query(
        f"""SELECT c.item_id, c.question_id, c.rater_id, r.name, c.status, c.value, c.rationale,
                   c.confidence, c.id AS annotation_id
            FROM current_annotations c JOIN raters r ON r.id = c.rater_id
            JOIN items i ON i.id = c.item_id
            WHERE {people_sql('r')} AND c.target = '' AND c.status IN ('answered', 'cannot_assess')
              AND i.kind IN ({','.join('?' * len(RUBRIC_KINDS))})
            ORDER BY c.item_id, c.question_id, c.id""", RUBRIC_KINDS)
    out: dict[Unit, list[UnitAnswer]] = {}
    for r in rows:
        out.setdefault(Unit(r["item_id"], r["question_id"]), []).append(_answer(r))
    return {k: v for k, v in out.items() if len(v) >= 2}


def step_marks(store: Store, item_id: int | None = None) -> dict[Unit, list[UnitAnswer]]:
    """(run, step) -> the clinicians' marks in force (one per clinician), where
    two or more clinicians marked that step (`item_id`: of that run only).
    Only explicit marks count: a reviewer who left a step unmarked said
    nothing about it."""
    only, only_params = ("", ()) if item_id is None else (" AND c.item_id = ?", (item_id,))
    rows = store.query(
        f"""SELECT c.item_id, c.question_id, c.target, c.rater_id, r.name, c.status, c.value,
                   c.rationale, json_extract(c.extra, '$.severity') AS severity,
                   c.id AS annotation_id
            FROM current_annotations c JOIN raters r ON r.id = c.rater_id
            JOIN questions q ON q.id = c.question_id
            WHERE q.key = ? AND {people_sql('r')} AND c.target GLOB 'step:[0-9]*'
              AND c.status IN ('answered', 'cannot_assess'){only}
            ORDER BY c.item_id, c.id""", (STEP_ERROR_QUESTION, *only_params))
    out: dict[Unit, dict[int, UnitAnswer]] = {}
    for r in rows:
        target = step_target(r["target"])
        if target is not None:  # `step:03` and `step:3` are one step: the newer mark is in force
            out.setdefault(Unit(r["item_id"], r["question_id"], target), {})[r["rater_id"]] = \
                _answer(r)
    return {k: list(v.values()) for k, v in out.items() if len(v) >= 2}


# -- what they agree on --------------------------------------------------------------

def agreed_answer(answers: list[UnitAnswer]) -> Agreement | None:
    """The answer every clinician gave, or None: "cannot assess" agrees with nothing."""
    if {a.status for a in answers} == {"answered"} and len({a.value for a in answers}) == 1:
        return answers[0].value, None
    return None


def agreed_mark(marks: list[UnitAnswer]) -> Agreement | None:
    """The settled mark when every clinician names the same error: that error
    and, for an error, the higher middle of their severities (severity is
    ordinal; between two neighbours the graver is kept), provided they lie
    within SEVERITY_SPREAD of each other. None: a disagreement."""
    if any(m.status != "answered" for m in marks) or len({m.value for m in marks}) != 1:
        return None
    error = marks[0].value
    if error == "no_error":
        return error, None
    severities = sorted(m.severity for m in marks if m.severity is not None)
    if severities and severities[-1] - severities[0] > SEVERITY_SPREAD:
        return None
    return error, severities[len(severities) // 2] if severities else None


@dataclass(frozen=True)
class Family:
    """A kind of unit adjudication settles: where its clinicians' answers come
    from and what they agree on. Labels of one question (in a round or
    outside), rubric criteria of agent runs and graded conversations, and
    step marks are its three instances (`label_family`, `criteria_family`, `step_family`)."""

    scope: int | None
    """The review round its settlements answer to; None: all clinicians' answers."""
    answers: Callable[[Store, int | None], dict[Unit, list[UnitAnswer]]]
    """(store, item id or None) -> the answers in force on each complete unit."""
    agree: Callable[[list[UnitAnswer]], Agreement | None]
    noun: str = "answers"
    """What the refusals call the clinicians' answers: 'answers' or 'marks'."""
    question_id: int | None = None
    """The one question its units answer, where there is one."""
    steps: bool = False

    def agreed(self, answers: list[UnitAnswer] | None) -> Agreement | None:
        """What two or more complete answers agree on, or None: what settles a
        unit on its own, and what a settlement so made rests on."""
        return self.agree(answers) if answers and len(answers) > 1 else None

    def settled(self, store: Store) -> dict[Unit, Settlement]:
        return settlements_in_force(store, question_id=self.question_id, steps=self.steps)


def label_family(round_id: int | None, question_id: int) -> Family:
    """Answers to one question: a round's, or (round_id None) all clinicians'."""
    return Family(round_id, lambda store, item_id=None: label_answers(
        store, round_id, question_id, item_id), agreed_answer, question_id=question_id)


def criteria_family() -> Family:
    """The criteria and outcome verdicts of agent runs and graded conversations, outside rounds."""
    return Family(None, lambda store, item_id=None: {
        u: a for u, a in rubric_answers(store).items() if item_id in (None, u.item_id)},
        agreed_answer)


def step_family() -> Family:
    """Step marks on agent runs, outside rounds."""
    return Family(None, lambda store, item_id=None: step_marks(store, item_id), agreed_mark,
                  noun="marks", steps=True)


def broken_settlements(store: Store, units: Iterable[tuple[int, int, str]]) -> list[Settlement]:
    """The settlements made on their own ('unanimous') on these units (item id,
    question id, target as written) that the scope they were made in would no
    longer make, by the rule that made them: an answer they rest on now
    differs, or too few are left. An adjudicator's ruling is never among them."""
    rater = store.scalar("SELECT id FROM raters WHERE name = ?", (ADJUDICATED,))
    if rater is None:
        return []
    out = []
    for item_id, question_id, target in dict.fromkeys(units):
        row = store.query_one(
            f"SELECT {_COLUMNS} FROM annotations a WHERE a.item_id = ? AND a.question_id = ?"
            " AND a.rater_id = ? AND a.target = ? ORDER BY a.id DESC LIMIT 1",
            (item_id, question_id, rater, target))
        if row is None:
            continue
        settled = _settlement(row)
        if settled.reason != UNANIMOUS or settled.status != "answered":
            continue
        if target:
            if step_target(target) is None:
                continue
            family = step_family()
            marks = family.answers(store, item_id).get(settled.unit)
            if marks is not None and family.agree(marks) == settled.agreement:
                continue  # the tool would settle it so: it stands
        else:
            family = label_family(settled.round_id, question_id)
            if family.agreed(family.answers(store, item_id).get(settled.unit)) \
                    == settled.agreement:
                continue  # the scope it was made in would settle it so: it stands
        out.append(Settlement(settled.annotation_id, Unit(item_id, question_id, target),
                              settled.status, settled.value, settled.reason, settled.adjudicator,
                              settled.severity, settled.note, settled.round_id))
    return out
