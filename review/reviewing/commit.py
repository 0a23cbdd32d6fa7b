"""Committing an answer: the one path every answer takes.

A clinician's label, rubric verdict, "cannot assess", skip and step mark, an
adjudicator's ruling, a settlement made on its own where clinicians agree and
the withdrawal of one a later answer breaks are all annotations about an
item, written by `write_answers` and nowhere else (importers aside, which
write through the store's writer). Inside one transaction it validates each
answer against the codebook, claims the reviewer's place in their review
round, writes the answer through the store, reopens a settlement the answer
breaks, marks the review complete, clears the draft and writes the audit
trail.

The actions that open that transaction:
- a clinician's: `commit_answers` (a batch about one item, all or nothing),
  `commit_answer` (one), `skip_item`, `commit_verdicts` (a rubric's
  criteria, as a screen hands them over) and `mark_step` (one step of an
  agent run);
- adjudication's (`review.team.adjudication`): a ruling and the settlements
  made on their own, through `write_answers` inside their own transaction
  after their refusal checks;
- `reopen_broken`, for importers that write clinicians' answers themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from codebook import CANNOT_ASSESS, NO_ERROR, RUBRIC_KINDS, STATUSES, codebook_in_force
from review.reviewing.answers import normalise_value
from review.reviewing.blinding import (
    DEFAULT_MODE,
    REVEAL_AFTER_COMMIT,
    WITHDRAWN,
    WITHDRAWN_REASON,
    labels_opened,
    labels_visible,
    later_rounds_owed,
    not_withdrawn,
    own_answer_revealed,
    phase_for_commit,
    reveal_cutoff,
    reveal_wait,
)
from review.reviewing.criteria import (
    is_reviewed,
    item_questions,
    step_codebook,
    step_count,
    step_question_id,
)
from review.reviewing.drafts import clear_draft
from review.reviewing.presses import Press, check_press
from review.team.access import require_role
from review.team.reviewers import Reviewer
from review.team.rounds import WITHDRAWAL, claim_answer_slot, complete_review
from review.team.settlements import (
    ADJUDICATED,
    REOPENED,
    adjudicated_rater,
    broken_settlements,
)
from store import Store, from_json, to_json, utcnow


@dataclass(frozen=True)
class AnswerSpec:
    """One answer of a batch about one item (one criterion, one step mark)."""

    question_id: int
    value: str | None
    status: str = "answered"
    rationale: str | None = None
    """The clinician's reason; an adjudicator's note."""
    confidence: int | None = None
    target: str = ""
    """'' for the whole item, 'step:<step_id>' for one step of a trajectory."""
    extra: dict[str, Any] | None = None
    labels_seen: bool = False
    """Given with the machine and reference labels already seen (a draft made
    under a 'suggest' round or after a reveal): recorded after the reveal."""


@dataclass(frozen=True)
class Clinician:
    """A reviewer answering, and how: what the answers record of their provenance."""

    reviewer: Reviewer
    mode: str = DEFAULT_MODE
    """The blinding the answers are given under (`review.reviewing.blinding`)."""
    round_id: int | None = None
    """The review round the answers are given in, if any: its place is claimed."""
    seconds_on_task: float | None = None
    source: str = "app"


@dataclass(frozen=True)
class Settler:
    """Who settles a unit: an adjudicator's ruling, or the tool (an agreement
    settled on its own, a settlement withdrawn). The answers are written as
    the reference rater `adjudicated`'s."""

    reason: str
    """Why: a reason of `review.team.adjudication.REASONS`, 'unanimous' or 'reopened'."""
    adjudicator: str | None = None
    """The adjudicator's name; None when the tool settles."""
    round_id: int | None = None
    """The scope the settlement answers to: a review round, or None (all clinicians)."""
    actor: str = "system"
    """Who the audit trail names."""


