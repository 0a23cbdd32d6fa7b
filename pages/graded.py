"""Graded-conversation screen (HealthBench style): read the conversation and
the completion, answer each rubric criterion met / not met, commit, then see
the judge's verdict and explanation beside yours and both example scores.

Keys: Y / N / U answer the current criterion and move on, Up / Down move
between criteria, Ctrl+Enter commits, Left / Right the previous and next
conversation.
"""

from __future__ import annotations

import streamlit as st

from pages._keys import marker, screen_keys
from pages._rubric import checklist, next_in_round_button, open_from_queue
from pages._scores import healthbench_scores_section
from pages._shared import address_follows, require_reviewer, show_text, store
from pages._steps import label_text
from review.reviewing.blinding import DEFAULT_MODE
from review.reviewing.criteria import (
    is_reviewed,
    item_position,
    item_questions,
    my_current_answers,
    neighbour,
    next_unreviewed,
)
from review.reviewing.names import item_name
from review.reviewing.screens import open_graded
from review.text import safe_markdown

KIND = "graded_conversation"
MODE = DEFAULT_MODE
ROLES = {"user": ("user", ":material/person:", "Patient or user"),
         "assistant": ("assistant", ":material/smart_toy:", "Assistant"),
         "system": ("assistant", ":material/settings:", "System")}

reviewer = require_reviewer()
db = store()

opened = open_from_queue(
    db, reviewer, kind=KIND, prefix="hb", title="Graded conversations",
    sidebar_heading="Which conversations", done_text="conversations graded by you",
    missing_text="graded conversation",
    finished_text="You have graded every conversation under these filters.",
    empty_text="No graded conversations yet. Import HealthBench rows (and model completions) "
               "on the Data screen or with `carelens import`.",
    opener=open_graded, mode=MODE, title_ratio=(3, 6, 2))
filt, item_id, screen, in_round = opened.filt, opened.item_id, opened.screen, opened.round
head, view = screen.header, screen.view
started_key = f"hb_started:{item_id}"


def go_item(target: int | None) -> None:
    if target is not None:
        st.session_state["hb_item"] = target


# First, before what they act on: Left / Right to the previous and next conversation.
screen_keys("hb", {"Left": f"hb_prev:{item_id}", "Right": f"hb_next:{item_id}",
                   "F": f"rv_flag:{item_id}"}, token=f"{item_id}")

name = item_name(db, item_id)
position, total = item_position(db, item_id, filt)
where = (f"assigned to you in {safe_markdown(in_round.name)}" if in_round else
         f"{position} of {total} in your queue" if position
         else f"outside this queue of {total} conversations")
facts = [f"**{safe_markdown(name.title)}**", f":small[{where}]"]
theme = head.meta.get("theme")
if theme:
    facts.append(f":gray-badge[{label_text(str(theme).replace('_', ' '))}]")
graded = is_reviewed(db, reviewer.id, item_id)
if graded:
    facts.append(":green-badge[:material/task_alt: graded by you]")
else:  # as on the Trajectories screen: how far along I am
    asked = [q.id for q in item_questions(db, item_id)]
    mine = my_current_answers(db, reviewer.id, item_id)
    done = sum(mine[q].status in ("answered", "cannot_assess") for q in asked if q in mine)
    facts.append(f":orange-badge[in progress: {done} of {len(asked)} graded by you]" if done
                 else ":orange-badge[not yet graded by you]")
with opened.head, st.container(key="item_head"):
    st.markdown(" · ".join(facts))
with st.sidebar, st.container(key="hb_nav", gap="small"):
    # Moving between conversations: beside the filters that make the queue.
    if in_round:
        next_in_round_button("hb", "Next in the round", graded, "conversation")
    else:
        row = st.columns(2, gap="small")
        row[0].button("Previous", key=f"hb_prev:{item_id}", shortcut="Left",
                      icon=":material/arrow_back:", width="stretch",
                      on_click=go_item, args=(neighbour(db, item_id, filt, -1),))
        row[1].button("Next", key=f"hb_next:{item_id}", shortcut="Right",
                      icon=":material/arrow_forward:", width="stretch",
                      on_click=go_item, args=(neighbour(db, item_id, filt, +1),))
        st.button("Next to grade", key=f"hb_next_open:{item_id}", icon=":material/playlist_play:",
                  on_click=go_item, width="stretch",
                  args=(next_unreviewed(db, reviewer.id, filt, after_id=item_id),))

left, right = st.columns([2, 3], gap="medium")
with left, st.container(key=marker("hb", str(item_id)), gap="small"):
    if view.turns:
        with st.container(border=True, key="hb_conversation"):
            for turn in view.turns:
                role, avatar, word = ROLES.get(turn.speaker,
                                               ("user", ":material/person:", turn.speaker))
                with st.container(key=f"hb_turn_{turn.index}"):
                    with st.chat_message(role, avatar=avatar):
                        st.caption(safe_markdown(word))
                        show_text(turn.text, key=f"turn:{item_id}:{turn.index}")
    with st.container(border=True, key="hb_completion"):
        source = ("the physician-written ideal completion"
                  if view.completion_source == "ideal_completion"
                  else safe_markdown(name.subject) if view.model else "a model")
        st.markdown(f"**Completion under review** · {source}" if view.completion is not None
                    else "**No completion to grade**")
        with st.chat_message("assistant", avatar=":material/smart_toy:"):
            show_text(view.completion, key=f"completion:{item_id}",
                      empty="(this item has no completion to grade)")
    reference_shown = bool(view.ideal_completion and view.completion_source != "ideal_completion"
                           and screen.sight.reference_shown)  # a reference is a reveal too
    if reference_shown:
        with st.expander("Reference: the physician-written ideal completion"):
            show_text(view.ideal_completion, key=f"ideal:{item_id}")
    st.caption(safe_markdown(name.shown_ids(screen.sight.model_hidden)[1]))

with right, st.container(key="hb_side", gap="small"):
    n_must_not = sum(c.must_not for c in view.criteria)
    st.markdown(f"**Rubric · {len(view.criteria)} criteria** · :small[{view.max_points:g} positive "
                "points" + (f" · {n_must_not} MUST-NOT criteri{'a' if n_must_not != 1 else 'on'}"
                            if n_must_not else "") + "]",
                help="A MUST-NOT criterion has negative points: met means the response did what "
                     "it must not. Keys: Y met, N not met, U can't assess, Up and Down move, "
                     "Ctrl+Enter commits." if n_must_not else
                     "Keys: Y met, N not met, U can't assess, Up and Down move, Ctrl+Enter commits.")
    if not screen.questions:
        st.warning("This conversation has no rubric criteria.")
    else:
        if view.completion is None:
            st.info("Nothing to grade yet: this conversation has no completion. The rubric is "
                    "shown for reference; import model completions (format "
                    "`healthbench-completions`) to grade them.", icon=":material/info:")
        checklist(reviewer, item_id, screen.questions, screen.mine, screen.revealed,
                  mode=opened.mode, started_key=started_key, show_scores=True, list_height=620,
                  read_only=view.completion is None, round_id=opened.round_id,
                  reference_shown=reference_shown)

healthbench_scores_section(db, ask="graded")  # every rater's, when asked: pages/_scores.py

address_follows()  # the address names the item shown, now that it is drawn (app.py does too)
