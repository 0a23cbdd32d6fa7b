"""What a reviewer may see, decided in one place.

A reviewer answers first and sees machine and reference labels afterwards.
Modes (recorded with each annotation so agreement can be split by them):

- ``blind``: machine and reference labels are never shown;
- ``reveal_after_commit`` (default): shown once the reviewer has committed an
  answer to that question of that item;
- ``suggest``: shown up front, for speed runs; answers are recorded with
  phase ``suggested``.

Other reviewers' answers are never shown to a reviewer, nor the settled
answer adjudication made of them; only adjudication sees them.

`what_reviewer_sees` is the decision every screen asks: the mode in force
(a review round's, the screen's, or blind where a fully blind round holds the
item for the reviewer), what is shown (the item's gold and machine labels,
the judges' verdicts, the gold of a case's earlier rounds), or why it is held
back, in words a page shows. Asked without an item, it decides a screen that
shows every rater's labels (Browse, Agreement): shown once the reviewer has
no blind work left there, or has chosen to see them (`open_labels`, kept in
the `labels_opened` table). The functions beside it are its parts, used by
the commit path too (`later_rounds_owed`, `labels_opened`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from codebook import BLIND, LABEL_KINDS, REVEAL_AFTER_COMMIT, RUBRIC_KINDS, SUGGEST
from review.reviewing.criteria import (
    RaterVerdict,
    item_header,
    item_questions,
    my_current_answers,
    review_progress,
)
from review.reviewing.items import Answer, ItemView, load_item, my_answers
from review.reviewing.queue import QueueFilter, kind_questions, queue_progress
from review.reviewing.reveals import record_reveal
from review.team.access import role_may
from review.team.reviewers import Reviewer
from review.text import safe_markdown
from store import Store, utcnow

DEFAULT_MODE = REVEAL_AFTER_COMMIT


REVEAL_DELAY_SECONDS = 5.0
"""The undo window. One key both answers a prefix or a response and moves on,
so a mis-key is often seen a second later: the item's labels wait this long
after the reviewer's first answer to it before any screen shows them, and a
correction made within it (Back, or "Change it") is still a blind answer -
nothing was shown. A change after it is recorded after the reveal. Agent runs
and graded conversations are committed as a checked batch: no wait.
$CARELENS_REVEAL_DELAY (seconds) sets another window; 0 shows the labels at once."""


def undo_window() -> float:
    """The undo window, in seconds ($CARELENS_REVEAL_DELAY, else 5): how long
    after an answer to a prefix or a response its labels wait (a correction
    within it is still blind), and how long an adjudicator may take back a
    settlement (`review.team.adjudication.take_back`)."""
    try:
        return max(0.0, float(os.environ.get("CARELENS_REVEAL_DELAY", REVEAL_DELAY_SECONDS)))
    except ValueError:
        return REVEAL_DELAY_SECONDS


def reveal_delay(item_kind: str | None) -> float:
    """The undo window of an answer to an item of this kind, in seconds."""
    if item_kind not in LABEL_KINDS:
        return 0.0
    return undo_window()


def reveal_cutoff(item_kind: str | None, now: datetime | None = None) -> str:
    """Answers given at or before this time (UTC, as stored) have had their
    reveal shown (`reveal_delay` after them, for prefixes and responses)."""
    delay = reveal_delay(item_kind)
    return ((now or datetime.now(UTC)) - timedelta(seconds=delay)).isoformat(
        timespec="microseconds")


WITHDRAWN = "withdrawn_before_reveal"
"""In a withdrawal's `extra`: the id of the answer it withdrew within its undo
window (Z), before anything was shown. That answer stays in the record,
superseded; it revealed nothing, so it counts for no reveal (`not_withdrawn`)."""
WITHDRAWN_REASON = "Withdrawn before its labels were shown (undo)"


def not_withdrawn(alias: str) -> str:
    """SQL: the answer `alias` was not withdrawn before its reveal (`WITHDRAWN`)."""
    return (f"NOT EXISTS (SELECT 1 FROM annotations w WHERE w.item_id = {alias}.item_id"
            f" AND w.question_id = {alias}.question_id AND w.rater_id = {alias}.rater_id"
            f" AND w.target = {alias}.target AND w.supersedes_id = {alias}.id"
            f" AND json_extract(w.extra, '$.{WITHDRAWN}') IS NOT NULL)")


def own_answer_revealed(store: Store, reviewer_id: int, item_id: int, question_id: int,
                        item_kind: str | None) -> bool:
    """Whether the reviewer's own answer to this question of the item has had
    its reveal due: one given (not a skip) at least the undo window ago, and
    not withdrawn within it."""
    return store.scalar(
        "SELECT 1 FROM annotations a WHERE a.item_id = ? AND a.question_id = ? AND a.rater_id = ?"
        " AND a.target = '' AND a.status != 'skipped' AND a.created_at <= ? AND "
        + not_withdrawn("a") + " LIMIT 1",
        (item_id, question_id, reviewer_id, reveal_cutoff(item_kind))) is not None


def reveal_wait(store: Store, reviewer_id: int, item_id: int, question_id: int | None,
                item_kind: str | None, mode: str) -> float:
    """Seconds until the labels of this item are due under my first answer to it
    (0 when they are due, or when nothing waits: no answer, or a mode that
    never or always shows them). A screen showing an answer within its undo
    window asks again after this long."""
    if mode != REVEAL_AFTER_COMMIT or question_id is None or item_kind not in LABEL_KINDS:
        return 0.0
    first = store.scalar(
        "SELECT MIN(a.created_at) FROM annotations a WHERE a.item_id = ? AND a.question_id = ?"
        " AND a.rater_id = ? AND a.target = '' AND a.status != 'skipped' AND "
        + not_withdrawn("a"), (item_id, question_id, reviewer_id))
    if first is None:
        return 0.0
    due = datetime.fromisoformat(first) + timedelta(seconds=reveal_delay(item_kind))
    return max(0.0, (due - datetime.now(UTC)).total_seconds())


def labels_visible(mode: str, has_committed: bool) -> bool:
    """May machine and reference labels be shown to this reviewer now?"""
    if mode == SUGGEST:
        return True
    if mode == BLIND:
        return False
    return has_committed


def phase_for_commit(mode: str, has_seen_labels: bool) -> str:
    """The phase a new answer is recorded under."""
    if mode == SUGGEST:
        return "suggested"
    return "after_reveal" if has_seen_labels else "blind"


# -- the decision ---------------------------------------------------------------------

@dataclass(frozen=True)
class Sight:
    """What a reviewer may see now, and why not what is held back.

    Words are Markdown a page shows as they are (untrusted names escaped)."""

    mode: str
    """The blinding mode in force: the one the reviewer's answers record."""
    shown: bool
    """Whether the labels are shown now: the item's machine and reference
    labels (for an agent run or graded conversation: those of any question),
    or, asked without an item, the screen of every rater's labels."""
    held: str | None = None
    """Why the labels are held back; None when they are shown."""
    notice: str | None = None
    """Why this item is reviewed blind here: a fully blind review round holds it
    for the reviewer, and nothing is shown outside it that the round hides."""
    labels: tuple[RevealedLabel, ...] = ()
    """A prefix's or response's machine and reference labels (and a response's
    prefix's gold, unless `prefix_held`), when shown."""
    prefix_held: str | None = None
    """Why a response's prefix's gold label (what the response should have
    done) is held back while the response's own labels are shown."""
    earlier: tuple[EarlierRound, ...] = ()
    """The gold of a case's earlier rounds, shown with the reveal of a later one."""
    verdicts: dict[int, list[RaterVerdict]] = field(default_factory=dict)
    """An agent run's or graded conversation's judges' and verifiers' answers,
    by question, for the questions whose labels are shown."""
    verdicts_held: str | None = None
    """Why an answered question's verdicts are held back (not in `verdicts`)."""
    reference_shown: bool = False
    """Whether a graded conversation's reference (its physician-written ideal
    completion) may be shown: a reference is a reveal too."""
    model_held: bool | None = None
    """Agent runs and graded conversations: whether which agent or model made the
    item stays hidden. A verdict shows once its own question is answered, but the
    agent's name would bear on every question still open, so it shows only when
    all are answered (or the mode shows verdicts from the start). None: as `shown`."""
    unanswered: int = 0
    """Asked without an item: the items still waiting for the reviewer's blind
    answer that the screen would unblind."""
    covers: tuple[int, int, int] | None = None
    """Asked without an item: what a choice to see the labels now covers (`labels_mark`)."""
    record: bool = False
    """Asked without an item: shown, and the opening is to be recorded
    (`open_labels`) before the labels are: it is not recorded yet."""

    @property
    def model_hidden(self) -> bool:
        """Whether the reviewer is kept blind to which model made the item: its
        labels are held back, so its name, and ids that name it (`..::aster-7b`),
        are not shown (`names.ItemName.shown_ids`); where the labels are shown
        (a researcher, a reveal) the ids are."""
        return self.model_held if self.model_held is not None else not self.shown

    def seen_while_answering(self, question_ids: Iterable[int],
                             reference_on_screen: bool = False) -> frozenset[int]:
        """Of an agent run's or graded conversation's questions, those answered
        with labels on screen (`seen_while_answering`)."""
        return seen_while_answering(self.mode, self.verdicts, question_ids,
                                    reference_on_screen and self.reference_shown)


