"""The facet index: every item's facet values held in memory, so a view's
selection and all its counts are array operations, not queries.

Built from review.browse.facts (the one definition of each facet) and kept
per database file, shared by every session of the process. Each part is
rebuilt only when what it reads has changed: item fields when items or
imports change, labels and marks when annotations change, tags and flags
when they change (append-only tables: their largest row id says whether
anything is new). Text matches come from the search index.

An index, once built, is never changed: bringing it up to date builds a new
one (sharing the parts that did not change) and `facet_index` swaps it in.
A Browse run takes one index and reads only it, so another session's
refresh - on its own thread, for items just imported - cannot change the
arrays under it (a selection made before and an index read after would
differ in size).

Selection: within a facet the chosen values are alternatives (OR); across
facets all must hold (AND); labels of one rater are alternatives, labels of
different raters must all hold. A facet's counts are taken with every other
filter applied and its own left out.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from codebook import builtin_codebooks
from review.browse.facts import (
    failed_criteria_facts,
    flagged_facts,
    label_facts,
    reviewed_facts,
    step_mark_facts,
    tag_facts,
)
from review.browse.query import BrowseQuery, split_label
from review.browse.search import excluded_item_ids, matched_item_ids, parse_query
from store import Store

ATTRIBUTES = {"kinds": "i.kind", "datasets": "d.name", "splits": "i.split", "models": "i.model",
              "rounds": "i.round_id"}
"""Facets read from the item's own fields (BrowseQuery field -> column). A model is its
run's label where the item belongs to a run (`store.runs`): two runs of one model are two
values of the facet, named apart by their protocol (or whatever else tells them apart)."""
TEXT_MEMO = 32
"""Text queries whose matches are remembered (per database, until the index changes)."""


@dataclass
class Column:
    """One value per row, as codes into `values` (-1: none)."""
    codes: np.ndarray
    values: list[str]

    def mask(self, chosen: Iterable[str]) -> np.ndarray:
        wanted = [self.values.index(v) for v in chosen if v in self.values]
        return np.isin(self.codes, wanted)

    def counts(self, base: np.ndarray) -> dict[str, int]:
        n = np.bincount(self.codes[base & (self.codes >= 0)], minlength=len(self.values))
        return {v: int(c) for v, c in zip(self.values, n, strict=True) if c}


@dataclass
class Sets:
    """Any number of values per item: one boolean mask per value."""
    masks: dict[str, np.ndarray] = field(default_factory=dict)

    def mask(self, chosen: Iterable[str], size: int) -> np.ndarray:
        out = np.zeros(size, bool)
        for value in chosen:
            if value in self.masks:
                out |= self.masks[value]
        return out

    def counts(self, base: np.ndarray) -> dict[str, int]:
        out = {v: int(np.count_nonzero(m & base)) for v, m in self.masks.items()}
        return {v: n for v, n in out.items() if n}


@dataclass
class StepMarks:
    """One row per marked step: the item's position, the error, the severity (0: none)."""
    pos: np.ndarray
    errors: Column
    severity: np.ndarray

    def rows(self, errors: Sequence[str], severities: Sequence[int]) -> np.ndarray:
        keep = np.ones(len(self.pos), bool)
        if errors:
            keep &= self.errors.mask(errors)
        if severities:
            keep &= np.isin(self.severity, list(severities))
        return keep


@cache
def _label_info() -> dict[str, tuple[str, int]]:
    """code -> (codebook, ordinal rank or -1) for every label of the shipped codebooks."""
    return {code: (book.key, rank if book.ordinal else -1)
            for book in builtin_codebooks().values() for rank, code in enumerate(book.codes)}


