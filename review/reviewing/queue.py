"""The review queue: which item a reviewer answers next, and how far they are.

An item is in a reviewer's queue while that reviewer has no annotation (an
answer, "cannot assess" or a skip) for the question asked of its kind.
Items come in import order, which for CARE-Bench is case by case, round by
round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codebook import RUBRIC_KINDS
from codebook.families import asks_outcome_sql
from store import Store


@dataclass(frozen=True)
class QueueFilter:
    kind: str = "prefix"
    """prefix | response | trajectory | graded_conversation"""
    dataset: str | None = None
    split: str | None = None
    round_id: int | None = None
    model: str | None = None
    include_failed: bool = True
    """Failed generations are shown (as failures) unless excluded."""
    question: str | None = None
    """The question answered (its key), where a kind of item is asked several (a
    study's conversations: a harm scale and an urgency scale); None: the first."""
    after: tuple[int, int, int] | None = None
    """(item id, import id, question id): only items that came after those:
    added after that item, added or completed (a stub replaced) by a later
    import, or asked a question added later (a criterion of theirs, or a
    question of every item of their kind)."""

    def where(self) -> tuple[str, list]:
        clauses, params = ["i.kind = ?"], [self.kind]
        if self.dataset:
            clauses.append("i.dataset_id = (SELECT id FROM datasets WHERE name = ?)")
            params.append(self.dataset)
        if self.split:
            clauses.append("i.split = ?")
            params.append(self.split)
        if self.round_id is not None:
            clauses.append("i.round_id = ?")
            params.append(self.round_id)
        if self.model:
            clauses.append("i.model = ?")
            params.append(self.model)
        if not self.include_failed:
            clauses.append("i.failed = 0")
        if self.after is not None:
            # A question of a kind of item: of every prefix or response; of an agent run or
            # graded conversation only of its benchmark family (`criteria.asks_outcome`).
            rubric = ", ".join(f"'{k}'" for k in RUBRIC_KINDS)
            clauses.append(
                "(i.id > ? OR coalesce(i.import_id, 0) > ? OR EXISTS (SELECT 1 FROM questions nq"
                " WHERE nq.id > ? AND (nq.item_id IN (i.id, coalesce(i.parent_id, i.id))"
                " OR (nq.item_id IS NULL AND nq.applies_to = i.kind"
                f" AND (i.kind NOT IN ({rubric}) OR {asks_outcome_sql('nq.key')})))))")
            params.extend(self.after)
        return " AND ".join(clauses), params


@dataclass
class Progress:
    done: int
    """Items this reviewer has answered or passed over (they left the queue)."""
    total: int
    skipped: int = 0
    """Of `done`, the items whose answer in force is a skip."""

    @property
    def remaining(self) -> int:
        return self.total - self.done


@dataclass
class FilterChoices:
    datasets: list[str] = field(default_factory=list)
    splits: list[str] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


def question_id_for_kind(store: Store, kind: str, question: str | None = None) -> int | None:
    """The question asked of every item of a kind (rubric items add their own): the one
    keyed `question`, else the first (a kind may be asked several label questions)."""
    if question is not None:
        return store.scalar("SELECT id FROM questions WHERE key = ? AND applies_to = ?"
                            " AND item_id IS NULL", (question, kind))
    return store.scalar(f"SELECT id FROM questions WHERE {KIND_WIDE} ORDER BY {IN_ORDER} LIMIT 1",
                        (kind,))


KIND_WIDE = "applies_to = ? AND item_id IS NULL AND kind IN ('labelset', 'criterion')"
"""The questions asked of every item of a kind: its label questions and the criteria of a
study's checklist (a rubric codebook's `[[criteria]]`), answered one at a time."""
IN_ORDER = "kind = 'criterion', id"
"""Label questions first, then a checklist's criteria, each in the order they came."""


def kind_questions(store: Store, kind: str) -> list[tuple[str, str]]:
    """(key, text) of every question asked of each item of a kind, label questions first
    (the Review screen's choice of question)."""
    return [(r[0], r[1]) for r in store.query(
        f"SELECT key, text FROM questions WHERE {KIND_WIDE} ORDER BY {IN_ORDER}", (kind,))]


_ANSWERED = (
    "EXISTS (SELECT 1 FROM annotations a WHERE a.rater_id = ? AND a.question_id = ?"
    " AND a.item_id = i.id AND a.target = '')"
)


def next_unreviewed_item(store: Store, reviewer_id: int, filt: QueueFilter,
                         after_id: int | None = None) -> int | None:
    """The first item in the queue (after `after_id`, wrapping around)."""
    qid = question_id_for_kind(store, filt.kind, filt.question)
    if qid is None:
        return None
    where, params = filt.where()
    base = f"SELECT i.id FROM items i WHERE {where} AND NOT {_ANSWERED}"
    if after_id is not None:
        row = store.query_one(base + " AND i.id > ? ORDER BY i.id LIMIT 1",
                              (*params, reviewer_id, qid, after_id))
        if row:
            return row[0]
    row = store.query_one(base + " ORDER BY i.id LIMIT 1", (*params, reviewer_id, qid))
    return row[0] if row else None


def queue_progress(store: Store, reviewer_id: int, filt: QueueFilter) -> Progress:
    """How many items match the filter, and how many of them this reviewer
    has answered (cost grows with the reviewer's answers, not the items)."""
    qid = question_id_for_kind(store, filt.kind, filt.question)
    where, params = filt.where()
    total = store.scalar(f"SELECT COUNT(*) FROM items i WHERE {where}", params)
    done = store.scalar(
        f"SELECT COUNT(DISTINCT a.item_id) FROM annotations a JOIN items i ON i.id = a.item_id"
        f" WHERE a.rater_id = ? AND a.question_id = ? AND a.target = '' AND {where}",
        (reviewer_id, qid or -1, *params),
    )
    skipped = store.scalar(
        f"SELECT COUNT(*) FROM current_annotations a JOIN items i ON i.id = a.item_id"
        f" WHERE a.rater_id = ? AND a.question_id = ? AND a.target = '' AND a.status = 'skipped'"
        f" AND {where}", (reviewer_id, qid or -1, *params),
    ) if done else 0
    return Progress(done=done, total=total, skipped=skipped)


def first_skipped_item(store: Store, reviewer_id: int, filt: QueueFilter) -> int | None:
    """The first item (in queue order) whose answer in force from this
    reviewer is a skip: a way back to what they passed over."""
    qid = question_id_for_kind(store, filt.kind, filt.question)
    where, params = filt.where()
    return store.scalar(
        f"SELECT i.id FROM current_annotations a JOIN items i ON i.id = a.item_id"
        f" WHERE a.rater_id = ? AND a.question_id = ? AND a.target = '' AND a.status = 'skipped'"
        f" AND {where} ORDER BY i.id LIMIT 1", (reviewer_id, qid or -1, *params))


_choices_memo: dict[tuple, FilterChoices] = {}


def filter_choices(store: Store, kind: str | None = None) -> FilterChoices:
    """The values each queue filter can take. Remembered until items change
    (an import), so the review screen does not scan every item on each key."""
    stamp = store.query_one("SELECT (SELECT MAX(id) FROM items), (SELECT MAX(id) FROM imports)")
    key = (store.path, kind, stamp[0], stamp[1])
    if key not in _choices_memo:
        if len(_choices_memo) > 64:
            _choices_memo.clear()
        _choices_memo[key] = _filter_choices(store, kind)
    return _choices_memo[key]


def _filter_choices(store: Store, kind: str | None) -> FilterChoices:
    cond, params = ("WHERE i.kind = ?", (kind,)) if kind else ("", ())

    def col(sql: str) -> list:
        return [r[0] for r in store.query(sql, params) if r[0] is not None]

    return FilterChoices(
        datasets=col(f"SELECT DISTINCT d.name FROM items i JOIN datasets d ON d.id = i.dataset_id {cond} ORDER BY 1"),
        splits=col(f"SELECT DISTINCT i.split FROM items i {cond} ORDER BY 1"),
        rounds=col(f"SELECT DISTINCT i.round_id FROM items i {cond} ORDER BY 1"),
        models=col(f"SELECT DISTINCT i.model FROM items i {cond} ORDER BY 1"),
        kinds=[r[0] for r in store.query("SELECT DISTINCT kind FROM items ORDER BY 1")],
    )


def item_position(store: Store, item_id: int, filt: QueueFilter) -> tuple[int, int]:
    """1-based position of an item among all items matching the filter, and the total."""
    where, params = filt.where()
    row = store.query_one(
        f"SELECT SUM(i.id <= ?), COUNT(*) FROM items i WHERE {where}", (item_id, *params)
    )
    return int(row[0] or 0), int(row[1] or 0)


def neighbour_item(store: Store, item_id: int, filt: QueueFilter, step: int) -> int | None:
    """The previous (step -1) or next (step +1) item under the filter, answered or not."""
    where, params = filt.where()
    op, order = (">", "ASC") if step > 0 else ("<", "DESC")
    row = store.query_one(
        f"SELECT i.id FROM items i WHERE {where} AND i.id {op} ? ORDER BY i.id {order} LIMIT 1",
        (*params, item_id),
    )
    return row[0] if row else None
