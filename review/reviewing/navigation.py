"""Where a reviewer is and where they go next, on every review screen.

- the round picker: the review rounds a screen offers (`screen_rounds`) and
  the one its address asks for (`round_in_address`);
- the next-item choice (`next_item`): in a review round, the item they began
  and have not finished, else the next the round reserves for them; outside
  rounds, the next in their queue they have not answered;
- Back and Next (`item_place`): inside a round, through the round's items
  given to them; outside, through the queue under its filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import review.reviewing.criteria as criteria
import review.reviewing.queue as queue
from codebook import RUBRIC_KINDS
from review.reviewing.criteria import is_reviewed
from review.reviewing.queue import QueueFilter
from review.team.reviewers import Reviewer
from review.team.rounds import (
    RoundInfo,
    has_place,
    is_rubric_round,
    list_rounds,
    my_round_items,
    reserve_next_item,
    round_counts,
)
from store import Store


def screen_rounds(store: Store, kinds: tuple[str, ...]) -> dict[int, RoundInfo]:
    """{round id: round} of the review rounds a screen over these item kinds
    offers, newest first: label rounds over prefixes or responses, criteria
    rounds over agent runs or graded conversations."""
    return {r.id: r for r in list_rounds(store)
            if r.kind in kinds and (r.kind not in RUBRIC_KINDS or is_rubric_round(r.question_key))}


def round_in_address(rounds: dict[int, RoundInfo], wanted: str | None) -> int | None:
    """The round the address (`?round=<id>`) asks for, if the screen offers it."""
    if wanted and wanted.isdigit() and int(wanted) in rounds:
        return int(wanted)
    return None


def unfinished_in_round(store: Store, round_id: int, reviewer_id: int) -> int | None:
    """An item of the round this reviewer began and has not finished, while its
    place is still theirs to take: it comes back before anything new."""
    for row in store.query(
            "SELECT a.item_id FROM annotations a WHERE a.round_id = ? AND a.rater_id = ?"
            " AND a.target = '' AND a.status != 'skipped' AND NOT EXISTS (SELECT 1 FROM"
            " round_reviews rr WHERE rr.round_id = a.round_id AND rr.item_id = a.item_id"
            " AND rr.rater_id = a.rater_id) GROUP BY a.item_id ORDER BY MIN(a.id)",
            (round_id, reviewer_id)):
        item_id = row["item_id"]
        if not is_reviewed(store, reviewer_id, item_id) and has_place(
                store.conn, round_id, item_id, reviewer_id):
            return item_id
    return None


def next_item(store: Store, reviewer: Reviewer, filt: QueueFilter, *,
              round_id: int | None = None, after_id: int | None = None) -> int | None:
    """The item this reviewer reviews next. In a review round: an agent run or
    graded conversation they began and have not finished (`unfinished_in_round`),
    else the next item the round reserves for them (`reserve_next_item`; a
    RoundError says why none can be). Outside rounds: the next item under the
    filter they have not answered (reviewed, for runs and conversations),
    after `after_id`, wrapping around."""
    rubric = filt.kind in RUBRIC_KINDS
    if round_id is not None:
        began = unfinished_in_round(store, round_id, reviewer.id) if rubric else None
        return began or reserve_next_item(store, round_id, reviewer)
    if rubric:
        return criteria.next_unreviewed(store, reviewer.id, filt, after_id=after_id)
    return queue.next_unreviewed_item(store, reviewer.id, filt, after_id=after_id)


@dataclass(frozen=True)
class Place:
    """Where an item is among those Back and Next move through."""

    position: int
    """1-based; 0 when the item is not among them (opened by a link)."""
    total: int
    earlier: int | None
    """The item Back opens; None at the first."""
    later: int | None
    """The item Next opens; None at the last."""


def item_place(store: Store, reviewer_id: int, item_id: int, filt: QueueFilter, *,
               round_id: int | None = None) -> Place:
    """The item's place: inside a review round, among the round's items given to
    this reviewer (answered in the round, or held now; an item not yet among
    them counts as the next), of all the round has for them; outside, among the
    items under the filter."""
    if round_id is not None:
        mine = my_round_items(store, round_id, reviewer_id)
        here = mine.index(item_id) if item_id in mine else len(mine)
        # Of the items the round has for this reviewer (`round_counts`), as the
        # progress line counts them: not only those given so far ("1 of 1", "2 of 2").
        yours = round_counts(store, round_id, reviewer_id).yours
        return Place(here + 1, max(yours, len(mine) + (item_id not in mine)),
                     mine[here - 1] if here > 0 else None,
                     mine[here + 1] if here + 1 < len(mine) else None)
    if filt.kind in RUBRIC_KINDS:
        position, total = criteria.item_position(store, item_id, filt)
        return Place(position, total, criteria.neighbour(store, item_id, filt, -1),
                     criteria.neighbour(store, item_id, filt, +1))
    position, total = queue.item_position(store, item_id, filt)
    return Place(position, total, queue.neighbour_item(store, item_id, filt, -1),
                 queue.neighbour_item(store, item_id, filt, +1))