def commit_answer(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                  value: str | None, *, status: str = "answered", rationale: str | None = None,
                  confidence: int | None = None, seconds_on_task: float | None = None,
                  mode: str = DEFAULT_MODE, target: str = "",
                  extra: dict[str, Any] | None = None, source: str = "app",
                  round_id: int | None = None, press: Press | None = None) -> int:
    """Record one answer as one transaction and return its annotation id.

    A second answer to the same question is a new row that supersedes the
    first; it is recorded as 'after_reveal' when the labels were visible to
    the reviewer before they answered again. Within a review round the
    round's answer limit is checked in the same transaction (see
    `review.team.rounds.claim_answer_slot`), so an item never counts more answers
    in the round than it asks for, however many reviewers commit at once; an
    answer that comes after its places were taken is kept outside the round
    (`review.team.rounds.late_for_round` tells the caller).

    `press`: the key or click that gave the answer on a screen, as the server
    saw it; one that does not count (`review.reviewing.presses`: pressed on
    what the screen no longer shows, or too soon after it was drawn) raises
    `TooSoon` and writes nothing."""
    answer = AnswerSpec(question_id, value, status, rationale, confidence, target, extra)
    return commit_answers(store, reviewer, item_id, [answer], seconds_on_task=seconds_on_task,
                          mode=mode, source=source, round_id=round_id, press=press)[0]


def commit_answers(store: Store, reviewer: Reviewer, item_id: int, answers: list[AnswerSpec], *,
                   seconds_on_task: float | None = None, mode: str = DEFAULT_MODE,
                   source: str = "app", round_id: int | None = None,
                   press: Press | None = None) -> list[int]:
    """Record several answers about one item (a rubric's criteria) as one
    transaction: all are written, or none is. Each follows `commit_answer`'s
    rules (`press` included); returns the annotation ids in the order given."""
    check_press(press)
    _check(answers)
    with store.transaction() as conn:
        return write_answers(store, conn, Clinician(reviewer, mode, round_id, seconds_on_task,
                                                    source), item_id, answers)


def _check(answers: list[AnswerSpec]) -> None:
    for answer in answers:
        if answer.status not in STATUSES:
            raise ValueError(f"unknown status {answer.status!r}")
        if answer.confidence is not None and not 1 <= int(answer.confidence) <= 5:
            raise ValueError("confidence must be 1 to 5")


def write_answers(store: Store, conn: Any, author: Clinician | Settler, item_id: int,
                  answers: list[AnswerSpec]) -> list[int]:
    """Write answers about one item inside the caller's transaction
    (`Store.transaction`): the one place an answer is written. Returns the
    annotation ids in the order given.

    Each answer is checked (its status and confidence) and its value
    normalised against the question's codebook (ValueError says what is
    allowed), then written as a new row that supersedes the author's last on
    the unit, and audited. A clinician's batch first claims their place in
    their review round (decided once for the whole batch: all of it counts in
    the round, or all of it is kept outside and says so, `late_for_round`);
    then a settlement made on its own that the answers break is withdrawn
    (`reopen_broken`), the review is marked complete in the round once it is
    (`complete_review`), and each answer's draft is cleared. The same answer
    again (a double click) writes nothing and returns the answer in force."""
    if isinstance(author, Clinician):
        require_role(author.reviewer, "review")
    _check(answers)
    late = None
    round_id = author.round_id
    clinician = isinstance(author, Clinician)
    if clinician and round_id is not None and not claim_answer_slot(
            conn, round_id, item_id, author.reviewer.id,
            [WITHDRAWAL if (a.extra or {}).get(WITHDRAWN) else a.status
             for a in answers if a.target == ""]):
        late, round_id = round_id, None
    ids = [_write(store, conn, author, item_id, answer, round_id, late) for answer in answers]
    if clinician:
        # An answer that breaks an agreement which settled on its own withdraws that settlement.
        reopen_broken(store, conn, [(item_id, a.question_id, a.target) for a in answers])
        # Step marks alone complete a review only of a run that asks nothing as a whole
        # (`_review_complete` -> `is_reviewed`); anything else needs its whole-item answers.
        if round_id is not None and _review_complete(store, conn, author.reviewer, item_id,
                                                     answers):
            if complete_review(conn, round_id, item_id, author.reviewer.id):
                store.audit(author.reviewer.name, "complete_review", "round_reviews", None, None,
                            {"round_id": round_id, "item_id": item_id})
    return ids