def seen_while_answering(mode: str, verdicts: Mapping[int, object], question_ids: Iterable[int],
                         reference_on_screen: bool = False) -> frozenset[int]:
    """The questions of an agent run or graded conversation whose answers are
    given with labels on screen, so recorded after a reveal: every one when
    the labels are shown up front (`suggest`) or a reference answer is on the
    page (`reference_on_screen`), else those whose judges' verdicts are shown
    (`verdicts`, by question: `Sight.verdicts`)."""
    if mode == SUGGEST or reference_on_screen:
        return frozenset(question_ids)
    return frozenset(q for q in question_ids if q in verdicts)


ITEM_NOUNS = {"trajectory": "agent run", "graded_conversation": "graded conversation"}
VERDICTS_HELD = "Judges' verdicts stay hidden under this review's blinding."
LABELS_HELD = "Reference and machine labels stay hidden until you answer."
PREFIX_GOLD = "The prefix's gold label (what the response should have done)"


def what_reviewer_sees(store: Store, reviewer_id: int | None, item_id: int | None = None, *,
                       round_id: int | None = None, mode: str = DEFAULT_MODE,
                       queue: str | None = None, question: str | None = None) -> Sight:
    """The blinding decision for this reviewer: on one item, on a review queue
    of items of one kind (`queue`: the screen's filters, `queue_sight`), or
    (neither) on a screen that shows every rater's labels. `reviewer_id` None: a
    visitor who has chosen no name (local mode), asked only about a screen
    (`visitor_sight`); they answer nothing before choosing one.

    On an item: the mode is the round's when a review round (`round_id`)
    holds the item, else `mode` (the screen's), or blind where a fully blind
    round holds the item for the reviewer (`blind_round_holding`). Under it:
    a prefix's or response's labels (`reveal_reference_labels`), a case's
    earlier rounds' gold (`earlier_round_golds`), an agent run's or graded
    conversation's verdicts (`revealed_verdicts`), or why they are held back.
    `question`: the question on screen, where a kind of item is asked several (a
    study's conversations): only its labels are revealed by an answer to it."""
    if reviewer_id is None:
        if item_id is not None or queue is not None:
            raise ValueError("a visitor with no name is shown no item to answer")
        return visitor_sight(store)
    if queue is not None:
        return queue_sight(store, reviewer_id, queue, mode)
    if item_id is None:
        return _screen_sight(store, reviewer_id)
    head = item_header(store, item_id)
    kind = head.kind if head is not None else None
    notice = None
    round_mode = store.scalar(
        "SELECT r.blinding FROM review_rounds r JOIN round_items ri ON ri.round_id = r.id"
        " WHERE r.id = ? AND ri.item_id = ?", (round_id, item_id)) if round_id is not None else None
    if round_mode is not None:
        mode = round_mode
    elif blind := blind_round_holding(store, reviewer_id, item_id):
        mode = BLIND
        notice = (f"You review this {ITEM_NOUNS.get(kind, 'item')} blind in {safe_markdown(blind)}, "
                  + ("so the judges' verdicts stay hidden here too." if kind in RUBRIC_KINDS
                     else "so its labels stay hidden here too."))
    if kind in RUBRIC_KINDS:
        verdicts = revealed_verdicts(store, reviewer_id, item_id, mode)
        mine = my_current_answers(store, reviewer_id, item_id)
        open_questions = mode == REVEAL_AFTER_COMMIT and any(
            q.id not in mine for q in item_questions(store, item_id))
        return Sight(mode, bool(verdicts), None if verdicts else LABELS_HELD, notice,
                     verdicts=verdicts, verdicts_held=VERDICTS_HELD,
                     reference_shown=bool(mine) and mode != BLIND,
                     model_held=not verdicts or open_questions)
    item = load_item(store, item_id, question)
    if item is None:
        return Sight(mode, False, LABELS_HELD, notice)
    labels = reveal_reference_labels(store, reviewer_id, item, mode)
    if labels is None:
        owed = later_rounds_owed(store, reviewer_id, item.id) if item.kind == "prefix" else []
        held = LABELS_HELD
        if owed and mode == REVEAL_AFTER_COMMIT and prefix_answered(store, reviewer_id, item.id):
            held = _rounds_owed(owed, "Gold and machine labels for this round appear") + (
                " Rounds this review round does not hold are answered in Free review."
                if round_mode is not None else "")
        return Sight(mode, False, held, notice)
    prefix_held = None
    parent = item.parent_id if item.kind == "response" else None
    if parent is not None and prefix_labels_hidden(store, reviewer_id, parent, mode):
        parent_owed = later_rounds_owed(store, reviewer_id, parent)
        prefix_held = (_rounds_owed(parent_owed, f"{PREFIX_GOLD} appears")
                       if parent_owed and prefix_answered(store, reviewer_id, parent)
                       else f"{PREFIX_GOLD} stays hidden until you answer the prefix itself.")
    earlier = earlier_round_golds(store, reviewer_id, item.id, mode) if item.kind == "prefix" else []
    return Sight(mode, True, None, notice, tuple(labels), prefix_held, tuple(earlier))


