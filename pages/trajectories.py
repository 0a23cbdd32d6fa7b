"""Trajectory screen: step through an agent run, mark the steps that went wrong,
answer the run's criteria and outcome verdict - blind to the judges and
verifiers until committed, then shown beside them.

Keys: Left / Right previous and next step; 0-6 pick an error type for the
step, Shift+1..5 its severity, M saves the mark; Y / N / U answer the current
criterion, Up / Down move between criteria, Ctrl+Enter commits; F flags the run.
A step mark begun and not saved is a draft in the database, like a verdict.
"""

from __future__ import annotations

import time

import streamlit as st

from codebook import NO_ERROR
from pages._keys import marker, press, press_counts, refused, screen_keys
from pages._rubric import checklist, flag_button, next_in_round_button, open_from_queue
from pages._shared import address_follows, require_reviewer, store
from pages._steps import (
    code_span,
    dialogue,
    final_answer,
    label_text,
    picked_step,
    show_step,
    timeline,
)
from review.reviewing.blinding import DEFAULT_MODE
from review.reviewing.commit import mark_step
from review.reviewing.criteria import (
    is_reviewed,
    item_position,
    item_questions,
    my_current_answers,
    neighbour,
    next_unreviewed,
    severity_levels,
    step_codebook,
    step_marks,
    step_question_id,
)
from review.reviewing.drafts import (
    drop_step_draft,
    load_step_draft,
    save_step_draft,
    unsaved_step_marks,
)
from review.reviewing.names import item_name, plural
from review.reviewing.presses import TooSoon
from review.reviewing.screens import open_run
from review.reviewing.trajectory import blind_to_agent, gate_of, gate_requirements
from review.team.rounds import full_text, keep_reservation, late_for_round
from review.text import safe_markdown

KIND = "trajectory"
MODE = DEFAULT_MODE

reviewer = require_reviewer()
db = store()

# -- which run ------------------------------------------------------------------------
opened = open_from_queue(
    db, reviewer, kind=KIND, prefix="trj", title="Trajectories", sidebar_heading="Which runs",
    done_text="runs reviewed by you", missing_text="agent run",
    finished_text="You have reviewed every run under these filters.",
    empty_text="No agent runs yet. Import KlinikeBench, Harbor or CliniCARE runs on the Data "
               "screen or with `carelens import`.",
    opener=open_run, mode=MODE)
filt, item_id, screen, in_round = opened.filt, opened.item_id, opened.screen, opened.round
head, view = screen.header, screen.view
if screen.sight.model_hidden:  # blind to the agent: its name is on no step either
    view = blind_to_agent(view)
started_key = f"trj_started:{item_id}"

# -- the step shown -----------------------------------------------------------------
# The URL's ?step= is followed when the run is first opened in this session and
# whenever it differs from the step this page last wrote there (a link to a step
# of a run already open, e.g. from Adjudicate); otherwise the session's step holds.
step_key, url_step_key = f"trj_step:{item_id}", f"trj_url_step:{item_id}"
asked = st.query_params.get("step")
if step_key not in st.session_state or (
        asked and asked != st.session_state.get(url_step_key)):
    st.session_state[step_key] = next(
        (s.index for s in view.steps if asked and str(s.step_id) == asked),
        st.session_state.get(step_key, 0))
last = max(len(view.steps) - 1, 0)
current = min(st.session_state[step_key], last)


def go_step(index: int) -> None:
    st.session_state[step_key] = max(0, min(last, index))


def go_item(target: int | None) -> None:
    if target is not None:
        st.session_state["trj_item"] = target
        st.query_params.pop("step", None)


def on_step_box() -> None:
    wanted_id = st.session_state.get(f"trj_stepbox:{item_id}")
    go_step(next((s.index for s in view.steps if s.step_id == wanted_id), current))


# The strip has one key a run, and holds the step on screen: set before it is
# drawn, so whatever moved the step (keys, buttons, the box, a link), the strip
# shows that step and a click on it is read against it. (Its squares carry
# their step numbers: see pages/_steps.py `timeline`.)
strip_key = f"trj_tl:{item_id}"


def on_timeline() -> None:
    picked = picked_step(view, strip_key)
    if picked is not None:
        go_step(picked)


