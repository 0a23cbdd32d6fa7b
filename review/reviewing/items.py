"""What a reviewer sees of an item, and what they do with it.

Display models (`ItemView`) for prefixes and responses, the actions
(`commit_answer`, `commit_answers` for a batch in one transaction, `skip_item`,
`flag_item`) and `reveal_reference_labels`,
which asks the blinding rule before showing any machine or reference label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from codebook import Codebook, builtin_codebooks
from review.reviewing.answers import normalise_value
from review.reviewing.blinding import (
    BLIND,
    DEFAULT_MODE,
    REVEAL_AFTER_COMMIT,
    labels_visible,
    phase_for_commit,
)
from review.reviewing.drafts import clear_draft
from review.team.reviewers import Reviewer
from store import Store, from_json, to_json, utcnow


@dataclass
class Round:
    number: int
    patient_text: str


@dataclass
class ItemView:
    id: int
    uid: str
    kind: str
    dataset: str
    split: str | None
    case_id: str | None
    round_id: int | None
    model: str | None
    failed: bool
    rounds: list[Round]
    """The patient's turns so far, one per round."""
    response: str | None = None
    error: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    question_id: int | None = None
    question_key: str | None = None
    question_text: str | None = None
    codebook: Codebook | None = None
    parent_id: int | None = None
    """A response's prefix."""


@dataclass
class Answer:
    annotation_id: int
    status: str
    value: str | None
    rationale: str | None
    confidence: int | None
    phase: str
    created_at: str


@dataclass
class RevealedLabel:
    rater: str
    rater_kind: str
    """machine | reference"""
    value: str | None
    rationale: str | None
    about: str
    """Which item the label is on: 'this response', 'the prefix', ..."""


def load_item(store: Store, item_id: int) -> ItemView | None:
    row = store.query_one(
        "SELECT i.*, d.name AS dataset FROM items i JOIN datasets d ON d.id = i.dataset_id"
        " WHERE i.id = ?",
        (item_id,),
    )
    if row is None:
        return None
    payload = json.loads(row["payload"])
    meta = json.loads(row["meta"])
    turns: list[str] = payload.get("turns", [])
    if row["kind"] == "response" and row["parent_id"]:
        parent = store.query_one("SELECT payload FROM items WHERE id = ?", (row["parent_id"],))
        turns = json.loads(parent[0]).get("turns", []) if parent else []
    q = store.query_one(
        "SELECT id, key, text, codebook FROM questions WHERE applies_to = ? AND item_id IS NULL"
        " ORDER BY id LIMIT 1",
        (row["kind"],),
    )
    return ItemView(
        id=row["id"], uid=row["uid"], kind=row["kind"], dataset=row["dataset"],
        split=row["split"], case_id=row["case_id"], round_id=row["round_id"],
        model=row["model"], failed=bool(row["failed"]),
        rounds=[Round(i + 1, t) for i, t in enumerate(turns)],
        response=payload.get("response"), error=payload.get("error"), payload=payload,
        meta=meta, question_id=q["id"] if q else None, question_key=q["key"] if q else None,
        question_text=q["text"] if q else None,
        codebook=builtin_codebooks().get(q["codebook"]) if q else None,
        parent_id=row["parent_id"],
    )


def find_item_id(store: Store, uid: str) -> int | None:
    return store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))


def my_answers(store: Store, reviewer_id: int, item_id: int, question_id: int,
               target: str = "") -> list[Answer]:
    """This reviewer's annotations on one question of one item, oldest first."""
    rows = store.query(
        "SELECT id, status, value, rationale, confidence, phase, created_at FROM annotations"
        " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target = ? ORDER BY id",
        (item_id, question_id, reviewer_id, target),
    )
    return [Answer(*r) for r in rows]


