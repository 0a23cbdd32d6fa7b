"""Adjudicate: settle the items where reviewers disagree.

Keys (shown on screen): the settled answer's (1-4 for CARE-Bench labels, Y / N
met or not, 0-6 a step's error), Shift+1-5 a step's severity, A G H M the
reason (ambiguous item, codebook gap, human reviewer's error, machine error),
Ctrl+Enter settle, Left / Right the previous or next item. Opening the screen writes nothing: what the
clinicians agree on is settled by the button that says how many.
"""

from __future__ import annotations

import re

import streamlit as st

from codebook import NO_ERROR
from pages._keys import marker, press, press_counts, refused, screen_keys
from pages._rubric import WORDS
from pages._shared import require_reviewer, show_messages, show_text, store
from pages._steps import code_span
from review.reviewing.criteria import severity_levels, step_codebook
from review.reviewing.items import load_item
from review.reviewing.names import item_name, plural, rater_name, study_round
from review.reviewing.presses import TooSoon
from review.reviewing.trajectory import load_graded_conversation, load_trajectory
from review.team.adjudication import (
    REASONS,
    AnswersChanged,
    adjudication_queue,
    rubric_queue,
    settle,
    settle_step,
    settle_unanimous,
    settle_unanimous_rubric,
    settle_unanimous_steps,
    step_queue,
    unanimous_rubric_waiting,
    unanimous_steps_waiting,
    unanimous_waiting,
)
from review.team.codebook_versions import current_codebook
from review.team.reviewers import Reviewer, can_adjudicate
from review.team.rounds import is_rubric_round, label_questions, list_rounds
from review.text import safe_markdown

st.title("Adjudicate", anchor=False)
me = require_reviewer()
db = store()
if not can_adjudicate(me):
    st.warning("Adjudication is for adjudicators and admins.")
    st.stop()

WHAT = {"labels": "Labels (CARE-Bench)", "rubric": "Rubric verdicts (agent runs, graded conversations)",
        "steps": "Step marks (agent runs)"}
wanted_what = st.query_params.get("what", "labels")
what = st.segmented_control("What to settle", list(WHAT), format_func=WHAT.get, key="adj_what",
                            default=wanted_what if wanted_what in WHAT else "labels") or "labels"
if st.query_params.get("what") != what:
    st.query_params["what"] = what


def answer_words(value: str | None, status: str, book) -> str:
    """An answer in words (Markdown-safe): a label's short name (never CARE-Bench's
    0A / 1B code), Met / Not met, or cannot assess."""
    if status == "cannot_assess" or value is None:
        return "cannot assess"
    if book is not None and book.kind == "labelset":
        try:
            return safe_markdown(book.label(value).short)
        except KeyError:
            return safe_markdown(value)
    return WORDS.get(value) or safe_markdown(value)


def item_heading(item_id: int, more: str = "") -> None:
    """The item as a clinician reads it ("Conversation 12, after the patient's 2nd
    message"), and its ids on a details line for researchers."""
    name = item_name(db, item_id)
    if name is None:
        st.markdown(f"Item {item_id}" + more)
        return
    st.markdown(f"**{safe_markdown(name.title)}**" + more)
    st.caption(safe_markdown(name.details))


def item_words(item_id: int) -> str:
    """The item's title, Markdown-safe, for a line that says what was done to it."""
    name = item_name(store(), item_id)
    return safe_markdown(name.title) if name is not None else f"item {item_id}"


SETTLE_REASONS = [r for r in REASONS if r != "unanimous"]


# The settle forms start empty: a settled answer and its reason are always
# chosen by the adjudicator, never recorded by one click on a default.
CHOOSE = "Choose the settled answer and a reason first."
REOPENED_NOTE = ":material/history: Reopened: this had settled on its own, until a later {what} changed the agreement."
show_machine = st.toggle(
    "Show machine labels", value=False, key="adj_machine",
    help="Hidden by default: the settled answer is the reference the mapper and the judges "
         "are measured against, so their labels should not sway it.")


SETTLED_TOAST = "adj_settled_toast"
SETTLE_ERROR = "adj_settle_error"
if said := st.session_state.pop(SETTLED_TOAST, None):
    # Inline, above the queue: a toast sat over the answers of the next item.
    st.success(said, icon=":material/gavel:")
if failed := st.session_state.pop(SETTLE_ERROR, None):
    st.error(failed, icon=":material/error:")


