"""Adjudication: settling the items where a round's reviewers disagree.

Unanimous items settle on their own. An item is in the queue when its
round answers are complete and differ (for ordinal labels: by at least the
round's set distance; "cannot assess" always counts as a difference). The
adjudicator sees every answer with its rationale and confidence (names
hidden unless asked) and the machine labels, and picks or writes the settled
answer with a reason. Nobody adjudicates an item they answered.

A settled answer is an annotation by the reference rater `adjudicated`, with
the adjudicator, reason and note in its extra fields: to the agreement
screen and the exports it is a rater like any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codebook import RUBRIC_KINDS, builtin_codebooks
from review.reviewing.answers import normalise_value
from review.team.reviewers import Reviewer, can_adjudicate, people_sql
from store import Store, to_json, utcnow

ADJUDICATED = "adjudicated"
REASONS = {
    "ambiguous_item": "the item is ambiguous",
    "codebook_gap": "the codebook does not cover it",
    "reviewer_error": "a reviewer erred",
    "machine_error": "the machine label is wrong",
    "unanimous": "all reviewers agreed",
}


class AdjudicationError(ValueError):
    """An adjudication that is not allowed; the message says why."""


def _require_adjudicator(reviewer: Reviewer, doing: str) -> None:
    """Only adjudicators and admins see every clinician's answers and settle them."""
    if not can_adjudicate(reviewer):
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


def _settlement(conn, item_id: int, question_id: int, step: int | None = None):
    """The newest settled answer (or withdrawn settlement) on a unit: the item's
    answer to the question, or with `step` that step's mark (`step:03` and
    `step:3` are one step, as in `_step_marks`). Columns: id, status, value,
    reason, adjudicator, severity, rationale; None if nothing was ever settled."""
    rows = conn.execute(
        "SELECT a.id, a.status, a.value, json_extract(a.extra, '$.reason'),"
        " json_extract(a.extra, '$.adjudicator'), json_extract(a.extra, '$.severity'), a.rationale,"
        " a.target FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.name = ? AND a.item_id = ? AND a.question_id = ? AND "
        + ("a.target = ''" if step is None else "a.target GLOB 'step:[0-9]*'")
        + " ORDER BY a.id DESC", (ADJUDICATED, item_id, question_id))
    for row in rows:
        if step is None or int(row[7].removeprefix("step:")) == step:
            return row
    return None


def _check_unchanged(conn, unit: str, item_id: int, question_id: int, adjudicator: Reviewer,
                     expected, ruling: tuple, step: int | None = None) -> int | None:
    """Inside the settling transaction: refuse if the unit's settled answer is
    not the one the adjudicator saw (`expected`: its id, None for none, or
    UNRULED). Returns the id of the adjudicator's identical ruling already in
    force (a second click on the same form), else None: go on and write.
    `ruling`: (value, reason, severity, note) being settled; `unit`: 'this item', ..."""
    now = _settlement(conn, item_id, question_id, step)
    now_id = None if now is None else now[0]
    ruled = now is not None and now[1] == "answered" and now[3] not in ("unanimous", REOPENED)
    if ruled and now[4] == adjudicator.name and (now[2], now[3], now[5], now[6]) == ruling:
        return now_id
    as_seen = not ruled if expected is UNRULED else now_id == expected
    if as_seen:
        return None
    if now is None:
        raise AdjudicationError(f"{unit} changed meanwhile; reload to see it")
    value = now[2] if now[5] is None else f"{now[2]} (severity {now[5]})"
    if now[1] != "answered":
        raise AdjudicationError(f"the settlement of {unit} was withdrawn meanwhile (a later answer "
                                "broke the agreement it rested on); reload to see it")
    if now[3] == "unanimous":
        raise AdjudicationError(f"{unit} settled on its own meanwhile as {value} (its clinicians "
                                "now agree); reload to see it")
    raise AdjudicationError(f"{unit} was settled meanwhile by {now[4]} as {value}; reload to see it")


class AnswersChanged(AdjudicationError):
    """The clinicians' answers on a unit are not the ones the adjudicator was
    shown: nothing was settled; show the unit again, with its answers as they are."""


def _answer_ids(answers) -> tuple[int, ...]:
    """The ids of clinicians' answers in force (rows of `_complete_items`,
    `_rubric_answers` or `_step_marks`): what a queue entry showed."""
    return tuple(sorted(a["annotation_id"] for a in answers))


def _words(value: str | None, severity: int | None = None, book=None) -> str:
    """An answer or a mark as the refusals name it: in the codebook's words
    (the adjudicator's form shows "Wrong tool", not wrong_tool)."""
    if value is None:
        return "cannot assess"
    try:
        name = book.label(value).short if book is not None else value
    except KeyError:
        name = value
    return name if severity is None or value == "no_error" else f"{name} (severity {severity})"