MODELS_HELD = ("Which model or agent made each item stays hidden while items wait for your"
               " blind answer, so the queue is not narrowed to one of them.")


def queue_sight(store: Store, reviewer_id: int, kind: str, mode: str = DEFAULT_MODE) -> Sight:
    """A review queue of items of `kind` (Review, Trajectories, Graded
    conversations, outside a round): whether the reviewer is blind to the model
    there, so that no model's or agent's name reaches the screen, its filters or
    what the page sends. Blind while any item of the kind waits for their answer
    (an item of the queue narrowed to one model is known to be that model's), and
    always under a fully blind mode; never where the labels are shown up front
    (`suggest`)."""
    if mode == SUGGEST:
        return Sight(mode, True, model_held=False)
    if mode == BLIND:
        return Sight(mode, False, MODELS_HELD, model_held=True)
    counted = (queue_progress if kind in LABEL_KINDS else review_progress)(
        store, reviewer_id, QueueFilter(kind=kind))
    waiting = counted.total > counted.done
    return Sight(mode, not waiting, MODELS_HELD if waiting else None, model_held=waiting)


def _rounds_owed(owed: list[int], held: str) -> str:
    """Why a case's labels wait: a later round of it still owes a blind answer
    (`held`: what waits, with its verb)."""
    rounds = ("round " + str(owed[0]) if len(owed) == 1
              else "rounds " + ", ".join(str(r) for r in owed[:-1]) + f" and {owed[-1]}")
    return (f"{held} once you have answered {rounds} of this case, so that "
            f"{'round is' if len(owed) == 1 else 'those rounds are'} still answered blind.")