# The Settle buttons run these as callbacks, with what their form showed when
# it was drawn (`seen`: the settlement in force then; `shown`: the clinicians'
# answers on screen): the next run reloads the queue, where another
# adjudicator's ruling may already have taken the item away, or a clinician's
# changed answer shows in place of the one the ruling was not made on.
def _chosen(form: str) -> tuple:
    return tuple(st.session_state.get(f"{form}:{part}") for part in ("value", "reason", "note"))


def _refused(form: str, exc: ValueError) -> None:
    """Say why nothing was settled, above the queue. Where the answers changed,
    the settled answer chosen is cleared too: it was chosen against the old
    ones, so the item comes back with the new answers to be decided afresh."""
    st.session_state[SETTLE_ERROR] = safe_markdown(str(exc))
    if isinstance(exc, AnswersChanged):
        for part in ("value", "severity"):
            st.session_state.pop(f"{form}:{part}", None)


# Said when a settling key is not taken (`review.reviewing.presses`).
ADJ_TOO_SOON = "Not recorded: too soon after the screen changed. Press again to settle this one."


def unit_token(form: str) -> str:
    """What a settle form's keys act on: the unit it settles (its form's name, as
    a marker takes it)."""
    return re.sub(r"[^A-Za-z0-9]", "_", form)


def settle_from_form(form: str, adjudicator: Reviewer, round_id: int | None, item_id: int,
                     question_key: str | None, seen: int | None, shown: tuple[int, ...],
                     book=None) -> None:
    value, reason, note = _chosen(form)
    if value is None or reason is None:
        st.session_state[SETTLE_ERROR] = CHOOSE
        return
    s = store()
    try:
        settle(s, round_id, item_id, adjudicator, value, reason, note, question_key=question_key,
               expected=seen, answers_shown=shown, press=press("adj", unit_token(form)))
    except TooSoon:
        refused("adj")
        st.session_state[SETTLE_ERROR] = ADJ_TOO_SOON
        return
    except ValueError as exc:
        _refused(form, exc)
        return
    word = answer_words(value, "answered", book)
    st.session_state[SETTLED_TOAST] = (f"Settled {item_words(item_id)} as {word}; "
                                       "every answer stays in its history.")


# A ambiguous, G a gap in the codebook, H a human (reviewer) error, M a machine error
# (Streamlit keeps C and R for the browser).
REASON_KEYS = {"ambiguous_item": "A", "codebook_gap": "G", "reviewer_error": "H",
               "machine_error": "M"}
REASON_SHORT = {"ambiguous_item": "Ambiguous item", "codebook_gap": "Codebook gap",
                "reviewer_error": "Reviewer error", "machine_error": "Machine error"}


def _choose(key: str, value) -> None:
    if not press_counts("adj", unit_token(key.rsplit(":", 1)[0])):  # too soon: said, not taken
        st.session_state[SETTLE_ERROR] = ADJ_TOO_SOON
        return
    st.session_state[key] = value


def answer_keys(codes: list[str], book) -> dict[str, str]:
    """The key of each settled answer: the codebook's own (as on the Review and
    Trajectories screens: 1-4, 0-6), Y / N for met / not met, else 1-9 in order."""
    keys = {}
    for n, code in enumerate(codes, start=1):
        try:
            given = book.label(code).shortcut if book is not None else None
        except KeyError:
            given = None
        keys[code] = (given or {"met": "Y", "not_met": "N"}.get(code)
                      or (str(n) if n <= 9 else "")).upper()
    return keys