def _check_answers(unit: str, noun: str, now: list, agreed: str | None,
                   shown: tuple[int, ...] | None, expected, book=None) -> None:
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
            _words(a["value"] if a["status"] == "answered" else None,
                   _severity(a) if "severity" in a.keys() else None, book) for a in now)
    raise AnswersChanged(f"the clinicians' {noun} on {unit} changed meanwhile, since you opened it "
                         f"({what}); nothing was settled: look again")


def _settlement_ids(store: Store, question_id: int | None = None) -> dict[tuple[int, int, str], int]:
    """(item, question, target) -> the id of the settled answer (or withdrawn
    settlement) in force, for the queues' `settled_id`; step targets spelled
    `step:N`. Read before what decides that a unit is open, so that an id is
    never newer than what the adjudicator is shown."""
    only, params = ("", ()) if question_id is None else (" AND c.question_id = ?", (question_id,))
    out: dict[tuple[int, int, str], int] = {}
    for item_id, qid, target, annotation_id in store.query(
            "SELECT c.item_id, c.question_id, c.target, c.id FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id WHERE r.name = ?" + only + " ORDER BY c.id",
            (ADJUDICATED, *params)):
        if target.startswith("step:") and target[5:].isdigit():
            target = f"step:{int(target[5:])}"
        out[(item_id, qid, target)] = annotation_id
    return out


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


def _adjudicated_rater(conn) -> int:
    row = conn.execute("SELECT id FROM raters WHERE name = ?", (ADJUDICATED,)).fetchone()
    if row:
        return row[0]
    return conn.execute(
        "INSERT INTO raters (name, kind, role, meta, created_at) VALUES (?, 'reference', 'adjudicated', ?, ?)",
        (ADJUDICATED, to_json({"about": "settled answers from adjudication"}), utcnow()),
    ).lastrowid


def _round_question(store: Store, round_id: int | None, question_key: str | None = None):
    """(ordinal distance that counts as disagreement, question id, codebook, question kind)."""
    if round_id is None:
        row = store.query_one("SELECT 1, id, codebook, kind FROM questions WHERE key = ?",
                              (question_key,))
        if row is None:
            raise AdjudicationError(f"no question {question_key!r}")
        return row
    row = store.query_one(
        "SELECT r.adjudicate_distance, q.id, q.codebook, q.kind FROM review_rounds r"
        " JOIN questions q ON q.key = r.question_key WHERE r.id = ?", (round_id,))
    if row is None:
        raise AdjudicationError(f"no review round {round_id}")
    return row


def _complete_items(store: Store, round_id: int | None, question_id: int,
                    item_id: int | None = None) -> dict[int, list]:
    """Items whose answers are all in, with those answers (newest per reviewer);
    `item_id`: that item only.

    In a round: the round's answers, once as many as it asks for are in.
    Outside rounds (round_id None): every item that two or more clinicians
    answered, with their current answers."""
    only, only_params = ("", ()) if item_id is None else (" AND i.id = ?", (item_id,))
    if round_id is None:
        # Who counts: the people who review, for an agent run or graded conversation
        # (not, say, imported HealthBench physicians), as `_rubric_answers`.
        rows = store.query(
            f"""SELECT c.item_id, 2 AS answers_needed, c.rater_id, r.name, c.status, c.value,
                       c.rationale, c.confidence, c.id AS annotation_id
                FROM current_annotations c JOIN raters r ON r.id = c.rater_id
                JOIN items i ON i.id = c.item_id
                WHERE c.question_id = ? AND r.kind = 'human' AND c.target = ''
                  AND (i.kind NOT IN ({','.join('?' * len(RUBRIC_KINDS))}) OR {people_sql('r')})
                  AND c.status IN ('answered', 'cannot_assess'){only}
                ORDER BY c.item_id, c.id""", (question_id, *RUBRIC_KINDS, *only_params))
        by_item: dict[int, list] = {}
        for r in rows:
            by_item.setdefault(r["item_id"], []).append(r)
        return {i: a for i, a in by_item.items() if len(a) >= 2}
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
    by_item: dict[int, list] = {}
    needed: dict[int, int] = {}
    for r in rows:
        by_item.setdefault(r["item_id"], []).append(r)
        needed[r["item_id"]] = r["answers_needed"]
    return {i: a for i, a in by_item.items() if len(a) >= needed[i]}


def _distance(book, values: list[str | None]) -> int | None:
    if book is None or not book.ordinal or any(v is None for v in values):
        return None
    ranks = [book.rank(v) for v in values]
    return max(ranks) - min(ranks)


