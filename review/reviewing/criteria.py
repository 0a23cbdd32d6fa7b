"""Reviewing agent runs and rubric-graded conversations: many questions per item.

`review.reviewing.queue` serves kinds that ask one question of each item. A trajectory
or a graded conversation asks several at once: its own rubric criteria (gates,
must-ask topics, HealthBench criteria; a completion shares its prompt's), the
outcome verdict where its benchmark has one, and a mark per step. This module
is the review layer for them:

- which items a reviewer still has to review (`next_unreviewed`,
  `review_progress`, `is_reviewed`), under the same `QueueFilter` as the
  review queue;
- what an item asks (`item_questions`) and what the reviewer answered so far
  (`my_current_answers`, `step_marks`);
- what a verdict revealed looks like (`RaterVerdict`; which are revealed is
  `review.reviewing.blinding`'s decision) and `rater_scores`, the HealthBench
  score of each rater beside mine.

The actions (`commit_verdicts`, `mark_step`) are in `review.reviewing.commit`.

An item is *reviewed* by a reviewer once they have answered (or said "cannot
assess") every question it asks as a whole. Step marks are optional; an item
that asks nothing as a whole counts as reviewed once any step is marked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codebook import (
    CANNOT_ASSESS,
    NO_ERROR,
    STEP_CODEBOOK,
    STEP_ERROR_QUESTION,
    Codebook,
    codebooks,
)
from codebook.families import asked_of_sql, asks_outcome
from review.reviewing.queue import Progress, QueueFilter
from review.reviewing.trajectory import (
    CriterionView,
    TrajectoryView,
    criteria_score,
    criterion_view,
    subagent_view,
)
from review.team.codebook_versions import current_codebook
from store import Store

# -- what an item is and what it asks ---------------------------------------------

@dataclass(frozen=True)
class ItemHeader:
    """The facts of an item the screens show above it."""

    id: int
    uid: str
    kind: str
    dataset: str
    dataset_kind: str
    model: str | None
    split: str | None
    failed: bool
    parent_id: int | None
    case_label: str | None
    """The case or task the item belongs to; None where that id identifies a patient."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemQuestion:
    id: int
    key: str
    kind: str
    """criterion (met / not met) | labelset (one code of `codebook`)."""
    text: str
    codebook: str
    criterion: CriterionView | None = None
    """Points, MUST-NOT flag, axis and group, for criteria."""
    book: Codebook | None = field(default=None, compare=False)
    """The codebook in force (its newest version, in-app edits included): the
    wording a reviewer is shown and the version their answer records."""


def item_header(store: Store, item_id: int) -> ItemHeader | None:
    row = store.query_one(
        "SELECT i.id, i.uid, i.kind, d.name AS dataset, d.kind AS dataset_kind, i.model, i.split,"
        " i.failed, i.parent_id, i.case_id, i.meta FROM items i"
        " JOIN datasets d ON d.id = i.dataset_id WHERE i.id = ?",
        (item_id,),
    )
    if row is None:
        return None
    meta = json.loads(row["meta"] or "{}")
    case = None if meta.get("identifying") else row["case_id"]
    return ItemHeader(row["id"], row["uid"], row["kind"], row["dataset"], row["dataset_kind"],
                      row["model"], row["split"], bool(row["failed"]), row["parent_id"], case, meta)


def find_item(store: Store, uid: str, kind: str | None = None) -> int | None:
    """The id of the item `uid` (of that kind, when given)."""
    if kind is None:
        return store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
    return store.scalar("SELECT id FROM items WHERE uid = ? AND kind = ?", (uid, kind))


def _outcome_questions(store: Store, kind: str) -> list[Any]:
    """Label-set questions asked of a whole item of this kind (the step question aside)."""
    return store.query(
        "SELECT id, key, kind, text, codebook FROM questions WHERE item_id IS NULL"
        " AND applies_to = ? AND kind = 'labelset' AND key != ? ORDER BY id",
        (kind, STEP_ERROR_QUESTION),
    )