def _screen_sight(store: Store, reviewer_id: int) -> Sight:
    """A screen that shows every rater's labels (gold, mapper, judges): a
    reviewer with items still waiting for their blind answer sees it only by
    choosing to (`open_labels`); asked again when items they have not been
    asked about arrive. Adjudicators and admins are not asked, but their
    opening is recorded all the same: one who also reviews gives answers
    after it that are not blind."""
    mark = labels_mark(store)
    opened = labels_opened(store, reviewer_id)
    fresh = opened is None or any(o < m for o, m in zip(opened, mark, strict=True))
    role = store.scalar("SELECT role FROM raters WHERE id = ?", (reviewer_id,))
    if role_may(role, "labels_unasked"):
        left = blind_work_left(store, reviewer_id, after=opened) if fresh else 0
        return Sight(DEFAULT_MODE, True, unanswered=left, covers=mark, record=fresh)
    left = blind_work_left(store, reviewer_id, after=opened)
    if not left:
        # Nothing waits for a blind answer, so nothing is asked; but the labels are
        # about to be seen, and an answer changed after this is not a blind one.
        return Sight(DEFAULT_MODE, True, covers=mark, record=fresh)
    if opened is None:
        waiting = (f"{left:,} item{'s are' if left != 1 else ' is'} still waiting for your blind "
                   "answer")
    else:
        waiting = (f"{left:,} item{'s' if left != 1 else ''} added since you last chose to see the "
                   f"labels {'are' if left != 1 else 'is'} waiting for your blind answer")
    return Sight(DEFAULT_MODE, False,
                 "This screen shows every rater's labels: the gold labels, the mapper's and the "
                 f"judges'. {waiting}; seeing their labels first would unblind it.",
                 unanswered=left, covers=mark)


