"""Facet counts: for each filter, its values and how many items each would select.

A facet's counts are taken with every other filter of the view applied (and
its own left out), so choosing one model still shows how many items the
other models have. Counts are items, not annotations: an item two clinicians
labelled 1B counts once under each clinician's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from codebook import known_codebooks, label_words
from codebook.vocabulary import first_up, rater_words
from review.browse.index import FacetIndex, facet_index
from review.browse.query import PARENT, BrowseQuery, split_label
from store import Store

GATE_NAMES = {
    "diagnosis": "Diagnosis", "required_tools": "Required tools",
    "parameterised_actions": "Parameterised actions", "must_ask": "Must-ask coverage",
    "outcome": "Outcome (all gates)", "must_ask_topic": "A must-ask topic",
    "healthbench": "HealthBench criterion", "criterion": "Rubric criterion",
    "process": "Process rubric", "verifier": "Verifier check",
}
KIND_NAMES = {"prefix": "Conversations", "response": "Model replies",
              "trajectory": "Agent runs", "graded_conversation": "Graded conversations",
              "conversation": "Chats",
              "task": "Tasks"}


@dataclass
class FacetValue:
    value: str
    """As written in the URL."""
    label: str
    """As shown."""
    count: int
    selected: bool = False


@dataclass
class Facet:
    field: str
    """The BrowseQuery field it sets (the pair facet sets a_said and b_said)."""
    title: str
    values: list[FacetValue] = field(default_factory=list)


def label_name(code: str | None, researcher: bool = False) -> str:
    """A label code in the clinician's words: 'Urgent care', 'Wrong tool', 'met'
    (`codebook.label_words`); `researcher`: with the code beside, 'Urgent care (1B)'."""
    if code is None:
        return "no answer"
    return label_words(code, researcher)


def ordinal_rank(code: str | None) -> int | None:
    """A label's place in its codebook's ordinal order (0 = least escalation), or None."""
    for book in known_codebooks():
        if book.ordinal and code in book.codes:
            return book.rank(code)
    return None


_RATERS: dict[tuple, dict[str, str]] = {}
"""A database's raters in words, by (path, how many raters there are)."""


def rater_words_of(store: Store) -> dict[str, str]:
    """Every rater of the database in words (`codebook.vocabulary.rater_words`)."""
    key = (store.path, store.scalar("SELECT COUNT(*) FROM raters"))
    if key not in _RATERS:
        _RATERS.clear()
        _RATERS[key] = {r["name"]: rater_words(r["name"], r["kind"], r["role"], r["model"],
                                               r["prompt_version"])
                        for r in store.query("SELECT name, kind, role, model, prompt_version"
                                             " FROM raters")}
    return _RATERS[key]


def rater_name(who: str, store: Store | None = None, researcher: bool = False,
               start: bool = True) -> str:
    """A rater as a clinician reads it, by role ('The reference label', 'The mapper,
    prompt v1', a person's name); `parent:<rater>` as '<rater> (on the conversation)':
    a label on the conversation a reply answers. `researcher`: the name it is stored
    under beside the words, for an export read back against the data. `start`
    False: as inside a sentence ("the reference label")."""
    parent = who.startswith(PARENT)
    base = who[len(PARENT):] if parent else who
    words = (rater_words_of(store).get(base) if store is not None else None) \
        or rater_words(base, None, None)
    words = words if words == base or not start else first_up(words)  # a name as written
    if researcher and words != base:
        words += f" ({base})"
    return f"{words} (on the conversation)" if parent else words


def _values(counts: dict[str, int], selected, label=str, order: str = "count") -> list[FacetValue]:
    """Values with items under the other filters, then chosen values with none."""
    selected = [str(s) for s in selected]
    keys = sorted(counts, key=(lambda v: (-counts[v], v)) if order == "count" else _natural)
    out = [FacetValue(v, label(v), counts[v], v in selected) for v in keys]
    out += [FacetValue(s, label(s), 0, True) for s in selected if s not in counts]
    return out


def _natural(value: str) -> tuple:
    return (0, int(value), "") if value.lstrip("-").isdigit() else (1, 0, value)


def facets(store: Store, q: BrowseQuery) -> dict[str, Facet]:
    """Every facet of the view with its counts, by the BrowseQuery field it sets."""
    ix = facet_index(store)

    def base(skip: str) -> np.ndarray:
        return ix.select(store, q, skip)

    out = {
        "kinds": Facet("kinds", "Kind", _values(ix.attrs["kinds"].counts(base("kinds")), q.kinds,
                                                 lambda k: KIND_NAMES.get(k, k))),
        "datasets": Facet("datasets", "Dataset",
                          _values(ix.attrs["datasets"].counts(base("datasets")), q.datasets)),
        "splits": Facet("splits", "Split", _values(ix.attrs["splits"].counts(base("splits")), q.splits)),
        "models": Facet("models", "Model", _values(ix.attrs["models"].counts(base("models")), q.models)),
        "rounds": Facet("rounds", "Patient's turn", _values(ix.attrs["rounds"].counts(base("rounds")), q.rounds,
                                                    lambda r: f"turn {r}", order="natural")),
    }

    def show_label(pair: str) -> str:
        who, value = split_label(pair)
        return f"{rater_name(who, store)}: {label_name(value)}"
    out["labels"] = Facet("labels", "Label given", _values(
        ix.labels.counts(base("labels")), q.labels, show_label, order="natural"))
    if q.rater_a and q.rater_b:
        out["pair"], out["distances"] = _pair_facets(store, ix, q)
    out["gates"] = Facet("gates", "Failed gate or criterion", _values(
        ix.gates.counts(base("gates")), q.gates, lambda g: GATE_NAMES.get(g, g.replace("_", " "))))
    out["step_errors"], out["severities"] = _step_facets(store, ix, q)
    out["tags"] = _tag_facet(ix, base("tags"), q.tags)
    n = int(np.count_nonzero(ix.flagged & base("flagged")))
    out["flagged"] = Facet("flagged", "Flagged", _values(
        {"1": n} if n else {}, ["1"] if q.flagged else [], lambda _: "flagged for review"))
    out["reviewers"] = Facet("reviewers", "Reviewed by", _values(
        ix.reviewers.counts(base("reviewers")), q.reviewers, order="natural"))
    return out