def reopen_broken(store: Store, conn: Any, units: Iterable[tuple[int, int, str]]) -> int:
    """Withdraw each settlement made on its own ('unanimous') on these units
    (item id, question id, target) that the scope it was made in would no
    longer make (`review.team.settlements.broken_settlements`). Inside the
    caller's transaction: a later answer that breaks an agreement leaves the
    unit without a settled answer (an annotation by `adjudicated` with status
    'skipped' and reason REOPENED), so no screen or export goes on counting
    the old agreement as the reference, and the unit goes to an adjudicator.
    Settled again on its own if the clinicians come to agree once more. An
    adjudicator's ruling is never withdrawn. Returns how many were withdrawn."""
    broken = broken_settlements(store, units)
    for settled in broken:
        write_answers(store, conn, Settler(REOPENED, None, settled.round_id), settled.unit.item_id,
                      [AnswerSpec(settled.unit.question_id, None, "skipped",
                                  target=settled.unit.target, extra={"withdrawn": settled.value})])
    return len(broken)


def _review_complete(store: Store, conn: Any, reviewer: Reviewer, item_id: int,
                     answers: list[AnswerSpec]) -> bool:
    """Whether, with these answers, the reviewer's review of the item is complete:
    an agent run or graded conversation once every criterion has an answer;
    any other item with one counted answer about the whole item."""
    kind = conn.execute("SELECT kind FROM items WHERE id = ?", (item_id,)).fetchone()["kind"]
    if kind in RUBRIC_KINDS:
        return is_reviewed(store, reviewer.id, item_id)
    return any(a.target == "" and a.status in ("answered", CANNOT_ASSESS) for a in answers)


def _same_answer(prev: Any, status: str, value: str | None, rationale: str | None,
                 confidence: int | None, round_id: int | None,
                 extra: dict[str, Any] | None) -> bool:
    """Whether an answer repeats the reviewer's answer in force word for word,
    in the same round (its provenance aside)."""
    kept = {k: v for k, v in from_json(prev["extra"] or "{}").items() if k != "blinding"}
    return (prev["status"], prev["value"], prev["rationale"] or None, prev["confidence"],
            prev["round_id"]) == (status, value, rationale or None, confidence, round_id) \
        and kept == (extra or {})


def _kind(conn: Any, item_id: int) -> str | None:
    row = conn.execute("SELECT kind FROM items WHERE id = ?", (item_id,)).fetchone()
    return row["kind"] if row else None


