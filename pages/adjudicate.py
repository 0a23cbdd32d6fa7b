"""Adjudicate: settle the items where reviewers disagree.

Keys (shown on screen): the settled answer's (1-4 for CARE-Bench labels, Y / N
met or not, 0-6 a step's error), Shift+1-5 a step's severity, A G H J the
reason (ambiguous item, codebook gap, a human reviewer's error, a machine's
error), Ctrl+Enter settle, Z take the settlement just made back (within the
undo window), Left / Right the previous or next item. Opening the screen
writes nothing: what the clinicians agree on is settled by the button that
says how many.
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
from review.reviewing.names import item_name, plural, rater_name, study_round, turn
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
    take_back,
    take_back_wait,
    unanimous_rubric_waiting,
    unanimous_steps_waiting,
    unanimous_waiting,
)
from review.team.codebook_versions import current_codebook
from review.team.reviewers import Reviewer, can_adjudicate
from review.team.rounds import is_rubric_round, label_questions, list_rounds
from review.text import safe_markdown

me = require_reviewer()
db = store()
if not can_adjudicate(me):
    st.title("Adjudicate", anchor=False)
    st.warning("Adjudication is for adjudicators and admins.")
    st.stop()

# Laid out for a laptop (1280x720), as the Review screen: the item on the left, the
# clinicians' answers and the settle panel on the right, together in the window (the
# keys act on what is in view); what to settle and how to show it in the sidebar.
WHAT = {"labels": "Labels", "rubric": "Rubric verdicts", "steps": "Step marks"}
WHAT_HELP = ("Labels: CARE-Bench conversations and replies. Rubric verdicts: the criteria of "
             "agent runs and graded conversations. Step marks: what went wrong at a step of "
             "an agent run.")
head = st.columns([2, 5], vertical_alignment="center", gap="small")
head[0].title("Adjudicate", anchor=False)
wanted_what = st.query_params.get("what", "labels")
what = head[1].segmented_control("What to settle", list(WHAT), format_func=WHAT.get,
                                 key="adj_what", help=WHAT_HELP, label_visibility="collapsed",
                                 default=wanted_what if wanted_what in WHAT else "labels") or "labels"
if st.query_params.get("what") != what:
    st.query_params["what"] = what
with st.sidebar:
    st.markdown("**How the answers show**")
    show_machine = st.toggle(
        "Show machine labels", value=False, key="adj_machine",
        help="Hidden by default: the settled answer is the reference the mapper and the judges "
             "are measured against, so their labels should not sway it.")
    show_names = st.toggle("Show names", value=False, key=f"adj_{what}_names",
                           help="Hidden by default, so that the answer is judged, not the person")


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

# Session keys: the last settlement made here (its annotation id, what it did in words),
# and why the last one was refused.
SETTLED = "adj_settled"
SETTLE_ERROR = "adj_settle_error"


def take_back_last(annotation_id: int) -> None:
    """Undo (Z): take the settlement just made back, within the undo window."""
    try:
        take_back(store(), me, annotation_id)
    except ValueError as exc:
        st.session_state[SETTLE_ERROR] = safe_markdown(str(exc))
        return
    _, words = st.session_state.pop(SETTLED, (None, ""))
    st.session_state[SETTLE_ERROR] = None
    st.session_state["adj_taken_back"] = (
        f"Taken back: {words.removeprefix('Settled ')} The ruling stays in the record, "
        "withdrawn; the item waits to be settled again.")


def last_settled() -> None:
    """The settlement just made, and (within the undo window) its Undo (Z); or
    why nothing was settled. Above the item on the left, so that a message
    never pushes the settle panel down."""
    if failed := st.session_state.pop(SETTLE_ERROR, None):
        st.error(failed, icon=":material/error:")
    if undone := st.session_state.pop("adj_taken_back", None):
        st.info(undone, icon=":material/undo:")
    if st.session_state.get(SETTLED) is None:
        return
    annotation_id, words = st.session_state[SETTLED]
    wait = take_back_wait(store(), annotation_id)
    if wait <= 0:
        st.session_state.pop(SETTLED)  # said once; the history keeps it
        st.success(words, icon=":material/gavel:")
        return
    row = st.columns([6, 1], vertical_alignment="center", gap="small")
    row[0].success(words, icon=":material/gavel:")
    row[1].button("Undo", key=f"adj_undo:{annotation_id}", shortcut="Z", width="stretch",
                  icon=":material/undo:", on_click=take_back_last, args=(annotation_id,),
                  help="Take this settlement back (Z), within a few seconds of making it: "
                       "recorded as withdrawn, and the item waits to be settled again")
    # Z is an undo: never refused for haste. No timer redraws the screen when the window
    # has passed (a run costs the server as much as a settlement, pages/_keys.py): the
    # Undo goes with the next run, and one pressed too late is refused, and said.
    screen_keys("adjudicate_undo", {"Z": f"adj_undo:{annotation_id}"},
                token=f"settled{annotation_id}", relative=["Z"])


# The Settle buttons run these as callbacks, with what their form showed when
# it was drawn (`seen`: the settlement in force then; `shown`: the clinicians'
# answers on screen): the next run reloads the queue, where another
# adjudicator's ruling may already have taken the item away, or a clinician's
# changed answer shows in place of the one the ruling was not made on.
def _chosen(form: str) -> tuple:
    return tuple(st.session_state.get(f"{form}:{part}") for part in ("value", "reason", "note"))


def _refused(form: str, exc: ValueError) -> None:
    """Say why nothing was settled, above the item. Where the answers changed,
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
        made = settle(s, round_id, item_id, adjudicator, value, reason, note,
                      question_key=question_key, expected=seen, answers_shown=shown,
                      press=press("adj", unit_token(form)))
    except TooSoon:
        refused("adj")
        st.session_state[SETTLE_ERROR] = ADJ_TOO_SOON
        return
    except ValueError as exc:
        _refused(form, exc)
        return
    word = answer_words(value, "answered", book)
    st.session_state[SETTLED] = (made, f"Settled {item_words(item_id)} as {word}; "
                                       "every answer stays in its history.")