def _answered_by(store: Store, rater_id: int) -> set[int]:
    """Items a rater answered anything about: theirs, so someone else adjudicates them."""
    return {r[0] for r in store.query(
        "SELECT DISTINCT item_id FROM annotations WHERE rater_id = ?", (rater_id,))}


ELSEWHERE = "unanimous elsewhere"
"""How `_settled` reports, to another scope, a settlement made on its own in
a round (or outside rounds): it answers to the scope it was made in."""


def _settled(store: Store, question_id: int,
             round_id: int | None = None) -> dict[int, tuple[str | None, str | None]]:
    """item -> (reason, value) of its settled answer in force, seen from the
    scope `round_id` (a round, or None: all clinicians' answers). A
    settlement whose reason is 'unanimous' was made by the tool, not an
    adjudicator: it holds while the answers of the scope it was made in still
    agree (see `_open`, `reopen_broken`); to any other scope it is settled
    (ELSEWHERE): a round counts its own reviewers' answers, whatever others
    answered outside it, and all clinicians' agreement is not undone by a
    round's settlement."""
    return {r[0]: ((ELSEWHERE if r[1] == "unanimous" and r[3] != round_id
                    else REOPENED_ELSEWHERE if r[1] == REOPENED and r[3] != round_id else r[1]), r[2])
            for r in store.query(
                "SELECT c.item_id, json_extract(c.extra, '$.reason'), c.value, c.round_id"
                " FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                " WHERE r.name = ? AND c.question_id = ? AND c.target = ''",
                (ADJUDICATED, question_id))}


def _open(settled: tuple | None, agreed: tuple | None) -> bool:
    """Whether a unit still needs settling: nothing settled yet, a settlement
    withdrawn (REOPENED, see `reopen_broken`), or settled on its own
    ('unanimous') while what its raters agree on has changed since, or while
    they no longer agree (`agreed` None): a later answer can undo an
    agreement, never an adjudicator's ruling."""
    if settled is None or settled[0] in (REOPENED, REOPENED_ELSEWHERE):
        return True
    return settled[0] == "unanimous" and settled[1:] != agreed


REOPENED = "reopened"
"""The reason recorded when a settlement made on its own is withdrawn."""
REOPENED_ELSEWHERE = "reopened elsewhere"
"""How `_settled` reports, to another scope, a settlement withdrawn in one:
nothing is settled, but it was not this scope's agreement that broke."""


def _was_reopened(settled: tuple | None) -> bool:
    return settled is not None and settled[0] == REOPENED


def reopen_broken(store: Store, conn, units) -> int:
    """Withdraw each settlement made on its own ('unanimous') on these units
    (item id, question id, target) that the scope it was made in would no
    longer make, by the rule that made it (`_agreed` over `_complete_items`,
    `_agreed_step` over `_step_marks`): an answer it rests on now differs, or
    too few are left. Inside the caller's transaction: a later answer that
    breaks an agreement leaves the unit without a settled answer (an
    annotation by `adjudicated` with status 'skipped' and reason REOPENED),
    so no screen or export goes on counting the old agreement as the
    reference, and the unit goes to an adjudicator. Settled again on its own
    if the clinicians come to agree once more. An adjudicator's ruling is
    never withdrawn. Returns how many were withdrawn."""
    row = conn.execute("SELECT id FROM raters WHERE name = ?", (ADJUDICATED,)).fetchone()
    if row is None:
        return 0
    rater = row[0]
    withdrawn = 0
    for item_id, question_id, target in dict.fromkeys(units):
        settled = conn.execute(
            "SELECT id, status, value, json_extract(extra, '$.reason'),"
            " json_extract(extra, '$.severity'), round_id FROM annotations WHERE item_id = ?"
            " AND question_id = ? AND rater_id = ? AND target = ? ORDER BY id DESC LIMIT 1",
            (item_id, question_id, rater, target)).fetchone()
        if settled is None or settled[3] != "unanimous" or settled[1] != "answered":
            continue
        if target:
            if not (target.startswith("step:") and target[5:].isdigit()):
                continue
            marks = _step_marks(store, item_id).get((item_id, int(target[5:])))
            held = (settled[2], None if settled[4] is None else int(settled[4]))
            if marks is not None and _agreed_step(marks) == held:
                continue  # `settle_unanimous_steps` would settle it so: it stands
        elif _agreed(_complete_items(store, settled[5], question_id, item_id).get(item_id)) \
                == (settled[2],):
            continue  # the scope it was made in (`settle_unanimous`) would settle it so: it stands
        cur = conn.execute(
            "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value, phase,"
            " source, supersedes_id, extra, created_at, round_id)"
            " VALUES (?,?,?,?, 'skipped', NULL, 'after_reveal', 'adjudication', ?, ?, ?, ?)",
            (item_id, question_id, rater, target, settled[0],
             to_json({"reason": REOPENED, "adjudicator": None, "withdrawn": settled[2]}),
             utcnow(), settled[5]))
        store.audit("system", "reopen_settlement", "annotations", cur.lastrowid,
                    {"value": settled[2], "reason": "unanimous"},
                    {"item_id": item_id, "question_id": question_id, "target": target,
                     "reason": REOPENED})
        withdrawn += 1
    return withdrawn