def _labels_seen_before(store: Store, conn: Any, reviewer: Reviewer, item_id: int,
                        question_id: int, target: str, own_reveals: bool = True) -> bool:
    """Whether this reviewer has seen the item's labels before this answer,
    whatever answer is in force now: an earlier answer of theirs was given
    where the labels are shown once it is committed (or up front) - on this
    item, or on another run of the same task, whose reveal shows the task's
    expected verdict too; they settled the item as its adjudicator; or they
    chose to see every rater's labels (Browse, Agreement) while the item was
    there. A step mark is revealed nothing on the review screens: only the
    last two count for it (a corrected mark is not an answer after a reveal).
    `own_reveals` False: the reviewer's earlier answers revealed nothing (a
    round whose case's later rounds they still owe: `later_rounds_owed`)."""
    if own_reveals and not target and conn.execute(
        "SELECT 1 FROM annotations a WHERE a.question_id = ?1 AND a.rater_id = ?2"
        " AND a.target = '' AND a.status != 'skipped'"
        " AND coalesce(json_extract(a.extra, '$.blinding'), '') != 'blind'"
        " AND a.created_at <= ?4"  # its reveal was due (the undo window had passed)
        " AND " + not_withdrawn("a") +  # and it was not withdrawn within it (Z)
        " AND (a.item_id = ?3 OR a.item_id IN (SELECT s.id FROM items s JOIN items i"
        " ON i.parent_id = s.parent_id WHERE i.id = ?3 AND i.kind = 'trajectory'"
        " AND s.kind = 'trajectory')) LIMIT 1",
        (question_id, reviewer.id, item_id, reveal_cutoff(_kind(conn, item_id)))).fetchone():
        return True
    if conn.execute(
        "SELECT 1 FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE a.item_id = ?"
        " AND r.name = ? AND json_extract(a.extra, '$.adjudicator') = ? LIMIT 1",
        (item_id, ADJUDICATED, reviewer.name)).fetchone():
        return True
    opened = labels_opened(store, reviewer.id)
    if opened is None:
        return False
    row = conn.execute("SELECT id, coalesce(import_id, 0) AS import_id FROM items WHERE id = ?",
                       (item_id,)).fetchone()
    return row is not None and row["id"] <= opened[0] and row["import_id"] <= opened[1] \
        and question_id <= opened[2]


def _write(store: Store, conn: Any, author: Clinician | Settler, item_id: int,
           answer: AnswerSpec, round_id: int | None, late: int | None) -> int:
    """Write one answer (see `write_answers`). `round_id`: the round it counts
    in; `late`: the round it was given in and is kept outside of (its places
    were taken meanwhile, see `claim_answer_slot`), which its provenance names."""
    question_id, status, target = answer.question_id, answer.status, answer.target
    rationale, confidence = answer.rationale or None, answer.confidence
    q = conn.execute("SELECT codebook, kind FROM questions WHERE id = ?",
                     (question_id,)).fetchone()
    if q is None:
        raise ValueError(f"no question {question_id}")
    book = codebook_in_force(conn, q["codebook"])
    value = normalise_value(q["codebook"], q["kind"], answer.value,
                            {book.key: book} if book is not None else {}) \
        if status == "answered" else None
    clinician = isinstance(author, Clinician)
    if clinician and status == "answered" and book is not None and book.rationale_required \
            and not rationale:
        raise ValueError(f"{book.title} asks for a rationale with every answer: say why, "
                         "then answer")
    rater_id = author.reviewer.id if clinician else adjudicated_rater(conn)
    prev = conn.execute(
        "SELECT id, status, value, rationale, confidence, round_id, extra FROM annotations"
        " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target = ?"
        " ORDER BY id DESC LIMIT 1",
        (item_id, question_id, rater_id, target),
    ).fetchone()
    if clinician:
        if prev is not None and _same_answer(prev, status, value, rationale, confidence, round_id,
                                             answer.extra):
            return prev["id"]  # the same answer again (a double click): nothing new to record
        reviewer, mode = author.reviewer, author.mode
        # A CARE-Bench round whose case's later rounds still wait for this reviewer
        # has had nothing revealed by their earlier answers (`later_rounds_owed`).
        held = not target and mode == REVEAL_AFTER_COMMIT \
            and bool(later_rounds_owed(store, reviewer.id, item_id))
        # My earlier answer revealed the labels once its undo window had passed
        # (`own_answer_revealed`): a mis-key corrected within it is still blind.
        seen = answer.labels_seen or (not target and not held and prev is not None
                                      and prev["status"] != "skipped"
                                      and labels_visible(mode, True)
                                      and own_answer_revealed(store, reviewer.id, item_id,
                                                              question_id, _kind(conn, item_id))) \
            or _labels_seen_before(store, conn, reviewer, item_id, question_id, target,
                                   own_reveals=not held)
        # The version in force, which the reviewer was shown: recorded with the answer.
        phase, codebook_version = phase_for_commit(mode, seen), book.version if book else None
        seconds, source, actor = author.seconds_on_task, author.source, reviewer.name
        extra = {"blinding": mode, **(answer.extra or {}),
                 **({"late_for_round": late} if late else {})}
        action = {"skipped": "skip"}.get(status, "revise" if prev else "answer")
    else:
        # A settled answer is made of clinicians' answers, each recording its own
        # provenance (blinding, codebook version); it records why and by whom.
        phase, codebook_version, seconds, source = "after_reveal", None, None, "adjudication"
        actor = author.actor
        extra = {"reason": author.reason, "adjudicator": author.adjudicator,
                 **(answer.extra or {})}
        action = ("withdraw_settlement" if (answer.extra or {}).get(WITHDRAWN) else
                  "adjudicate" if author.adjudicator else
                  "reopen_settlement" if author.reason == REOPENED else "settle_unanimous")
    cur = conn.execute(
        "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value,"
        " rationale, confidence, phase, codebook_version, seconds_on_task, supersedes_id,"
        " source, extra, created_at, round_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (item_id, question_id, rater_id, target, status, value, rationale, confidence, phase,
         codebook_version, seconds, prev["id"] if prev else None, source, to_json(extra),
         utcnow(), round_id),
    )
    if clinician:
        clear_draft(conn, author.reviewer.id, item_id, question_id, target)
    store.audit(
        actor, action, "annotations", cur.lastrowid,
        None if prev is None else {
            "status": prev["status"], "value": prev["value"], "rationale": prev["rationale"],
            "confidence": prev["confidence"],
            **{k: v for k, v in from_json(prev["extra"] or "{}").items()
               if k in ("reason", "severity")}},
        {"item_id": item_id, "question_id": question_id, "target": target, "status": status,
         "value": value, "rationale": rationale, "confidence": confidence, "round_id": round_id,
         **{k: v for k, v in extra.items() if k != "blinding"}},
    )
    return cur.lastrowid