def settle_controls(form: str, codes: list[str], words, label: str, on_settle, args: tuple,
                    keys: dict[str, str] | None, noun: str = "answer",
                    severities: dict[int, str] | None = None, per_row: int = 4) -> None:
    """Pick the settled answer (and, for a step's mark, its severity) and a reason with
    buttons, write a note, and settle. With `keys` (each answer's key), the keys are
    live and shown on screen: the answer's, Shift+1-5 the severity, A G H M the reason,
    Ctrl+Enter settle; only one unit on screen takes them. Nothing is chosen
    beforehand: the adjudicator chooses, every time."""
    chosen = st.session_state.get(f"{form}:value")
    reason = st.session_state.get(f"{form}:reason")
    if keys:  # first, before what they press (pages/_keys.py): held during a redraw, and timed
        shortcuts = {k: f"{form}:pick:{code}" for code, k in keys.items() if k}
        shortcuts.update({f"Shift+{level}": f"{form}:sev:{level}" for level in severities or {}})
        shortcuts.update({REASON_KEYS[why]: f"{form}:why:{why}" for why in SETTLE_REASONS
                          if why in REASON_KEYS})
        shortcuts["Ctrl+Enter"] = f"{form}:settle"
        screen_keys("adj", shortcuts, token=unit_token(form), too_soon=ADJ_TOO_SOON)
    st.markdown(f"**Settled {noun}**")
    cols = st.columns(min(len(codes), per_row))
    for n, code in enumerate(codes):
        cols[n % len(cols)].button(
            words(code), key=f"{form}:pick:{code}", width="stretch",
            shortcut=keys.get(code) or None if keys else None,
            type="primary" if chosen == code else "secondary",
            on_click=_choose, args=(f"{form}:value", code))
    if severities:
        picked = st.session_state.get(f"{form}:severity")
        st.markdown("**Severity** :grey[(of an error; not kept for 'no error')]")
        cols = st.columns(len(severities))
        for col, (level, name) in zip(cols, severities.items(), strict=True):
            col.button(f"{level} · {name}", key=f"{form}:sev:{level}", width="stretch",
                       shortcut=f"Shift+{level}" if keys else None,
                       type="primary" if picked == level else "secondary",
                       on_click=_choose, args=(f"{form}:severity", level))
    st.markdown("**Reason**")
    cols = st.columns(min(len(SETTLE_REASONS), per_row))
    for n, why in enumerate(SETTLE_REASONS):
        cols[n % len(cols)].button(REASON_SHORT.get(why, why), key=f"{form}:why:{why}",
                                   help=REASONS[why].capitalize(), width="stretch",
                                   shortcut=REASON_KEYS.get(why) if keys else None,
                                   type="primary" if reason == why else "secondary",
                                   on_click=_choose, args=(f"{form}:reason", why))
    with st.form(form, border=False):
        st.text_input("Note", placeholder="What decided it; a codebook gap to fix",
                      key=f"{form}:note")
        st.form_submit_button(label, type="primary", on_click=on_settle, args=args,
                              shortcut="Ctrl+Enter" if keys else None, width="stretch",
                              key=f"{form}:settle")
    if keys:
        # The marker of what the keys act on, drawn after the unit and its answers.
        with st.container(key=marker("adj", unit_token(form))):
            st.caption(f"Keys: {' '.join(k for k in keys.values() if k)} the settled {noun} · "
                       + ("Shift+1–5 the severity · " if severities else "")
                       + " ".join(REASON_KEYS.values()) + " the reason · Ctrl+Enter settle · "
                       "← → previous / next")


def settle_agreed_button(count: int, one: str, many: str, settle_own, **scope) -> None:
    """Settle what the clinicians agree on, by an explicit click that says how many
    (recorded against whoever clicks): opening the screen settles nothing."""
    if not count:
        return

    def settle_now() -> None:
        done = settle_own(store(), **scope, actor=me.name)
        st.session_state[SETTLED_TOAST] = (f"Settled {plural(done, one, many)} the clinicians "
                                           "agree on; each stays reopenable if a later answer "
                                           "differs.")

    st.button(f"Settle the {plural(count, 'unanimous ' + one, 'unanimous ' + many)}",
              on_click=settle_now, icon=":material/done_all:", key=f"adj_agreed:{many}",
              help="Where every clinician gave the same answer, that answer becomes the settled "
                   "one (reason: all reviewers agreed), recorded as your action.")


def queue_nav(pos: int, total: int, state_key: str, noun: str = "") -> None:
    """Previous / Next through a queue (arrow keys), the position kept in the session."""
    nav = st.columns(2)
    for col, label, step, off in ((nav[0], "Previous", -1, pos == 0),
                                  (nav[1], "Next", 1, pos >= total - 1)):
        if col.button(f"{label}{noun}", disabled=off, width="stretch",
                      shortcut="Left" if step < 0 else "Right", key=f"{state_key}:{label}"):
            st.session_state[state_key] = pos + step
            st.rerun()