def item_questions(store: Store, item_id: int) -> list[ItemQuestion]:
    """What the item asks as a whole: its criteria (and its parent prompt's), in
    rubric order, then the outcome verdict where its benchmark has one."""
    head = item_header(store, item_id)
    if head is None:
        return []
    rows = store.query(
        "SELECT id, key, kind, text, codebook, points, meta FROM questions"
        " WHERE kind = 'criterion' AND item_id IN (?, ?) ORDER BY id",
        (item_id, head.parent_id if head.parent_id is not None else item_id),
    )
    books: dict[str, Codebook | None] = {}

    def book(key: str) -> Codebook | None:
        if key not in books:
            books[key] = current_codebook(store, key)
        return books[key]

    criteria = [ItemQuestion(r["id"], r["key"], "criterion", r["text"], r["codebook"],
                             criterion_view(r), book(r["codebook"])) for r in rows]
    criteria.sort(key=lambda q: q.criterion.index)  # stable: import order within an index
    outcome = [ItemQuestion(r["id"], r["key"], "labelset", r["text"], r["codebook"],
                            book=book(r["codebook"]))
               for r in _outcome_questions(store, head.kind)
               if asks_outcome(r["key"], head.uid, head.dataset_kind)]
    return criteria + outcome


def step_question_id(store: Store) -> int | None:
    return store.scalar("SELECT id FROM questions WHERE key = ?", (STEP_ERROR_QUESTION,))


# -- the queue ----------------------------------------------------------------------

def _where(store: Store, filt: QueueFilter) -> tuple[str, list]:
    """The filter's conditions, plus: a graded conversation needs a completion to grade."""
    where, params = filt.where()
    if filt.kind == "graded_conversation":
        where += " AND json_extract(i.payload, '$.completion') IS NOT NULL"
    return where, params


def _reviewed_sql(store: Store, kind: str, reviewer_id: int) -> tuple[str, list]:
    """SQL that is true when the reviewer has reviewed item `i` (joined with its
    dataset as `d`), and its parameters."""
    def unanswered(qid: str) -> str:
        return ("NOT EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = i.id"
                f" AND a.question_id = {qid} AND a.rater_id = ? AND a.target = '')")

    criteria = ("SELECT 1 FROM questions q WHERE q.kind = 'criterion'"
                " AND q.item_id IN (i.id, coalesce(i.parent_id, i.id))")
    asked = [f"EXISTS ({criteria})"]
    open_ = [f"EXISTS ({criteria} AND {unanswered('q.id')})"]
    asked_params: list = []
    open_params: list = [reviewer_id]
    for q in _outcome_questions(store, kind):
        applies, applies_params = asked_of_sql(q["key"])
        asked.append(applies)
        asked_params += applies_params
        open_.append(f"({applies} AND {unanswered('?')})")
        open_params += [*applies_params, q["id"], reviewer_id]
    sql = (f"(CASE WHEN {' OR '.join(asked)} THEN NOT ({' OR '.join(open_)})"
           " ELSE EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = i.id AND a.rater_id = ?)"
           " END)")
    return sql, [*asked_params, *open_params, reviewer_id]


def next_unreviewed(store: Store, reviewer_id: int, filt: QueueFilter,
                    after_id: int | None = None) -> int | None:
    """The first item under the filter this reviewer has not reviewed (after
    `after_id`, wrapping around), in import order."""
    where, params = _where(store, filt)
    reviewed, rparams = _reviewed_sql(store, filt.kind, reviewer_id)
    base = (f"SELECT i.id FROM items i JOIN datasets d ON d.id = i.dataset_id WHERE {where}"
            f" AND NOT {reviewed}")
    if after_id is not None:
        row = store.query_one(base + " AND i.id > ? ORDER BY i.id LIMIT 1",
                              (*params, *rparams, after_id))
        if row:
            return row["id"]
    row = store.query_one(base + " ORDER BY i.id LIMIT 1", (*params, *rparams))
    return row["id"] if row else None


def review_progress(store: Store, reviewer_id: int, filt: QueueFilter) -> Progress:
    """How many items match the filter and how many this reviewer has reviewed
    (only items they have answered something on are examined)."""
    where, params = _where(store, filt)
    total = store.scalar(f"SELECT COUNT(*) FROM items i WHERE {where}", params)
    reviewed, rparams = _reviewed_sql(store, filt.kind, reviewer_id)
    done = store.scalar(
        f"SELECT COUNT(*) FROM items i JOIN datasets d ON d.id = i.dataset_id WHERE {where}"
        " AND i.id IN (SELECT DISTINCT item_id FROM annotations WHERE rater_id = ?)"
        f" AND {reviewed}",
        (*params, reviewer_id, *rparams),
    )
    return Progress(done=done, total=total)


