"""What a reviewer sees of a prefix or a response, and the flag they raise on it.

The display model (`ItemView`) of prefixes and responses, a reviewer's
answers on one (`my_answers`) and their flag on any item (`flag_item`). Their
answers are committed by `review.reviewing.commit`; what of the item's labels
they may see is decided by `review.reviewing.blinding`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from codebook import Codebook, codebook_in_force
from review.reviewing.queue import IN_ORDER, KIND_WIDE
from review.reviewing.trajectory import message_text
from review.team.access import require_role
from review.team.reviewers import Reviewer
from store import Store, utcnow


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
    points: float | None = None
    """A checklist criterion's points (None for a label question)."""
    must_not: bool = False
    """A checklist criterion that is an error when met."""

    @property
    def model_input(self) -> list[tuple[str, str]]:
        """What the model was given, as (role, text), when the generation kept it
        (CARE-Bench raw generations' `input_messages`: the system prompt and the
        patient's turns as sent); [] when it did not."""
        messages = self.payload.get("input_messages")
        if not isinstance(messages, list):
            return []
        return [(str(m.get("role")), message_text(m.get("content")))
                for m in messages if isinstance(m, dict)]


@dataclass
class Answer:
    annotation_id: int
    status: str
    value: str | None
    rationale: str | None
    confidence: int | None
    phase: str
    created_at: str


def load_item(store: Store, item_id: int, question: str | None = None) -> ItemView | None:
    """The item as the Review screen shows it, with the question asked of it: the one
    keyed `question`, else the first of its kind; and that question's codebook at the
    version in force."""
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
        turns = json.loads(parent["payload"]).get("turns", []) if parent else []
    q = store.query_one(
        f"SELECT id, key, text, codebook, points, meta FROM questions WHERE {KIND_WIDE}"
        + (" AND key = ?" if question else "") + f" ORDER BY {IN_ORDER} LIMIT 1",
        (row["kind"], question) if question else (row["kind"],),
    )
    return ItemView(
        id=row["id"], uid=row["uid"], kind=row["kind"], dataset=row["dataset"],
        split=row["split"], case_id=row["case_id"], round_id=row["round_id"],
        model=row["model"], failed=bool(row["failed"]),
        rounds=[Round(i + 1, t) for i, t in enumerate(turns)],
        response=payload.get("response"), error=payload.get("error"), payload=payload,
        meta=meta, question_id=q["id"] if q else None, question_key=q["key"] if q else None,
        question_text=q["text"] if q else None,
        codebook=codebook_in_force(store, q["codebook"]) if q else None,
        parent_id=row["parent_id"],
        points=q["points"] if q else None,
        must_not=bool(json.loads(q["meta"] or "{}").get("must_not")) if q else False,
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
    return [Answer(r["id"], r["status"], r["value"], r["rationale"], r["confidence"], r["phase"],
                   r["created_at"]) for r in rows]


def flag_item(store: Store, reviewer: Reviewer, item_id: int, raised: bool = True,
              note: str | None = None) -> None:
    """Raise (or clear) this reviewer's flag on an item, for later review."""
    require_role(reviewer, "review")
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
    return bool(row and row["raised"])


def item_uid(store: Store, item_id: int) -> str | None:
    """The public id of an item (what links and messages name it by)."""
    return store.scalar("SELECT uid FROM items WHERE id = ?", (item_id,))