# A ambiguous, G a gap in the codebook, H a human (reviewer) error, J a machine's
# (a judge's, a mapper's, a grader's) error. Not M: on the Trajectories screen M
# saves a step's mark (one key, one meaning); Streamlit keeps C and R for the browser.
REASON_KEYS = {"ambiguous_item": "A", "codebook_gap": "G", "reviewer_error": "H",
               "machine_error": "J"}
REASON_SHORT = {"ambiguous_item": "Ambiguous item", "codebook_gap": "Codebook gap",
                "reviewer_error": "A reviewer's error", "machine_error": "Machine's error"}


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
                    severities: dict[int, str] | None = None) -> None:
    """Pick the settled answer (and, for a step's mark, its severity) and a reason with
    buttons, write a note, and settle: compact, under the answers it settles. With
    `keys` (each answer's key), the keys are live and shown on screen: the answer's,
    Shift+1-5 the severity, A G H J the reason, Ctrl+Enter settle. Nothing is chosen
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
    with st.container(border=True, key="adj_settle", gap="small"):
        st.markdown(f"**Settled {noun}**")
        with st.container(horizontal=True, gap="small", key="adj_values"):
            for code in codes:
                st.button(words(code), key=f"{form}:pick:{code}",
                          shortcut=keys.get(code) or None if keys else None,
                          type="primary" if chosen == code else "secondary",
                          on_click=_choose, args=(f"{form}:value", code))
        if severities:
            picked = st.session_state.get(f"{form}:severity")
            with st.container(horizontal=True, gap="small", key="adj_severities",
                              vertical_alignment="center"):
                st.caption("Severity ⇧1–5 (of an error)" if keys else "Severity (of an error)",
                           width="content")
                for level, name in severities.items():
                    st.button(f"{level} {name}" if picked == level else str(level),
                              key=f"{form}:sev:{level}", help=f"{level} · {name}",
                              shortcut=f"Shift+{level}" if keys else None,
                              type="primary" if picked == level else "secondary",
                              on_click=_choose, args=(f"{form}:severity", level))
        with st.container(horizontal=True, gap="small", key="adj_reasons",
                          vertical_alignment="center"):
            st.caption("Because", width="content")
            for why in SETTLE_REASONS:
                st.button(REASON_SHORT.get(why, why), key=f"{form}:why:{why}",
                          help=REASONS[why].capitalize(),
                          shortcut=REASON_KEYS.get(why) if keys else None,
                          type="primary" if reason == why else "secondary",
                          on_click=_choose, args=(f"{form}:reason", why))
        with st.form(form, border=False):
            row = st.columns([1, 1], vertical_alignment="center", gap="small")
            row[0].text_input("Note", placeholder="What decided it; a codebook gap to fix",
                              key=f"{form}:note", label_visibility="collapsed")
            row[1].form_submit_button(label, type="primary", on_click=on_settle, args=args,
                                      shortcut="Ctrl+Enter" if keys else None, width="stretch",
                                      key=f"{form}:settle")
        if keys:
            # The marker of what the keys act on, drawn after the unit and its answers.
            with st.container(key=marker("adj", unit_token(form))):
                st.caption(f"Keys: {' '.join(k for k in keys.values() if k)} the settled {noun} · "
                           + ("Shift+1–5 the severity · " if severities else "")
                           + " ".join(REASON_KEYS.values()) + " the reason · Ctrl+Enter settle · "
                           "Z undo · ← → previous / next")


def settle_agreed_button(where, count: int, one: str, many: str, settle_own, **scope) -> None:
    """Settle what the clinicians agree on, by an explicit click that says how many
    (recorded against whoever clicks): opening the screen settles nothing."""
    if not count:
        return

    def settle_now() -> None:
        done = settle_own(store(), **scope, actor=me.name)
        st.session_state[SETTLED] = (None, f"Settled {plural(done, one, many)} the clinicians "
                                           "agree on; each stays reopenable if a later answer "
                                           "differs.")

    where.button(f"Settle the {plural(count, 'unanimous ' + one, 'unanimous ' + many)}",
                 on_click=settle_now, icon=":material/done_all:", key=f"adj_agreed:{many}",
                 help="Where every clinician gave the same answer, that answer becomes the "
                      "settled one (reason: all reviewers agreed), recorded as your action.")


def queue_bar(pos: int, total: int, state_key: str, text: str, agreed: tuple) -> None:
    """Where the adjudicator is in the queue (one line): how far, what the
    clinicians agree on (a button that settles it), Previous / Next (← →)."""
    row = st.columns([4, 3, 2], vertical_alignment="center", gap="small")
    row[0].progress((pos + 1) / total if total else 1.0, text=text)
    settle_agreed_button(row[1], *agreed)
    with row[2], st.container(horizontal=True, gap="small"):
        for label, step, off in (("Previous", -1, pos == 0), ("Next", 1, pos >= total - 1)):
            if st.button(label, disabled=off, width="stretch",
                         shortcut="Left" if step < 0 else "Right", key=f"{state_key}:{label}"):
                st.session_state[state_key] = pos + step
                st.rerun()


def nothing_left(agreed: tuple, empty: str) -> None:
    settle_agreed_button(st, *agreed)
    st.success(f"Nothing to adjudicate here: {empty} (someone else adjudicates those).",
               icon=":material/task_alt:")


def answers_box(lines: list[tuple[str, str | None]], reopened: str | None = None) -> None:
    """The clinicians' answers, one line each with its rationale or note under it."""
    with st.container(border=True, key="adj_answers", gap="small"):
        st.markdown("**The clinicians' answers**")
        if reopened:
            st.caption(REOPENED_NOTE.format(what=reopened))
        for line, why in lines:
            st.markdown(line)
            if why:
                st.caption(safe_markdown(why))