VISITOR_HELD = ("This screen shows other raters' labels (the gold labels, the mapper's and the "
                "judges'); your answers on these items will no longer count as blind. You have "
                "not chosen a name: the name you choose next is recorded as having seen them.")


def visitor_sight(store: Store) -> Sight:
    """A screen of every rater's labels asked by a visitor with no name (local
    mode, nobody chosen in the sidebar): never shown without the gate, since
    whoever they turn out to be may still owe blind answers; a choice to see
    them is kept by the page until a name is chosen, then recorded against it
    (`adopt_visitor_opening`)."""
    return Sight(DEFAULT_MODE, False, VISITOR_HELD, covers=labels_mark(store), record=True)


def adopt_visitor_opening(store: Store, reviewer: Reviewer, screen: str,
                          covered: tuple[int, int, int]) -> bool:
    """A visitor who saw every rater's labels (covering `covered`, a
    `labels_mark`) before choosing a name has now chosen `reviewer`: the
    opening is recorded against them (`open_labels`), so their later answers
    on those items are not recorded as blind. Nothing is recorded when a
    choice of theirs already covers it. True when recorded."""
    opened = labels_opened(store, reviewer.id)
    if opened is not None and all(o >= c for o, c in zip(opened, covered, strict=True)):
        return False
    mark = tuple(max(o, c) for o, c in zip(opened or covered, covered, strict=True))
    open_labels(store, reviewer, screen, blind_work_left(store, reviewer.id, after=opened), mark)
    return True


# -- its parts: prefixes and responses -------------------------------------------------

@dataclass(frozen=True)
class RevealedLabel:
    rater: str
    rater_kind: str
    """machine | reference"""
    value: str | None
    rationale: str | None
    about: str
    """Which item the label is on: 'this response', 'the prefix', ..."""
    annotation_id: int | None = None
    """The annotation shown (recorded in ``reveals``: review.reviewing.reveals)."""


