"""Field names and their drift between releases: the one place for it.

Each canonical field lists the names it has been seen (or is assumed) to
carry. Assumptions are marked: the mapped-responses file and the direct-label
CSV have no published schema beyond `prefix_id`, so the names below for the
model alias and the mapped label are guesses kept deliberately broad.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

from review.datasets.sources.readers import non_finite
from store.writer import MAX_ID_CHARS, InputError, too_long

ALIASES: dict[str, tuple[str, ...]] = {
    "prefix_id": ("prefix_id", "prefixId", "id"),
    "case_id": ("case_id", "caseId"),
    "round_id": ("round_id", "round", "round_index"),
    "split": ("split", "data_split", "config_split"),
    "gold_label": ("gold_label", "label", "gold", "expected_label"),
    "input_patient_turns": ("input_patient_turns", "patient_turns", "turns"),
    "patient_information": ("patient_information_available_so_far", "patient_information"),
    "raw_model_response": ("raw_model_response", "response", "model_response", "output"),
    "generation_failed": ("generation_failed", "failed"),
    "error_message": ("error_message", "error"),
    # assumed: the model alias in generations and mapped files
    "model": ("model_alias", "model", "model_requested", "model_name", "model_actual"),
    # assumed: the label written by the mapper
    "mapped_label": ("mapped_label", "predicted_label", "label", "mapper_label", "prediction"),
    "mapper": ("mapper_model", "mapper", "mapper_name"),
    "predicted_label": ("predicted_label", "label", "prediction"),
}


def quoted(value: Any, limit: int = 200) -> str:
    """A value as an error message shows it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def pick(row: dict[str, Any], field: str) -> Any:
    """The value of a canonical field under any of its names, or None."""
    for name in ALIASES.get(field, (field,)):
        value = row.get(name)
        if value is not None and value != "":
            return value
    return None


def names(*fields: str) -> tuple[str, ...]:
    """Every name the given fields may carry in a file."""
    return tuple(n for f in fields for n in ALIASES.get(f, (f,)))


class Fields:
    """`pick` for every row of a file, fast: which of a field's names a row
    carries is worked out once per row shape (its keys), not once per field
    per row. `Fields("prefix_id", "model")(row)` is
    `(pick(row, "prefix_id"), pick(row, "model"))` (a tuple or a list).

    The rows of a file nearly always share one shape: the last row's keys are
    compared first, and when every field is present under one name or has its
    first name filled in, one C-level `itemgetter` reads them all."""

    MAX_SHAPES = 64

    def __init__(self, *fields: str):
        self.fields = fields
        self._plans: dict[tuple[str, ...], _Plan] = {}
        self._keys: Any = None
        self._plan: _Plan | None = None

    def __call__(self, row: dict[str, Any]) -> tuple[Any, ...] | list[Any]:
        keys = row.keys()
        plan = self._plan
        if keys != self._keys or plan is None:  # compared as sets: C speed
            shape = tuple(keys)
            plan = self._plans.get(shape)
            if plan is None:
                plan = _Plan(self.fields, row)
                if len(self._plans) < self.MAX_SHAPES:
                    self._plans[shape] = plan
            # A copy, not the view: the caller may change that row, and it need not be kept alive.
            self._keys, self._plan = frozenset(keys), plan
        if plan.getter is not None:
            values = plan.getter(row)
            if "" not in values:
                for i in plan.fallbacks:
                    if values[i] is None:
                        break
                else:
                    return values
        out = []
        for names in plan.names:
            value = None
            for name in names:
                value = row[name]
                if value is not None and value != "":
                    break
                value = None
            out.append(value)
        return out


class _Plan:
    """For one row shape: each field's names present in it, in order of
    preference; and, when every field is present, a getter of each field's
    first name and the fields that have another name to fall back on."""

    __slots__ = ("names", "getter", "fallbacks")

    def __init__(self, fields: tuple[str, ...], row: dict[str, Any]):
        self.names = tuple(tuple(n for n in ALIASES.get(f, (f,)) if n in row) for f in fields)
        self.getter = None
        self.fallbacks = tuple(i for i, names in enumerate(self.names) if len(names) > 1)
        if len(fields) > 1 and all(self.names):
            self.getter = itemgetter(*(names[0] for names in self.names))


