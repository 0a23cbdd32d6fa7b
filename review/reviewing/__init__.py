"""One reviewer's loop: what a reviewer sees of an item and what they do with it.

One module per job, their public names re-exported here:

- `items` (prefixes and responses: `ItemView`, my answers, flags) and
  `criteria` (agent runs and graded conversations: what an item asks, my
  answers and step marks, the rubric queue);
- `trajectory` (the display models of an agent run and a graded conversation);
- `queue` (the label queue) and `navigation` (the round picker, the next
  item, Back and Next);
- `blinding` (what a reviewer may see: `what_reviewer_sees`, the one decision);
- `commit` (the one path every answer takes: `write_answers`, and the
  actions `commit_answers`, `commit_verdicts`, `mark_step`, `skip_item`);
- `drafts` (what is typed but not committed), `answers` (what an answer may
  be), `screens` (what a rubric screen shows of one item, in one call),
  `names` (what things are called on screen).
"""

from review.reviewing.answers import normalise_value
from review.reviewing.blinding import (
    DEFAULT_MODE,
    LABELS_OPENED,
    EarlierRound,
    RevealedLabel,
    Sight,
    blind_work_left,
    labels_mark,
    labels_opened,
    open_labels,
    what_reviewer_sees,
)
from review.reviewing.commit import (
    AnswerSpec,
    Clinician,
    Settler,
    Verdict,
    commit_answer,
    commit_answers,
    commit_verdicts,
    mark_step,
    reopen_broken,
    skip_item,
    write_answers,
)
from review.reviewing.criteria import (
    ItemHeader,
    ItemQuestion,
    MyAnswer,
    RaterVerdict,
    ScoreLine,
    StepMark,
    evidence_steps,
    find_item,
    is_reviewed,
    item_header,
    item_questions,
    load_subagent,
    my_current_answers,
    rater_scores,
    review_progress,
    severity_levels,
    step_codebook,
    step_marks,
)
from review.reviewing.drafts import (
    Draft,
    drop_draft,
    drop_step_draft,
    load_draft,
    load_drafts,
    load_step_draft,
    save_draft,
    save_step_draft,
    unsaved_step_marks,
)
from review.reviewing.items import (
    Answer,
    ItemView,
    find_item_id,
    flag_item,
    is_flagged,
    item_uid,
    load_item,
    my_answers,
)
from review.reviewing.names import ItemName, item_name, rater_name, rater_words, study_round
from review.reviewing.navigation import (
    Place,
    item_place,
    next_item,
    round_in_address,
    screen_rounds,
    unfinished_in_round,
)
from review.reviewing.queue import (
    FilterChoices,
    Progress,
    QueueFilter,
    filter_choices,
    first_skipped_item,
    next_unreviewed_item,
    queue_progress,
)
from review.reviewing.screens import GradedScreen, RunScreen, open_graded, open_run
from review.reviewing.trajectory import (
    CriterionView,
    GradedConversationView,
    TrajectoryView,
    load_graded_conversation,
    load_trajectory,
    trajectory_view,
)

__all__ = [
    "DEFAULT_MODE", "LABELS_OPENED", "Answer", "AnswerSpec", "Clinician", "CriterionView",
    "Draft", "EarlierRound", "FilterChoices", "GradedConversationView", "GradedScreen",
    "ItemHeader", "ItemName", "ItemQuestion", "ItemView", "MyAnswer", "Place", "Progress", "QueueFilter",
    "RaterVerdict", "RevealedLabel", "RunScreen", "ScoreLine", "Settler", "Sight", "StepMark",
    "TrajectoryView", "Verdict", "blind_work_left", "commit_answer", "commit_answers",
    "commit_verdicts", "drop_draft", "drop_step_draft", "evidence_steps", "filter_choices",
    "find_item", "find_item_id", "first_skipped_item", "flag_item", "is_flagged", "is_reviewed",
    "item_header", "item_name", "item_place", "item_questions", "item_uid", "labels_mark", "labels_opened",
    "load_draft", "load_drafts", "load_graded_conversation", "load_item", "load_step_draft",
    "load_subagent", "load_trajectory", "mark_step", "my_answers", "my_current_answers",
    "next_item", "next_unreviewed_item", "normalise_value", "open_graded", "open_labels",
    "open_run", "queue_progress", "rater_name", "rater_scores", "rater_words", "reopen_broken", "review_progress",
    "round_in_address", "save_draft", "save_step_draft", "screen_rounds", "severity_levels",
    "skip_item", "step_codebook", "step_marks", "study_round", "trajectory_view", "unfinished_in_round",
    "unsaved_step_marks", "what_reviewer_sees", "write_answers",
]