def reveal_reference_labels(store: Store, reviewer_id: int, item: ItemView,
                            mode: str = DEFAULT_MODE, *,
                            record: bool = True) -> list[RevealedLabel] | None:
    """Machine and reference labels for the item, or None while the blinding
    rule hides them (a prefix's also while a later round of its case waits for
    the reviewer's blind answer: `later_rounds_owed`). Never includes another
    reviewer's answer, nor the settled answer adjudication made of theirs. An
    answer still within its undo window (`REVEAL_DELAY_SECONDS`) reveals
    nothing yet."""
    committed = bool(item.question_id) and own_answer_revealed(
        store, reviewer_id, item.id, item.question_id, item.kind)
    if not labels_visible(mode, committed):
        return None
    if item.kind == "prefix" and mode == REVEAL_AFTER_COMMIT \
            and later_rounds_owed(store, reviewer_id, item.id):
        return None  # a later round of the case still waits for a blind answer
    targets = [(item.id, "this item")]
    parent = item.parent_id if item.kind == "response" else None
    if parent and not prefix_labels_hidden(store, reviewer_id, parent, mode):
        targets.append((parent, "the prefix"))
    out: list[RevealedLabel] = []
    for target_id, about in targets:
        # On the item itself, the labels of the question answered, none of another
        # (a study's conversation asks several: an answer reveals its own question's).
        own = "q.id = ?" if about == "this item" and item.question_id else "q.kind = 'labelset'"
        rows = store.query(
            "SELECT c.id, r.name, r.kind, c.value, c.rationale FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id"
            " WHERE c.item_id = ? AND r.kind IN ('machine', 'reference') AND c.target = ''"
            " AND c.status != 'skipped'"  # e.g. a settled answer withdrawn: no label
            # The settled answer is made of other clinicians' answers: never revealed.
            " AND coalesce(r.role, '') != 'adjudicated'"
            f" AND q.item_id IS NULL AND {own} ORDER BY r.kind DESC, r.name",
            (target_id, item.question_id) if "?" in own else (target_id,),
        )
        for r in rows:
            out.append(RevealedLabel(
                r["name"], r["kind"], r["value"], r["rationale"],
                "this response" if about == "this item" and item.kind == "response" else about,
                r["id"]))
    if record:  # shown: what the reviewer saw is kept (review.reviewing.reveals)
        record_reveal(store, reviewer_id, item.id, out)
    return out


def blind_round_holding(store: Store, reviewer_id: int, item_id: int) -> str | None:
    """The name of a fully blind review round in which this reviewer holds a
    place on the item, or answered it: outside that round the item is shown
    blind too (no peeking at what the round keeps hidden)."""
    return store.scalar(
        "SELECT r.name FROM review_rounds r JOIN round_items ri ON ri.round_id = r.id"
        " WHERE ri.item_id = ?1 AND r.blinding = 'blind' AND (EXISTS (SELECT 1 FROM"
        " reservations v WHERE v.round_id = r.id AND v.item_id = ?1 AND v.rater_id = ?2)"
        " OR EXISTS (SELECT 1 FROM annotations a WHERE a.round_id = r.id AND a.item_id = ?1"
        " AND a.rater_id = ?2)) LIMIT 1", (item_id, reviewer_id))


def later_rounds_owed(store: Store, reviewer_id: int, prefix_id: int) -> list[int]:
    """The later rounds of this prefix's case (CARE-Bench: the same patient,
    more said) that the reviewer has not answered yet, in order. While one is
    owed a blind answer, this prefix's labels stay hidden after the reviewer
    answers it: its gold label (round 2: urgent care) tells them about the
    next round's, which would then not be answered blind."""
    return [r["round_id"] for r in store.query(
        "SELECT later.round_id FROM items i JOIN items later ON later.case_id = i.case_id"
        " AND later.dataset_id = i.dataset_id AND later.kind = 'prefix'"
        " AND later.round_id > i.round_id"
        " WHERE i.id = ? AND i.kind = 'prefix' AND i.case_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM annotations a JOIN questions q ON q.id = a.question_id"
        " WHERE a.item_id = later.id AND a.rater_id = ? AND a.target = ''"
        " AND a.status != 'skipped' AND q.item_id IS NULL AND " + not_withdrawn("a") + ")"
        " ORDER BY later.round_id", (prefix_id, reviewer_id))]


def earlier_rounds(store: Store, prefix_id: int) -> list[int]:
    """The prefixes of the earlier rounds of this prefix's case, in order: what
    its reveal shows beside it once the case's last round is answered (their
    labels were held back until then, `later_rounds_owed`)."""
    return [r["id"] for r in store.query(
        "SELECT earlier.id FROM items i JOIN items earlier ON earlier.case_id = i.case_id"
        " AND earlier.dataset_id = i.dataset_id AND earlier.kind = 'prefix'"
        " AND earlier.round_id < i.round_id"
        " WHERE i.id = ? AND i.kind = 'prefix' AND i.case_id IS NOT NULL"
        " ORDER BY earlier.round_id", (prefix_id,))]


