"""Adjudication: settling the units on which clinicians disagree.

A unit is what one settled answer answers (`review.team.settlements.Unit`):
an item's answer to a label question, in a review round or outside rounds;
a criterion or outcome verdict of an agent run or graded conversation; one
step of an agent run. One workflow serves the three (`Family`), in three
thin faces:

- labels: `adjudication_queue`, `settle`, `settle_unanimous`;
- rubric criteria: `rubric_queue`, `settle` (by the criterion's key),
  `settle_unanimous_rubric`;
- step marks: `step_queue`, `settle_step`, `settle_unanimous_steps`.

Unanimous units settle when an adjudicator settles them (`settle_unanimous`: a
screen offers it, never does it on opening). A unit is in the queue when its answers
are complete and differ (for ordinal labels: by at least the round's set
distance; "cannot assess" always counts as a difference; step marks naming
the same error with severities far apart). The adjudicator sees every answer
with its rationale and confidence (names hidden unless asked) and the
machine labels, and picks or writes the settled answer with a reason. Nobody
adjudicates an item they answered. Only adjudicators and admins see the
queues or settle.

A settled answer is an annotation by the reference rater `adjudicated`, with
the adjudicator, reason and note in its extra fields, written through the
commit path (`review.reviewing.commit.write_answers`): to the agreement
screen and the exports it is a rater like any other. This module sits above
`review.reviewing` for that reason (`review.team`'s other modules sit below it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from codebook import NO_ERROR, STEP_CODEBOOK, STEP_ERROR_QUESTION, Codebook, codebook_in_force
from review.reviewing.answers import normalise_value
from review.reviewing.blinding import undo_window
from review.reviewing.commit import AnswerSpec, Settler, reopen_broken, withdraw, write_answers
from review.reviewing.criteria import step_count
from review.reviewing.presses import Press, check_press
from review.team.access import may
from review.team.reviewers import Reviewer
from review.team.settlements import (
    ADJUDICATED,
    ELSEWHERE,
    REOPENED,
    REOPENED_ELSEWHERE,
    SEVERITY_SPREAD,
    TAKEN_BACK,
    UNANIMOUS,
    Agreement,
    Family,
    Settlement,
    Unit,
    UnitAnswer,
    criteria_family,
    is_open,
    label_family,
    settlement_on,
    step_family,
)
from store import Store, from_json

__all__ = [
    "ADJUDICATED", "ELSEWHERE", "REASONS", "REOPENED", "REOPENED_ELSEWHERE", "SEVERITY_SPREAD",
    "UNRULED", "AdjudicationError", "AnswersChanged", "CriterionDispute", "Disagreement",
    "ItemDisputes", "RoundAnswer", "RunStepDisputes", "StepAnswer", "StepDispute",
    "adjudication_queue", "reopen_broken", "rubric_queue", "settle", "settle_step",
    "settle_unanimous", "settle_unanimous_rubric", "settle_unanimous_steps", "step_queue",
    "take_back", "take_back_wait", "unanimous_rubric_waiting", "unanimous_steps_waiting",
    "unanimous_waiting",
]

REASONS = {
    "ambiguous_item": "the item is ambiguous",
    "codebook_gap": "the codebook does not cover it",
    "reviewer_error": "a reviewer erred",
    "machine_error": "the machine label is wrong",
    UNANIMOUS: "all reviewers agreed",
}


class AdjudicationError(ValueError):
    """An adjudication that is not allowed; the message says why."""


class AnswersChanged(AdjudicationError):
    """The clinicians' answers on a unit are not the ones the adjudicator was
    shown: nothing was settled; show the unit again, with its answers as they are."""


def _require_adjudicator(reviewer: Reviewer, doing: str) -> None:
    """Only adjudicators and admins see every clinician's answers and settle them."""
    if not may(reviewer, "adjudicate"):
        raise AdjudicationError(f"only an adjudicator or an admin can {doing}")


class _Unruled:
    def __repr__(self) -> str:
        return "UNRULED"


UNRULED = _Unruled()
"""What `settle` and `settle_step` check by default, when the caller does not
say what settlement it saw (`expected`): that no adjudicator's ruling is in
force, so one is never replaced by someone who did not see it. A screen
passes what it showed instead (a queue entry's `settled_id`): then any change
since, a ruling, a settlement made on its own or one withdrawn, is refused."""