def disputed(mode: str, settle_own, load, settled_words: tuple[int, str], empty: str,
             progress: str):
    """What the rubric and step modes open with: the names toggle, the button that
    settles what the clinicians agree on (`settled_words`: how many, and what), and
    the queue with this adjudicator's place in it; None (said on the page) when
    nothing is left."""
    show_names = st.toggle("Show names", value=False, key=f"adj_{mode}_names",
                           help="Hidden by default, so that the answer is judged, not the person")
    settle_agreed_button(*settled_words, settle_own)
    queue = load(db, me, show_names=show_names)
    if not queue:
        st.success(f"Nothing to adjudicate here: {empty} (someone else adjudicates those).",
                   icon=":material/task_alt:")
        return None
    pos = min(st.session_state.get(f"adj_{mode}_pos", 0), len(queue) - 1)
    st.progress((pos + 1) / len(queue), text=progress.format(pos=pos + 1, n=len(queue)))
    return queue, pos


def evidence(case) -> None:
    """What the verdicts are about, on this page: the consultation's dialogue
    (an agent run; its steps when it kept no dialogue) or the conversation and
    the graded reply."""
    with st.expander("The conversation", expanded=True):
        if case.item_kind == "trajectory":
            view = load_trajectory(db, case.item_uid)
            if view is None:
                st.caption("This run is no longer in the database.")
            elif view.dialogue:
                for turn in view.dialogue:
                    st.markdown(f"**{safe_markdown(turn.speaker.capitalize())}** · "
                                + safe_markdown(turn.text))
            else:
                for step in view.steps:
                    st.markdown(f"**{step.step_id}** · {safe_markdown(step.source)} · "
                                + safe_markdown(_preview(step)))
            return
        conversation = load_graded_conversation(db, case.item_uid)
        if conversation is None:
            st.caption("This conversation is no longer in the database.")
            return
        for turn in conversation.turns:
            st.markdown(f"**{safe_markdown(turn.speaker.capitalize())}** · " + safe_markdown(turn.text))
        if conversation.completion:
            name = item_name(db, case.item_id)
            st.markdown(f"**The graded reply: {safe_markdown(name.subject)}**" if name else
                        "**The graded reply**")
            show_text(conversation.completion, key=f"adj_reply:{case.item_id}")


def rubric_mode() -> None:
    """One agent run or graded conversation at a time, each disputed criterion
    with the clinicians' verdicts and the judges', settled one by one."""
    found = disputed(
        "rubric", settle_unanimous_rubric, rubric_queue,
        (unanimous_rubric_waiting(db), "criterion", "criteria"),
        "every criterion two or more clinicians answered is settled, agreed on, or on an item you "
        "answered yourself", "Item {pos} of {n} with disagreements")
    if found is None:
        return
    queue, pos = found
    case = queue[pos]
    page = "pages/trajectories.py" if case.item_kind == "trajectory" else "pages/graded.py"
    head = st.columns([3, 2], vertical_alignment="center")
    with head[0]:
        item_heading(case.item_id, " · " + plural(len(case.disputes), "disputed criterion",
                                                   "disputed criteria"))
    head[1].page_link(page, label="Read the item (answering there makes you its reviewer)",
                      icon=":material/open_in_new:", query_params={"item": case.item_uid})
    evidence(case)
    for d in case.disputes:
        book = current_codebook(db, d.codebook)  # the wording in force
        with st.container(border=True, key=f"adj_c_{d.question_id}"):
            st.markdown(f"**{safe_markdown(d.text)}**")
            if d.reopened:
                st.caption(REOPENED_NOTE.format(what="answer"))
            for a in d.answers:
                line = f"{safe_markdown(a.reviewer)} · {answer_words(a.value, a.status, book)}"
                st.markdown(line + (f" · confidence {a.confidence}" if a.confidence else ""))
                if a.rationale:
                    st.caption(safe_markdown(a.rationale))
            if d.machine and show_machine:
                st.caption("Judges and verifiers: " + "; ".join(
                    f"{safe_markdown(rater_name(db, name))}: {answer_words(v, 'answered', book)}"
                    for name, v in d.machine))
            codes = book.codes if book is not None and book.kind == "labelset" else ["met", "not_met"]
            form = f"settle_c:{case.item_id}:{d.question_id}"
            # Keys settle the first disputed criterion; each settled leaves the list.
            settle_controls(form, codes, lambda c, book=book: answer_words(c, "answered", book),
                            "Settle this criterion", settle_from_form,
                            (form, me, None, case.item_id, d.question_key, d.settled_id,
                             d.answer_ids, book), noun="verdict",
                            keys=answer_keys(codes, book) if d is case.disputes[0] else None)
    queue_nav(pos, len(queue), "adj_rubric_pos", " item")