def machine_line(machine: list[tuple[str, str | None]], book, who: str) -> None:
    if machine and show_machine:
        st.caption(f"{who}: " + "; ".join(
            f"{safe_markdown(rater_name(db, name))}: {answer_words(v, 'answered', book)}"
            for name, v in machine))


def pick_dispute(item_id: int, mode: str, labels: list[str]) -> int:
    """Which of an item's disputes the panel settles (the first, unless another is
    chosen): one at a time, beside the item, with the keys acting on it."""
    if len(labels) == 1:
        return 0
    key = f"adj_{mode}_dispute:{item_id}"
    if (st.session_state.get(key) or 0) >= len(labels):
        st.session_state[key] = 0  # the one chosen was settled: the first left
    return st.segmented_control(
        "Which one", list(range(len(labels))), format_func=lambda i: labels[i], key=key,
        default=0, label_visibility="collapsed") or 0


def evidence(case) -> None:
    """What the verdicts are about, in its own scrolling box: the consultation's
    dialogue (an agent run; its steps when it kept no dialogue) or the
    conversation and the graded reply."""
    st.markdown("**The conversation**")
    with st.container(border=True, key="adj_evidence"):
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
            st.markdown(f"**{safe_markdown(turn.speaker.capitalize())}** · "
                        + safe_markdown(turn.text))
        if conversation.completion:
            name = item_name(db, case.item_id)
            st.markdown(f"**The graded reply: {safe_markdown(name.subject)}**" if name else
                        "**The graded reply**")
            show_text(conversation.completion, key=f"adj_reply:{case.item_id}")