# -- what the queues show ------------------------------------------------------------

@dataclass
class RoundAnswer:
    reviewer: str
    """The reviewer's name, or 'Reviewer A', 'Reviewer B', ... when hidden."""
    status: str
    value: str | None
    rationale: str | None
    confidence: int | None


@dataclass
class Disagreement:
    round_id: int
    item_id: int
    item_uid: str
    question_id: int
    answers: list[RoundAnswer]
    machine_labels: list[tuple[str, str | None]] = field(default_factory=list)
    distance: int | None = None
    """Largest ordinal distance between the answers (None where not ordinal)."""
    reopened: bool = False
    """It had settled on its own; a later answer broke that agreement."""
    settled_id: int | None = None
    """The settled answer (or withdrawn settlement) in force when the queue was
    read; None: none. Pass it to `settle` as `expected`."""
    answer_ids: tuple[int, ...] = ()
    """The clinicians' answers shown (their annotation ids, ascending). Pass it
    to `settle` as `answers_shown`: a ruling is then refused if any of them
    changed since."""


@dataclass
class CriterionDispute:
    question_id: int
    question_key: str
    text: str
    codebook: str
    kind: str
    """criterion (met / not met) or labelset (e.g. the CliniCARE verdict)."""
    answers: list[RoundAnswer]
    machine: list[tuple[str, str | None]] = field(default_factory=list)
    """Judges' and verifiers' verdicts on the criterion: (rater, value)."""
    reopened: bool = False
    """It had settled on its own; a later answer broke that agreement."""
    settled_id: int | None = None
    """As `Disagreement.settled_id`: pass it to `settle` as `expected`."""
    answer_ids: tuple[int, ...] = ()
    """As `Disagreement.answer_ids`: pass it to `settle` as `answers_shown`."""


@dataclass
class ItemDisputes:
    item_id: int
    item_uid: str
    item_kind: str
    disputes: list[CriterionDispute]


@dataclass
class StepAnswer:
    reviewer: str
    """The reviewer's name, or 'Reviewer A', 'Reviewer B', ... when hidden."""
    error: str | None
    """A code of the trajectory-errors codebook (`no_error`: checked, nothing
    wrong); None: the reviewer could not assess the step."""
    severity: int | None
    note: str | None


@dataclass
class StepDispute:
    step_id: int
    answers: list[StepAnswer]
    reopened: bool = False
    """It had settled on its own; a later mark broke that agreement."""
    settled_id: int | None = None
    """As `Disagreement.settled_id`: pass it to `settle_step` as `expected`."""
    answer_ids: tuple[int, ...] = ()
    """The clinicians' marks shown (as `Disagreement.answer_ids`): pass it to
    `settle_step` as `answers_shown`."""


@dataclass
class RunStepDisputes:
    item_id: int
    item_uid: str
    disputes: list[StepDispute]


# -- one workflow, keyed by the unit -------------------------------------------------

@dataclass(frozen=True)
class Dispute:
    """A unit whose clinicians' answers differ and that nothing settles."""

    unit: Unit
    answers: list[UnitAnswer]
    settled: Settlement | None
    """The settlement in force when the queue was read (a withdrawn one, or
    one made on its own whose agreement is gone), or None."""
    scope: int | None

    @property
    def settled_id(self) -> int | None:
        return None if self.settled is None else self.settled.annotation_id

    @property
    def reopened(self) -> bool:
        return self.settled is not None and self.settled.reopened_in(self.scope)

    @property
    def answer_ids(self) -> tuple[int, ...]:
        return _answer_ids(self.answers)


def _answer_ids(answers: list[UnitAnswer]) -> tuple[int, ...]:
    """The ids of clinicians' answers in force: what a queue entry showed."""
    return tuple(sorted(a.annotation_id for a in answers))


def _answered_by(store: Store, rater_id: int) -> set[int]:
    """Items a rater answered anything about: theirs, so someone else adjudicates them."""
    return {r["item_id"] for r in store.query(
        "SELECT DISTINCT item_id FROM annotations WHERE rater_id = ?", (rater_id,))}


