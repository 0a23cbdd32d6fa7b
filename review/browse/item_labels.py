"""Every label on one item, for the read-only disagreement view.

What a researcher following a number down to one disagreement reads: each
rater's answers to the question (clinicians, machine raters, references such
as the dataset's gold, and the settled answer), oldest first, every answer
kept (a revision made after the reveal beside the blind answer it replaced),
with its phase, rationale and confidence; and for a response, the reference
labels of the conversation it answers (the gold of its prefix). Who may see
this is decided before it is asked for (the labels gate of the screens that
show every rater's labels); nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from codebook.vocabulary import first_up, rater_words
from review.browse.facets import label_name
from review.team.adjudication import ADJUDICATED
from store import Store, from_json

PHASE_WORDS = {"blind": "blind", "after_reveal": "after the reveal",
               "suggested": "with the machine labels shown", "imported": "imported"}
"""When an answer was given, against what the rater had seen."""
KIND_WORDS = {"human": "clinician", "machine": "machine rater", "reference": "reference"}
CRITERION_WORDS = {"met": "Met", "not_met": "Not met"}
STATUS_WORDS = {"cannot_assess": "cannot assess", "skipped": "skipped"}


@dataclass(frozen=True)
class LabelEntry:
    """One rater's answer, as given."""

    rater: str
    kind: str
    """human | machine | reference (the settled answer is the reference `adjudicated`)."""
    role: str | None
    """A clinician's role, a machine's (mapper, judge), a reference's (gold, verifier)."""
    value: str | None
    words: str
    """The answer in the codebook's words, or 'cannot assess' / 'skipped'."""
    status: str
    phase: str
    """blind | after_reveal | suggested | imported (see PHASE_WORDS)."""
    rationale: str | None
    confidence: int | None
    at: str
    in_force: bool
    """False: a later answer by the same rater replaced it (kept all the same)."""
    round_name: str | None
    """The review round it was given in, if any."""
    reason: str | None = None
    """A settled answer's reason (the adjudicator's, or 'unanimous')."""
    adjudicator: str | None = None
    who: str = ""
    """The rater as a clinician reads it: "The reference label", "The mapper,
    prompt v1", a person's name (`codebook.vocabulary.rater_words`)."""


@dataclass
class QuestionLabels:
    """Every answer to one question about the item (or one of its steps)."""

    question_key: str
    question_text: str
    target: str
    """'' the whole item, 'step:N' one step of an agent run."""
    entries: list[LabelEntry] = field(default_factory=list)

    def of_kind(self, kind: str, settled: bool = False) -> list[LabelEntry]:
        """The entries of raters of a kind (`settled`: only the settled answer)."""
        return [e for e in self.entries if e.kind == kind and (e.rater == ADJUDICATED) == settled]

    @property
    def settled(self) -> LabelEntry | None:
        """The settled answer in force, if any (a settlement withdrawn is none)."""
        last = next((e for e in reversed(self.entries) if e.rater == ADJUDICATED and e.in_force),
                    None)
        return last if last is not None and last.status == "answered" else None

    @property
    def withdrawn(self) -> LabelEntry | None:
        """The settlement withdrawn (reopened by a later answer, or taken back by its
        adjudicator) that is the last word on the unit, if so."""
        last = next((e for e in reversed(self.entries) if e.rater == ADJUDICATED and e.in_force),
                    None)
        return last if last is not None and last.status != "answered" else None

    @property
    def disagree(self) -> bool:
        """Whether the answers in force (settled answer aside) differ."""
        values = {(e.status, e.value) for e in self.entries
                  if e.in_force and e.rater != ADJUDICATED and e.status != "skipped"}
        return len(values) > 1


@dataclass
class ItemLabels:
    item_id: int
    uid: str
    kind: str
    parent_uid: str | None
    questions: list[QuestionLabels]
    on_parent: list[QuestionLabels]
    """A response's conversation (its prefix): the references' labels on it (the gold)."""


