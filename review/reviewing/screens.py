"""What the agent-run and graded-conversation screens show of one item, in one call.

`open_run` and `open_graded` gather, for one reviewer: the item's header, its
display model, their marks and answers, and what the blinding decision
(`review.reviewing.blinding.what_reviewer_sees`) lets them see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from review.reviewing.blinding import DEFAULT_MODE, Sight, what_reviewer_sees
from review.reviewing.criteria import (
    ItemHeader,
    ItemQuestion,
    MyAnswer,
    RaterVerdict,
    StepMark,
    item_header,
    item_questions,
    my_current_answers,
    step_marks,
)
from review.reviewing.trajectory import (
    GradedConversationView,
    TrajectoryView,
    load_graded_conversation,
    trajectory_view,
)
from store import Store


@dataclass
class RunScreen:
    """Everything the trajectory screen shows of one run for one reviewer."""

    header: ItemHeader
    view: TrajectoryView
    marks: dict[int, StepMark]
    questions: list[ItemQuestion]
    mine: dict[int, MyAnswer]
    revealed: dict[int, list[RaterVerdict]]
    """The judges' and verifiers' verdicts shown, by question (`sight.verdicts`)."""
    sight: Sight
    """The blinding decision the run is shown under."""


@dataclass
class GradedScreen:
    """Everything the graded-conversation screen shows of one item for one reviewer."""

    header: ItemHeader
    view: GradedConversationView
    questions: list[ItemQuestion]
    mine: dict[int, MyAnswer]
    revealed: dict[int, list[RaterVerdict]]
    """The judges' verdicts shown, by question (`sight.verdicts`)."""
    sight: Sight
    """The blinding decision the conversation is shown under."""


def open_run(store: Store, reviewer_id: int, item_id: int, mode: str = DEFAULT_MODE, *,
             round_id: int | None = None) -> RunScreen | None:
    """A trajectory as the screen shows it, with this reviewer's marks and answers
    and what the blinding decision lets them see (`mode`: the screen's, outside
    a review round; `round_id`: the round it is open in)."""
    header = item_header(store, item_id)
    if header is None or header.kind != "trajectory":
        return None
    payload = store.scalar("SELECT payload FROM items WHERE id = ?", (item_id,))
    marks = step_marks(store, reviewer_id, item_id)
    view = trajectory_view(json.loads(payload), {sid: m.error for sid, m in marks.items()})
    sight = what_reviewer_sees(store, reviewer_id, item_id, round_id=round_id, mode=mode)
    return RunScreen(header, view, marks, item_questions(store, item_id),
                     my_current_answers(store, reviewer_id, item_id), sight.verdicts, sight)


def open_graded(store: Store, reviewer_id: int, item_id: int, mode: str = DEFAULT_MODE, *,
                round_id: int | None = None) -> GradedScreen | None:
    """A graded conversation as the screen shows it, for this reviewer (as `open_run`)."""
    header = item_header(store, item_id)
    if header is None or header.kind != "graded_conversation":
        return None
    view = load_graded_conversation(store, header.uid)
    sight = what_reviewer_sees(store, reviewer_id, item_id, round_id=round_id, mode=mode)
    return GradedScreen(header, view, item_questions(store, item_id),
                        my_current_answers(store, reviewer_id, item_id), sight.verdicts, sight)