def settle_unanimous(store: Store, round_id: int | None, actor: str = "system",
                     question_key: str | None = None) -> int:
    """Record the settled answer of every complete item whose reviewers agree."""
    min_distance, question_id, book_key, _ = _round_question(store, round_id, question_key)

    def agreed_items() -> list[tuple[int, str]]:
        done = _settled(store, question_id, round_id)
        out = []
        for item_id, answers in _complete_items(store, round_id, question_id).items():
            if (agreed := _agreed(answers)) is not None and _open(done.get(item_id), agreed):
                out.append((item_id, agreed[0]))
        return out

    if not agreed_items():
        return 0
    with store.transaction() as conn:
        # Again, under the write lock: another page may have settled them, or a
        # clinician changed an answer, since (`reopen_broken` found nothing then).
        agreed = agreed_items()
        if not agreed:
            return 0
        rater = _adjudicated_rater(conn)
        for item_id, value in agreed:
            conn.execute(
                "INSERT INTO annotations (item_id, question_id, rater_id, status, value, phase, source,"
                " extra, created_at, round_id) VALUES (?,?,?, 'answered', ?, 'after_reveal',"
                " 'adjudication', ?, ?, ?)",
                (item_id, question_id, rater, value,
                 to_json({"reason": "unanimous", "adjudicator": None}), utcnow(), round_id),
            )
        store.audit(actor, "settle_unanimous", "annotations", None, None,
                    {"round_id": round_id, "question_id": question_id, "items": len(agreed)})
    return len(agreed)


def adjudication_queue(store: Store, round_id: int | None, adjudicator: Reviewer,
                       show_names: bool = False,
                       question_key: str | None = None) -> list[Disagreement]:
    """Disagreeing, unsettled items of the round (or, with round_id None, of
    a question outside rounds) that this adjudicator did not answer. Only for
    adjudicators and admins: it shows every clinician's answers."""
    _require_adjudicator(adjudicator, "see the disagreements to settle")
    min_distance, question_id, book_key, _ = _round_question(store, round_id, question_key)
    book = builtin_codebooks().get(book_key)
    ids = _settlement_ids(store, question_id)
    done = _settled(store, question_id, round_id)
    own = _answered_by(store, adjudicator.id)
    out = []
    for item_id, answers in _complete_items(store, round_id, question_id).items():
        if not _open(done.get(item_id), None) or item_id in own:
            continue
        values = [a["value"] for a in answers]
        statuses = {a["status"] for a in answers}
        distance = _distance(book, values)
        if statuses == {"answered"} and len(set(values)) == 1:
            continue  # unanimous: settles on its own
        if distance is not None and distance < max(min_distance, 1):
            continue
        uid = store.scalar("SELECT uid FROM items WHERE id = ?", (item_id,))
        machine = store.query(
            "SELECT r.name, c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
            " WHERE c.item_id = ? AND c.question_id = ? AND r.kind = 'machine' AND c.target = ''"
            " ORDER BY r.name", (item_id, question_id))
        out.append(Disagreement(
            round_id, item_id, uid, question_id,
            [RoundAnswer(a["name"] if show_names else f"Reviewer {chr(65 + i)}", a["status"],
                         a["value"], a["rationale"], a["confidence"]) for i, a in enumerate(answers)],
            [(m[0], m[1]) for m in machine], distance, _was_reopened(done.get(item_id)),
            ids.get((item_id, question_id, "")), _answer_ids(answers),
        ))
    return out