ID_FIELDS = frozenset({"prefix_id", "case_id", "model", "mapper", "task_id", "trial_name",
                       "prompt_id", "completion_id", "item_id", "rater", "subset", "run"})
"""Fields an id is made from (an item's uid, a rater's name): at most MAX_ID_CHARS."""


def id_length(value: Any, field: str, where: str) -> Any:
    """`value`, refused with file, line and field when it is text longer than an id
    may be (`store.writer.MAX_ID_CHARS`)."""
    if type(value) is str and len(value) > MAX_ID_CHARS:
        raise InputError(f"{where}: field {field!r}: {too_long(value, 'the id')}")
    return value


def has_field(names: set[str], field: str) -> bool:
    return any(n in names for n in ALIASES.get(field, (field,)))


def require(row: dict[str, Any], field: str, where: str, typ: type | tuple[type, ...] = str) -> Any:
    """A field's value, refused in one line when missing or of another type. Text
    may be given as a whole number (`"prefix_id": 36` reads as "36", digit for
    digit); a number with a point is refused: its text is not what the source
    wrote (a spreadsheet's 36.0, or 1e+20), and an id must not change."""
    value = pick(row, field)
    if value is None:
        names = " / ".join(ALIASES.get(field, (field,)))
        raise InputError(f"{where}: missing required field {field!r} (looked for {names})")
    if typ is str and type(value) is int:
        value = str(value)
    elif typ is str and type(value) is float:
        raise InputError(f"{where}: field {field!r} must be text, got the number {value!r} (a"
                         " number with a point is not read as text: write the text itself)")
    if not isinstance(value, typ):
        expected = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise InputError(f"{where}: field {field!r} must be {expected}, got {type(value).__name__}")
    return id_length(value, field, where) if field in ID_FIELDS else value


_WHOLE = re.compile(r"\A[ \t]*[+-]?[0-9]+[ \t]*\Z")
"""A whole number as text: ASCII digits only (Python's int() also reads "1_000"
and other scripts' digits, "٣": a value no reader would take for that number)."""


def as_int(value: Any, field: str, where: str) -> int | None:
    """A whole number from an int, a whole float (1.0: a dataframe's integer
    column with a gap is a float column) or its text in ASCII digits; anything
    else (1.5, true, infinity, "1_000", beyond 64 bits) is an InputError."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()) \
                or (isinstance(value, str) and not _WHOLE.match(value)):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}: field {field!r} must be a whole number, got {value!r}") from None
    if not -(1 << 63) <= number < (1 << 63):
        raise InputError(f"{where}: field {field!r}: {number} is beyond a 64-bit integer")
    return number


def as_name(value: Any, field: str, where: str) -> str | None:
    """A name (a split, a model, a subset) as text: text as given, a whole number
    as its digits, null or "" as none; true / false, a number with a point, a list
    or an object are refused, naming the field (`"split": true` is no split's
    name, and "1" would be)."""
    if value is None or value == "":
        return None
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    got = {bool: "true/false", float: "a number with a point", list: "a list",
           dict: "an object"}.get(type(value), type(value).__name__)
    raise InputError(f"{where}: field {field!r}: expected text or a whole number (a name), got"
                     f" {got}: {quoted(value, 60)}")


def as_given(value: Any, field: str, where: str) -> Any:
    """A value kept as the source wrote it (an extra column, the verifier's detail),
    refused in one line when it holds a number JSON cannot hold - NaN, Infinity,
    -Infinity (Python's json writes them; a dataframe's NaN): it would be stored
    as null, a changed value. A missing value is written null."""
    found = non_finite(value)
    if found is not None:
        inner, number = found
        spelled = "NaN" if number != number else "Infinity" if number > 0 else "-Infinity"
        raise InputError(f"{where}: field {field + inner!r} is {spelled}, which JSON cannot"
                         " hold (it would be stored as null); write null for a value that is"
                         " missing, or the number")
    return value


def as_bool(value: Any, field: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if value is None or value == "":
        return False
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "y", "t"):
        return True
    if text in ("false", "0", "no", "n", "f"):
        return False
    raise InputError(f"{where}: field {field!r} must be true or false, got {value!r}")