step = view.steps[current] if view.steps else None
if step is not None:
    if st.query_params.get("step") != str(step.step_id):
        st.query_params["step"] = str(step.step_id)
    st.session_state[url_step_key] = str(step.step_id)

# -- the run at a glance --------------------------------------------------------------
book = step_codebook(db)  # the version in force: the one a mark records
levels = {lv["level"]: lv for lv in severity_levels(db)}
step_qid = step_question_id(db)
sid = step.step_id if step is not None else 0
# First, before what they act on: the keys of the step (a key pressed while the rest
# is drawn is held until its button is there; see pages/_keys.py).
step_keys = {"Left": f"trj_prev:{item_id}:{sid}", "Right": f"trj_next:{item_id}:{sid}",
             "F": f"rv_flag:{item_id}", "M": f"trj_save_mark:{item_id}:{sid}"}
step_keys.update({lab.shortcut: f"trj_errbtn:{item_id}:{sid}:{lab.code}" for lab in book.labels})
step_keys.update({f"Shift+{lv}": f"trj_sevbtn:{item_id}:{sid}:{lv}" for lv in levels})
STEP_TOO_SOON = "Not recorded: too soon after the step changed. Press again to mark this step."
screen_keys("trj", step_keys, token=f"{item_id}_s{sid}", too_soon=STEP_TOO_SOON,
            notice_after="trj_severity")

name = item_name(db, item_id)
agent = " ".join(str(view.agent[k]) for k in ("name", "version") if view.agent.get(k))
position, total = item_position(db, item_id, filt)
where = (f"assigned to you in {safe_markdown(in_round.name)}" if in_round else
         f"run {position} of {total}" if position else
         f"outside this queue of {plural(total, 'run')}")
facts = [f"**{safe_markdown(name.title)}**", f":small[{where}]"]
reviewed = is_reviewed(db, reviewer.id, item_id)
if reviewed:
    facts.append(":green-badge[:material/task_alt: reviewed by you]")
else:
    asked = [q.id for q in item_questions(db, item_id)]
    mine = my_current_answers(db, reviewer.id, item_id)
    done = sum(mine[q].status in ("answered", "cannot_assess") for q in asked if q in mine)
    facts.append(f":orange-badge[in progress: {done} of {len(asked)} answered by you]" if done
                 else ":orange-badge[not yet reviewed by you]")
# Over the step, on the left: what concerns the run's steps (a line the title's keeps free).
step_facts = []
if head.failed:
    step_facts.append(":red-badge[:material/error: the run failed]")
if unsaved := unsaved_step_marks(db, reviewer.id, item_id):
    # A mark begun and left (→ before M) reaches no review: say so wherever the run is.
    steps_words = ", ".join(str(s) for s in unsaved)
    step_facts.append(f":orange-badge[:material/bookmark: {plural(len(unsaved), 'unsaved mark')}: "
                      f"step{'s' * (len(unsaved) != 1)} {steps_words} (M saves)]")
with opened.head, st.container(key="item_head"):
    st.markdown(" · ".join(facts))
with st.sidebar, st.container(key="trj_runs", gap="small"):
    # Moving between runs: beside the filters that make the queue (the screen's
    # height is the step's and the criteria's).
    if in_round:
        next_in_round_button("trj", "Next run in the round", reviewed, "run")
    else:
        row = st.columns(2, gap="small")
        row[0].button("Previous run", key="trj_prev_run", icon=":material/skip_previous:",
                      on_click=go_item, args=(neighbour(db, item_id, filt, -1),),
                      width="stretch")
        row[1].button("Next run", key="trj_next_run", icon=":material/skip_next:",
                      on_click=go_item, args=(neighbour(db, item_id, filt, +1),),
                      width="stretch")
        st.button("Next run to review", key="trj_next_open", icon=":material/playlist_play:",
                  on_click=go_item, args=(next_unreviewed(db, reviewer.id, filt, after_id=item_id),),
                  help="The next run you have not reviewed", width="stretch")
    flag_button(reviewer, item_id)  # every run, with criteria or without (F)

tl = view.timeline
counts = tl.counts
summary = [plural(counts["steps"], "step"), plural(counts["tool_calls"], "tool call")]
if counts["said"]:
    summary.append(plural(counts["said"], "question") + " to the patient")
