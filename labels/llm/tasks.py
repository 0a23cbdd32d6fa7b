"""What a machine rater is asked to do, and how its reply is read.

A `Task` bundles the structured-output schema a model must fill, the strict
reader of that output, and how work is found in the store. The three tasks
(map, judge, extract) are defined in `mapper.py` and `judge.py`.

Strict reading: a reply is accepted only when it is one JSON object with
exactly the schema's keys and allowed values. Anything else raises
`ReplyUnreadable`; the runner retries (bounded) and then records the failure
with the raw text. A label is never guessed from prose.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store import Store


class ReplyUnreadable(ValueError):
    """The model's reply does not follow the requested schema."""


@dataclass(frozen=True)
class Answer:
    """One machine rater's answer, ready to become an annotation."""

    status: str
    """answered | cannot_assess"""
    value: str | None
    rationale: str | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    """One (item, question) a machine rater is to answer, with the template values."""

    item_id: int
    item_uid: str
    question_id: int
    question_key: str
    values: dict[str, str]
    """Placeholder values for the prompt template: everything the model may see."""
    codebook_version: str | None = None


@dataclass
class Found:
    """What a search for work returned."""

    work: list[Work]
    unusable: dict[str, int] = field(default_factory=dict)
    """Items left out, by reason (e.g. 'generation failed': 3)."""


FindWork = Callable[["Store", int | None, dict[str, Any], int | None, bool], Found]
"""(store, rater id or None, filters, limit, include answered) -> Found"""


@dataclass(frozen=True)
class Task:
    name: str
    """map | judge | extract"""
    role: str
    """The machine rater's role: mapper | judge | extractor."""
    tool_name: str
    """Name of the structured output (Anthropic tool, OpenAI json_schema)."""
    tool_description: str
    schema: dict[str, Any]
    read: Callable[[dict[str, Any]], Answer]
    """Strict reader of the structured output; raises ReplyUnreadable."""
    find_work: FindWork
    filters: tuple[str, ...]
    """Filter names `find_work` understands."""
    max_output_tokens: int = 2048
    """Room for the answer (and a reasoning model's thinking) before the reply is cut."""
    typical_output_tokens: int = 150
    """For the cost estimate before a run."""


def object_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A strict JSON schema: every property required, nothing else allowed
    (the form both OpenAI strict mode and Anthropic strict tools accept)."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def read_json_object(reply: str | dict[str, Any]) -> dict[str, Any]:
    """The reply as a JSON object: a tool input as is, or text that is exactly
    one JSON object (optionally inside one ```json fenced block)."""
    if isinstance(reply, dict):
        return reply
    text = (reply or "").strip()
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        text = text[3:-3]
        text = text[4:] if text.startswith("json") else text
        text = text.strip()
    try:
        value = json.loads(text)
    except RecursionError:
        raise ReplyUnreadable("the reply is JSON nested too deeply to read") from None
    except ValueError:
        raise ReplyUnreadable("the reply is not a JSON object") from None
    if not isinstance(value, dict):
        raise ReplyUnreadable("the reply is JSON but not an object")
    return value


def exact_keys(obj: dict[str, Any], schema: dict[str, Any]) -> None:
    expected = set(schema["properties"])
    if set(obj) != expected:
        raise ReplyUnreadable(
            f"the reply has keys {sorted(obj)}; expected exactly {sorted(expected)}")


def text_field(obj: dict[str, Any], name: str) -> str:
    value = obj[name]
    if not isinstance(value, str):
        raise ReplyUnreadable(f"'{name}' must be text")
    return value.strip()


def in_chunks(values: list[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]
