"""Side by side: every model's response to one prefix, with every rater's label.

What stands out is marked: raters who disagree about one response, and labels
that sit above or below the prefix's reference (gold) label in the ordinal
order (over- and under-triage).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from codebook import builtin_codebooks
from review.browse.facets import label_name
from review.reviewing.trajectory import message_text
from store import Store
from store.runs import run_label_map


@dataclass
class LabelCell:
    rater: str
    rater_kind: str
    """human | machine | reference"""
    value: str | None
    shown: str
    """The label in the clinician's words."""
    rationale: str | None = None
    vs_gold: int | None = None
    """Ordinal steps above (+) or below (-) the gold label; None when not comparable."""


@dataclass
class ResponseColumn:
    item_id: int
    uid: str
    kind: str
    model: str | None
    text: str
    failed: bool
    error: str | None
    labels: list[LabelCell] = field(default_factory=list)
    raters_disagree: bool = False
    """The raters of this response did not all give the same label."""


@dataclass
class SideBySide:
    prefix_id: int
    prefix_uid: str
    turns: list[str]
    prefix_labels: list[LabelCell]
    gold: str | None
    """The reference label of the prefix, if it has one."""
    responses: list[ResponseColumn]

    @property
    def models_disagree(self) -> bool:
        """The responses were not all given the same label (by their raters' majority)."""
        tops = {Counter(c.value for c in r.labels).most_common(1)[0][0]
                for r in self.responses if r.labels}
        return len(tops) > 1


def _ranks() -> dict[str, int]:
    return {code: rank for book in builtin_codebooks().values() if book.ordinal
            for rank, code in enumerate(book.codes)}


def _labels(store: Store, item_id: int, gold: str | None) -> list[LabelCell]:
    ranks = _ranks()
    rows = store.query(
        "SELECT r.name, r.kind, c.value, c.rationale FROM current_annotations c"
        " JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id"
        " WHERE c.item_id = ? AND c.target = '' AND c.status = 'answered' AND q.kind = 'labelset'"
        " AND q.item_id IS NULL ORDER BY CASE r.kind WHEN 'reference' THEN 0 WHEN 'machine' THEN 1"
        " ELSE 2 END, r.name", (item_id,))
    out = []
    for name, kind, value, rationale in rows:
        diff = ranks[value] - ranks[gold] if value in ranks and gold in ranks else None
        out.append(LabelCell(name, kind, value, label_name(value), rationale, diff))
    return out


def side_by_side(store: Store, uid: str) -> SideBySide | None:
    """The prefix `uid` (or the prefix of response `uid`) and all responses to it."""
    row = store.query_one("SELECT id, kind, parent_id FROM items WHERE uid = ?", (uid,))
    if row is None:
        return None
    prefix_id = row["parent_id"] if row["kind"] != "prefix" and row["parent_id"] else row["id"]
    prefix = store.query_one("SELECT id, uid, payload FROM items WHERE id = ?", (prefix_id,))
    payload = json.loads(prefix["payload"])
    turns = [message_text(t.get("content") if isinstance(t, dict) else t)
             for t in payload.get("turns") or []]
    gold = store.scalar(
        "SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " JOIN questions q ON q.id = c.question_id WHERE c.item_id = ? AND r.kind = 'reference'"
        " AND c.target = '' AND c.status = 'answered' AND q.kind = 'labelset'"
        " ORDER BY r.role = 'gold' DESC, c.id LIMIT 1",
        (prefix_id,))
    responses = []
    runs = run_label_map(store.conn)  # a model's two runs named apart (store.runs)
    for r in store.query("SELECT id, uid, kind, model, run_id, payload, failed FROM items"
                         " WHERE parent_id = ? ORDER BY model, id", (prefix_id,)):
        p = json.loads(r["payload"])
        labels = _labels(store, r["id"], gold)
        responses.append(ResponseColumn(
            r["id"], r["uid"], r["kind"], runs.get(r["run_id"], r["model"]),
            p.get("response") or p.get("completion") or "",
            bool(r["failed"]), p.get("error"), labels,
            len({c.value for c in labels}) > 1))
    return SideBySide(prefix_id, prefix["uid"], turns, _labels(store, prefix_id, None), gold,
                      responses)