def reveal_reference_labels(store: Store, reviewer_id: int, item: ItemView,
                            mode: str = DEFAULT_MODE) -> list[RevealedLabel] | None:
    """Machine and reference labels for the item, or None while the blinding
    rule hides them (a prefix's also while a later round of its case waits for
    the reviewer's blind answer: `later_rounds_owed`). Never includes another
    reviewer's answer, nor the settled answer adjudication made of theirs."""
    committed = bool(item.question_id) and store.scalar(
        "SELECT 1 FROM annotations WHERE item_id = ? AND question_id = ? AND rater_id = ?"
        " AND status != 'skipped' LIMIT 1",
        (item.id, item.question_id, reviewer_id),
    ) is not None
    if not labels_visible(mode, committed):
        return None
    if item.kind == "prefix" and mode == REVEAL_AFTER_COMMIT \
            and later_rounds_owed(store, reviewer_id, item.id):
        return None  # a later round of the case still waits for a blind answer
    targets = [(item.id, "this item")]
    parent = item.parent_id if item.kind == "response" else None
    if parent and not prefix_labels_hidden(store, reviewer_id, parent, mode):
        targets.append((parent, "the prefix"))
    out: list[RevealedLabel] = []
    for target_id, about in targets:
        rows = store.query(
            "SELECT r.name, r.kind, c.value, c.rationale FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id"
            " WHERE c.item_id = ? AND r.kind IN ('machine', 'reference') AND c.target = ''"
            " AND c.status != 'skipped'"  # e.g. a settled answer withdrawn: no label
            # The settled answer is made of other clinicians' answers: never revealed.
            " AND coalesce(r.role, '') != 'adjudicated'"
            " AND q.item_id IS NULL ORDER BY r.kind DESC, r.name",
            (target_id,),
        )
        for r in rows:
            out.append(RevealedLabel(r[0], r[1], r[2], r[3],
                                     "this response" if about == "this item" and item.kind == "response"
                                     else about))
    return out


def blind_round_holding(store: Store, reviewer_id: int, item_id: int) -> str | None:
    """The name of a fully blind review round in which this reviewer holds a
    place on the item, or answered it: outside that round the item is shown
    blind too (no peeking at what the round keeps hidden)."""
    return store.scalar(
        "SELECT r.name FROM review_rounds r JOIN round_items ri ON ri.round_id = r.id"
        " WHERE ri.item_id = ?1 AND r.blinding = 'blind' AND (EXISTS (SELECT 1 FROM"
        " reservations v WHERE v.round_id = r.id AND v.item_id = ?1 AND v.rater_id = ?2)"
        " OR EXISTS (SELECT 1 FROM annotations a WHERE a.round_id = r.id AND a.item_id = ?1"
        " AND a.rater_id = ?2)) LIMIT 1", (item_id, reviewer_id))


def later_rounds_owed(store: Store, reviewer_id: int, prefix_id: int) -> list[int]:
    """The later rounds of this prefix's case (CARE-Bench: the same patient,
    more said) that the reviewer has not answered yet, in order. While one is
    owed a blind answer, this prefix's labels stay hidden after the reviewer
    answers it: its gold label (round 2: urgent care) tells them about the
    next round's, which would then not be answered blind."""
    return [r[0] for r in store.query(
        "SELECT later.round_id FROM items i JOIN items later ON later.case_id = i.case_id"
        " AND later.dataset_id = i.dataset_id AND later.kind = 'prefix'"
        " AND later.round_id > i.round_id"
        " WHERE i.id = ? AND i.kind = 'prefix' AND i.case_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM annotations a JOIN questions q ON q.id = a.question_id"
        " WHERE a.item_id = later.id AND a.rater_id = ? AND a.target = ''"
        " AND a.status != 'skipped' AND q.item_id IS NULL)"
        " ORDER BY later.round_id", (prefix_id, reviewer_id))]


def earlier_rounds(store: Store, prefix_id: int) -> list[int]:
    """The prefixes of the earlier rounds of this prefix's case, in order: what
    its reveal shows beside it once the case's last round is answered (their
    labels were held back until then, `later_rounds_owed`)."""
    return [r[0] for r in store.query(
        "SELECT earlier.id FROM items i JOIN items earlier ON earlier.case_id = i.case_id"
        " AND earlier.dataset_id = i.dataset_id AND earlier.kind = 'prefix'"
        " AND earlier.round_id < i.round_id"
        " WHERE i.id = ? AND i.kind = 'prefix' AND i.case_id IS NOT NULL"
        " ORDER BY earlier.round_id", (prefix_id,))]


@dataclass(frozen=True)
class EarlierRound:
    """A case's earlier round, as the reveal of its last round shows it."""

    item: ItemView
    answer: Answer
    """The reviewer's answer in force on it."""
    gold: str