def skip_item(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
              reason: str, **kw: Any) -> int:
    """Pass over an item, with the reason; it leaves the reviewer's queue."""
    if not reason.strip():
        raise ValueError("say why you skip this item")
    return commit_answer(store, reviewer, item_id, question_id, None, status="skipped",
                         rationale=reason.strip(), **kw)


def withdraw_before_reveal(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                           *, mode: str = DEFAULT_MODE, round_id: int | None = None) -> int | None:
    """Undo (Z) within the undo window: the reviewer's answer in force is
    withdrawn before its labels were shown. The withdrawal is a new answer
    (status skipped, `WITHDRAWN_REASON`) that supersedes it and names it
    (`WITHDRAWN` in its extra); the answer stays in the record and counts for
    no reveal, so a new answer after it is still blind. Returns the
    withdrawal's id, or None when there is nothing to withdraw before a reveal:
    no answer in force, or its labels are due already (a change is then an
    answer after the reveal, as ever)."""
    with store.transaction() as conn:
        prev = conn.execute(
            "SELECT id, status FROM annotations WHERE item_id = ? AND question_id = ?"
            " AND rater_id = ? AND target = '' ORDER BY id DESC LIMIT 1",
            (item_id, question_id, reviewer.id)).fetchone()
        if prev is None or prev["status"] == "skipped":
            return None
        if reveal_wait(store, reviewer.id, item_id, question_id, _kind(conn, item_id), mode) <= 0:
            return None
        return withdraw(store, conn, Clinician(reviewer, mode, round_id, None, "app"), item_id,
                        question_id, "", prev["id"], WITHDRAWN_REASON)


def withdraw(store: Store, conn: Any, author: Clinician | Settler, item_id: int,
             question_id: int, target: str, withdrawn_id: int, reason: str) -> int:
    """Inside the caller's transaction, after its checks: withdraw the
    author's answer `withdrawn_id` on the unit (a clinician's answer within its
    undo window, `withdraw_before_reveal`; an adjudicator's settlement within
    it, `review.team.adjudication.take_back`). The withdrawal is a new answer,
    status skipped with the `reason`, that supersedes the answer and names it
    (`WITHDRAWN` in its extra): the answer stays in the record, in force no
    more. Returns the withdrawal's id."""
    return write_answers(store, conn, author, item_id,
                         [AnswerSpec(question_id, None, "skipped", reason, target=target,
                                     extra={WITHDRAWN: withdrawn_id})])[0]