def _disputes(store: Store, family: Family, adjudicator: Reviewer) -> list[Dispute]:
    """The family's units whose answers differ and that are open to settling
    (`is_open`, from the family's scope), leaving out the items the
    adjudicator answered anything about. The settlements are read before what
    decides that a unit is open, so that a `settled_id` is never newer than
    what the adjudicator is shown."""
    settled = family.settled(store)
    own = _answered_by(store, adjudicator.id)
    out = []
    for unit, answers in family.answers(store, None).items():
        if unit.item_id in own or not is_open(settled.get(unit), None, family.scope):
            continue
        if family.agree(answers) is not None:
            continue  # unanimous: settles on its own
        out.append(Dispute(unit, answers, settled.get(unit), family.scope))
    return out


def _agreed_units(store: Store, family: Family) -> list[tuple[Unit, Agreement]]:
    """The family's units whose clinicians agree and that are open to settling."""
    settled = family.settled(store)
    return [(unit, agreed) for unit, answers in family.answers(store, None).items()
            if (agreed := family.agreed(answers)) is not None
            and is_open(settled.get(unit), agreed, family.scope)]


def _settle_agreed(store: Store, family: Family, actor: str) -> int:
    """Record the settled answer of every unit of the family whose clinicians
    agree (`Family.agreed`); one settled this way is settled again, or
    reopened for an adjudicator, when a clinician's later answer changes the
    agreement. Returns how many were settled."""
    if not _agreed_units(store, family):
        return 0
    with store.transaction() as conn:
        # Again, under the write lock: another page may have settled them, or a
        # clinician changed an answer, since (`reopen_broken` found nothing then).
        agreed = _agreed_units(store, family)
        for unit, (value, severity) in agreed:
            write_answers(store, conn, Settler(UNANIMOUS, None, family.scope, actor), unit.item_id,
                          [AnswerSpec(unit.question_id, value, target=unit.target,
                                      extra=None if severity is None else {"severity": severity})])
    return len(agreed)


def _words(value: str | None, severity: int | None = None, book: Codebook | None = None) -> str:
    """An answer or a mark as the refusals name it: in the codebook's words
    (the adjudicator's form shows "Wrong tool", not wrong_tool)."""
    if value is None:
        return "cannot assess"
    try:
        name = book.label(value).short if book is not None else value
    except KeyError:
        name = value
    return name if severity is None or value == NO_ERROR else f"{name} (severity {severity})"


def _check_unchanged(store: Store, words: str, unit: Unit, adjudicator: Reviewer, expected,
                     ruling: tuple) -> int | None:
    """Inside the settling transaction: refuse if the unit's settled answer is
    not the one the adjudicator saw (`expected`: its id, None for none, or
    UNRULED). Returns the id of the adjudicator's identical ruling already in
    force (a second click on the same form), else None: go on and write.
    `ruling`: (value, reason, severity, note) being settled; `words`: the
    unit as the refusal names it ('this item', ...)."""
    now = settlement_on(store, unit)
    ruled = now is not None and now.ruled
    if ruled and now.adjudicator == adjudicator.name \
            and (now.value, now.reason, now.severity, now.note) == ruling:
        return now.annotation_id
    as_seen = not ruled if expected is UNRULED else (
        None if now is None else now.annotation_id) == expected
    if as_seen:
        return None
    if now is None:
        raise AdjudicationError(f"{words} changed meanwhile; reload to see it")
    value = now.value if now.severity is None else f"{now.value} (severity {now.severity})"
    if now.status != "answered" and now.reason == TAKEN_BACK:
        raise AdjudicationError(f"the settlement of {words} was taken back meanwhile by "
                                f"{now.adjudicator}; reload to see it")
    if now.status != "answered":
        raise AdjudicationError(f"the settlement of {words} was withdrawn meanwhile (a later "
                                "answer broke the agreement it rested on); reload to see it")
    if now.reason == UNANIMOUS:
        raise AdjudicationError(f"{words} settled on its own meanwhile as {value} (its "
                                "clinicians now agree); reload to see it")
    raise AdjudicationError(f"{words} was settled meanwhile by {now.adjudicator} as {value}; "
                            "reload to see it")