if counts["patient_replies"]:
    summary.append(plural(counts["patient_replies"], "patient reply", "patient replies"))
if counts["subagents"]:
    summary.append(plural(counts["subagents"], "subagent run"))
errors = sum(m.is_error for m in screen.marks.values())
summary.append(plural(errors, "error") + " marked by you")
if tl.prompt_tokens or tl.completion_tokens:
    summary.append(f"{tl.prompt_tokens:,} prompt + {tl.completion_tokens:,} completion tokens")
if tl.cost_usd is not None:
    summary.append(f"\\${tl.cost_usd:.4f}")
if tl.duration_s is not None:
    summary.append(f"{tl.duration_s / 60:.1f} min")
summary += [f"{key} in the file is not a number: {code_span(str(raw)[:40])}"
            for key, raw in tl.unread.items()]
strip_legend = ""
if view.steps:
    st.session_state[strip_key] = view.steps[current].step_id
    strip_legend = timeline(view, screen.marks, key=strip_key, on_pick=on_timeline,
                            legend=False)

# -- marking a step -------------------------------------------------------------------


def mark_keys(sid: int) -> tuple[str, str, str]:
    """Session keys of a step mark being made: error type, severity, note. Per
    reviewer: another reviewer in this browser never inherits a half-made mark."""
    return (f"trj_err:{reviewer.id}:{item_id}:{sid}", f"trj_sev:{reviewer.id}:{item_id}:{sid}",
            f"trj_note:{reviewer.id}:{item_id}:{sid}")


def keep_step_draft(sid: int) -> None:
    """Keep the mark begun on step `sid` as a draft in the database (a reload, a
    closed tab or another browser brings it back), or drop the draft when it is
    back to the saved mark or to nothing. Saving the mark removes it."""
    if step_qid is None:
        return
    err_key, sev_key, note_key = mark_keys(sid)
    err, sev = st.session_state.get(err_key), st.session_state.get(sev_key)
    note = (st.session_state.get(note_key) or "").strip()
    s = store()
    if opened.round_id is not None:
        keep_reservation(s, opened.round_id, item_id, reviewer.id)  # at work on it: keep its place
    saved = step_marks(s, reviewer.id, item_id).get(sid)
    if (saved is not None and (saved.error, saved.severity, saved.note or "") == (
            err, None if err == NO_ERROR else sev, note)) or (
            saved is None and err is None and not note):
        drop_step_draft(s, reviewer, item_id, step_qid, sid)
    else:
        save_step_draft(s, reviewer, item_id, step_qid, sid, err, sev, note or None)


def save_mark(sid: int) -> None:
    err = st.session_state.get(f"trj_err:{reviewer.id}:{item_id}:{sid}")
    sev = st.session_state.get(f"trj_sev:{reviewer.id}:{item_id}:{sid}")
    note = st.session_state.get(f"trj_note:{reviewer.id}:{item_id}:{sid}")
    try:
        annotation_id = mark_step(
            store(), reviewer, item_id, sid, err, sev, note, mode=opened.mode,
            round_id=opened.round_id, press=press("trj", f"{item_id}_s{sid}"),
            seconds_on_task=round(time.monotonic() - st.session_state[started_key], 2))
    except TooSoon:
        refused("trj")
        st.session_state["trj_flash"] = ("warning", STEP_TOO_SOON)
        return
    except ValueError as exc:
        st.session_state["trj_flash"] = ("error", safe_markdown(str(exc)))
        return
    what = book.label(err).short
    if sev and err != NO_ERROR:
        what += f", severity {sev} ({levels[sev]['name']})"
    if opened.round_id is not None and late_for_round(store(), [annotation_id]) is not None:
        st.session_state["trj_flash"] = ("warning", f"Step {sid} marked: {what}. "
                                         + full_text(store(), opened.round_id, item_id))
        return
    st.session_state["trj_mark_flash"] = ("success", f"Step {sid} marked: {label_text(what)}.")


def pick(name: str, sid: int, value: object) -> None:
    if not press_counts("trj", f"{item_id}_s{sid}"):  # review.reviewing.presses: too soon
        st.session_state["trj_flash"] = ("warning", STEP_TOO_SOON)
        return
    st.session_state[f"trj_{name}:{reviewer.id}:{item_id}:{sid}"] = value
    keep_step_draft(sid)


