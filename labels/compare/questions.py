"""Question sets: which questions a comparison pools, and what their answers mean.

A *question set* is one label-set question (e.g. the CARE-Bench prefix
question ``carebench.escalation_needed``) or a family of rubric criteria
(every criterion question of one codebook). Its codebook fixes the allowed
answers, their order and so the statistic that fits (see :func:`level_of`):

- an ordinal label set (CARE-Bench escalation) is compared as *ordinal*:
  weighted kappa, ordinal alpha, Gwet's AC2;
- a nominal label set (CliniCARE verdicts) as *nominal*;
- rubric criteria (met / not met) as *binary*: with PABAK and Gwet's AC1,
  because most criteria are "not met" and kappa collapses on skewed labels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from codebook import (
    CANNOT_ASSESS,
    CAREBENCH,
    MULTI_SEPARATOR,
    Codebook,
    codebook,
    codebook_in_force,
)
from store import Store

ITEM_WORDS = {
    "prefix": "prefixes",
    "response": "responses",
    "trajectory": "trajectories",
    "graded_conversation": "graded conversations",
    "conversation": "chats",
}


@dataclass(frozen=True)
class QuestionSet:
    """The questions one comparison pools, with their shared answer set."""

    key: str
    """How to name it to ``question_set``: a question key, ``criteria:<codebook>`` or a glob."""
    title: str
    """In the clinician's words, e.g. "Responses: which action does this response recommend?"."""
    codebook: str
    kind: str
    """labelset | criterion"""
    level: str
    """ordinal | nominal | binary: decides which statistics are computed."""
    categories: tuple[str, ...]
    """Allowed answers in codebook order (the ordinal order where ordinal)."""
    labels: tuple[str, ...]
    """Short names of the categories, for charts."""
    item_kinds: tuple[str, ...]
    """Kinds of item the questions are asked of."""
    n_questions: int
    where: str
    """SQL condition on ``questions q`` selecting the set (internal)."""
    params: tuple = ()
    values: tuple[float, ...] | None = None
    """The categories' numbers where the codebook's scale is interval (Krippendorff's
    alpha (interval) is then computed on them too)."""
    weights: tuple[tuple[float, ...], ...] | None = None
    """The codebook's own agreement weights, if it defines them."""
    chosen_code: str | None = None
    """One label of a multiple-choice question (`QUESTION#CODE`): each answer is read as
    choosing it or not (`CHOSEN`, `NOT_CHOSEN`), compared as a binary question."""

    def label(self, code: str | None) -> str:
        """The short name of an answer code."""
        if code is None:
            return "no answer"
        if code == CANNOT_ASSESS:
            return "cannot assess"
        try:
            return self.labels[self.categories.index(code)]
        except ValueError:
            return code

    def with_cannot_assess(self) -> QuestionSet:
        """The same set with "cannot assess" as one more (unordered) category."""
        if CANNOT_ASSESS in self.categories:
            return self
        level = "nominal"
        return QuestionSet(  # no scale values or weights for the unordered extra answer
            self.key, self.title, self.codebook, self.kind, level,
            (*self.categories, CANNOT_ASSESS), (*self.labels, "cannot assess"),
            self.item_kinds, self.n_questions, self.where, self.params,
            chosen_code=self.chosen_code,
        )

    def read(self, value: str) -> str:
        """An answer's stored value as this set compares it: a multiple-choice answer as
        choosing `chosen_code` or not; any other as it is."""
        if self.chosen_code is None or value == CANNOT_ASSESS:
            return value
        return CHOSEN if self.chosen_code in value.split(MULTI_SEPARATOR) else NOT_CHOSEN


CHOSEN, NOT_CHOSEN = "chosen", "not_chosen"
"""How a label of a multiple-choice question is compared: chosen in an answer, or not."""


def carebench_questions() -> tuple[str, str]:
    """The CARE-Bench prefix and response question keys, from the codebook."""
    qs = {q.applies_to: q.key for q in codebook(CAREBENCH).questions}
    return qs["prefix"], qs["response"]


def level_of(book: Codebook, question_kind: str) -> str:
    """The measurement level a question's answers are compared at (the one place
    this is decided): criteria are binary, ordinal label sets ordinal, others nominal."""
    if question_kind == "criterion":
        return "binary"
    return "ordinal" if book.ordinal else "nominal"  # an interval scale is ordered too


def codebook_for(store: Store, key: str) -> Codebook:
    """A codebook by key, at its version in force (`codebook.codebooks`: the shipped ones
    and the study's own in the database)."""
    book = codebook_in_force(store, key)
    if book is None:
        raise ValueError(f"codebook {key!r} is neither shipped nor in this database")
    return book