@dataclass(frozen=True)
class EarlierRound:
    """A case's earlier round, as the reveal of its last round shows it."""

    item: ItemView
    answer: Answer
    """The reviewer's answer in force on it."""
    gold: str


def earlier_round_golds(store: Store, reviewer_id: int, prefix_id: int,
                        mode: str = DEFAULT_MODE) -> list[EarlierRound]:
    """The gold labels of the case's earlier rounds that the reviewer answered,
    under the blinding each is shown with (`mode`, or blind where a fully blind
    review round holds that round for them: `blind_round_holding`), for the
    reveal of the case's last round; a round whose labels stay hidden is left out."""
    out = []
    for earlier_id in earlier_rounds(store, prefix_id):
        item = load_item(store, earlier_id)
        if item is None or not item.question_id:
            continue
        answers = my_answers(store, reviewer_id, earlier_id, item.question_id)
        shown = BLIND if blind_round_holding(store, reviewer_id, earlier_id) else mode
        labels = (reveal_reference_labels(store, reviewer_id, item, shown, record=False)
                  if answers else None)
        gold = next((lab for lab in labels or [] if lab.rater_kind == "reference"), None)
        if gold is not None:  # only the gold of an earlier round is shown
            record_reveal(store, reviewer_id, prefix_id, [gold])
            gold = gold.value
            out.append(EarlierRound(item, answers[-1], gold))
    return out


def prefix_answered(store: Store, reviewer_id: int, prefix_id: int,
                    revealed: bool = False) -> bool:
    """Whether the reviewer has answered the prefix itself (a skip is no answer);
    `revealed`: at least the undo window ago, so that its gold may show."""
    return store.scalar(
        "SELECT 1 FROM annotations a JOIN questions q ON q.id = a.question_id"
        " WHERE a.item_id = ? AND a.rater_id = ? AND a.target = '' AND a.status != 'skipped'"
        " AND q.item_id IS NULL AND a.created_at <= ? AND " + not_withdrawn("a") + " LIMIT 1",
        (prefix_id, reviewer_id, reveal_cutoff("prefix") if revealed else "9999")) is not None


def prefix_labels_hidden(store: Store, reviewer_id: int, prefix_id: int,
                         mode: str = DEFAULT_MODE) -> bool:
    """Whether the labels of a response's prefix (its gold label: what the
    response should have done) stay hidden from this reviewer: under the same
    rule as the prefix's own, until they have answered the prefix. Answering a
    response reveals the response's labels, not the prefix's gold, which the
    reviewer may still owe a blind answer; nor while they owe one to a later
    round of its case (`later_rounds_owed`)."""
    if mode == REVEAL_AFTER_COMMIT and later_rounds_owed(store, reviewer_id, prefix_id):
        return True
    return not labels_visible(mode, prefix_answered(store, reviewer_id, prefix_id,
                                                    revealed=True))


# -- its parts: agent runs and graded conversations -----------------------------------

def revealed_verdicts(store: Store, reviewer_id: int, item_id: int,
                      mode: str = DEFAULT_MODE) -> dict[int, list[RaterVerdict]]:
    """{question id: machine and reference answers} for the questions whose
    answers the blinding rule lets this reviewer see now - under the default
    mode, those they have committed an answer to. Questions still hidden are
    absent. Never includes another human reviewer's answer, nor the settled
    answer adjudication made of theirs."""
    questions = item_questions(store, item_id)
    mine = my_current_answers(store, reviewer_id, item_id)
    visible = [q for q in questions
               if labels_visible(mode, q.id in mine and mine[q.id].status != "skipped")]
    if not visible:
        return {}
    head = item_header(store, item_id)
    ids = [q.id for q in visible]
    targets = [(item_id, "this item")]
    if head is not None and head.parent_id is not None and head.kind == "trajectory":
        targets.append((head.parent_id, "the task"))
    out: dict[int, list[RaterVerdict]] = {q: [] for q in ids}
    marks = ",".join("?" * len(ids))
    for target_id, about in targets:
        rows = store.query(
            "SELECT c.question_id, r.name, r.kind, r.role, c.value, c.rationale, c.extra"
            " FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
            f" WHERE c.item_id = ? AND c.target = '' AND c.question_id IN ({marks})"
            " AND r.kind IN ('machine', 'reference') AND c.status = 'answered'"
            # The settled answer comes from other clinicians' answers (and its note may
            # name them): never part of a reviewer's reveal.
            " AND coalesce(r.role, '') != 'adjudicated'"
            " ORDER BY r.kind DESC, r.name",
            (target_id, *ids),
        )
        for r in rows:
            out[r["question_id"]].append(RaterVerdict(
                r["name"], r["kind"], r["role"], r["value"], r["rationale"],
                json.loads(r["extra"] or "{}"), about))
    return out


