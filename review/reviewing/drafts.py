"""Drafts: what a reviewer has typed or picked but not committed, kept across a
reload or a closed tab. A draft is never an answer; committing the answer
removes it (in the answer's own transaction, see `review.reviewing.commit`)."""

from __future__ import annotations

from dataclasses import dataclass

from review.team.access import require_role
from review.team.reviewers import Reviewer
from store import Store, utcnow


@dataclass
class Draft:
    rationale: str | None
    confidence: int | None
    updated_at: str
    value: str | None = None
    """A verdict or label picked but not committed."""
    labels_seen: bool = False
    """The machine and reference labels were on screen while it was made."""
    severity: int | None = None
    """A step mark's severity picked, 1 (negligible) to 5 (critical)."""


def save_draft(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
               rationale: str | None, confidence: int | None, target: str = "",
               value: str | None = None, labels_seen: bool = False,
               severity: int | None = None) -> None:
    """Keep what is typed or picked so far; an empty draft is dropped. Once a
    draft was made with the labels on screen, it stays marked so."""
    require_role(reviewer, "review")
    rationale = rationale if rationale and rationale.strip() else None
    for name, number in (("confidence", confidence), ("severity", severity)):
        if number is not None and not 1 <= int(number) <= 5:
            raise ValueError(f"{name} must be 1 to 5")
    with store.transaction() as conn:
        if rationale is None and confidence is None and value is None and severity is None:
            conn.execute("DELETE FROM drafts WHERE rater_id = ? AND item_id = ? AND question_id = ?"
                         " AND target = ?", (reviewer.id, item_id, question_id, target))
            return
        conn.execute(
            "INSERT INTO drafts (rater_id, item_id, question_id, target, rationale, confidence,"
            " value, labels_seen, severity, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (rater_id, item_id, question_id, target)"
            " DO UPDATE SET rationale = excluded.rationale, confidence = excluded.confidence,"
            " value = excluded.value, labels_seen = MAX(labels_seen, excluded.labels_seen),"
            " severity = excluded.severity, updated_at = excluded.updated_at",
            (reviewer.id, item_id, question_id, target, rationale, confidence, value,
             int(labels_seen), None if severity is None else int(severity), utcnow()))


def drop_draft(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
               target: str = "") -> None:
    """Forget a draft (e.g. it came back to what was committed)."""
    require_role(reviewer, "review")
    with store.transaction() as conn:
        clear_draft(conn, reviewer.id, item_id, question_id, target)


def load_draft(store: Store, reviewer_id: int, item_id: int, question_id: int,
               target: str = "") -> Draft | None:
    row = store.query_one(
        "SELECT rationale, confidence, updated_at, value, labels_seen, severity FROM drafts"
        " WHERE rater_id = ? AND item_id = ? AND question_id = ? AND target = ?",
        (reviewer_id, item_id, question_id, target))
    return Draft(*row[:4], bool(row[4]), row[5]) if row else None


def load_drafts(store: Store, reviewer_id: int, item_id: int) -> dict[int, Draft]:
    """This reviewer's drafts on the item's whole-item questions, by question id."""
    return {r[0]: Draft(*r[1:5], bool(r[5])) for r in store.query(
        "SELECT question_id, rationale, confidence, updated_at, value, labels_seen FROM drafts"
        " WHERE rater_id = ? AND item_id = ? AND target = ''", (reviewer_id, item_id))}


def clear_draft(conn, rater_id: int, item_id: int, question_id: int, target: str = "") -> None:
    """Inside an answer's transaction: the draft has become the answer."""
    conn.execute("DELETE FROM drafts WHERE rater_id = ? AND item_id = ? AND question_id = ?"
                 " AND target = ?", (rater_id, item_id, question_id, target))


# -- a step mark begun ------------------------------------------------------------------

@dataclass
class StepDraft:
    """A mark on one step of an agent run, picked or typed but not saved."""

    error: str | None
    """The error type picked (a code of the step-error codebook), if any."""
    severity: int | None
    """The severity picked, 1 (negligible) to 5 (critical), if any."""
    note: str | None
    """The note typed so far."""
    updated_at: str


def step_target(step_id: int) -> str:
    """The draft's and the mark's target for one step: 'step:<step_id>'."""
    return f"step:{int(step_id)}"


def save_step_draft(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                    step_id: int, error: str | None, severity: int | None,
                    note: str | None) -> None:
    """Keep a step mark begun (the error type as its value, the severity, the
    note as its rationale); an empty one is dropped. Saving the mark removes
    the draft (see `review.reviewing.commit`)."""
    require_role(reviewer, "review")
    save_draft(store, reviewer, item_id, question_id, note, None, target=step_target(step_id),
               value=error, severity=severity)


def load_step_draft(store: Store, reviewer_id: int, item_id: int, question_id: int,
                    step_id: int) -> StepDraft | None:
    """The step mark this reviewer began on the step and did not save, if any."""
    draft = load_draft(store, reviewer_id, item_id, question_id, step_target(step_id))
    if draft is None:
        return None
    return StepDraft(draft.value, draft.severity, draft.rationale, draft.updated_at)


def drop_step_draft(store: Store, reviewer: Reviewer, item_id: int, question_id: int,
                    step_id: int) -> None:
    """Forget a step mark begun (it came back to the saved mark, or to nothing)."""
    require_role(reviewer, "review")
    drop_draft(store, reviewer, item_id, question_id, step_target(step_id))


def unsaved_step_marks(store: Store, reviewer_id: int, item_id: int) -> list[int]:
    """The steps of the run on which this reviewer began a mark and did not save
    it (M), in order: marks that reach no review until they are saved."""
    return sorted(int(r[0][5:]) for r in store.query(
        "SELECT target FROM drafts WHERE rater_id = ? AND item_id = ? AND target GLOB 'step:[0-9]*'"
        " AND (value IS NOT NULL OR coalesce(rationale, '') != '')", (reviewer_id, item_id)))