def _make(store: Store, key: str, where: str, params: tuple, title: str | None) -> QuestionSet:
    rows = store.query(
        f"SELECT q.codebook, q.kind, q.text, COALESCE(i.kind, q.applies_to) AS item_kind"
        f" FROM questions q LEFT JOIN items i ON i.id = q.item_id WHERE {where}",
        params,
    )
    if not rows:
        raise ValueError(f"no question matches {key!r}")
    books = {r["codebook"] for r in rows}
    kinds = {r["kind"] for r in rows}
    if len(books) > 1 or len(kinds) > 1:
        raise ValueError(
            f"{key!r} mixes answer sets ({', '.join(sorted(books))}); "
            "a comparison pools questions with one codebook"
        )
    book = codebook_for(store, books.pop())
    kind = kinds.pop()
    item_kinds = tuple(sorted({r["item_kind"] for r in rows if r["item_kind"]}))
    if title is None:
        where_asked = ", ".join(ITEM_WORDS.get(k, k) for k in item_kinds) or "items"
        title = (
            f"{where_asked.capitalize()}: {rows[0]['text']}"
            if len(rows) == 1
            else f"{where_asked.capitalize()}: {len(rows)} rubric criteria ({book.title})"
        )
    return QuestionSet(
        key=key,
        title=title,
        codebook=book.key,
        kind=kind,
        level=level_of(book, kind),
        categories=tuple(book.codes),
        labels=tuple(label.short for label in book.labels),
        item_kinds=item_kinds,
        n_questions=len(rows),
        where=where,
        params=params,
        values=book.values if kind != "criterion" else None,
        weights=book.weights if kind != "criterion" else None,
    )


def _one_label(qs: QuestionSet, book: Codebook, code: str) -> QuestionSet:
    """The set of one label of a multiple-choice question: chosen or not, per answer."""
    if code not in book.codes:
        raise ValueError(f"{qs.key!r} has no label {code!r}; its labels: {', '.join(book.codes)}")
    short = book.label(code).short
    return replace(qs, key=f"{qs.key}#{code}", title=f"{qs.title} — {short}", level="binary",
                   categories=(CHOSEN, NOT_CHOSEN), labels=(short, f"not {short}"),
                   values=None, weights=None, chosen_code=code)


def question_set(store: Store, name: str) -> QuestionSet:
    """Resolve a question-set name:

    - a question key (``carebench.response_action``), or
    - ``criteria`` (every rubric criterion; they must share one codebook),
      ``criteria:<codebook>``, or ``criteria:<codebook>@<item kind>`` (the
      criteria asked of one kind of item: an agent run's gates and must-ask
      topics are not pooled with a graded conversation's rubric), or
    - a glob over question keys (``hb:*``) whose questions share one codebook;
    - ``<question>#<code>``: one label of a multiple-choice question, compared as
      chosen or not (a multiple-choice question is compared label by label).
    """
    name = name.strip()
    if "#" in name:
        base, _, code = name.partition("#")
        qs = _whole(store, base)
        book = codebook_for(store, qs.codebook)
        if not book.multi:
            raise ValueError(f"{base!r} is not a multiple-choice question: compare it whole")
        return _one_label(qs, book, code)
    if name == "criteria":
        return _make(store, name, "q.kind = 'criterion'", (), None)
    if name.startswith("criteria:"):
        book, _, item_kind = name[9:].partition("@")
        if item_kind:
            return _make(store, name, "q.kind = 'criterion' AND q.codebook = ? AND"
                         " COALESCE((SELECT kind FROM items WHERE id = q.item_id), q.applies_to) = ?",
                         (book, item_kind), None)
        return _make(store, name, "q.kind = 'criterion' AND q.codebook = ?", (book,), None)
    qs = _whole(store, name)
    if qs.kind == "labelset" and codebook_for(store, qs.codebook).multi:
        raise ValueError(f"{name!r} is a multiple-choice question: it is compared one label at a "
                         "time, chosen or not; name one as " + ", ".join(
                             f"{name}#{code}" for code in qs.categories))
    return qs


def _whole(store: Store, name: str) -> QuestionSet:
    """A question key, or a glob over question keys, as one set."""
    if any(ch in name for ch in "*?["):
        return _make(store, name, "q.key GLOB ?", (name,), None)
    try:
        return _make(store, name, "q.key = ?", (name,), None)
    except ValueError:
        known = ", ".join(qs.key for qs in question_sets(store)) or "none with answers yet"
        raise ValueError(f"unknown question set {name!r}; answered sets: {known}") from None


def question_sets(store: Store) -> list[QuestionSet]:
    """The question sets that have answers: each answered label-set question, and the
    rubric criteria of each codebook asked of each kind of item as one set."""
    labelsets = store.query(
        "SELECT q.key FROM questions q WHERE q.kind = 'labelset'"
        " AND EXISTS (SELECT 1 FROM annotations a WHERE a.question_id = q.id) ORDER BY q.id"
    )
    criteria = store.query(
        "SELECT DISTINCT q.codebook,"
        " COALESCE((SELECT kind FROM items WHERE id = q.item_id), q.applies_to) AS item_kind"
        " FROM questions q WHERE q.kind = 'criterion'"
        " AND EXISTS (SELECT 1 FROM annotations a WHERE a.question_id = q.id) ORDER BY 1, 2"
    )
    out = []
    for r in labelsets:
        qs = _whole(store, r[0])
        book = codebook_for(store, qs.codebook)
        # A multiple-choice question is compared one label at a time (chosen or not).
        out += [_one_label(qs, book, code) for code in book.codes] if book.multi else [qs]
    kinds: dict[str, list[str | None]] = {}
    for r in criteria:
        kinds.setdefault(r[0], []).append(r[1])
    for book, item_kinds in kinds.items():
        if len(item_kinds) == 1 or None in item_kinds:
            out.append(question_set(store, f"criteria:{book}"))
        else:
            out += [question_set(store, f"criteria:{book}@{k}") for k in item_kinds]
    return out