SOURCE_WORDS = {"system": "system prompt", "user": "task as given", "patient": "patient's reply"}


def meanings() -> str:
    """What the error types and severities mean: the mark line's help."""
    lines = [f"**{safe_markdown(lab.shortcut)} · {safe_markdown(lab.short)}**: "
             f"{safe_markdown(lab.definition)}" for lab in book.labels]
    lines += [f"**Severity {level} · {safe_markdown(levels[level]['name'])}**: "
              f"{safe_markdown(levels[level]['definition'])}" for level in sorted(levels)]
    return "  \n".join(lines)


def mark_panel(sid: int) -> None:
    """Error type (keys 0-6), severity (Shift+1..5), note, save (M): compact, so
    that the step on the left and the criterion being answered under it share
    a laptop's window."""
    saved = screen.marks.get(sid)
    err_key, sev_key, note_key = mark_keys(sid)
    restored_key = f"trj_restored:{reviewer.id}:{item_id}:{sid}"
    if err_key not in st.session_state:
        # The mark begun and not saved (a draft in the database), else the saved one.
        draft = load_step_draft(db, reviewer.id, item_id, step_qid, sid) if step_qid else None
        if draft is not None:
            st.session_state[err_key] = draft.error
            st.session_state[sev_key] = draft.severity
            st.session_state.setdefault(note_key, draft.note or "")
            st.session_state[restored_key] = draft.updated_at
        elif saved is not None:
            st.session_state[err_key] = saved.error
            st.session_state[sev_key] = saved.severity
            st.session_state.setdefault(note_key, saved.note or "")
    err, sev = st.session_state.get(err_key), st.session_state.get(sev_key)
    with st.container(border=True, key="trj_mark", gap="small"):
        if saved is None:
            head = f"**Mark step {sid}** · :gray[not marked yet]"
        else:
            words = book.label(saved.error).short
            if saved.severity:
                words += f" · severity {saved.severity} ({levels[saved.severity]['name']})"
            head = (f"**Mark step {sid}** · your mark: :red-badge[{label_text(words)}]"
                    if saved.is_error else
                    f"**Mark step {sid}** · your mark: :green-badge[{label_text(words)}]")
            if saved.note:
                head += f" · :small[{safe_markdown(saved.note)}]"
        flash = st.session_state.pop("trj_mark_flash", None)
        if flash:  # said on the mark's own line: a banner would push the criteria down
            colour = {"success": "green", "warning": "orange", "error": "red"}.get(flash[0], "gray")
            head += f"  \n:{colour}[{flash[1]}]"
        top = st.columns([1, 1], vertical_alignment="center", gap="small")
        top[0].markdown(head, help="What went wrong at this step (keys 0–6), its severity "
                                   "(Shift+1 … 5), then save (M).  \n" + meanings())
        top[1].text_input("Note", key=note_key, label_visibility="collapsed",
                          placeholder="Note on this step (optional)", persist_state="session",
                          on_change=keep_step_draft, args=(sid,))
        with st.container(horizontal=True, gap="small", key="trj_errors"):
            # In the order of their keys, 0 (no error) to 6: two lines on a laptop.
            for lab in sorted(book.labels, key=lambda lab: lab.shortcut or "~"):
                st.button(safe_markdown(lab.short), key=f"trj_errbtn:{item_id}:{sid}:{lab.code}",
                          shortcut=lab.shortcut, help=safe_markdown(lab.definition),
                          type="primary" if err == lab.code else "secondary",
                          on_click=pick, args=("err", sid, lab.code))
        ready = err == NO_ERROR or (err is not None and sev is not None)
        unchanged = saved is not None and saved.error == err and saved.severity == (
            None if err == NO_ERROR else sev) and (saved.note or "") == (
            st.session_state.get(note_key) or "")
        with st.container(horizontal=True, gap="small", key="trj_severity",
                          vertical_alignment="center"):
            st.caption("Severity ⇧1–5")
            for level in sorted(levels):
                # The level's name on the one chosen (all of them in the tooltips): the
                # row stays one line on a laptop.
                st.button(f"{level} {safe_markdown(levels[level]['name'])}" if sev == level
                          else str(level),
                          key=f"trj_sevbtn:{item_id}:{sid}:{level}", shortcut=f"Shift+{level}",
                          help=f"{level} · {safe_markdown(levels[level]['name'])}: "
                               f"{safe_markdown(levels[level]['definition'])}",
                          type="primary" if sev == level else "secondary",
                          disabled=err in (None, NO_ERROR), on_click=pick, args=("sev", sid, level))
            st.space("stretch")
            st.button(f"Save step {sid}", key=f"trj_save_mark:{item_id}:{sid}", shortcut="M",
                      help=f"Save the mark on step {sid} (M)",
                      type="primary", disabled=not ready or unchanged,
                      icon=":material/bookmark_add:", on_click=save_mark, args=(sid,))
        if unchanged:
            st.session_state.pop(restored_key, None)
        elif st.session_state.get(restored_key):
            st.caption(f"Your unsaved mark on step {sid} was restored (kept "
                       f"{st.session_state[restored_key][:16].replace('T', ' ')} UTC); "
                       "save it (M) when you are ready.")