def _preview(step, limit: int = 240) -> str:
    """A step in a line: its message, what it said to the patient and what
    came back from the patient, cut short."""
    parts = [step.message] + [f"said: {t}" for t in step.said_to_patient] + [
        f"patient: {r.content}" for r in step.results if r.from_patient]
    parts += [f"tool: {c.name}" for c in step.tool_calls if c.kind != "say"]
    text = " · ".join(p.replace("\n", " ").strip() for p in parts if p and p.strip()) or "(no text)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def settle_step_from_form(form: str, adjudicator: Reviewer, item_id: int, step_id: int,
                          seen: int | None, shown: tuple[int, ...]) -> None:
    """As `settle_from_form`, for one step's settled mark."""
    error, reason, note = _chosen(form)
    severity = st.session_state.get(f"{form}:severity")
    if error is None or reason is None:
        st.session_state[SETTLE_ERROR] = CHOOSE
        return
    s = store()
    try:
        settle_step(s, item_id, step_id, adjudicator, error, None if error == NO_ERROR else severity,
                    reason, note, expected=seen, answers_shown=shown,
                    press=press("adj", unit_token(form)))
    except TooSoon:
        refused("adj")
        st.session_state[SETTLE_ERROR] = ADJ_TOO_SOON
        return
    except ValueError as exc:
        _refused(form, exc)
        return
    st.session_state[SETTLED_TOAST] = (f"Settled step {step_id} of {item_words(item_id)};"
                                       " every mark stays in its history.")


def steps_mode() -> None:
    """One agent run at a time, each step clinicians marked with different
    errors shown with the step itself and their marks, settled one by one."""
    found = disputed(
        "steps", settle_unanimous_steps, step_queue,
        (unanimous_steps_waiting(db), "step", "steps"),
        "every step two or more clinicians marked is settled, marked alike, or on a run you "
        "answered yourself", "Run {pos} of {n} with disputed steps")
    if found is None:
        return
    queue, pos = found
    case = queue[pos]
    item_heading(case.item_id, " · " + plural(len(case.disputes), "disputed step"))
    book = step_codebook(db)  # the wording in force, as the Trajectories screen shows it
    codes = book.codes
    levels = {lv["level"]: lv["name"] for lv in severity_levels()}
    view = load_trajectory(db, case.item_uid)
    steps = {s.step_id: s for s in view.steps} if view else {}

    def error_words(code: str | None, severity: int | None = None) -> str:
        if code is None:
            return "cannot assess"
        try:
            words = safe_markdown(book.label(code).short)
        except KeyError:
            words = safe_markdown(code)
        return words + (f" · severity {severity} ({levels.get(severity, '?')})" if severity else "")

    for d in case.disputes:
        step = steps.get(d.step_id)
        with st.container(border=True, key=f"adj_s_{case.item_id}_{d.step_id}"):
            head = st.columns([3, 2], vertical_alignment="center")
            head[0].markdown(f"**Step {d.step_id}**"
                             + (f" · {safe_markdown(step.source)}" if step else ""))
            head[1].page_link("pages/trajectories.py", label="Open the run at this step",
                              icon=":material/open_in_new:",
                              query_params={"item": case.item_uid, "step": str(d.step_id)})
            if d.reopened:
                st.caption(REOPENED_NOTE.format(what="mark"))
            if step is not None:
                show_text(step.message, key=f"adj_s:{case.item_id}:{d.step_id}",
                          empty="(no message: see the tool calls in the run)")
                for call in step.tool_calls:
                    st.caption(f"Tool call: {code_span(call.name)}")
                before = [s for s in view.steps if s.index < step.index]
                if step.reasoning or before:
                    with st.expander(f"The run up to this step ({plural(len(before), 'step')}"
                                     " before it"
                                     + (", and the agent's reasoning here)" if step.reasoning else ")")):
                        for s in before:
                            st.markdown(f"**{s.step_id}** · {safe_markdown(s.source)} · "
                                        + safe_markdown(_preview(s)))
                        if step.reasoning:
                            st.caption(f"Reasoning at step {d.step_id}")
                            show_text(step.reasoning, key=f"adj_sr:{case.item_id}:{d.step_id}")
            for a in d.answers:
                st.markdown(f"{safe_markdown(a.reviewer)} · {error_words(a.error, a.severity)}")
                if a.note:
                    st.caption(safe_markdown(a.note))
            form = f"settle_s:{case.item_id}:{d.step_id}"
            # Keys settle the first disputed step; each settled leaves the list.
            settle_controls(form, codes, lambda c: safe_markdown(book.label(c).short),
                            "Settle this step", settle_step_from_form,
                            (form, me, case.item_id, d.step_id, d.settled_id, d.answer_ids),
                            noun="mark", severities=levels,
                            keys=answer_keys(codes, book) if d is case.disputes[0] else None)
    queue_nav(pos, len(queue), "adj_steps_pos", " run")