def is_reviewed(store: Store, reviewer_id: int, item_id: int) -> bool:
    head = item_header(store, item_id)
    if head is None:
        return False
    reviewed, rparams = _reviewed_sql(store, head.kind, reviewer_id)
    return bool(store.scalar(
        f"SELECT {reviewed} FROM items i JOIN datasets d ON d.id = i.dataset_id WHERE i.id = ?",
        (*rparams, item_id),
    ))


def item_position(store: Store, item_id: int, filt: QueueFilter) -> tuple[int, int]:
    """1-based position of the item among the items under the filter, and their
    number; position 0 when the item is not under the filter (opened by link)."""
    where, params = _where(store, filt)
    row = store.query_one(f"SELECT SUM(i.id <= ?) AS position, COUNT(*) AS total,"
                          f" SUM(i.id = ?) AS here FROM items i WHERE {where}",
                          (item_id, item_id, *params))
    return (int(row["position"] or 0) if row["here"] else 0), int(row["total"] or 0)


def neighbour(store: Store, item_id: int, filt: QueueFilter, step: int) -> int | None:
    """The previous (step -1) or next (+1) item under the filter, reviewed or not."""
    where, params = _where(store, filt)
    op, order = (">", "ASC") if step > 0 else ("<", "DESC")
    return store.scalar(
        f"SELECT i.id FROM items i WHERE {where} AND i.id {op} ? ORDER BY i.id {order} LIMIT 1",
        (*params, item_id),
    )


# -- my answers ---------------------------------------------------------------------

@dataclass(frozen=True)
class MyAnswer:
    question_id: int
    status: str
    """answered | cannot_assess | skipped"""
    value: str | None
    rationale: str | None
    phase: str

    @property
    def choice(self) -> str | None:
        """What the checklist shows: the value, 'cannot_assess', or None after a skip."""
        return self.value if self.status == "answered" else (
            CANNOT_ASSESS if self.status == CANNOT_ASSESS else None)


def my_current_answers(store: Store, reviewer_id: int, item_id: int) -> dict[int, MyAnswer]:
    """{question id: my answer in force} on the item as a whole."""
    rows = store.query(
        "SELECT question_id, status, value, rationale, phase FROM current_annotations"
        " WHERE item_id = ? AND rater_id = ? AND target = ''",
        (item_id, reviewer_id),
    )
    return {r["question_id"]: MyAnswer(r["question_id"], r["status"], r["value"], r["rationale"],
                                       r["phase"]) for r in rows}


# -- step marks -----------------------------------------------------------------------

@dataclass(frozen=True)
class StepMark:
    step_id: int
    error: str
    """A code of the trajectory-errors codebook (`no_error` records a checked step)."""
    severity: int | None
    note: str | None
    phase: str

    @property
    def is_error(self) -> bool:
        return self.error != NO_ERROR


def step_marks(store: Store, reviewer_id: int, item_id: int) -> dict[int, StepMark]:
    """{step_id: this reviewer's mark in force} on one trajectory."""
    qid = step_question_id(store)
    rows = store.query(
        "SELECT target, value, extra, rationale, phase FROM current_annotations"
        " WHERE item_id = ? AND question_id = ? AND rater_id = ? AND target LIKE 'step:%'"
        " AND status = 'answered'",
        (item_id, qid if qid is not None else -1, reviewer_id),
    )
    marks = {}
    for target, value, extra, note, phase in rows:
        sid = target.split(":", 1)[1]
        if sid.isdigit():
            severity = json.loads(extra or "{}").get("severity")
            marks[int(sid)] = StepMark(int(sid), value, severity, note, phase)
    return marks


def step_count(store: Store, item_id: int) -> int:
    return int(store.scalar(
        "SELECT max(coalesce(json_array_length(payload, '$.steps'), 0),"
        " coalesce(json_array_length(payload, '$.transcript'), 0)) FROM items WHERE id = ?",
        (item_id,),
    ) or 0)