# -- its parts: screens that show every rater's labels --------------------------------

def blind_work_left(store: Store, reviewer_id: int,
                    after: tuple[int, int, int] | None = None) -> int:
    """Items in the review queues (prefixes, responses, agent runs, graded
    conversations) this reviewer has not answered yet: what a screen showing
    gold and machine labels would unblind. `after`: only items that came
    after that `labels_mark` (those a reviewer who chose to see the labels
    then has not been asked about)."""
    left = 0
    for kind in LABEL_KINDS:
        # Each question asked of the kind (a study's chats may be asked several).
        for question in [key for key, _ in kind_questions(store, kind)] or [None]:
            p = queue_progress(store, reviewer_id, QueueFilter(kind=kind, after=after,
                                                               question=question))
            left += p.total - p.done
    for kind in RUBRIC_KINDS:
        p = review_progress(store, reviewer_id, QueueFilter(kind=kind, after=after))
        left += p.total - p.done
    return left


LABELS_OPENED = "labels_opened"
"""Audit action: a reviewer chose to open a screen that shows every rater's
labels (Browse, Agreement) while items were still waiting for their blind answer."""
MARK_KEYS = ("newest_item", "newest_import", "newest_question")


def labels_mark(store: Store) -> tuple[int, int, int]:
    """(newest item id, newest import id, newest question id): what a choice
    to see the labels covers. Items added later, completed later (a stub an
    import replaced) or asked a question added later (a revised rubric's new
    criterion) come after it (`QueueFilter.after`)."""
    row = store.query_one("SELECT coalesce((SELECT MAX(id) FROM items), 0) AS item,"
                          " coalesce((SELECT MAX(id) FROM imports), 0) AS import_,"
                          " coalesce((SELECT MAX(id) FROM questions), 0) AS question")
    return int(row["item"]), int(row["import_"]), int(row["question"])


def labels_opened(store: Store, reviewer_id: int) -> tuple[int, int, int] | None:
    """The `labels_mark` this reviewer's last choice to see every rater's
    labels covered; None if they never chose to (or chose before choices
    recorded all of what they covered: they are asked about everything again)."""
    row = store.query_one(
        "SELECT " + ", ".join(MARK_KEYS) + " FROM labels_opened WHERE rater_id = ?"
        " ORDER BY id DESC LIMIT 1", (reviewer_id,))
    if row is None or any(row[k] is None for k in MARK_KEYS):
        return None
    return tuple(int(row[k]) for k in MARK_KEYS)


def open_labels(store: Store, reviewer: Reviewer, screen: str, left: int,
                covered: tuple[int, int, int] | None = None) -> None:
    """Record that the reviewer chose to see every rater's labels on `screen`
    with `left` items still unanswered: their later answers on those items
    were not given blind, and the audit trail says so. `covered`: the
    `labels_mark` of what they were told about (default: now); items that
    come after it are asked about again (`labels_opened`)."""
    with store.transaction() as conn:
        mark = covered or labels_mark(store)
        cur = conn.execute(
            "INSERT INTO labels_opened (rater_id, screen, unanswered, " + ", ".join(MARK_KEYS)
            + ", opened_at) VALUES (?,?,?,?,?,?,?)", (reviewer.id, screen, left, *mark, utcnow()))
        store.audit(reviewer.name, LABELS_OPENED, "labels_opened", cur.lastrowid, None,
                    {"screen": screen, "unanswered": left, **dict(zip(MARK_KEYS, mark, strict=True))})