def is_withdrawal(store: Store, annotation_id: int) -> bool:
    """Whether this answer is a withdrawal before the reveal (`withdraw_before_reveal`)."""
    return store.scalar(
        f"SELECT json_extract(extra, '$.{WITHDRAWN}') IS NOT NULL FROM annotations WHERE id = ?",
        (annotation_id,)) == 1


@dataclass(frozen=True)
class Verdict:
    """A reviewer's draft answer to one question, as the screen hands it over."""

    question_id: int
    choice: str
    """A label code, 'met' / 'not_met', or 'cannot_assess'."""
    rationale: str | None = None
    labels_seen: bool = False
    """Picked with the machine and reference labels on screen (its draft says so)."""


def commit_verdicts(store: Store, reviewer: Reviewer, item_id: int, verdicts: Iterable[Verdict],
                    *, mode: str = DEFAULT_MODE, seconds_on_task: float | None = None,
                    round_id: int | None = None, press: Press | None = None) -> list[int]:
    """Record a batch of answers about one item as one transaction, and return
    their annotation ids. Only questions the item asks are accepted; a bad
    value anywhere rejects the whole batch. In a review round (`round_id`),
    the batch takes the reviewer's place on the item; if the item already
    has all the reviewers the round asks for, the whole batch is kept outside
    the round (`review.team.rounds.late_for_round`). `press`: as for
    `commit_answer`."""
    check_press(press)
    asked = {q.id for q in item_questions(store, item_id)}
    answers = []
    for v in verdicts:
        if v.question_id not in asked:
            raise ValueError(f"question {v.question_id} is not asked of this item")
        rationale = (v.rationale or "").strip() or None
        if v.choice == CANNOT_ASSESS:
            answers.append(AnswerSpec(v.question_id, None, "cannot_assess", rationale,
                                      labels_seen=v.labels_seen))
        else:
            answers.append(AnswerSpec(v.question_id, v.choice, "answered", rationale,
                                      labels_seen=v.labels_seen))
    if not answers:
        raise ValueError("nothing to commit: answer at least one question")
    return commit_answers(store, reviewer, item_id, answers, mode=mode,
                          seconds_on_task=seconds_on_task, round_id=round_id, press=press)


def mark_step(store: Store, reviewer: Reviewer, item_id: int, step_id: int, error: str,
              severity: int | None = None, note: str | None = None, *,
              mode: str = DEFAULT_MODE, seconds_on_task: float | None = None,
              round_id: int | None = None, press: Press | None = None) -> int:
    """Mark one step of a trajectory with an error type and a severity (1-5),
    or record it as checked with `no_error` (no severity). One transaction;
    a new mark on the same step supersedes the old one. `press`: as for
    `commit_answer`."""
    check_press(press)
    qid = step_question_id(store)
    if qid is None:
        raise ValueError("the trajectory-errors codebook is not loaded")
    if not 1 <= int(step_id) <= step_count(store, item_id):
        raise ValueError(f"this run has no step {step_id}")
    book = step_codebook(store)
    error = book.normalise(error)
    if error == NO_ERROR:
        severity = None
    elif severity is None or not 1 <= int(severity) <= 5:
        raise ValueError("choose a severity from 1 (negligible) to 5 (critical)")
    extra = {"severity": int(severity)} if severity is not None else {}
    answer = AnswerSpec(qid, error, "answered", (note or "").strip() or None,
                        target=f"step:{int(step_id)}", extra=extra)
    return commit_answers(store, reviewer, item_id, [answer], mode=mode,
                          seconds_on_task=seconds_on_task, round_id=round_id, press=press)[0]

