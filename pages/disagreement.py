"""Disagreement: one item and every rater's label on it, read-only.

Where an item of an Agreement cell opens: the item, each clinician's answers
(blind and after the reveal, every one kept), the machine raters', the
references' (the gold), the settled answer, with rationales; no answer can be
given here. Every rater's labels are shown, so the screen stands behind the
same labels gate as Agreement and Browse, and reads through the same reader's
store (`review.team.access`): a reviewer on a server sees their own answers and
the machine and reference labels, never a colleague's. Data text is shown as
written.
"""

from __future__ import annotations

import streamlit as st

from pages._shared import (
    current_reviewer,
    labels_gate,
    server_mode,
    show_messages,
    show_text,
    store,
    viewer_store,
)
from pages._steps import code_span
from review.browse import item_link
from review.browse.item_labels import PHASE_WORDS, QuestionLabels, item_labels
from review.reviewing.items import load_item
from review.reviewing.names import item_name, plural, study_round
from review.reviewing.trajectory import load_graded_conversation, load_trajectory
from review.team.adjudication import REASONS
from review.team.reviewers import can_adjudicate
from review.text import safe_markdown

ITEM_WORDS = {"prefix": "conversation so far", "response": "model reply",
              "trajectory": "agent run", "graded_conversation": "graded conversation",
              "conversation": "chat"}
GROUPS = (("human", "Clinicians"), ("machine", "Machine raters"), ("reference", "References"))

st.title("Disagreement", anchor=False)
labels_gate("disagreement")
db = viewer_store()  # from here on: only the answers this reader may read (review.team.access)
me = current_reviewer()
uid = st.query_params.get("item")
question = st.query_params.get("question") or None
target = st.query_params.get("target", "")
found = item_labels(db, uid, question, target) if uid else None
name = item_name(store(), found.item_id) if found is not None else None
if found is None:
    st.info(("No item " + code_span(uid) + " here." if uid else "No item chosen.")
            + " Open one from a cell of the Agreement screen's confusion matrix.",
            icon=":material/info:")
    st.page_link("pages/agreement.py", label="Agreement", icon=":material/balance:")
    st.stop()


def md(value: object) -> str:
    return safe_markdown(str(value))


def when(at: str) -> str:
    return at[:16].replace("T", " ")


def answer_line(e) -> str:
    """One answer: what, when, in which phase, with confidence and round."""
    bits = [f"**{md(e.words)}**", PHASE_WORDS.get(e.phase, e.phase)]
    if e.confidence:
        bits.append(f"confidence {e.confidence} of 5")
    if e.round_name:
        bits.append(md(study_round(e.round_name)))
    bits.append(when(e.at))
    line = " · ".join(bits)
    return line if e.in_force else f":grey[{line} · replaced by a later answer]"


def rater_block(name: str, entries) -> None:
    """A rater's answers, oldest first, the one in force last: a clinician by name
    and role, a machine or reference by what it is (the name it is stored under in
    the tooltip, for researchers)."""
    last = entries[-1]
    role = last.role if last.kind == "human" else None
    with st.container(border=True):
        st.markdown(f"**{md(last.who or name)}**" + (f" · :grey[{md(role)}]" if role else ""),
                    help=f"Stored as {name}" if last.who != name else None)
        for e in entries:
            st.markdown(answer_line(e))
            if e.rationale:
                st.caption(md(e.rationale))