def step_codebook(store: Store) -> Codebook:
    """The step-error codebook in force (its newest version, in-app edits
    included): what the screens show and what a step mark records."""
    book = current_codebook(store, STEP_CODEBOOK)
    if book is None:
        raise ValueError("the trajectory-errors codebook is not loaded")
    return book


def severity_levels(store: Store | None = None) -> list[dict[str, Any]]:
    """The codebook's severity scale: [{level, name, definition}], mildest first
    (of the version in force when `store` is given; in-app edits change only
    label wording, so the shipped scale otherwise)."""
    book = step_codebook(store) if store is not None else codebooks()[STEP_CODEBOOK]
    return book.severity


# -- the reveal -----------------------------------------------------------------------

@dataclass(frozen=True)
class RaterVerdict:
    """A judge's, verifier's or reference answer, shown after the reviewer's own."""

    rater: str
    rater_kind: str
    """machine | reference"""
    role: str | None
    """judge | verifier | agent | gold ..."""
    value: str | None
    rationale: str | None
    extra: dict[str, Any]
    about: str = "this item"
    """'this item', or 'the task' for a label on the parent (a cohort's expected verdict)."""


@dataclass(frozen=True)
class ScoreLine:
    rater: str
    score: float | None
    """HealthBench example score, 0..1; None until every criterion is answered."""
    answered: int
    total: int


def rater_scores(questions: list[ItemQuestion], mine: Mapping[int, MyAnswer],
                 revealed: Mapping[int, list[RaterVerdict]], me: str) -> list[ScoreLine]:
    """My score and each revealed rater's, by HealthBench's formula over the
    item's criteria. A rater who left a criterion unanswered (or could not
    assess it) has no score. Other raters appear only once every criterion is
    revealed, so a score never leaks a hidden verdict."""
    criteria = [q for q in questions if q.criterion is not None]
    if not criteria:
        return []
    views = [q.criterion for q in criteria]

    def line(name: str, verdicts: dict[str, Any]) -> ScoreLine:
        answered = sum(v in ("met", "not_met") for v in verdicts.values())
        return ScoreLine(name, criteria_score(views, verdicts), answered, len(criteria))

    lines = [line(me, {q.key: mine[q.id].value for q in criteria if q.id in mine})]
    if all(q.id in revealed for q in criteria):
        others: dict[str, dict[str, Any]] = {}
        for q in criteria:
            for v in revealed[q.id]:
                others.setdefault(v.rater, {})[q.key] = v.value
        lines += [line(name, verdicts) for name, verdicts in sorted(others.items())]
    return lines


# -- what a screen shows beside the run ---------------------------------------------------


def load_subagent(store: Store, item_id: int, index: int) -> TrajectoryView | None:
    """An embedded subagent trajectory of a run, shown like the run itself."""
    payload = store.scalar("SELECT payload FROM items WHERE id = ?", (item_id,))
    if payload is None:
        return None
    doc = json.loads(payload)
    if not 0 <= index < len(doc.get("subagent_trajectories") or []):
        return None
    return subagent_view(doc, index)


def evidence_steps(view: TrajectoryView, evidence: Iterable[str]) -> dict[str, list[int]]:
    """{evidence id the final answer cites: indices of the steps whose tool
    results contain it}, so a reviewer can check each citation at its source.
    An id found nowhere maps to [] (a citation the run never retrieved)."""
    out: dict[str, list[int]] = {}
    for ev in evidence:
        found = _cited_id(str(ev)).search if str(ev) else None
        out[ev] = [s.index for s in view.steps
                   if found and any(found(r.content) for r in s.results)]
    return out


def _cited_id(ev: str) -> re.Pattern[str]:
    """`ev` as a whole identifier: `obs-1` is not found inside `obs-12`,
    `obs-12b` or `1.2` inside `1.2.840`, but is inside `Observation/obs-1` and
    at the end of a sentence (`... obs-1.`). Letters, digits, `_` and `-`
    (and a `.` followed by one of them) continue an identifier."""
    head = r"(?<![\w-])(?<!\w\.)" if re.match(r"[\w-]", ev[0]) else ""
    tail = r"(?![\w-]|\.\w)" if re.match(r"[\w-]", ev[-1]) else ""
    return re.compile(head + re.escape(ev) + tail)