def rubric_mode() -> None:
    """One agent run or graded conversation at a time: the evidence on the left; on
    the right one disputed criterion, with the clinicians' verdicts (and the judges',
    if asked) and its settle panel."""
    agreed = (unanimous_rubric_waiting(db), "criterion", "criteria", settle_unanimous_rubric)
    empty = ("every criterion two or more clinicians answered is settled, agreed on, or on an "
             "item you answered yourself")
    queue = rubric_queue(db, me, show_names=show_names)
    if not queue:
        last_settled()
        nothing_left(agreed, empty)
        return
    pos = min(st.session_state.get("adj_rubric_pos", 0), len(queue) - 1)
    case = queue[pos]
    queue_bar(pos, len(queue), "adj_rubric_pos",
              f"Item {pos + 1} of {len(queue)} with disagreements", agreed)
    page = "pages/trajectories.py" if case.item_kind == "trajectory" else "pages/graded.py"
    left, right = st.columns([1, 1], gap="medium")
    with left:
        last_settled()  # on the left: the settle panel on the right stays where it is
    with left, st.container(key=marker("adj_item", f"{case.item_id}"), gap="small"):
        item_heading(case.item_id, " · " + plural(len(case.disputes), "disputed criterion",
                                                   "disputed criteria"))
        evidence(case)
        st.page_link(page, label="Read the item on its screen (answering there makes you its "
                                 "reviewer)", icon=":material/open_in_new:",
                     query_params={"item": case.item_uid})
    with right:
        at = pick_dispute(case.item_id, "rubric",
                          [f"Criterion {n}" for n in range(1, len(case.disputes) + 1)])
        d = case.disputes[at]
        book = current_codebook(db, d.codebook)  # the wording in force
        st.markdown(f"**{safe_markdown(d.text)}**")
        answers_box([(f"{safe_markdown(a.reviewer)} · {answer_words(a.value, a.status, book)}"
                      + (f" · confidence {a.confidence}" if a.confidence else ""), a.rationale)
                     for a in d.answers], "answer" if d.reopened else None)
        machine_line(d.machine, book, "Judges and verifiers")
        codes = book.codes if book is not None and book.kind == "labelset" else ["met", "not_met"]
        form = f"settle_c:{case.item_id}:{d.question_id}"
        settle_controls(form, codes, lambda c, book=book: answer_words(c, "answered", book),
                        "Settle this criterion", settle_from_form,
                        (form, me, None, case.item_id, d.question_key, d.settled_id,
                         d.answer_ids, book), noun="verdict", keys=answer_keys(codes, book))