def unit_section(unit: QuestionLabels) -> None:
    where = f" · {unit.target.replace('step:', 'step ')}" if unit.target else ""
    st.subheader(md(unit.question_text) + where, anchor=False)
    in_force = [e for e in unit.entries if e.in_force and e.rater != "adjudicated"]
    said = sorted({e.words for e in in_force})
    st.caption(f"{plural(len(in_force), 'rater')} · " + (
        "they disagree: " + ", ".join(md(s) for s in said) if unit.disagree
        else "they agree" if in_force else "no answers yet"))
    settled = unit.settled
    if unit.withdrawn is not None:
        gone = unit.withdrawn
        why = ("taken back by its adjudicator" if gone.reason == "taken_back"
               else "withdrawn: a later answer broke the agreement it rested on")
        st.info(f"No settled answer: the last settlement was {why} · {when(gone.at)}",
                icon=":material/history:")
    if settled is not None:
        how = ("the clinicians agreed" if settled.reason == "unanimous"
               else REASONS.get(settled.reason or "", settled.reason or ""))
        st.success(f"Settled: **{md(settled.words)}** · {md(how)}"
                   + (f" · by {md(settled.adjudicator)}" if settled.adjudicator else "")
                   + f" · {when(settled.at)}", icon=":material/gavel:")
        if settled.rationale:
            st.caption(md(settled.rationale))
    for kind, title in GROUPS:
        entries = unit.of_kind(kind)
        if not entries:
            continue
        st.markdown(f"**{title}**")
        by_rater: dict[str, list] = {}
        for e in entries:
            by_rater.setdefault(e.rater, []).append(e)
        for name, answers in by_rater.items():
            rater_block(name, answers)


def show_item() -> None:
    """What the raters judged, as written."""
    if found.kind in ("prefix", "response"):
        item = load_item(db, found.item_id)
        for rnd in item.rounds:
            with st.chat_message("user", avatar=":material/person:"):
                st.caption(f"Patient · turn {rnd.number}")
                show_text(rnd.patient_text, key=f"dis:{item.id}:{rnd.number}")
        if item.kind == "response":
            with st.chat_message("assistant", avatar=":material/smart_toy:"):
                st.caption(md(name.subject) if name else "The reply")
                show_text(item.response or item.error, key=f"dis:{item.id}:reply")
        return
    if found.kind == "conversation":
        show_messages(load_item(db, found.item_id).payload.get("messages"),
                      f"dis:{found.item_id}")
        return
    if found.kind == "trajectory":
        view = load_trajectory(db, found.uid)
        steps = view.steps if view else []
        if target:
            steps = [s for s in steps if f"step:{s.step_id}" == target] or steps
        for step in steps[:40]:
            st.caption(f"Step {step.step_id} · {md(step.source)}")
            show_text(step.message, key=f"dis:{found.item_id}:{step.step_id}",
                      empty="(no message: see the tool calls in the run)")
        return
    conversation = load_graded_conversation(db, found.uid)
    if conversation is None:
        return
    for n, turn in enumerate(conversation.turns):
        st.caption(md(turn.speaker.capitalize()))
        show_text(turn.text, key=f"dis:{found.item_id}:turn{n}")
    if conversation.completion:
        st.caption("The graded reply" + (f" · {md(name.subject)}" if name else ""))
        show_text(conversation.completion, key=f"dis:{found.item_id}:completion")


who = me.name if me is not None and not server_mode() else None
# The item by what it is; its ids (and the model) on a details line, for researchers.
st.markdown(f"**{md(name.title) if name else code_span(found.uid)}**"
            + " · :grey[read-only: every rater's answers, as given]")
if name:
    st.caption(md(name.details))
links = st.columns(2)
links[0].markdown(
    f"[:material/rate_review: Review it on its screen]"
    f"({item_link(found.kind, found.uid, target or None, reviewer=who)})")
links[0].caption("You have seen its labels here: an answer you give now is recorded as given "
                 "after the reveal, not blind.")
if can_adjudicate(me):
    links[1].page_link("pages/adjudicate.py", label="Settle disagreements on Adjudicate",
                       icon=":material/gavel:")
left, right = st.columns([5, 4], gap="large")
with left:
    st.markdown(f"**The {ITEM_WORDS.get(found.kind, 'item')}**")
    with st.container(height=620, border=True):
        show_item()
with right:
    if found.on_parent:
        gold = [e for unit in found.on_parent for e in unit.entries if e.in_force]
        st.markdown("**Reference labels of the conversation it replies to**")
        for e in gold:
            st.markdown(f"{md(e.who or e.rater)}: **{md(e.words)}**")
    if not found.questions:
        st.info("No rater has answered this item yet.", icon=":material/info:")
    for unit in found.questions:
        unit_section(unit)
