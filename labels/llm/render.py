"""What a judge reads about an item: one small rendering function per item kind.

Each function turns an item's payload (and its parent's, for a response) into
plain text, and returns None when the payload holds nothing to judge. New item
kinds slot in by adding a function to `RENDERERS`.

Long records are cut to a stated size, `RECORD_CHAR_LIMIT` characters: the
head and the tail are kept and the middle is replaced by a marker that says
how much was left out, so the judge sees how the record starts and ends. The
judge prompt says so. Payload field names below are read defensively (the
importers' shapes are documented in review/datasets/sources); unknown fields are
ignored, never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RECORD_CHAR_LIMIT = 24_000
"""Most characters of a rendered record sent to a judge."""
FIELD_CHAR_LIMIT = 600
"""Most characters of one tool call's arguments or one tool result in a trajectory."""


@dataclass(frozen=True)
class ItemView:
    """The parts of an item a renderer may read."""

    kind: str
    payload: dict[str, Any]
    parent_payload: dict[str, Any] | None = None
    round_id: int | None = None


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, keeping head and tail."""
    if len(text) <= limit:
        return text
    marker = "\n[... {n} characters left out ...]\n"
    room = max(limit - len(marker.format(n=len(text))), 0)
    head, tail = room * 2 // 3, room - room * 2 // 3
    left_out = len(text) - head - tail
    return text[:head] + marker.format(n=left_out) + (text[-tail:] if tail else "")


def _content_text(content: Any) -> str:
    """Message content as text: a string, or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("content") or f"[{part.get('type', 'part')}]"))
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return "" if content is None else str(content)


def _messages(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [("user", value)]
    out = []
    for message in value or []:
        if isinstance(message, dict):
            out.append((str(message.get("role", "user")), _content_text(message.get("content"))))
    return out


def _first(payload: dict[str, Any], *names: str) -> Any:
    for name in names:
        if payload.get(name) not in (None, "", []):
            return payload[name]
    return None


def patient_turns(payload: dict[str, Any] | None, round_id: int | None = None) -> list[str]:
    """A CARE-Bench prefix's patient turns, never beyond `round_id` rounds."""
    turns = [str(t) for t in (payload or {}).get("turns") or []]
    return turns[:round_id] if round_id else turns


def render_response(item: ItemView) -> str | None:
    """A CARE-Bench response: the patient's turns so far, then the reply."""
    reply = item.payload.get("response")
    if not reply:
        return None
    turns = patient_turns(item.parent_payload, item.round_id)
    lines = [f"Patient (round {i}): {t}" for i, t in enumerate(turns, 1)]
    lines.append(f"Assistant reply (the work under review): {reply}")
    return "\n\n".join(lines)


def render_graded_conversation(item: ItemView) -> str | None:
    """A conversation and the completion graded against the rubric. A
    completion item shares its prompt item's turns (its parent's payload)."""
    p, parent = item.payload, item.parent_payload or {}
    conversation = _messages(_first(p, "turns", "prompt", "conversation", "messages")
                             or _first(parent, "turns", "prompt", "conversation", "messages"))
    completion = _first(p, "completion", "response", "answer")
    if completion is None:
        return None
    if isinstance(completion, dict):
        completion = completion.get("content")
    elif isinstance(completion, list):
        completion = "\n\n".join(text for _, text in _messages(completion))
    lines = [f"{role}: {text}" for role, text in conversation]
    lines.append(f"assistant (the completion under review): {_content_text(completion)}")
    return "\n\n".join(lines)


def final_answer_text(payload: dict[str, Any]) -> str | None:
    """An agent's final answer or report: `final_answer` (text, or {text, ...}
    as the importers write it) or a `report` field."""
    given = _first(payload, "final_answer", "report", "final_report")
    if isinstance(given, dict):
        given = given.get("text")
    return _content_text(given) if given else None


def _step_line(step: dict[str, Any]) -> str:
    source = step.get("source", "?")
    text = _content_text(step.get("message")).strip()
    line = f"[{step.get('step_id', '?')}] {source}: {shorten(text, FIELD_CHAR_LIMIT * 2)}"
    for call in step.get("tool_calls") or []:
        args = json.dumps(call.get("arguments"), ensure_ascii=False)
        line += f"\n    call {call.get('function_name')}({shorten(args, FIELD_CHAR_LIMIT)})"
    for result in (step.get("observation") or {}).get("results") or []:
        content = _content_text(result.get("content"))
        line += f"\n    result: {shorten(content, FIELD_CHAR_LIMIT)}"
    return line


def render_trajectory(item: ItemView) -> str | None:
    """An agent run, compactly: the dialogue, the steps with tool calls and
    results cut short, and the final answer or report."""
    p = item.payload
    parts = []
    task = _first(p, "task", "question", "instruction")
    if task:
        parts.append(f"Task: {_content_text(task)}")
    dialogue = _messages(_first(p, "transcript", "dialogue"))
    if dialogue:
        parts.append("Dialogue:\n" + "\n".join(f"{role}: {text}" for role, text in dialogue))
    steps = _first(p, "steps", "agent_steps")
    if isinstance(steps, dict):
        steps = steps.get("steps")
    if isinstance(steps, list) and steps:
        parts.append("Steps:\n" + "\n".join(_step_line(s) for s in steps if isinstance(s, dict)))
    final = final_answer_text(p)
    if final:
        parts.append(f"Final answer: {final}")
    return "\n\n".join(parts) if parts else None


def render_conversation(item: ItemView) -> str | None:
    """A study's own chat (`conversation` items): each message as `role: text`, in
    order, as the study's file gave it."""
    lines = [f"{role}: {text}" for role, text in _messages(item.payload.get("messages"))]
    return "\n\n".join(lines) if lines else None


RENDERERS: dict[str, Callable[[ItemView], str | None]] = {
    "response": render_response,
    "conversation": render_conversation,
    "graded_conversation": render_graded_conversation,
    "trajectory": render_trajectory,
}


def render_record(item: ItemView, limit: int = RECORD_CHAR_LIMIT) -> str | None:
    """The item as a judge reads it, cut to `limit` characters; None when the
    item's kind has no renderer or its payload holds nothing to judge."""
    renderer = RENDERERS.get(item.kind)
    text = renderer(item) if renderer else None
    return shorten(text, limit) if text else None


def report_text(payload: dict[str, Any]) -> str | None:
    """The report a CliniCARE agent wrote (for verdict extraction): its final
    answer, else the last message an agent step wrote."""
    report = final_answer_text(payload)
    if report:
        return report
    steps = _first(payload, "steps", "agent_steps")
    if isinstance(steps, list):
        for step in reversed(steps):
            if isinstance(step, dict) and step.get("source") == "agent" and step.get("message"):
                return _content_text(step["message"])
    return None