def _preview(step, limit: int = 240) -> str:
    """A step in a line: its message, what it said to the patient and what
    came back from the patient, cut short."""
    parts = [step.message] + [f"said: {t}" for t in step.said_to_patient] + [
        f"patient: {r.said}" for r in step.results if r.from_patient]
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
        made = settle_step(s, item_id, step_id, adjudicator, error,
                           None if error == NO_ERROR else severity, reason, note,
                           expected=seen, answers_shown=shown,
                           press=press("adj", unit_token(form)))
    except TooSoon:
        refused("adj")
        st.session_state[SETTLE_ERROR] = ADJ_TOO_SOON
        return
    except ValueError as exc:
        _refused(form, exc)
        return
    st.session_state[SETTLED] = (made, f"Settled step {step_id} of {item_words(item_id)}; "
                                       "every mark stays in its history.")


def steps_mode() -> None:
    """One agent run at a time: the disputed step on the left (with the run up to
    it), the clinicians' marks and the settle panel on the right; one step at a time."""
    agreed = (unanimous_steps_waiting(db), "step", "steps", settle_unanimous_steps)
    empty = ("every step two or more clinicians marked is settled, marked alike, or on a run "
             "you answered yourself")
    queue = step_queue(db, me, show_names=show_names)
    if not queue:
        last_settled()
        nothing_left(agreed, empty)
        return
    pos = min(st.session_state.get("adj_steps_pos", 0), len(queue) - 1)
    case = queue[pos]
    queue_bar(pos, len(queue), "adj_steps_pos",
              f"Run {pos + 1} of {len(queue)} with disputed steps", agreed)
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

    left, right = st.columns([1, 1], gap="medium")
    with right:
        at = pick_dispute(case.item_id, "steps",
                          [f"Step {d.step_id}" for d in case.disputes])
    d = case.disputes[at]
    step = steps.get(d.step_id)
    with left:
        last_settled()  # on the left: the settle panel on the right stays where it is
    with left, st.container(key=marker("adj_item", f"{case.item_id}_s{d.step_id}"), gap="small"):
        item_heading(case.item_id, " · " + plural(len(case.disputes), "disputed step"))
        st.markdown(f"**Step {d.step_id}**"
                    + (f" · {safe_markdown(step.source)}" if step else ""))
        with st.container(border=True, key="adj_step"):
            if step is None:
                st.caption("This step is no longer in the run.")
            else:
                show_text(step.message, key=f"adj_s:{case.item_id}:{d.step_id}",
                          empty="(no message: see the tool calls in the run)")
                for call in step.tool_calls:
                    if call.kind == "say":
                        st.caption("Said to the patient")
                        show_text(call.said, key=f"adj_said:{case.item_id}:{d.step_id}")
                    else:
                        st.caption(f"Tool call: {code_span(call.name)}")
                for n, result in enumerate(r for r in step.results if r.from_patient):
                    st.caption("Patient replied")
                    show_text(result.said, key=f"adj_reply:{case.item_id}:{d.step_id}:{n}")
        if step is not None:
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
        st.page_link("pages/trajectories.py", label="Open the run at this step",
                     icon=":material/open_in_new:",
                     query_params={"item": case.item_uid, "step": str(d.step_id)})
    with right:
        answers_box([(f"{safe_markdown(a.reviewer)} · {error_words(a.error, a.severity)}", a.note)
                     for a in d.answers], "mark" if d.reopened else None)
        form = f"settle_s:{case.item_id}:{d.step_id}"
        settle_controls(form, codes, lambda c: safe_markdown(book.label(c).short),
                        "Settle this step", settle_step_from_form,
                        (form, me, case.item_id, d.step_id, d.settled_id, d.answer_ids),
                        noun="mark", severities=levels, keys=answer_keys(codes, book))