class FacetIndex:
    """The facet values of every item of one database, by item position."""

    def __init__(self) -> None:
        self.stamps: dict[str, tuple] = {}
        self.ids = np.zeros(0, np.int64)
        self.parent = np.zeros(0, np.int64)
        """Position of each item's parent, -1 when it has none."""
        self.attrs: dict[str, Column] = {}
        self.labels = Sets()
        """'who=value' -> items."""
        self.raters: dict[str, np.ndarray] = {}
        """who -> each item's label, as a code into `values` (-1: none)."""
        self.values: list[str] = []
        self.value_book = np.zeros(0, np.int32)
        self.value_rank = np.zeros(0, np.int32)
        self.gates = Sets()
        self.steps = StepMarks(np.zeros(0, np.int64), Column(np.zeros(0, np.int32), []),
                               np.zeros(0, np.int32))
        self.reviewers = Sets()
        self.tags = Sets()
        self.tag_tree: dict[str, list[str]] = {}
        self.tag_subtrees = Sets()
        """tag -> items carrying it or a tag under it (what choosing it selects)."""
        self.flagged = np.zeros(0, bool)
        self._text: OrderedDict[tuple[str, str | None], np.ndarray] = OrderedDict()
        self._text_lock = threading.Lock()

    @property
    def size(self) -> int:
        return len(self.ids)

    # -- positions ---------------------------------------------------------------
    def locate(self, item_ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(positions, known): where each item id sits, and whether it is indexed."""
        ids = np.fromiter(item_ids, np.int64)
        if not self.size:
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        pos = np.minimum(np.searchsorted(self.ids, ids), self.size - 1)
        return pos, self.ids[pos] == ids

    def mask_of(self, item_ids: Iterable[int]) -> np.ndarray:
        pos, known = self.locate(item_ids)
        out = np.zeros(self.size, bool)
        out[pos[known]] = True
        return out

    def item_ids(self, mask: np.ndarray) -> list[int]:
        return self.ids[mask].tolist()

    # -- building ----------------------------------------------------------------
    def refresh(self, store: Store) -> FacetIndex:
        """This index when it is up to date with the store, else a new one with
        the parts that are out of date rebuilt (this one is left as it is)."""
        row = store.query_one(
            "SELECT (SELECT MAX(id) FROM items), (SELECT MAX(id) FROM imports),"
            " (SELECT MAX(id) FROM annotations), (SELECT MAX(id) FROM item_tags),"
            " (SELECT MAX(id) FROM tags), (SELECT MAX(id) FROM flags),"
            " (SELECT MAX(id) FROM search_docs), (SELECT COUNT(*) FROM search_docs)")
        items = (row[0], row[1])
        wanted = {"items": items, "answers": (*items, row[2]), "tags": (*items, row[3], row[4]),
                  "flags": (*items, row[5]), "text": (*items, row[6], row[7])}
        if self.stamps == wanted:
            return self
        new = copy.copy(self)  # shares the parts that stay: no part is ever changed in place
        new.stamps = dict(self.stamps)
        new._text_lock = threading.Lock()
        with self._text_lock:
            new._text = OrderedDict(self._text) if self.stamps.get("text") == wanted["text"] \
                else OrderedDict()
        for part, load in (("items", new._load_items), ("answers", new._load_answers),
                           ("tags", new._load_tags), ("flags", new._load_flags)):
            if new.stamps.get(part) != wanted[part]:
                load(store)
                new.stamps[part] = wanted[part]
        new.stamps["text"] = wanted["text"]
        return new

    def _load_items(self, store: Store) -> None:
        from store.runs import run_label_map

        rows = store.query("SELECT i.id, i.parent_id, " + ", ".join(ATTRIBUTES.values())
                           + ", i.run_id FROM items i JOIN datasets d ON d.id = i.dataset_id"
                           " ORDER BY i.id")
        labels = run_label_map(store.conn)
        run_at = 2 + len(ATTRIBUTES)
        self.ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        pos, known = self.locate(r[1] or 0 for r in rows)
        self.parent = np.where(known, pos, -1)
        self.attrs = {}
        for k, name in enumerate(ATTRIBUTES, start=2):
            values: dict[str, int] = {}
            if name == "models":
                of = [labels.get(r[run_at], r[k]) for r in rows]
            else:
                of = [r[k] for r in rows]
            codes = np.fromiter((-1 if v is None else values.setdefault(str(v), len(values))
                                 for v in of), np.int32, len(rows))
            self.attrs[name] = Column(codes, list(values))
        self.stamps.clear()  # every other part holds item positions: rebuild them too

    def _load_answers(self, store: Store) -> None:
        rows = store.query(*label_facts())
        pos, known = self.locate(r[0] for r in rows)
        info = _label_info()
        self.values = sorted({r[2] for r in rows})
        code = {v: k for k, v in enumerate(self.values)}
        books = {b: k for k, b in enumerate(sorted({info.get(v, (v, -1))[0] for v in self.values}))}
        self.value_book = np.array([books[info.get(v, (v, -1))[0]] for v in self.values], np.int32)
        self.value_rank = np.array([info.get(v, (v, -1))[1] for v in self.values], np.int32)
        by_key: dict[str, list[int]] = {}
        self.raters = {}
        for (_, who, value, _), p, ok in zip(rows, pos, known, strict=True):
            if ok:
                by_key.setdefault(f"{who}={value}", []).append(p)
                self.raters.setdefault(who, np.full(self.size, -1, np.int32))[p] = code[value]
        self.labels = Sets({k: self._at(v) for k, v in by_key.items()})
        self.gates = self._sets(store.query(*failed_criteria_facts()))
        marks = store.query(*step_mark_facts())
        pos, known = self.locate(r[0] for r in marks)
        errors: dict[str, int] = {}
        codes = np.fromiter((errors.setdefault(r[2], len(errors)) for r in marks), np.int32, len(marks))
        severity = np.fromiter((r[3] or 0 for r in marks), np.int32, len(marks))
        self.steps = StepMarks(pos[known], Column(codes[known], list(errors)), severity[known])
        self.reviewers = self._sets(store.query(*reviewed_facts()))

    def _load_tags(self, store: Store) -> None:
        self.tags = self._sets((r[0], r[2]) for r in store.query(*tag_facts()))
        rows = store.query("SELECT id, name, parent_id FROM tags")
        names = {tag_id: name for tag_id, name, _ in rows}
        self.tag_tree = {name: [] for name in names.values()}
        for _, name, parent in rows:
            if parent in names:
                self.tag_tree[names[parent]].append(name)
        self.tag_subtrees = Sets({name: self.tags.mask(self.narrower_tags([name]), self.size)
                                  for name in self.tag_tree})

    def _load_flags(self, store: Store) -> None:
        self.flagged = self.mask_of(r[0] for r in store.query(*flagged_facts()))

    def _at(self, positions: list[int]) -> np.ndarray:
        out = np.zeros(self.size, bool)
        out[positions] = True
        return out

    def _sets(self, rows: Iterable[Sequence]) -> Sets:
        by_value: dict[str, list[int]] = {}
        for item_id, value in rows:
            by_value.setdefault(str(value), []).append(item_id)
        return Sets({v: self.mask_of(ids) for v, ids in by_value.items()})

    # -- selecting ---------------------------------------------------------------
    def text_mask(self, store: Store, text: str) -> np.ndarray | None:
        """Items whose text or notes match, or whose parent's do, less the items
        the -words exclude (see review.browse.search.matching_items); None: nothing to
        search for."""
        query = parse_query(text)
        if query.match is None:
            return None
        key = (query.match, query.exclude)
        with self._text_lock:
            found = self._text.get(key)
        if found is None:
            hit = self.mask_of(matched_item_ids(store, query.match))
            if query.exclude is not None:
                out = self.mask_of(excluded_item_ids(store, query))
                hit &= ~out
            via_parent = (self.parent >= 0) & hit[np.maximum(self.parent, 0)]
            found = hit | via_parent
            if query.exclude is not None:
                found &= ~out
            found.flags.writeable = False  # shared by every run that reads this index
            with self._text_lock:
                self._text[key] = found
                while len(self._text) > TEXT_MEMO:
                    self._text.popitem(last=False)
        return found

    def stored_tags(self, names: Iterable[str]) -> dict[str, str]:
        """Each name that is a tag (in any case) -> the tag's name as stored."""
        folded = {n.casefold(): n for n in self.tag_tree}
        return {n: folded[n.casefold()] for n in names if n.casefold() in folded}

    def narrower_tags(self, names: Iterable[str]) -> list[str]:
        """The tags named (in any case) and every tag under them in the taxonomy."""
        out, stack = [], list(self.stored_tags(names).values())
        while stack:
            name = stack.pop()
            if name not in out:  # a loop in the taxonomy ends here
                out.append(name)
                stack.extend(self.tag_tree.get(name, []))
        return out

    def pair(self, a: str, b: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(both labelled from one codebook, A's codes, B's codes) over all items."""
        none = np.full(self.size, -1, np.int32)
        ca, cb = self.raters.get(a, none), self.raters.get(b, none)
        both = (ca >= 0) & (cb >= 0)
        both &= self.value_book[np.maximum(ca, 0)] == self.value_book[np.maximum(cb, 0)] \
            if len(self.values) else both
        return both, ca, cb

    def distance(self, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
        """(both labelled on one ordinal scale, |rank A - rank B|) over all items."""
        both, ca, cb = self.pair(a, b)
        if not len(self.values):
            return both, np.zeros(self.size, np.int32)
        ra, rb = self.value_rank[np.maximum(ca, 0)], self.value_rank[np.maximum(cb, 0)]
        return both & (ra >= 0) & (rb >= 0), np.abs(ra - rb)

    def code(self, value: str | None) -> int:
        return self.values.index(value) if value in self.values else -2

    def select(self, store: Store, q: BrowseQuery, skip: str | None = None) -> np.ndarray:
        """The items the view selects, leaving out facet `skip` (a BrowseQuery
        field name, or 'pair' for what rater A and B said)."""
        out = np.ones(self.size, bool)
        if q.text and skip != "text":
            text = self.text_mask(store, q.text)
            if text is not None:
                out &= text
        for name, column in self.attrs.items():
            chosen = [str(v) for v in getattr(q, name)]
            if chosen and skip != name:
                out &= column.mask(chosen)
        if q.labels and skip != "labels":
            by_rater: dict[str, list[str]] = {}
            for pair in q.labels:
                who, _ = split_label(pair)
                by_rater.setdefault(who, []).append(pair)
            for keys in by_rater.values():
                out &= self.labels.mask(keys, self.size)
        if q.rater_a and q.rater_b:
            if skip != "pair":
                both, ca, cb = self.pair(q.rater_a, q.rater_b)
                out &= both
                if q.a_said:
                    out &= ca == self.code(q.a_said)
                if q.b_said:
                    out &= cb == self.code(q.b_said)
            if q.distances and skip != "distances":
                ordinal, dist = self.distance(q.rater_a, q.rater_b)
                out &= ordinal & np.isin(dist, list(q.distances))
        if q.gates and skip != "gates":
            out &= self.gates.mask(q.gates, self.size)
        if (q.step_errors or q.severities) and skip not in ("step_errors", "severities"):
            out &= self.step_items(q.step_errors, q.severities)
        if q.tags and skip != "tags":
            out &= self.tags.mask(self.narrower_tags(q.tags), self.size)
        if q.flagged and skip != "flagged":
            out &= self.flagged
        if q.reviewers and skip != "reviewers":
            out &= self.reviewers.mask(q.reviewers, self.size)
        return out

    def step_items(self, errors: Sequence[str], severities: Sequence[int]) -> np.ndarray:
        """Items with a step marked with one of `errors` at one of `severities`."""
        out = np.zeros(self.size, bool)
        out[self.steps.pos[self.steps.rows(errors, severities)]] = True
        return out


_indexes: dict[str, FacetIndex] = {}
_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()


def facet_index(store: Store) -> FacetIndex:
    """The store's facet index, up to date (one per database file per process,
    shared by every session). Read only the index it returns for the whole of
    one run: a newer one may be swapped in meanwhile, this one never changes."""
    key = store.path if store.path != ":memory:" else f":memory:{id(store.conn)}"
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        current = _indexes.get(key)
        current = FacetIndex() if current is None else current
        _indexes[key] = fresh = current.refresh(store)
        return fresh
