"""How an agent run is shown: one step, the timeline of the whole run, the
dialogue, the final answer and an embedded subagent run (inline, under the
result that delegated to it: a dialog over the page would leave the page's
keys marking the run hidden behind it).

Layout only. Text from the data is never HTML: messages go through
`show_text` (safe Markdown), tool arguments through `st.json`, commands and
tool output through `st.code`; the timeline holds no text from the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import streamlit as st

from pages._shared import show_text, store
from review.reviewing.criteria import StepMark, evidence_steps, load_subagent
from review.reviewing.names import plural
from review.reviewing.trajectory import ResultView, StepView, ToolCallView, TrajectoryView
from review.text import safe_markdown

PREVIEW_CHARS = 4000
"""Tool output shown at once; the rest waits behind an expander."""
REST_CHARS = 60_000
"""Tool output the expander holds; beyond it, the whole output is a download."""
KIND_NAMES = {
    "system": "System prompt", "task": "Task", "user": "User", "patient": "Patient",
    "said": "Said to the patient", "tool": "Tool call", "message": "Agent message",
    "answer": "Final answer", "subagent": "Subagent",
}
SOURCE_BADGES = {"system": ":gray-badge[System]", "user": ":blue-badge[User]",
                 "agent": ":green-badge[Agent]", "patient": ":violet-badge[Patient]"}


def code_span(text: object) -> str:
    """Data shown as inline code: Markdown is not read inside, only backticks need care."""
    return "`" + " ".join(str(text).replace("`", "'").split()) + "`"


def label_text(text: object) -> str:
    """Data inside a badge or another bracketed Markdown directive."""
    return safe_markdown(str(text))  # brackets included: nothing in it can close the directive



def long_code(text: str, key: str) -> None:
    """Tool output as plain monospace text, cut so a huge output never freezes the page."""
    if not text:
        st.caption("(no output)")
        return
    text = _pretty_json(text)
    st.code(text[:PREVIEW_CHARS], language=None, wrap_lines=True)
    rest = text[PREVIEW_CHARS:]
    if rest:
        with st.expander(f"Show the remaining {len(rest):,} characters"):
            st.code(rest[:REST_CHARS], language=None, wrap_lines=True)
            if len(rest) > REST_CHARS:
                st.download_button(f"Download the whole output ({len(text):,} characters)",
                                   text, file_name=f"{key}.txt", mime="text/plain",
                                   key=f"download:{key}", on_click="ignore")


def _pretty_json(text: str) -> str:
    """A JSON tool output indented for reading; any other text as it is."""
    if len(text) > 200_000 or text.lstrip()[:1] not in ("{", "["):
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _metrics_line(metrics: dict[str, float]) -> str:
    parts = []
    for name, word in (("prompt_tokens", "prompt"), ("completion_tokens", "completion"),
                       ("cached_tokens", "cached")):
        if metrics.get(name) is not None:
            parts.append(f"{int(metrics[name]):,} {word}")
    line = (" · ".join(parts) + " tokens") if parts else ""
    if metrics.get("cost_usd") is not None:
        line += f"{' · ' if line else ''}\\${float(metrics['cost_usd']):.4f}"
    return line


def _tool_call(call: ToolCallView, results: list[ResultView], key: str,
               item_id: int | None) -> None:
    if call.kind == "say":
        with st.chat_message("assistant", avatar=":material/stethoscope:"):
            st.caption("Said to the patient")
            show_text(call.said, key=f"{key}:said")
    else:
        what = "Clinic tool" if call.kind == "clinic_tool" else "Tool call"
        st.markdown(f"**{what}** {code_span(call.name or '(unnamed)')}")
        if isinstance(call.arguments, dict):
            if call.arguments:
                st.json(call.arguments, expanded=2)
            else:
                st.caption("no arguments")
        else:
            st.code(str(call.arguments), language=None, wrap_lines=True)
        if call.command:
            with st.expander("Shell command"):
                st.code(call.command, language="bash", wrap_lines=True)
    for k, result in enumerate(results):
        _result(result, f"{key}:r{k}", item_id)


def _result(result: ResultView, key: str, item_id: int | None) -> None:
    if result.from_patient:
        with st.chat_message("user", avatar=":material/person:"):
            st.caption("Patient replied")
            show_text(result.said, key=key)
    else:
        st.caption("Result")
        long_code(result.content, key)
    for ref in result.subagents:
        name = ref.trajectory_id or ref.session_id
        if ref.embedded_index is None or item_id is None:
            where = ref.path or name or "unknown"
            st.caption(f"Delegated to a subagent run: {code_span(where)}"
                       + ("" if ref.embedded_index is not None else
                          " (the linked file is not in the run's folder)" if ref.missing else
                          " (kept outside this file)"))
        else:
            open_key = subagent_key(item_id, key, ref.embedded_index)
            shown = bool(st.session_state.get(open_key))
            words = ("Close" if shown else "Open") + " subagent run"
            st.button(f"{words} {safe_markdown(name)}" if name else words,
                      key=f"sub:{key}:{ref.embedded_index}", icon=":material/account_tree:",
                      type="primary" if shown else "secondary", on_click=_toggle, args=(open_key,))
            if shown:
                subagent_run(item_id, ref.embedded_index, name)


def subagent_key(item_id: int, key: str, index: int) -> str:
    """Session key: the subagent run `index`, delegated to from the result `key`, is open."""
    return f"sub_open:{item_id}:{key}:{index}"


def _toggle(state_key: str) -> None:
    st.session_state[state_key] = not st.session_state.get(state_key)


def subagent_run(item_id: int, index: int, name: str | None) -> None:
    """An embedded subagent run, read in place under the result that delegated to
    it. It is context for the step: marks and verdicts stay on the run under review."""
    view = load_subagent(store(), item_id, index)
    with st.container(border=True, key=f"subagent_{item_id}_{index}"):
        if view is None:
            st.warning("This subagent run is not embedded in the trajectory.")
            return
        agent = " · ".join(safe_markdown(str(v)) for v in view.agent.values())
        st.markdown(f"**Subagent run {code_span(name)}**" if name else "**Subagent run**")
        st.caption(plural(len(view.steps), "step") + (f" · {agent}" if agent else "")
                   + " · part of this step: your marks and verdicts stay on the run under review")
        for n, step in enumerate(view.steps):
            if n:
                st.divider()
            show_step(step, view, key=f"subagent:{index}", item_id=None, compact=True)


def show_step(step: StepView, view: TrajectoryView, key: str, item_id: int | None,
              compact: bool = False) -> None:
    """One step: who acted, the message, reasoning (collapsed), tool calls with
    their arguments and results, subagent runs (opened from the run `item_id`),
    and tokens and cost."""
    facts = [SOURCE_BADGES.get(step.source, f":gray-badge[{label_text(step.source)}]"),
             f"step {step.step_id} of {len(view.steps)}"]
    if step.timestamp:
        facts.append(safe_markdown(step.timestamp.replace("T", " ")[:19]))
    if step.model:
        facts.append(code_span(step.model))
    if step.done:
        facts.append(":green-badge[:material/flag: declared the task complete]")
    if step.log_source:
        facts.append(f"the agent wrote no trajectory; its log {safe_markdown(step.log_source)}")
    st.markdown(" · ".join(facts))
    if step.failure:
        st.error(safe_markdown(step.failure), icon=":material/error:")
    if step.message.strip():
        show_text(step.message, key=f"{key}:{step.step_id}:message")
    elif not step.tool_calls:
        st.caption("(no message)")
    if step.reasoning:
        with st.expander("Agent's reasoning", icon=":material/psychology:"):
            show_text(step.reasoning, key=f"{key}:{step.step_id}:reasoning")
    if step.analysis:
        with st.expander("Agent's analysis (in its reply)", icon=":material/psychology:"):
            show_text(step.analysis, key=f"{key}:{step.step_id}:analysis")
    answered = set()
    for n, call in enumerate(step.tool_calls):
        results = [r for r in step.results if r.source_call_id == call.call_id]
        answered.update(id(r) for r in results)
        _tool_call(call, results, f"{key}:{step.step_id}:c{n}", item_id)
    for n, result in enumerate(r for r in step.results if id(r) not in answered):
        _result(result, f"{key}:{step.step_id}:o{n}", item_id)
    if step.metrics and not compact:
        st.caption(_metrics_line(step.metrics))


STRIP_COLOURS = {"system": "gray", "task": "blue", "user": "blue", "patient": "violet",
                 "said": "green", "tool": "orange", "message": "gray", "answer": "primary",
                 "subagent": "red"}
STRIP_SYMBOLS = {"answer": "★", "subagent": "◆"}


def timeline(view: TrajectoryView, marks: dict[int, StepMark], key: str,
             on_pick: Callable[[], None], legend: bool = True) -> str:
    """The whole run at a glance, in a line: one square a step, coloured by what
    happened (a star for the final answer), a cross where I marked an error and
    a tick where I checked it; the current step chosen (the caller sets the
    session's `key` to its step id before this draws it: one key a run, so the
    strip never holds a step other than the one on screen). A click opens a
    step. (Light: no chart library to load before the screen is ready.)
    Returns what the colours mean; drawn under the strip unless `legend` is
    False (the caller puts it where it costs no height)."""
    kinds = {m.step_id: m.kind for m in view.timeline.marks}

    def square(step_id: int) -> str:
        # With its number: Streamlit tells the options apart by their labels, so
        # two alike ("■", "■") are one choice and the strip would show the last.
        mark = marks.get(step_id)
        if mark is not None:
            symbol = ":red[✖]" if mark.is_error else ":green[✔]"
        else:
            kind = kinds.get(step_id, "message")
            symbol = f":{STRIP_COLOURS.get(kind, 'gray')}[{STRIP_SYMBOLS.get(kind, '■')}]"
        return f"{symbol} :small[{step_id}]"

    st.segmented_control(
        "Steps of the run", [s.step_id for s in view.steps], key=key,
        format_func=square, on_change=on_pick,
        label_visibility="collapsed", width="stretch")
    shown = {k for k in kinds.values()}
    words = [f":{STRIP_COLOURS.get(k, 'gray')}[{STRIP_SYMBOLS.get(k, '■')}] "
             f"{KIND_NAMES.get(k, k).lower()}" for k in KIND_NAMES if k in shown]
    if marks:
        words.append(":red[✖] your error mark · :green[✔] checked, no error")
    if legend:
        st.caption(" · ".join(words))
    return " · ".join(words)


def picked_step(view: TrajectoryView, key: str) -> int | None:
    """The step index chosen on the timeline, if any."""
    step_id = st.session_state.get(key)
    return next((s.index for s in view.steps if s.step_id == step_id), None)


def dialogue(view: TrajectoryView) -> None:
    """The clinician-patient conversation as the patient saw it."""
    if not view.dialogue:
        return
    with st.expander(f"The whole dialogue with the patient ({plural(len(view.dialogue), 'turn')})",
                     icon=":material/forum:"):
        for turn in view.dialogue:
            patient = turn.speaker == "patient"
            with st.chat_message("user" if patient else "assistant",
                                 avatar=":material/person:" if patient else ":material/stethoscope:"):
                st.caption(safe_markdown(turn.speaker.capitalize()))
                show_text(turn.text, key=f"dialogue:{turn.index}")


def final_answer(view: TrajectoryView, go_to: Callable[[int], None], folded: bool = False) -> None:
    """The answer or verdict the run ended with, and where its cited evidence
    came from. `folded`: in an expander, closed (the split screens keep the
    window for the step and what the keys act on)."""
    answer = view.final_answer
    if folded:
        verdict = f" · {label_text(answer.verdict)}" if answer and answer.verdict else ""
        with st.expander(f"The run's final answer{verdict}" if answer or view.error
                         else "The run gave no final answer", icon=":material/flag:"):
            _final_answer(view, answer, go_to, folded=True)
        return
    with st.container(border=True, key="final_answer"):
        st.markdown("**Final answer**")
        _final_answer(view, answer, go_to, folded=False)


def _final_answer(view: TrajectoryView, answer, go_to: Callable[[int], None],
                  folded: bool) -> None:
    if view.error:
        st.error("The run ended with an error: ", icon=":material/error:")
        st.code(view.error, language=None, wrap_lines=True)
    if answer is None:
        st.caption("The run gave no final answer.")
        return
    if answer.verdict:
        st.markdown(f"Verdict: :blue-badge[{label_text(answer.verdict)}]")
    if answer.answer_line:
        st.code(answer.answer_line, language=None, wrap_lines=True)
    if answer.step_index is not None:
        st.button(f"Go to step {view.steps[answer.step_index].step_id}", key="go_answer",
                  on_click=go_to, args=(answer.step_index,), icon=":material/my_location:")
    if folded:  # no expander inside an expander
        show_text(answer.text, key="final_answer_text")
    else:
        with st.expander("The whole answer", expanded=len(answer.text) < 700):
            show_text(answer.text, key="final_answer_text")
    if answer.evidence:
        st.markdown("**Cited evidence**")
        for ev, steps in evidence_steps(view, answer.evidence).items():
            cols = st.columns([2, 3], vertical_alignment="center")
            cols[0].markdown(code_span(ev))
            if not steps:
                cols[1].markdown(":orange-badge[:material/warning: not found in any tool result]")
            else:
                cols[1].button(f"Step {view.steps[steps[0]].step_id}", key=f"ev:{ev}",
                               on_click=go_to, args=(steps[0],), icon=":material/search:",
                               help="Open the step whose result holds this evidence")