def _check_answers(words: str, noun: str, now: list[UnitAnswer], agreed: str | None,
                   shown: tuple[int, ...] | None, expected, book: Codebook | None) -> None:
    """Inside the settling transaction, after `_check_unchanged`: refuse if the
    clinicians' answers on the unit (`now`: as its queue reads them; [] when
    too few are left) are not those the adjudicator was shown (`shown`: the
    queue entry's `answer_ids`): one was changed, added or withdrawn since. A
    caller that names the settlement it saw (`expected`) but not the answers
    is refused only where they no longer disagree at all (`agreed`: in words,
    what they now agree on); one that names neither is not checked.
    `noun`: 'answers' or 'marks'."""
    if shown is not None:
        if tuple(sorted(shown)) == _answer_ids(now):
            return
    elif expected is UNRULED or (now and agreed is None):
        return
    if not now:
        what = "too few are left to settle"
    elif agreed is not None:
        what = f"they now agree: {agreed}"
    else:
        what = "now: " + ", ".join(
            _words(a.value if a.status == "answered" else None, a.severity, book) for a in now)
    raise AnswersChanged(f"the clinicians' {noun} on {words} changed meanwhile, since you opened "
                         f"it ({what}); nothing was settled: look again")


def _settle(store: Store, family: Family, unit: Unit, adjudicator: Reviewer, value: str,
            severity: int | None, reason: str, note: str | None, *, expected,
            answers_shown: tuple[int, ...] | None, words: str, noun: str,
            book: Codebook | None) -> int:
    """Record an adjudicator's settled answer on one unit, in one transaction,
    after the refusals (`noun`: the item as they name it, 'item' or 'run')."""
    with store.transaction() as conn:
        if conn.execute(  # any question of the item, in any round: their own item
                "SELECT 1 FROM annotations WHERE item_id = ? AND rater_id = ? LIMIT 1",
                (unit.item_id, adjudicator.id)).fetchone():
            raise AdjudicationError(f"you answered this {noun}, so someone else must adjudicate it")
        same = _check_unchanged(store, words, unit, adjudicator, expected,
                                (value, reason, severity, note or None))
        if same is not None:
            return same
        now = family.answers(store, unit.item_id).get(unit, [])
        agreed = family.agreed(now)
        _check_answers(words, family.noun, now, None if agreed is None else _words(*agreed, book),
                       answers_shown, expected, book)
        return write_answers(
            store, conn, Settler(reason, adjudicator.name, family.scope, adjudicator.name),
            unit.item_id, [AnswerSpec(unit.question_id, value, rationale=note, target=unit.target,
                                      extra=None if severity is None else {"severity": severity})])[0]


def _check_reason(reason: str) -> None:
    if reason not in REASONS or reason == UNANIMOUS:
        raise AdjudicationError(
            f"give a reason: one of {', '.join(r for r in REASONS if r != UNANIMOUS)}")


def _letters(disputes: list[Dispute]) -> dict[int, str]:
    """{rater id: 'Reviewer A', ...}, one letter per clinician across an item's units."""
    raters = dict.fromkeys(a.rater_id for d in disputes for a in d.answers)
    return {rid: f"Reviewer {chr(65 + i)}" for i, rid in enumerate(raters)}


def _by_item(disputes: list[Dispute]) -> dict[int, list[Dispute]]:
    out: dict[int, list[Dispute]] = {}
    for d in disputes:
        out.setdefault(d.unit.item_id, []).append(d)
    return out