def settle(store: Store, round_id: int | None, item_id: int, adjudicator: Reviewer, value: str,
           reason: str, note: str | None = None, question_key: str | None = None, *,
           expected: int | None | _Unruled = UNRULED,
           answers_shown: tuple[int, ...] | None = None) -> int:
    """Record the settled answer for one item, by an adjudicator who answered
    nothing about that item (in any round, to any question).

    `expected`: the settled answer the adjudicator saw (the queue entry's
    `settled_id`); if another was recorded since, nothing is written and the
    error says what. By default (UNRULED) only an adjudicator's ruling in
    force is refused. The same ruling sent twice is recorded once.

    `answers_shown`: the clinicians' answers the adjudicator saw (the queue
    entry's `answer_ids`); if any changed since (one came round, say), nothing
    is written (AnswersChanged). Without it, a caller that passes `expected`
    is refused only once the answers agree; one that passes neither, not."""
    _require_adjudicator(adjudicator, "settle disagreements")
    if reason not in REASONS or reason == "unanimous":
        raise AdjudicationError(f"give a reason: one of {', '.join(r for r in REASONS if r != 'unanimous')}")
    _, question_id, book_key, kind = _round_question(store, round_id, question_key)
    value = normalise_value(book_key, kind, value)
    with store.transaction() as conn:
        answered = conn.execute(  # any question of the item, in any round: their own item
            "SELECT 1 FROM annotations WHERE item_id = ? AND rater_id = ? LIMIT 1",
            (item_id, adjudicator.id)).fetchone()
        if answered:
            raise AdjudicationError("you answered this item, so someone else must adjudicate it")
        unit = "this criterion" if kind == "criterion" else "this item"
        same = _check_unchanged(conn, unit, item_id, question_id, adjudicator, expected,
                                (value, reason, None, note or None))
        if same is not None:
            return same
        now = _complete_items(store, round_id, question_id, item_id).get(item_id, [])
        agreed = _agreed(now)
        book = builtin_codebooks().get(book_key)
        _check_answers(unit, "answers", now, None if agreed is None else _words(agreed[0], book=book),
                       answers_shown, expected, book)
        rater = _adjudicated_rater(conn)
        prev = conn.execute(
            "SELECT id, value FROM annotations WHERE item_id = ? AND question_id = ? AND rater_id = ?"
            " AND target = '' ORDER BY id DESC LIMIT 1", (item_id, question_id, rater)).fetchone()
        cur = conn.execute(
            "INSERT INTO annotations (item_id, question_id, rater_id, status, value, rationale, phase,"
            " source, supersedes_id, extra, created_at, round_id)"
            " VALUES (?,?,?, 'answered', ?, ?, 'after_reveal', 'adjudication', ?, ?, ?, ?)",
            (item_id, question_id, rater, value, note or None, prev[0] if prev else None,
             to_json({"reason": reason, "adjudicator": adjudicator.name}), utcnow(), round_id),
        )
        store.audit(adjudicator.name, "adjudicate", "annotations", cur.lastrowid,
                    {"value": prev[1]} if prev else None,
                    {"round_id": round_id, "item_id": item_id, "value": value, "reason": reason,
                     "note": note})
    return cur.lastrowid


# -- rubric verdicts: agent runs and graded conversations -----------------------


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


def _rubric_answers(store: Store) -> dict[tuple[int, int], list]:
    """(item, question) -> the clinicians' current answers, for rubric items
    that two or more clinicians answered."""
    rows = store.query(
        f"""SELECT c.item_id, c.question_id, c.rater_id, r.name, c.status, c.value, c.rationale,
                   c.confidence, c.id AS annotation_id
            FROM current_annotations c JOIN raters r ON r.id = c.rater_id
            JOIN items i ON i.id = c.item_id
            WHERE {people_sql('r')} AND c.target = '' AND c.status IN ('answered', 'cannot_assess')
              AND i.kind IN ({','.join('?' * len(RUBRIC_KINDS))})
            ORDER BY c.item_id, c.question_id, c.id""", RUBRIC_KINDS)
    out: dict[tuple[int, int], list] = {}
    for r in rows:
        out.setdefault((r["item_id"], r["question_id"]), []).append(r)
    return {k: v for k, v in out.items() if len(v) >= 2}