def earlier_round_golds(store: Store, reviewer_id: int, prefix_id: int,
                        mode: str = DEFAULT_MODE) -> list[EarlierRound]:
    """The gold labels of the case's earlier rounds that the reviewer answered,
    under the blinding each is shown with (`mode`, or blind where a fully blind
    review round holds that round for them: `blind_round_holding`), for the
    reveal of the case's last round; a round whose labels stay hidden is left out."""
    out = []
    for earlier_id in earlier_rounds(store, prefix_id):
        item = load_item(store, earlier_id)
        if item is None or not item.question_id:
            continue
        answers = my_answers(store, reviewer_id, earlier_id, item.question_id)
        shown = BLIND if blind_round_holding(store, reviewer_id, earlier_id) else mode
        labels = reveal_reference_labels(store, reviewer_id, item, shown) if answers else None
        gold = next((lab.value for lab in labels or [] if lab.rater_kind == "reference"), None)
        if gold is not None:
            out.append(EarlierRound(item, answers[-1], gold))
    return out


def prefix_answered(store: Store, reviewer_id: int, prefix_id: int) -> bool:
    """Whether the reviewer has answered the prefix itself (a skip is no answer)."""
    return store.scalar(
        "SELECT 1 FROM annotations a JOIN questions q ON q.id = a.question_id"
        " WHERE a.item_id = ? AND a.rater_id = ? AND a.target = '' AND a.status != 'skipped'"
        " AND q.item_id IS NULL LIMIT 1", (prefix_id, reviewer_id)) is not None


def prefix_labels_hidden(store: Store, reviewer_id: int, prefix_id: int,
                         mode: str = DEFAULT_MODE) -> bool:
    """Whether the labels of a response's prefix (its gold label: what the
    response should have done) stay hidden from this reviewer: under the same
    rule as the prefix's own, until they have answered the prefix. Answering a
    response reveals the response's labels, not the prefix's gold, which the
    reviewer may still owe a blind answer; nor while they owe one to a later
    round of its case (`later_rounds_owed`)."""
    if mode == REVEAL_AFTER_COMMIT and later_rounds_owed(store, reviewer_id, prefix_id):
        return True
    return not labels_visible(mode, prefix_answered(store, reviewer_id, prefix_id))


@dataclass(frozen=True)
class AnswerSpec:
    """One answer of a batch given to `commit_answers` (one criterion, one step mark)."""

    question_id: int
    value: str | None
    status: str = "answered"
    rationale: str | None = None
    confidence: int | None = None
    target: str = ""
    """'' for the whole item, 'step:<step_id>' for one step of a trajectory."""
    extra: dict[str, Any] | None = None
    labels_seen: bool = False
    """Given with the machine and reference labels already seen (a draft made
    under a 'suggest' round or after a reveal): recorded after the reveal."""


def commit_answer(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                  value: str | None, *, status: str = "answered", rationale: str | None = None,
                  confidence: int | None = None, seconds_on_task: float | None = None,
                  mode: str = DEFAULT_MODE, target: str = "",
                  extra: dict[str, Any] | None = None, source: str = "app",
                  round_id: int | None = None) -> int:
    """Record one answer as one transaction and return its annotation id.

    A second answer to the same question is a new row that supersedes the
    first; it is recorded as 'after_reveal' when the labels were visible to
    the reviewer before they answered again. Within a review round the
    round's answer limit is checked in the same transaction (see
    `review.team.rounds.claim_answer_slot`), so an item never counts more answers
    in the round than it asks for, however many reviewers commit at once; an
    answer that comes after its places were taken is kept outside the round
    (`review.team.rounds.late_for_round` tells the caller)."""
    answer = AnswerSpec(question_id, value, status, rationale, confidence, target, extra)
    return commit_answers(store, reviewer, item_id, [answer], seconds_on_task=seconds_on_task,
                          mode=mode, source=source, round_id=round_id)[0]


