"""One page of the items a Browse view selects, with what a reviewer needs to
pick the ones worth opening: the matched words, labels, tags and flags."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from review.browse.facts import (
    failed_criteria_facts,
    flagged_facts,
    label_facts,
    step_mark_facts,
    tag_facts,
)
from review.browse.index import FacetIndex, facet_index
from review.browse.query import BrowseQuery
from review.browse.search import (
    SearchHit,
    TextQuery,
    item_excerpt,
    matching_items,
    parse_query,
    search_hits,
)
from store import Store
from store.runs import run_label_map

PER_PAGE = 20


@dataclass
class ResultItem:
    item_id: int
    uid: str
    kind: str
    dataset: str
    split: str | None
    model: str | None
    round_id: int | None
    case_id: str | None
    failed: bool
    snippet: str
    """Matched text with search markers (see review.browse.search), or the item's opening."""
    found_in: str = "item"
    note_by: str | None = None
    target: str = ""
    """The step the match lies in ('step:N'), when it lies in one."""
    labels: list[tuple[str, str]] = field(default_factory=list)
    """(rater, value) current labels; `parent:` raters label the parent item."""
    tags: list[tuple[str, str]] = field(default_factory=list)
    """(tag, target) in force."""
    flagged: bool = False
    step_ids: list[int] = field(default_factory=list)
    """A trajectory's step ids (what a tag can target), else empty."""
    patient_said: str | None = None
    """For a response: the patient's last turn before it (the context of the reply)."""
    step_marks: list[tuple[str, str, int | None]] = field(default_factory=list)
    """(target, error, severity) marked on its steps, in step order."""
    failed_gates: list[str] = field(default_factory=list)
    """Gates or criteria a machine or reference rater failed it on (see review.browse.facts)."""
    own_text: str | None = None
    """When the words were found in its parent (the patient's words): the opening of its own text."""


@dataclass
class BrowsePage:
    total: int
    page: int
    pages: int
    items: list[ResultItem]
    text: TextQuery


def browse(store: Store, q: BrowseQuery, per_page: int = PER_PAGE) -> BrowsePage:
    """The items the view selects, one page of them: best matches first when
    words are searched for, else in import order. A page past the last (a link
    kept after the view shrank) shows the last page."""
    ix = facet_index(store)  # this run reads this index only (see review.browse.index)
    text = parse_query(q.text)
    chosen = ix.select(store, q)
    total = int(np.count_nonzero(chosen))
    pages = max(1, -(-total // per_page))
    page = min(max(1, q.page), pages)
    offset = (page - 1) * per_page
    if text.match is not None:
        found = matching_items(store, text, _within(ix, store, q), per_page, offset)
        hits = search_hits(store, text, found)
    else:
        ids = ix.ids[chosen][offset:offset + per_page].tolist()
        excerpts = item_excerpt(store, ids)
        hits = [SearchHit(i, "", "", 0.0, excerpts.get(i, "")) for i in ids]
    return BrowsePage(total, page, pages, _result_items(store, hits), text)


def _within(ix: FacetIndex, store: Store, q: BrowseQuery) -> set[int] | None:
    """The items the view's filters other than the words allow (None: all)."""
    others = replace(q, text="", page=1, side=None)
    if others == BrowseQuery():
        return None
    return set(ix.item_ids(ix.select(store, others)))


def view_item_ids(store: Store, q: BrowseQuery) -> list[int]:
    """The ids of every item the view selects, in id order (no ranking: cheap)."""
    ix = facet_index(store)
    return ix.item_ids(ix.select(store, q))


def selected_item_ids(store: Store, q: BrowseQuery, limit: int | None = None) -> list[int]:
    """Every item the view selects (up to `limit`), in the order Browse lists them."""
    ix = facet_index(store)
    text = parse_query(q.text)
    if text.match is not None:
        return [f[0] for f in matching_items(store, text, _within(ix, store, q), limit)]
    return ix.item_ids(ix.select(store, q))[:limit]


def _result_items(store: Store, hits: list[SearchHit]) -> list[ResultItem]:
    if not hits:
        return []
    ids = json.dumps([h.item_id for h in hits])
    rows = {r["id"]: r for r in store.query(
        "SELECT i.id, i.uid, i.kind, d.name AS dataset, i.split, i.model, i.run_id, i.round_id,"
        " i.case_id,"
        " i.failed, CASE WHEN i.kind = 'trajectory' THEN (SELECT json_group_array("
        " coalesce(json_extract(s.value, '$.step_id'), s.key + 1)) FROM json_each(i.payload, '$.steps') s)"
        " END AS step_ids, CASE WHEN i.kind = 'response' THEN json_extract(p.payload, '$.turns[#-1]')"
        " END AS patient_said FROM items i JOIN datasets d ON d.id = i.dataset_id"
        " LEFT JOIN items p ON p.id = i.parent_id"
        " WHERE i.id IN (SELECT value FROM json_each(?))", (ids,))}
    labels: dict[int, list[tuple[str, str]]] = {}
    for item_id, who, value, _ in sorted(store.query(*label_facts(ids)), key=lambda r: r[1]):
        labels.setdefault(item_id, []).append((who, value))
    tags: dict[int, list[tuple[str, str]]] = {}
    for item_id, target, tag, _, _ in store.query(*tag_facts(ids)):
        tags.setdefault(item_id, []).append((tag, target))
    marks: dict[int, list[tuple[str, str, int | None]]] = {}
    for item_id, target, error, severity, _, _ in store.query(*step_mark_facts(ids)):
        marks.setdefault(item_id, []).append((target, error, severity))
    gates: dict[int, list[str]] = {}
    for item_id, gate in sorted({tuple(r) for r in store.query(*failed_criteria_facts(ids))}, key=lambda r: r[1]):
        gates.setdefault(item_id, []).append(gate)
    flagged = {r[0] for r in store.query(*flagged_facts(ids))}
    own_text = item_excerpt(store, [h.item_id for h in hits if h.found_in == "parent"], 400)
    runs = run_label_map(store.conn)  # a model's two runs named apart (store.runs)
    out = []
    for h in hits:
        r = rows[h.item_id]
        out.append(ResultItem(
            h.item_id, r["uid"], r["kind"], r["dataset"], r["split"],
            runs.get(r["run_id"], r["model"]), r["round_id"],
            r["case_id"], bool(r["failed"]), h.snippet, h.found_in, h.note_by, h.target,
            labels.get(h.item_id, []), tags.get(h.item_id, []), h.item_id in flagged,
            json.loads(r["step_ids"]) if r["step_ids"] else [],
            r["patient_said"] if isinstance(r["patient_said"], str) else None,
            marks.get(h.item_id, []), gates.get(h.item_id, []), own_text.get(h.item_id)))
    return out