def _settled_pairs(store: Store) -> dict[tuple[int, int], tuple[str | None, str | None]]:
    """(item, question) -> (reason, value) of the settled verdict in force (see `_settled`)."""
    return {(r[0], r[1]): (r[2], r[3]) for r in store.query(
        "SELECT c.item_id, c.question_id, json_extract(c.extra, '$.reason'), c.value"
        " FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " WHERE r.name = ? AND c.target = ''", (ADJUDICATED,))}


def _agreed(answers: list | None) -> tuple[str | None] | None:
    """The answer two or more clinicians' complete answers agree on (see
    `_complete_items`), or None: what settles a whole item on its own, and
    what a settlement so made rests on."""
    return _agreed_verdict(answers) if answers and len(answers) > 1 else None


def _agreed_verdict(answers: list) -> tuple[str | None] | None:
    if {a["status"] for a in answers} == {"answered"} and len({a["value"] for a in answers}) == 1:
        return (answers[0]["value"],)
    return None


def settle_unanimous_rubric(store: Store, actor: str = "system") -> int:
    """Record the settled verdict of every rubric criterion its clinicians agree on."""
    def agreed_criteria() -> list[tuple[int, int, str | None]]:
        done = _settled_pairs(store)
        return [(item_id, question_id, verdict[0])
                for (item_id, question_id), answers in _rubric_answers(store).items()
                if (verdict := _agreed_verdict(answers)) is not None
                and _open(done.get((item_id, question_id)), verdict)]

    if not agreed_criteria():
        return 0
    with store.transaction() as conn:
        agreed = agreed_criteria()  # again, under the write lock (see `settle_unanimous`)
        if not agreed:
            return 0
        rater = _adjudicated_rater(conn)
        conn.executemany(
            "INSERT INTO annotations (item_id, question_id, rater_id, status, value, phase, source,"
            " extra, created_at) VALUES (?,?,?, 'answered', ?, 'after_reveal', 'adjudication', ?, ?)",
            [(item_id, question_id, rater, value, to_json({"reason": "unanimous", "adjudicator": None}),
              utcnow()) for item_id, question_id, value in agreed])
        store.audit(actor, "settle_unanimous", "annotations", None, None,
                    {"rubric": True, "criteria": len(agreed)})
    return len(agreed)


def rubric_queue(store: Store, adjudicator: Reviewer, show_names: bool = False) -> list[ItemDisputes]:
    """Agent runs and graded conversations on which clinicians' verdicts on a
    criterion differ and nothing is settled yet, item by item. An item the
    adjudicator answered any criterion of is left to someone else. Only for
    adjudicators and admins: it shows every clinician's answers."""
    _require_adjudicator(adjudicator, "see the disagreements to settle")
    ids = _settlement_ids(store)
    done = _settled_pairs(store)
    own = _answered_by(store, adjudicator.id)
    by_item: dict[int, list[tuple[int, list]]] = {}
    for (item_id, question_id), answers in _rubric_answers(store).items():
        if not _open(done.get((item_id, question_id)), None) or item_id in own:
            continue
        if _agreed_verdict(answers) is not None:
            continue  # unanimous: settles on its own
        by_item.setdefault(item_id, []).append((question_id, answers))
    out = []
    for item_id, pairs in by_item.items():
        item = store.query_one("SELECT uid, kind FROM items WHERE id = ?", (item_id,))
        raters = dict.fromkeys(a["rater_id"] for _, answers in pairs for a in answers)
        names = {rid: f"Reviewer {chr(65 + i)}" for i, rid in enumerate(raters)}  # one letter per item
        disputes = []
        for question_id, answers in pairs:
            q = store.query_one("SELECT key, text, codebook, kind FROM questions WHERE id = ?",
                                (question_id,))
            machine = store.query(
                "SELECT r.name, c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
                " WHERE c.item_id = ? AND c.question_id = ? AND r.kind IN ('machine', 'reference')"
                " AND r.name != ? AND c.target = '' ORDER BY r.kind, r.name",
                (item_id, question_id, ADJUDICATED))
            disputes.append(CriterionDispute(
                question_id, q["key"], q["text"], q["codebook"], q["kind"],
                [RoundAnswer(a["name"] if show_names else names[a["rater_id"]], a["status"], a["value"],
                             a["rationale"], a["confidence"]) for a in answers],
                [(m[0], m[1]) for m in machine], _was_reopened(done.get((item_id, question_id))),
                ids.get((item_id, question_id, "")), _answer_ids(answers)))
        out.append(ItemDisputes(item_id, item["uid"], item["kind"], disputes))
    return out


# -- step marks: where in an agent run things went wrong -------------------------


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


SEVERITY_SPREAD = 1
"""Marks naming the same error whose severities lie further apart than this
are a disagreement for an adjudicator (critical against negligible is not an
agreement); within it they settle on their own."""


def _step_marks(store: Store, item_id: int | None = None) -> dict[tuple[int, int], list]:
    """(run, step id) -> the clinicians' marks in force (one per clinician),
    where two or more clinicians marked that step (`item_id`: of that run
    only). Only explicit marks count: a reviewer who left a step unmarked
    said nothing about it."""
    from codebook import STEP_ERROR_QUESTION

    only, only_params = ("", ()) if item_id is None else (" AND c.item_id = ?", (item_id,))
    rows = store.query(
        f"""SELECT c.item_id, c.target, c.rater_id, r.name, c.status, c.value, c.rationale,
                   json_extract(c.extra, '$.severity') AS severity, c.id AS annotation_id
            FROM current_annotations c JOIN raters r ON r.id = c.rater_id
            JOIN questions q ON q.id = c.question_id
            WHERE q.key = ? AND {people_sql('r')} AND c.target GLOB 'step:[0-9]*'
              AND c.status IN ('answered', 'cannot_assess'){only}
            ORDER BY c.item_id, c.id""", (STEP_ERROR_QUESTION, *only_params))
    out: dict[tuple[int, int], dict[int, object]] = {}
    for r in rows:
        step = r["target"].removeprefix("step:")
        if step.isdigit():  # `step:03` and `step:3` (databases from before targets were one
            # spelling) are one step: the clinician's newer mark is the one in force
            out.setdefault((r["item_id"], int(step)), {})[r["rater_id"]] = r
    return {k: list(v.values()) for k, v in out.items() if len(v) >= 2}


def _severity(mark) -> int | None:
    try:
        return None if mark["severity"] is None else int(mark["severity"])
    except (TypeError, ValueError):
        return None


def _agreed_step(marks: list) -> tuple[str, int | None] | None:
    """The settled mark when every clinician names the same error: that error
    and, for an error, the higher middle of their severities (severity is
    ordinal; between two neighbours the graver is kept), provided they lie
    within SEVERITY_SPREAD of each other. None: a disagreement."""
    if any(m["status"] != "answered" for m in marks) or len({m["value"] for m in marks}) != 1:
        return None
    error = marks[0]["value"]
    if error == "no_error":
        return error, None
    severities = sorted(s for m in marks if (s := _severity(m)) is not None)
    if severities and severities[-1] - severities[0] > SEVERITY_SPREAD:
        return None
    return error, severities[len(severities) // 2] if severities else None


def _settled_steps(store: Store) -> dict[tuple[int, int], tuple[str | None, str | None, int | None]]:
    """(run, step id) -> (reason, error, severity) of the settled mark in force (see `_settled`)."""
    from codebook import STEP_ERROR_QUESTION

    out = {}
    for r in store.query(
            "SELECT c.item_id, c.target, json_extract(c.extra, '$.reason'), c.value,"
            " json_extract(c.extra, '$.severity') FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id"
            " WHERE r.name = ? AND q.key = ? AND c.target GLOB 'step:[0-9]*' ORDER BY c.id",
            (ADJUDICATED, STEP_ERROR_QUESTION)):
        out[(r[0], int(r[1].removeprefix("step:")))] = (r[2], r[3], None if r[4] is None else int(r[4]))
    return out


def _insert_step(conn, item_id: int, step_id: int, error: str, severity: int | None,
                 note: str | None, extra: dict) -> tuple[int, tuple | None]:
    """Write a settled mark; returns its id and the settled mark it replaces, if any."""
    from codebook import STEP_ERROR_QUESTION

    question_id = conn.execute("SELECT id FROM questions WHERE key = ?",
                               (STEP_ERROR_QUESTION,)).fetchone()[0]
    rater = _adjudicated_rater(conn)
    target = f"step:{step_id}"
    prev = conn.execute(
        "SELECT id, value, json_extract(extra, '$.severity'), json_extract(extra, '$.reason')"
        " FROM annotations WHERE item_id = ? AND question_id = ? AND rater_id = ?"
        " AND target = ? ORDER BY id DESC LIMIT 1", (item_id, question_id, rater, target)).fetchone()
    annotation_id = conn.execute(
        "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value, rationale,"
        " phase, source, supersedes_id, extra, created_at)"
        " VALUES (?,?,?,?, 'answered', ?, ?, 'after_reveal', 'adjudication', ?, ?, ?)",
        (item_id, question_id, rater, target, error, note or None, prev[0] if prev else None,
         to_json({**extra, **({"severity": severity} if severity is not None else {})}), utcnow()),
    ).lastrowid
    return annotation_id, (tuple(prev[1:]) if prev else None)


def settle_unanimous_steps(store: Store, actor: str = "system") -> int:
    """Record the settled mark of every step its clinicians mark alike (see
    `_agreed_step`); one settled this way is settled again, or reopened for an
    adjudicator, when a clinician's later mark changes the agreement."""
    def agreed_steps() -> list[tuple[tuple[int, int], tuple[str, int | None]]]:
        done = _settled_steps(store)
        return [(key, mark) for key, marks in _step_marks(store).items()
                if (mark := _agreed_step(marks)) is not None and _open(done.get(key), mark)]

    if not agreed_steps():
        return 0
    with store.transaction() as conn:
        agreed = agreed_steps()  # again, under the write lock (see `settle_unanimous`)
        for (item_id, step_id), (error, severity) in agreed:
            _insert_step(conn, item_id, step_id, error, severity, None,
                         {"reason": "unanimous", "adjudicator": None})
        if agreed:
            store.audit(actor, "settle_unanimous", "annotations", None, None,
                        {"step_marks": len(agreed)})
    return len(agreed)


def step_queue(store: Store, adjudicator: Reviewer, show_names: bool = False) -> list[RunStepDisputes]:
    """Agent runs with steps clinicians marked differently (another error, a
    severity far apart, or 'cannot assess'), not settled by an adjudicator,
    run by run, steps in order. A run the adjudicator answered anything about
    is left to someone else. Only for adjudicators and admins: it shows every
    clinician's marks."""
    from codebook import STEP_ERROR_QUESTION

    _require_adjudicator(adjudicator, "see the disagreements to settle")
    step_question = store.scalar("SELECT id FROM questions WHERE key = ?", (STEP_ERROR_QUESTION,))
    ids = _settlement_ids(store, step_question)
    done = _settled_steps(store)
    own = _answered_by(store, adjudicator.id)
    by_run: dict[int, list[tuple[int, list]]] = {}
    for (item_id, step_id), marks in sorted(_step_marks(store).items()):
        if item_id in own or _agreed_step(marks) is not None \
                or not _open(done.get((item_id, step_id)), None):
            continue
        by_run.setdefault(item_id, []).append((step_id, marks))
    out = []
    for item_id, steps in by_run.items():
        raters = dict.fromkeys(m["rater_id"] for _, marks in steps for m in marks)
        names = {rid: f"Reviewer {chr(65 + i)}" for i, rid in enumerate(raters)}  # one letter per run
        out.append(RunStepDisputes(
            item_id, store.scalar("SELECT uid FROM items WHERE id = ?", (item_id,)),
            [StepDispute(step_id, [
                StepAnswer(m["name"] if show_names else names[m["rater_id"]],
                           m["value"] if m["status"] == "answered" else None,
                           _severity(m) if m["value"] != "no_error" else None, m["rationale"])
                for m in marks], _was_reopened(done.get((item_id, step_id))),
                ids.get((item_id, step_question, f"step:{step_id}")), _answer_ids(marks))
             for step_id, marks in steps]))
    return out


def settle_step(store: Store, item_id: int, step_id: int, adjudicator: Reviewer, error: str,
                severity: int | None, reason: str, note: str | None = None, *,
                expected: int | None | _Unruled = UNRULED,
                answers_shown: tuple[int, ...] | None = None) -> int:
    """Record the settled mark of one step of a run: an error of the
    trajectory-errors codebook with a severity 1-5, or `no_error`; by an
    adjudicator who answered nothing about the run. A settled mark it
    replaces is named in the audit trail. `expected` and `answers_shown`:
    the settled mark and the clinicians' marks the adjudicator saw (the queue
    entry's `settled_id` and `answer_ids`), as in `settle`."""
    from codebook import NO_ERROR, STEP_CODEBOOK, STEP_ERROR_QUESTION
    from review.reviewing.criteria import step_count

    _require_adjudicator(adjudicator, "settle disagreements")
    if reason not in REASONS or reason == "unanimous":
        raise AdjudicationError(f"give a reason: one of {', '.join(r for r in REASONS if r != 'unanimous')}")
    if not 1 <= int(step_id) <= step_count(store, item_id):
        raise AdjudicationError(f"this run has no step {step_id}")
    error = builtin_codebooks()[STEP_CODEBOOK].normalise(error)
    if error == NO_ERROR:
        severity = None
    elif severity is None or not 1 <= int(severity) <= 5:
        raise AdjudicationError("choose a severity from 1 (negligible) to 5 (critical)")
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM annotations WHERE item_id = ? AND rater_id = ? LIMIT 1",
                        (item_id, adjudicator.id)).fetchone():
            raise AdjudicationError("you answered this run, so someone else must adjudicate it")
        question_id = conn.execute("SELECT id FROM questions WHERE key = ?",
                                   (STEP_ERROR_QUESTION,)).fetchone()[0]
        unit = f"step {int(step_id)} of this run"
        same = _check_unchanged(conn, unit, item_id, question_id, adjudicator, expected,
                                (error, reason, None if severity is None else int(severity),
                                 note or None),
                                step=int(step_id))
        if same is not None:
            return same
        now = _step_marks(store, item_id).get((item_id, int(step_id)), [])
        agreed = _agreed_step(now)
        book = builtin_codebooks()[STEP_CODEBOOK]
        _check_answers(unit, "marks", now, None if agreed is None else _words(*agreed, book=book),
                       answers_shown, expected, book)
        annotation_id, prev = _insert_step(conn, item_id, int(step_id), error,
                                           None if severity is None else int(severity), note,
                                           {"reason": reason, "adjudicator": adjudicator.name})
        store.audit(adjudicator.name, "adjudicate", "annotations", annotation_id,
                    None if prev is None else {"value": prev[0], "severity": prev[1], "reason": prev[2]},
                    {"item_id": item_id, "step": int(step_id), "value": error,
                     "severity": severity, "reason": reason, "note": note})
    return annotation_id