def _words(value: str | None, status: str) -> str:
    if status != "answered" or value is None:
        return STATUS_WORDS.get(status, status)
    return CRITERION_WORDS.get(value) or label_name(value)


def _entries(store: Store, item_id: int, question_key: str | None, target: str | None,
             kinds: tuple[str, ...] | None = None) -> list[QuestionLabels]:
    clauses, params = ["a.item_id = ?"], [item_id]
    if question_key is not None:
        clauses.append("q.key = ?")
        params.append(question_key)
    if target is not None:
        clauses.append("a.target = ?")
        params.append(target)
    if kinds:
        clauses.append(f"r.kind IN ({', '.join('?' * len(kinds))})")
        params.extend(kinds)
    rows = store.query(
        "SELECT a.id, a.status, a.value, a.rationale, a.confidence, a.phase, a.target,"
        " a.created_at, a.extra, r.name AS rater, r.kind AS rater_kind, r.role, r.model,"
        " r.prompt_version, q.key,"
        " q.text, rr.name AS round_name,"
        " a.id = (SELECT MAX(b.id) FROM annotations b WHERE b.item_id = a.item_id"
        "   AND b.question_id = a.question_id AND b.rater_id = a.rater_id"
        "   AND b.target = a.target) AS in_force"
        " FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " JOIN questions q ON q.id = a.question_id"
        " LEFT JOIN review_rounds rr ON rr.id = a.round_id"
        f" WHERE {' AND '.join(clauses)} ORDER BY q.id, a.target, a.id", params)
    out: dict[tuple[str, str], QuestionLabels] = {}
    for r in rows:
        unit = out.setdefault((r["key"], r["target"]),
                              QuestionLabels(r["key"], r["text"], r["target"]))
        extra = from_json(r["extra"]) if r["extra"] else {}
        unit.entries.append(LabelEntry(
            rater=r["rater"], kind=r["rater_kind"], role=r["role"], value=r["value"],
            words=_words(r["value"], r["status"]), status=r["status"],
            phase=r["phase"], rationale=r["rationale"], confidence=r["confidence"],
            at=r["created_at"], in_force=bool(r["in_force"]), round_name=r["round_name"],
            reason=extra.get("reason") if r["rater"] == ADJUDICATED else None,
            adjudicator=extra.get("adjudicator") if r["rater"] == ADJUDICATED else None,
            who=first_up(rater_words(r["rater"], r["rater_kind"], r["role"], r["model"],
                                     r["prompt_version"]))))
    return list(out.values())


def item_labels(store: Store, uid: str, question_key: str | None = None,
                target: str | None = "") -> ItemLabels | None:
    """Every answer on the item `uid` (to `question_key`, on `target`: '' the whole
    item, 'step:N' a step, None every part), oldest first; None when there is no
    such item."""
    row = store.query_one(
        "SELECT i.id, i.uid, i.kind, p.uid AS parent_uid, i.parent_id FROM items i"
        " LEFT JOIN items p ON p.id = i.parent_id WHERE i.uid = ?", (uid,))
    if row is None:
        return None
    on_parent = (_entries(store, row["parent_id"], None, "", ("reference",))
                 if row["parent_id"] is not None else [])
    return ItemLabels(row["id"], row["uid"], row["kind"], row["parent_uid"],
                      _entries(store, row["id"], question_key, target), on_parent)


SCREEN = "disagreement"
"""The read-only view's address (its url_path in app.py)."""


def disagreement_link(uid: str, question_key: str | None = None, target: str = "",
                      reviewer: str | None = None) -> str:
    """A relative link (``./``) to the read-only view of the item's labels: to one
    question (and step, `target` 'step:N'), carrying the reviewer, where given, so
    that a link opened in a new tab comes back as them (local mode)."""
    params = {"item": uid}
    if question_key:
        params["question"] = question_key
    if target:
        params["target"] = target
    if reviewer:
        params["reviewer"] = reviewer
    return f"./{SCREEN}?" + urlencode(params, quote_via=quote)