def _pair_facets(store: Store, ix: FacetIndex, q: BrowseQuery) -> tuple[Facet, Facet]:
    both, ca, cb = ix.pair(q.rater_a, q.rater_b)
    rows = both & ix.select(store, q, "pair")
    counts: dict[str, int] = {}
    if rows.any():
        combos, n = np.unique(np.stack([ca[rows], cb[rows]]), axis=1, return_counts=True)
        counts = {f"{ix.values[x]}|{ix.values[y]}": int(c) for (x, y), c in zip(combos.T, n, strict=True)}
    chosen = [f"{q.a_said or ''}|{q.b_said or ''}"] if (q.a_said or q.b_said) else []

    def show(cell: str) -> str:
        x, _, y = cell.partition("|")
        return (f"A: {label_name(x) if x else 'any'} · B: {label_name(y) if y else 'any'}"
                + (" (agree)" if x == y else ""))
    cells = _values(counts, chosen, show)
    cells.sort(key=lambda v: (v.label.endswith("(agree)"), -v.count))  # disagreements first
    pair = Facet("pair", "A said · B said", cells)
    ordinal, dist = ix.distance(q.rater_a, q.rater_b)
    rows = ordinal & ix.select(store, q, "distances")
    n = np.bincount(dist[rows]) if rows.any() else np.zeros(0, np.int64)
    distance = Facet("distances", "Ordinal distance", _values(
        {str(d): int(c) for d, c in enumerate(n) if c}, q.distances,
        lambda d: "same label" if str(d) == "0" else f"{d} apart", order="natural"))
    return pair, distance


def _tag_facet(ix: FacetIndex, base: np.ndarray, chosen: tuple[str, ...]) -> Facet:
    """Each tag with the items choosing it selects: those carrying it or a tag
    under it in the taxonomy. A tag chosen in another case (a link's
    'Unsafe Reassurance') keeps that spelling as its value - the widget's -
    and is counted and shown as the tag it names."""
    counts = ix.tag_subtrees.counts(base)
    respelled = {name: tag for name, tag in ix.stored_tags(chosen).items() if name != tag}
    for name, tag in respelled.items():
        counts[name] = counts.get(tag, 0)
    for tag in set(respelled.values()) - set(chosen):
        counts.pop(tag, None)  # listed once, under the spelling it was chosen by
    return Facet("tags", "Tag", _values(counts, chosen, lambda v: respelled.get(v, v)))


def _step_facets(store: Store, ix: FacetIndex, q: BrowseQuery) -> tuple[Facet, Facet]:
    base = ix.select(store, q, "step_errors")
    steps = ix.steps
    in_view = base[steps.pos] if len(steps.pos) else np.zeros(0, bool)

    def items_per(codes: np.ndarray, keep: np.ndarray) -> dict[int, int]:
        pairs = {(int(c), int(p)) for c, p in zip(codes[keep], steps.pos[keep], strict=True)}
        out: dict[int, int] = {}
        for c, _ in pairs:
            out[c] = out.get(c, 0) + 1
        return out

    by_error = items_per(steps.errors.codes, in_view & steps.rows((), q.severities))
    errors = Facet("step_errors", "Step error", _values(
        {steps.errors.values[c]: n for c, n in by_error.items()}, q.step_errors, label_name))
    by_severity = items_per(steps.severity, in_view & steps.rows(q.step_errors, ()) & (steps.severity > 0))
    names = {str(s["level"]): s["name"] for book in known_codebooks() for s in book.severity}
    severity = Facet("severities", "Severity", _values(
        {str(c): n for c, n in by_severity.items()}, q.severities,
        lambda s: f"{s} {names.get(str(s), '')}".strip(), order="natural"))
    return errors, severity


def comparable_raters(store: Store) -> list[str]:
    """Raters with labels to compare (reference, then machine, then human), and
    each reference rater's label on the parent item (`parent:<rater>`)."""
    labelled = ("SELECT 1 FROM annotations a JOIN questions qq ON qq.id = a.question_id"
                " WHERE a.rater_id = r.id AND qq.kind = 'labelset' AND qq.item_id IS NULL"
                " AND a.target = '' AND a.status = 'answered'"
                # a label in force: not one since withdrawn (a settlement reopened)
                " AND NOT EXISTS (SELECT 1 FROM annotations b WHERE b.item_id = a.item_id"
                " AND b.question_id = a.question_id AND b.rater_id = a.rater_id"
                " AND b.target = a.target AND b.id > a.id AND b.status != 'answered')")
    rows = store.query(
        f"SELECT r.name, r.kind, r.kind = 'reference' AND EXISTS ({labelled} AND EXISTS"
        " (SELECT 1 FROM items c WHERE c.parent_id = a.item_id)) FROM raters r"
        f" WHERE EXISTS ({labelled}) ORDER BY CASE r.kind WHEN 'reference' THEN 0"
        " WHEN 'machine' THEN 1 ELSE 2 END, r.name")
    return [r[0] for r in rows] + [PARENT + r[0] for r in rows if r[2]]