def _machine(store: Store, unit: Unit, kinds: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(rater, value) of the machine (and, with 'reference', reference) raters'
    answers in force on a whole-item unit; never the settled answer."""
    return [(r["name"], r["value"]) for r in store.query(
        "SELECT r.name, c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        f" WHERE c.item_id = ? AND c.question_id = ? AND r.kind IN ({','.join('?' * len(kinds))})"
        " AND r.name != ? AND c.target = '' ORDER BY r.kind, r.name",
        (unit.item_id, unit.question_id, *kinds, ADJUDICATED))]


def _uid(store: Store, item_id: int) -> str:
    return store.scalar("SELECT uid FROM items WHERE id = ?", (item_id,))


# -- labels: one question, in a round or outside rounds ----------------------------

@dataclass(frozen=True)
class _Question:
    distance: int
    """The ordinal distance that counts as a disagreement."""
    id: int
    codebook: str
    kind: str


def _round_question(store: Store, round_id: int | None, question_key: str | None = None) -> _Question:
    """The question a round is over (or, outside rounds, the one named) and the
    distance that counts as a disagreement (1 outside rounds)."""
    if round_id is None:
        row = store.query_one("SELECT 1 AS distance, id, codebook, kind FROM questions WHERE key = ?",
                              (question_key,))
        if row is None:
            raise AdjudicationError(f"no question {question_key!r}")
    else:
        row = store.query_one(
            "SELECT r.adjudicate_distance AS distance, q.id, q.codebook, q.kind FROM review_rounds r"
            " JOIN questions q ON q.key = r.question_key WHERE r.id = ?", (round_id,))
        if row is None:
            raise AdjudicationError(f"no review round {round_id}")
    return _Question(row["distance"], row["id"], row["codebook"], row["kind"])


def _distance(book: Codebook | None, values: list[str | None]) -> int | None:
    if book is None or not book.ordinal or any(v is None for v in values):
        return None
    ranks = [book.rank(v) for v in values]
    return max(ranks) - min(ranks)


def settle_unanimous(store: Store, round_id: int | None, actor: str = "system",
                     question_key: str | None = None) -> int:
    """Record the settled answer of every complete item whose reviewers agree."""
    question = _round_question(store, round_id, question_key)
    return _settle_agreed(store, label_family(round_id, question.id), actor)


def unanimous_waiting(store: Store, round_id: int | None, question_key: str | None = None) -> int:
    """How many complete items whose reviewers agree `settle_unanimous` would settle
    now (read only: a screen offers to settle them, it never does so on opening)."""
    question = _round_question(store, round_id, question_key)
    return len(_agreed_units(store, label_family(round_id, question.id)))


def adjudication_queue(store: Store, round_id: int | None, adjudicator: Reviewer,
                       show_names: bool = False,
                       question_key: str | None = None) -> list[Disagreement]:
    """Disagreeing, unsettled items of the round (or, with round_id None, of
    a question outside rounds) that this adjudicator did not answer. Only for
    adjudicators and admins: it shows every clinician's answers."""
    _require_adjudicator(adjudicator, "see the disagreements to settle")
    question = _round_question(store, round_id, question_key)
    book = codebook_in_force(store, question.codebook)
    out = []
    for d in _disputes(store, label_family(round_id, question.id), adjudicator):
        distance = _distance(book, [a.value for a in d.answers])
        if distance is not None and distance < max(question.distance, 1):
            continue
        names = _letters([d])
        out.append(Disagreement(
            round_id, d.unit.item_id, _uid(store, d.unit.item_id), question.id,
            [RoundAnswer(a.reviewer if show_names else names[a.rater_id], a.status, a.value,
                         a.rationale, a.confidence) for a in d.answers],
            _machine(store, d.unit, ("machine",)), distance, d.reopened, d.settled_id,
            d.answer_ids))
    return out


def settle(store: Store, round_id: int | None, item_id: int, adjudicator: Reviewer, value: str,
           reason: str, note: str | None = None, question_key: str | None = None, *,
           expected: int | None | _Unruled = UNRULED,
           answers_shown: tuple[int, ...] | None = None, press: Press | None = None) -> int:
    """Record the settled answer for one item, by an adjudicator who answered
    nothing about that item (in any round, to any question).

    `expected`: the settled answer the adjudicator saw (the queue entry's
    `settled_id`); if another was recorded since, nothing is written and the
    error says what. By default (UNRULED) only an adjudicator's ruling in
    force is refused. The same ruling sent twice is recorded once.

    `answers_shown`: the clinicians' answers the adjudicator saw (the queue
    entry's `answer_ids`); if any changed since (one came round, say), nothing
    is written (AnswersChanged). Without it, a caller that passes `expected`
    is refused only once the answers agree; one that passes neither, not.

    `press`: the key or click that settled it on a screen, as the server saw
    it; one that does not count (`review.reviewing.presses`) raises `TooSoon`
    and writes nothing."""
    check_press(press)
    _require_adjudicator(adjudicator, "settle disagreements")
    _check_reason(reason)
    question = _round_question(store, round_id, question_key)
    book = codebook_in_force(store, question.codebook)
    value = normalise_value(question.codebook, question.kind, value,
                            {book.key: book} if book is not None else {})
    return _settle(store, label_family(round_id, question.id), Unit(item_id, question.id), adjudicator,
                   value, None, reason, note, expected=expected, answers_shown=answers_shown,
                   words="this criterion" if question.kind == "criterion" else "this item",
                   noun="item", book=book)


# -- rubric verdicts: agent runs and graded conversations -----------------------

def settle_unanimous_rubric(store: Store, actor: str = "system") -> int:
    """Record the settled verdict of every rubric criterion its clinicians agree on."""
    return _settle_agreed(store, criteria_family(), actor)


def unanimous_rubric_waiting(store: Store) -> int:
    """How many criteria `settle_unanimous_rubric` would settle now (read only)."""
    return len(_agreed_units(store, criteria_family()))


def rubric_queue(store: Store, adjudicator: Reviewer, show_names: bool = False) -> list[ItemDisputes]:
    """Agent runs and graded conversations on which clinicians' verdicts on a
    criterion differ and nothing is settled yet, item by item. An item the
    adjudicator answered any criterion of is left to someone else. Only for
    adjudicators and admins: it shows every clinician's answers. Each is
    settled by `settle` with its criterion's key (outside rounds)."""
    _require_adjudicator(adjudicator, "see the disagreements to settle")
    out = []
    for item_id, disputes in _by_item(_disputes(store, criteria_family(), adjudicator)).items():
        item = store.query_one("SELECT uid, kind FROM items WHERE id = ?", (item_id,))
        names = _letters(disputes)  # one letter per clinician across the item
        shown = []
        for d in disputes:
            q = store.query_one("SELECT key, text, codebook, kind FROM questions WHERE id = ?",
                                (d.unit.question_id,))
            shown.append(CriterionDispute(
                d.unit.question_id, q["key"], q["text"], q["codebook"], q["kind"],
                [RoundAnswer(a.reviewer if show_names else names[a.rater_id], a.status, a.value,
                             a.rationale, a.confidence) for a in d.answers],
                _machine(store, d.unit, ("machine", "reference")), d.reopened, d.settled_id,
                d.answer_ids))
        out.append(ItemDisputes(item_id, item["uid"], item["kind"], shown))
    return out


# -- step marks: where in an agent run things went wrong -------------------------

def settle_unanimous_steps(store: Store, actor: str = "system") -> int:
    """Record the settled mark of every step its clinicians mark alike (see
    `review.team.settlements.agreed_mark`); one settled this way is settled
    again, or reopened for an adjudicator, when a clinician's later mark
    changes the agreement."""
    return _settle_agreed(store, step_family(), actor)


def unanimous_steps_waiting(store: Store) -> int:
    """How many steps `settle_unanimous_steps` would settle now (read only)."""
    return len(_agreed_units(store, step_family()))


def step_queue(store: Store, adjudicator: Reviewer, show_names: bool = False) -> list[RunStepDisputes]:
    """Agent runs with steps clinicians marked differently (another error, a
    severity far apart, or 'cannot assess'), not settled by an adjudicator,
    run by run, steps in order. A run the adjudicator answered anything about
    is left to someone else. Only for adjudicators and admins: it shows every
    clinician's marks."""
    _require_adjudicator(adjudicator, "see the disagreements to settle")
    found = sorted(_disputes(store, step_family(), adjudicator),
                   key=lambda d: (d.unit.item_id, d.unit.step))
    out = []
    for item_id, disputes in _by_item(found).items():
        names = _letters(disputes)  # one letter per clinician across the run
        out.append(RunStepDisputes(item_id, _uid(store, item_id), [
            StepDispute(d.unit.step, [
                StepAnswer(a.reviewer if show_names else names[a.rater_id],
                           a.value if a.status == "answered" else None,
                           a.severity if a.value != NO_ERROR else None, a.rationale)
                for a in d.answers], d.reopened, d.settled_id, d.answer_ids)
            for d in disputes]))
    return out


def settle_step(store: Store, item_id: int, step_id: int, adjudicator: Reviewer, error: str,
                severity: int | None, reason: str, note: str | None = None, *,
                expected: int | None | _Unruled = UNRULED,
                answers_shown: tuple[int, ...] | None = None, press: Press | None = None) -> int:
    """Record the settled mark of one step of a run: an error of the
    trajectory-errors codebook with a severity 1-5, or `no_error`; by an
    adjudicator who answered nothing about the run. A settled mark it
    replaces is named in the audit trail. `expected` and `answers_shown`:
    the settled mark and the clinicians' marks the adjudicator saw (the queue
    entry's `settled_id` and `answer_ids`), as in `settle`; `press` too."""
    check_press(press)
    _require_adjudicator(adjudicator, "settle disagreements")
    _check_reason(reason)
    if not 1 <= int(step_id) <= step_count(store, item_id):
        raise AdjudicationError(f"this run has no step {step_id}")
    book = codebook_in_force(store, STEP_CODEBOOK)
    error = book.normalise(error)
    if error == NO_ERROR:
        severity = None
    elif severity is None or not 1 <= int(severity) <= 5:
        raise AdjudicationError("choose a severity from 1 (negligible) to 5 (critical)")
    question_id = store.scalar("SELECT id FROM questions WHERE key = ?", (STEP_ERROR_QUESTION,))
    return _settle(store, step_family(), Unit(item_id, question_id, f"step:{int(step_id)}"),
                   adjudicator, error, None if severity is None else int(severity), reason, note,
                   expected=expected, answers_shown=answers_shown,
                   words=f"step {int(step_id)} of this run", noun="run", book=book)


# -- taking a ruling back within the undo window ---------------------------------------

TAKEN_BACK_WORDS = "Taken back by its adjudicator within the undo window"
"""The rationale of a settlement's withdrawal by `take_back`."""


def take_back_wait(store: Store, annotation_id: int) -> float:
    """Seconds left in which the ruling `annotation_id` may be taken back (0: none)."""
    made = store.scalar("SELECT created_at FROM annotations WHERE id = ?", (annotation_id,))
    if made is None:
        return 0.0
    due = datetime.fromisoformat(made) + timedelta(seconds=undo_window())
    return max(0.0, (due - datetime.now(UTC)).total_seconds())


def take_back(store: Store, adjudicator: Reviewer, annotation_id: int) -> int:
    """An adjudicator takes back their own ruling within the undo window
    (`review.reviewing.blinding.undo_window`, as a clinician withdraws an answer
    with Z): recorded as a withdrawn answer is (`review.reviewing.commit.withdraw`:
    a new settled answer, status skipped, reason TAKEN_BACK, naming the ruling it
    withdraws), so the ruling stays in the record and the unit is open to be
    settled again. Refused (AdjudicationError, nothing written) for someone
    else's ruling or a settlement made on its own, once the window has passed,
    or when the ruling is no longer the settlement in force on its unit.
    Returns the withdrawal's id."""
    _require_adjudicator(adjudicator, "take back a settlement")
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT a.id, a.item_id, a.question_id, a.target, a.status, a.extra, a.round_id,"
            " r.name AS rater FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " WHERE a.id = ?", (annotation_id,)).fetchone()
        if row is None or row["rater"] != ADJUDICATED:
            raise AdjudicationError(f"no settlement {annotation_id}")
        extra = from_json(row["extra"] or "{}")
        if row["status"] != "answered" or extra.get("adjudicator") != adjudicator.name:
            raise AdjudicationError("only the adjudicator who settled a unit can take it back")
        newest = conn.execute(
            "SELECT MAX(id) FROM annotations WHERE item_id = ? AND question_id = ?"
            " AND rater_id = (SELECT id FROM raters WHERE name = ?) AND target = ?",
            (row["item_id"], row["question_id"], ADJUDICATED, row["target"])).fetchone()[0]
        if newest != annotation_id:
            raise AdjudicationError("it is no longer the settlement in force (settled again or "
                                    "withdrawn since); reload to see it")
        if take_back_wait(store, annotation_id) <= 0:
            raise AdjudicationError(
                f"the undo window ({undo_window():g} s) has passed: settle it again to change it")
        return withdraw(store, conn, Settler(TAKEN_BACK, adjudicator.name, row["round_id"],
                                             adjudicator.name),
                        row["item_id"], row["question_id"], row["target"], annotation_id,
                        TAKEN_BACK_WORDS)
