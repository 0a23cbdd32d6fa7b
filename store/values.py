"""Values as the database holds them: timestamps and JSON columns.

Leaf module of the store: `store.db` (the store class) and `store.writer`
(the record writer) both use it, and it imports neither.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson


def utcnow() -> str:
    """Timestamps are ISO 8601 in UTC with microseconds, sortable as text."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def to_json(value: Any) -> str:
    """Compact JSON for the database's JSON columns. orjson does the work (an
    import writes tens of megabytes of it; the standard encoder is several
    times slower); what orjson refuses (an integer beyond 64 bits) goes to
    the standard encoder. Anything else unknown is written as its str()."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return _ENCODE(value)


def from_json(text: str | bytes) -> Any:
    """A JSON column's value. orjson reads nearly all of them; what it cannot
    (an integer of hundreds of digits, which the standard encoder wrote for
    `to_json`) the standard parser does."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