def commit_answers(store: Store, reviewer: Reviewer, item_id: int, answers: list[AnswerSpec], *,
                   seconds_on_task: float | None = None, mode: str = DEFAULT_MODE,
                   source: str = "app", round_id: int | None = None) -> list[int]:
    """Record several answers about one item (a rubric's criteria) as one
    transaction: all are written, or none is. Each follows `commit_answer`'s
    rules; returns the annotation ids in the order given."""
    for answer in answers:
        if answer.status not in ("answered", "cannot_assess", "skipped"):
            raise ValueError(f"unknown status {answer.status!r}")
        if answer.confidence is not None and not 1 <= int(answer.confidence) <= 5:
            raise ValueError("confidence must be 1 to 5")
    with store.transaction() as conn:
        late = None
        if round_id is not None:
            from review.team.rounds import claim_answer_slot

            # Decided once for the whole batch, before anything is written: all
            # of it counts in the round, or all of it is kept outside.
            if not claim_answer_slot(conn, round_id, item_id, reviewer.id,
                                     [a.status for a in answers if a.target == ""]):
                late, round_id = round_id, None
        ids = [_record_answer(store, conn, reviewer, item_id, answer, seconds_on_task, mode,
                              source, round_id, late) for answer in answers]
        from review.team.adjudication import reopen_broken

        # An answer that breaks an agreement which settled on its own withdraws that settlement.
        reopen_broken(store, conn, [(item_id, a.question_id, a.target) for a in answers])
        # Step marks alone complete a review only of a run that asks nothing as a whole
        # (`_review_complete` -> `is_reviewed`); anything else needs its whole-item answers.
        if round_id is not None and _review_complete(store, conn, reviewer, item_id, answers):
            from review.team.rounds import complete_review

            if complete_review(conn, round_id, item_id, reviewer.id):
                store.audit(reviewer.name, "complete_review", "round_reviews", None, None,
                            {"round_id": round_id, "item_id": item_id})
        return ids


def _review_complete(store: Store, conn: Any, reviewer: Reviewer, item_id: int,
                     answers: list[AnswerSpec]) -> bool:
    """Whether, with these answers, the reviewer's review of the item is complete:
    an agent run or graded conversation once every criterion has an answer;
    any other item with one counted answer about the whole item."""
    from review.team.rounds import RUBRIC_KINDS

    kind = conn.execute("SELECT kind FROM items WHERE id = ?", (item_id,)).fetchone()[0]
    if kind in RUBRIC_KINDS:
        from review.reviewing.criteria import is_reviewed

        return is_reviewed(store, reviewer.id, item_id)
    return any(a.target == "" and a.status in ("answered", "cannot_assess") for a in answers)


def _same_answer(prev: Any, status: str, value: str | None, rationale: str | None,
                 confidence: int | None, round_id: int | None,
                 extra: dict[str, Any] | None) -> bool:
    """Whether an answer repeats the reviewer's answer in force word for word,
    in the same round (its provenance aside)."""
    kept = {k: v for k, v in from_json(prev[6] or "{}").items() if k != "blinding"}
    return (prev[1], prev[2], prev[3] or None, prev[4], prev[5]) == (
        status, value, rationale or None, confidence, round_id) and kept == (extra or {})


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
        " AND (a.item_id = ?3 OR a.item_id IN (SELECT s.id FROM items s JOIN items i"
        " ON i.parent_id = s.parent_id WHERE i.id = ?3 AND i.kind = 'trajectory'"
        " AND s.kind = 'trajectory')) LIMIT 1",
        (question_id, reviewer.id, item_id)).fetchone():
        return True
    from review.reviewing.criteria import labels_opened
    from review.team.adjudication import ADJUDICATED

    if conn.execute(
        "SELECT 1 FROM annotations a JOIN raters r ON r.id = a.rater_id WHERE a.item_id = ?"
        " AND r.name = ? AND json_extract(a.extra, '$.adjudicator') = ? LIMIT 1",
        (item_id, ADJUDICATED, reviewer.name)).fetchone():
        return True

    opened = labels_opened(store, reviewer.id)
    if opened is None:
        return False
    row = conn.execute("SELECT id, coalesce(import_id, 0) FROM items WHERE id = ?",
                       (item_id,)).fetchone()
    return row is not None and row[0] <= opened[0] and row[1] <= opened[1] \
        and question_id <= opened[2]