# The split, as on the Review screen: the step on the left, in its own scrolling box;
# on the right what the keys act on - the step's mark, then the run's criteria with the
# one being answered in view - so that nothing a key changes is off screen.
left, right = st.columns([1, 1], gap="medium")

# -- the step -------------------------------------------------------------------------
with left:
    if step is None:
        st.warning("This run has no steps to show.")
    else:
        row = st.columns([1.3, 1, 1.3], vertical_alignment="bottom", gap="small")
        row[0].button("Previous step", key=f"trj_prev:{item_id}:{step.step_id}", shortcut="Left",
                      icon=":material/arrow_back:", width="stretch", on_click=go_step,
                      args=(current - 1,), disabled=current == 0)
        st.session_state[f"trj_stepbox:{item_id}"] = step.step_id
        row[1].number_input("Go to step", min_value=view.steps[0].step_id,
                            max_value=view.steps[-1].step_id, step=1, key=f"trj_stepbox:{item_id}",
                            on_change=on_step_box, label_visibility="collapsed")
        row[2].button("Next step", key=f"trj_next:{item_id}:{step.step_id}", shortcut="Right",
                      icon=":material/arrow_forward:", width="stretch", on_click=go_step,
                      args=(current + 1,), disabled=current == last)
        if step_facts:
            st.markdown(" · ".join(step_facts))
        with st.container(key=marker("trj", f"{item_id}_s{step.step_id}")):
            with st.container(border=True, key="trj_step"):
                show_step(step, view, key=f"run:{item_id}", item_id=item_id)
    # While the reviewer is blind to the agent, neither its name nor an id naming it.
    hidden = screen.sight.model_hidden
    st.caption(" · ".join(summary) + "  \nThe line of steps: " + strip_legend + "  \n"
               + safe_markdown(name.shown_ids(hidden)[1])
               + (f" · agent {safe_markdown(agent)}" if agent and not hidden else ""))
    final_answer(view, go_step, folded=True)
    dialogue(view)

# -- the mark, the criteria and the verdict ---------------------------------------------
with right, st.container(key="trj_side", gap="small"):
    flash = st.session_state.pop("trj_flash", None)
    if flash:
        getattr(st, flash[0])(flash[1])
    if step is not None:
        if step.source in ("system", "user", "patient"):
            # What went wrong is the agent's conduct: the instructions, the task and the
            # patient's words are context, not steps to mark.
            st.caption(f"Step {step.step_id} is the {SOURCE_WORDS.get(step.source, step.source)}: "
                       "marks are for the agent's steps.")
        else:
            mark_panel(step.step_id)
    with st.container(key="trj_criteria", gap="small"):
        if not screen.questions:
            st.caption("This run has no criteria to answer; mark its steps on the left.")
        else:
            # What the task required, beside the gate that asks about it: the reviewer
            # answers "did the agent reach the reference diagnosis?" with the diagnosis
            # in view.
            needs = gate_requirements(head.meta)
            context = {q.id: needs[gate] for q in screen.questions
                       if (gate := gate_of(q.key)) in needs}
            checklist(reviewer, item_id, screen.questions, screen.mine, screen.revealed,
                      mode=opened.mode, started_key=started_key, round_id=opened.round_id,
                      flag=False, context=context, title="Criteria")

address_follows()  # the address names the run shown, now that it is drawn (app.py does too)