if what == "rubric":
    rubric_mode()
    st.stop()
if what == "steps":
    steps_mode()
    st.stop()

rounds = [r for r in list_rounds(db) if not is_rubric_round(r.question_key)]  # rubric: above
scopes = [None] + [r.id for r in rounds]
names = {r.id: study_round(r.name) for r in rounds}
top = st.columns([3, 3, 2], vertical_alignment="bottom")
wanted = st.query_params.get("round")
scope = top[0].selectbox(
    "Answers from", scopes,
    index=scopes.index(int(wanted)) if wanted and wanted.isdigit() and int(wanted) in scopes else 0,
    format_func=lambda s: names.get(s, "All clinicians' answers (no review round)"))
question_key = None
if scope is None:
    texts = label_questions(db)
    question_key = top[1].selectbox("Question", list(texts), format_func=texts.get)
show_names = top[2].toggle("Show names", value=False,
                           help="Hidden by default, so that the answer is judged, not the person")
agreed = unanimous_waiting(db, scope, question_key)
settle_agreed_button(agreed, "item", "items", settle_unanimous,
                     round_id=scope, question_key=question_key)
queue = adjudication_queue(db, scope, me, show_names=show_names, question_key=question_key)
if not queue:
    st.success("Nothing to adjudicate here: every complete item is settled, unanimous, or one you "
               "answered yourself (someone else adjudicates those).", icon=":material/task_alt:")
    st.stop()

pos = min(st.session_state.get("adj_pos", 0), len(queue) - 1)
case = queue[pos]
# The question disputed (a study's chat may be asked several): its codebook settles it.
item = load_item(db, case.item_id,
                 db.scalar("SELECT key FROM questions WHERE id = ?", (case.question_id,)))
st.progress((pos + 1) / len(queue), text=f"Item {pos + 1} of {len(queue)} with disagreements")
left, right = st.columns([3, 2], gap="large")
with left:
    item_heading(item.id)
    with st.container(border=True):
        for rnd in item.rounds:
            with st.chat_message("user", avatar=":material/person:"):
                st.caption(f"Patient · turn {rnd.number}")
                show_text(rnd.patient_text, key=f"adj:{item.id}:{rnd.number}")
        show_messages(item.payload.get("messages"), f"adj:{item.id}")  # a study's chat
        if item.kind == "response":
            with st.chat_message("assistant", avatar=":material/smart_toy:"):
                st.caption(safe_markdown(item_name(db, item.id).subject))
                show_text(item.response, key=f"adj:{item.id}:response")

book = item.codebook
with right:
    st.markdown("**The answers**")
    if case.reopened:
        st.caption(REOPENED_NOTE.format(what="answer"))
    for a in case.answers:
        with st.container(border=True):
            label = answer_words(a.value, a.status, book)
            st.markdown(f"**{safe_markdown(a.reviewer)}** · {label}"
                        + (f" · confidence {a.confidence}" if a.confidence else ""))
            if a.rationale:
                st.caption(safe_markdown(a.rationale))
    if case.machine_labels and show_machine:
        st.markdown("**Machine labels**")
        for rater, value in case.machine_labels:
            st.caption(f"{safe_markdown(rater_name(db, rater))}: "
                       f"{answer_words(value, 'answered', book)}")
    form = f"settle:{case.round_id}:{case.question_id}:{case.item_id}"
    with st.container(border=True):
        codes = book.codes if book else ["met", "not_met"]
        settle_controls(form, codes, lambda c: answer_words(c, "answered", book), "Settle",
                        settle_from_form, (form, me, case.round_id, case.item_id, question_key,
                                           case.settled_id, case.answer_ids, book),
                        keys=answer_keys(codes, book), per_row=2)
    queue_nav(pos, len(queue), "adj_pos")