def _record_answer(store: Store, conn: Any, reviewer: Reviewer, item_id: int, answer: AnswerSpec,
                   seconds_on_task: float | None, mode: str, source: str,
                   round_id: int | None, late: int | None) -> int:
    """Write one answer inside the caller's transaction (see `commit_answers`).
    `late`: the round it was given in and is kept outside of (its places were
    taken meanwhile, see `claim_answer_slot`); its provenance names it
    (`late_for_round`)."""
    question_id, status, target = answer.question_id, answer.status, answer.target
    rationale, confidence = answer.rationale, answer.confidence
    q = conn.execute("SELECT codebook, kind FROM questions WHERE id = ?", (question_id,)).fetchone()
    if q is None:
        raise ValueError(f"no question {question_id}")
    value = normalise_value(q[0], q[1], answer.value) if status == "answered" else None
    prev = conn.execute(
        "SELECT id, status, value, rationale, confidence, round_id, extra FROM annotations"
        " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target = ?"
        " ORDER BY id DESC LIMIT 1",
        (item_id, question_id, reviewer.id, target),
    ).fetchone()
    if prev is not None and _same_answer(prev, status, value, rationale, confidence, round_id,
                                         answer.extra):
        return prev[0]  # the same answer again (a double click): nothing new to record
    # A CARE-Bench round whose case's later rounds still wait for this reviewer
    # has had nothing revealed by their earlier answers (`later_rounds_owed`).
    held = not target and mode == REVEAL_AFTER_COMMIT \
        and bool(later_rounds_owed(store, reviewer.id, item_id))
    seen = answer.labels_seen or (not target and not held and prev is not None
                                  and prev[1] != "skipped" and labels_visible(mode, True)) \
        or _labels_seen_before(store, conn, reviewer, item_id, question_id, target,
                               own_reveals=not held)
    version = conn.execute(
        "SELECT version FROM codebook_versions WHERE codebook = ? ORDER BY id DESC LIMIT 1",
        (q[0],),
    ).fetchone()
    cur = conn.execute(
        "INSERT INTO annotations (item_id, question_id, rater_id, target, status, value,"
        " rationale, confidence, phase, codebook_version, seconds_on_task, supersedes_id,"
        " source, extra, created_at, round_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (item_id, question_id, reviewer.id, target, status, value, rationale or None,
         confidence, phase_for_commit(mode, seen), version[0] if version else None,
         seconds_on_task, prev[0] if prev else None, source,
         to_json({"blinding": mode, **(answer.extra or {}),
                  **({"late_for_round": late} if late else {})}), utcnow(), round_id),
    )
    clear_draft(conn, reviewer.id, item_id, question_id, target)
    action = {"skipped": "skip"}.get(status, "revise" if prev else "answer")
    store.audit(
        reviewer.name, action, "annotations", cur.lastrowid,
        None if prev is None else {"status": prev[1], "value": prev[2], "rationale": prev[3],
                                   "confidence": prev[4]},
        {"item_id": item_id, "question_id": question_id, "target": target, "status": status,
         "value": value, "rationale": rationale or None, "confidence": confidence,
         "round_id": round_id, **({"late_for_round": late} if late else {})},
    )
    return cur.lastrowid


def skip_item(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
              reason: str, **kw: Any) -> int:
    """Pass over an item, with the reason; it leaves the reviewer's queue."""
    if not reason.strip():
        raise ValueError("say why you skip this item")
    return commit_answer(store, reviewer, item_id, question_id, None, status="skipped",
                         rationale=reason.strip(), **kw)


def flag_item(store: Store, reviewer: Reviewer, item_id: int, raised: bool = True,
              note: str | None = None) -> None:
    """Raise (or clear) this reviewer's flag on an item, for later review."""
    with store.transaction() as conn:
        cur = conn.execute(
            "INSERT INTO flags (item_id, rater_id, raised, note, created_at) VALUES (?,?,?,?,?)",
            (item_id, reviewer.id, int(raised), note or None, utcnow()),
        )
        store.audit(reviewer.name, "flag" if raised else "unflag", "flags", cur.lastrowid, None,
                    {"item_id": item_id, "note": note})


def is_flagged(store: Store, reviewer_id: int, item_id: int) -> bool:
    row = store.query_one(
        "SELECT raised FROM flags WHERE item_id = ? AND rater_id = ? ORDER BY id DESC LIMIT 1",
        (item_id, reviewer_id),
    )
    return bool(row and row[0])