def labels_mode() -> None:
    """CARE-Bench labels: the conversation or reply on the left, the clinicians'
    answers and the settle panel on the right."""
    rounds = [r for r in list_rounds(db) if not is_rubric_round(r.question_key)]  # rubric: above
    scopes = [None] + [r.id for r in rounds]
    names = {r.id: study_round(r.name) for r in rounds}
    wanted = st.query_params.get("round")
    with st.sidebar:
        scope = st.selectbox(
            "Answers from", scopes,
            index=scopes.index(int(wanted)) if wanted and wanted.isdigit()
            and int(wanted) in scopes else 0,
            format_func=lambda s: names.get(s, "All clinicians' answers (no study round)"))
        question_key = None
        if scope is None:
            texts = label_questions(db)
            question_key = st.selectbox("Question", list(texts), format_func=texts.get)
    agreed = (unanimous_waiting(db, scope, question_key), "item", "items", settle_unanimous)
    queue = adjudication_queue(db, scope, me, show_names=show_names, question_key=question_key)
    if not queue:
        last_settled()
        settle_agreed_button(st, *agreed[:4], round_id=scope, question_key=question_key)
        st.success("Nothing to adjudicate here: every complete item is settled, unanimous, or "
                   "one you answered yourself (someone else adjudicates those).",
                   icon=":material/task_alt:")
        return
    pos = min(st.session_state.get("adj_pos", 0), len(queue) - 1)
    case = queue[pos]
    # The question disputed (a study's chat may be asked several): its codebook settles it.
    item = load_item(db, case.item_id,
                     db.scalar("SELECT key FROM questions WHERE id = ?", (case.question_id,)))
    row = st.columns([4, 3, 2], vertical_alignment="center", gap="small")
    row[0].progress((pos + 1) / len(queue), text=f"Item {pos + 1} of {len(queue)} with "
                                                 "disagreements")
    settle_agreed_button(row[1], *agreed[:4], round_id=scope, question_key=question_key)
    with row[2], st.container(horizontal=True, gap="small"):
        for label, step, off in (("Previous", -1, pos == 0), ("Next", 1, pos >= len(queue) - 1)):
            if st.button(label, disabled=off, width="stretch",
                         shortcut="Left" if step < 0 else "Right", key=f"adj_pos:{label}"):
                st.session_state["adj_pos"] = pos + step
                st.rerun()
    left, right = st.columns([1, 1], gap="medium")
    with left:
        last_settled()  # on the left: the settle panel on the right stays where it is
    with left, st.container(key=marker("adj_item", str(item.id)), gap="small"):
        item_heading(item.id)
        with st.container(border=True, key="adj_item"):
            for rnd in item.rounds:
                with st.chat_message("user", avatar=":material/person:"):
                    st.caption(f"Patient · {turn(rnd.number)}")
                    show_text(rnd.patient_text, key=f"adj:{item.id}:{rnd.number}")
            show_messages(item.payload.get("messages"), f"adj:{item.id}")  # a study's chat
            if item.kind == "response":
                with st.chat_message("assistant", avatar=":material/smart_toy:"):
                    st.caption(safe_markdown(item_name(db, item.id).subject))
                    show_text(item.response, key=f"adj:{item.id}:response")
    book = item.codebook
    with right:
        answers_box([(f"**{safe_markdown(a.reviewer)}** · {answer_words(a.value, a.status, book)}"
                      + (f" · confidence {a.confidence}" if a.confidence else ""), a.rationale)
                     for a in case.answers], "answer" if case.reopened else None)
        machine_line(case.machine_labels, book, "Machine labels")
        form = f"settle:{case.round_id}:{case.question_id}:{case.item_id}"
        codes = book.codes if book else ["met", "not_met"]
        settle_controls(form, codes, lambda c: answer_words(c, "answered", book), "Settle",
                        settle_from_form, (form, me, case.round_id, case.item_id, question_key,
                                           case.settled_id, case.answer_ids, book),
                        keys=answer_keys(codes, book))


if what == "rubric":
    rubric_mode()
elif what == "steps":
    steps_mode()
else:
    labels_mode()
