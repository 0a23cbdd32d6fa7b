"""Codebooks: versioned label sets and rubrics, kept as TOML data files.

The loader validates every field and names the file and the field on error,
so a codebook edited by hand fails loudly and precisely. One concept, one
place: the order of a label set, the label a shortcut picks, and the
normalisation of a label given by a file all live here.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from codebook.vocabulary import ITEM_KINDS

DATA_DIR = Path(__file__).parent / "data"


class CodebookError(ValueError):
    """A codebook file is malformed; the message names file and field."""


@dataclass(frozen=True)
class Label:
    code: str
    """The exact string stored and exported (e.g. 1B_ESCALATION_URGENT_CARE)."""
    short: str
    """A short name for buttons and charts."""
    definition: str
    rules: tuple[str, ...]
    """Decision rules, in the order a reviewer should apply them."""
    example: str
    """One invented example (never real patient text)."""
    shortcut: str | None = None
    """The single key that picks this label in the review screen."""
    value: float | None = None
    """The label's number on an interval scale (``scale = "interval"``), e.g. 1..7."""


@dataclass(frozen=True)
class QuestionSpec:
    key: str
    """Stable key stored in the database, e.g. carebench.escalation_needed."""
    applies_to: str
    """Item kind the question is asked of."""
    text: str
    """The question in the clinician's words."""


@dataclass(frozen=True)
class Codebook:
    key: str
    version: str
    title: str
    kind: str
    """'labelset' (choose one code) or 'rubric' (met / not met per criterion)."""
    ordinal: bool
    description: str
    labels: tuple[Label, ...]
    questions: tuple[QuestionSpec, ...] = ()
    source: str = ""
    """File the codebook was loaded from."""
    extra: dict[str, Any] = field(default_factory=dict)
    scale: str = ""
    """nominal | ordinal | interval: how answers are compared (from ``scale``, else from
    ``ordinal``). An interval scale is ordered and its labels carry numbers (``value``)."""
    weights: tuple[tuple[float, ...], ...] | None = None
    """Agreement weights a codebook may define (a K x K table in label order: 1 on the
    diagonal, partial credit off it) for weighted kappa and Gwet's AC2."""

    def __post_init__(self) -> None:
        if not self.scale:
            object.__setattr__(self, "scale", "ordinal" if self.ordinal else "nominal")

    @property
    def values(self) -> tuple[float, ...] | None:
        """The labels' numbers, in label order, on an interval scale (else None)."""
        if self.scale != "interval":
            return None
        return tuple(float(label.value) for label in self.labels)

    @property
    def codes(self) -> list[str]:
        """The label codes in codebook order (ordinal order where ordinal)."""
        return [label.code for label in self.labels]

    def label(self, code: str) -> Label:
        for label in self.labels:
            if label.code == code:
                return label
        raise KeyError(code)

    def rank(self, code: str) -> int:
        """Position of a code in the ordinal order (0 = least escalation)."""
        return self.codes.index(code)

    def normalise(self, value: str) -> str:
        """The exact code a given label means, or CodebookError naming the
        allowed codes. Accepts the exact code in any case, or its unambiguous
        leading part (``1B`` for ``1B_ESCALATION_URGENT_CARE``)."""
        text = str(value).strip()
        codes = self.codes
        if text in codes:
            return text
        for code in codes:
            if text.upper() == code.upper():
                return code
        if text:
            matches = [c for c in codes if c.upper().startswith(text.upper() + "_")]
            if len(matches) == 1:
                return matches[0]
        raise CodebookError(
            f"unknown label {value!r}; allowed: {', '.join(codes)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "version": self.version,
            "title": self.title,
            "kind": self.kind,
            "ordinal": self.ordinal,
            "description": self.description,
            "labels": [
                {
                    "code": lb.code,
                    "short": lb.short,
                    "shortcut": lb.shortcut,
                    "definition": lb.definition,
                    "rules": list(lb.rules),
                    "example": lb.example,
                    **({"value": lb.value} if lb.value is not None else {}),
                }
                for lb in self.labels
            ],
            **({"scale": self.scale} if self.scale != ("ordinal" if self.ordinal
                                                        else "nominal") else {}),
            **({"weights": [list(r) for r in self.weights]} if self.weights else {}),
            "questions": [
                {"key": q.key, "applies_to": q.applies_to, "text": q.text} for q in self.questions
            ],
            **self.extra,
        }

    @property
    def severity(self) -> list[dict[str, Any]]:
        """Severity levels (1 mildest .. 5 worst) a marked error may carry, if the codebook has them."""
        return list(self.extra.get("severity", []))


def _req(data: dict, name: str, where: str, typ: type | tuple[type, ...] = str) -> Any:
    if name not in data:
        raise CodebookError(f"{where}.{name}: missing required field" if where else f"{name}: missing required field")
    value = data[name]
    if not isinstance(value, typ) or (isinstance(value, str) and not value.strip()):
        kind = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        label = f"{where}.{name}" if where else name
        raise CodebookError(f"{label}: expected a non-empty {kind}, got {value!r}")
    return value


def parse_codebook(data: dict[str, Any], source: str = "<codebook>") -> Codebook:
    """Validate a codebook given as a dict (from TOML or the database)."""
    try:
        key = _req(data, "key", "")
        version = str(_req(data, "version", "", (str, int, float)))
        title = _req(data, "title", "")
        kind = _req(data, "kind", "")
        if kind not in ("labelset", "rubric"):
            raise CodebookError(f"kind: expected 'labelset' or 'rubric', got {kind!r}")
        ordinal = data.get("ordinal", False)
        if not isinstance(ordinal, bool):
            raise CodebookError(f"ordinal: expected true or false, got {ordinal!r}")
        raw_labels = _req(data, "labels", "", list)
        labels: list[Label] = []
        seen_codes: set[str] = set()
        seen_keys: set[str] = set()
        for i, raw in enumerate(raw_labels):
            where = f"labels[{i}]"
            if not isinstance(raw, dict):
                raise CodebookError(f"{where}: expected a table, got {raw!r}")
            code = _req(raw, "code", where)
            if code in seen_codes:
                raise CodebookError(f"{where}.code: duplicate code {code!r}")
            seen_codes.add(code)
            rules = raw.get("rules", [])
            if not isinstance(rules, list) or not all(isinstance(r, str) and r.strip() for r in rules):
                raise CodebookError(f"{where}.rules: expected a list of non-empty strings")
            shortcut = raw.get("shortcut")
            if shortcut is not None:
                shortcut = str(shortcut)
                if len(shortcut) != 1 or not shortcut.isalnum():
                    raise CodebookError(f"{where}.shortcut: expected one letter or digit, got {shortcut!r}")
                if shortcut in seen_keys:
                    raise CodebookError(f"{where}.shortcut: {shortcut!r} is used twice")
                seen_keys.add(shortcut)
            value = raw.get("value")
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise CodebookError(f"{where}.value: expected a number, got {value!r}")
            labels.append(
                Label(
                    code=code,
                    short=_req(raw, "short", where),
                    definition=_req(raw, "definition", where),
                    rules=tuple(rules),
                    example=_req(raw, "example", where) if kind == "labelset" else raw.get("example", ""),
                    shortcut=shortcut,
                    value=float(value) if value is not None else None,
                )
            )
        if len(labels) < 2:
            raise CodebookError("labels: a codebook needs at least two labels")
        scale = _scale(data, ordinal, labels)
        ordinal = ordinal or scale in ("ordinal", "interval")
        weights = _weights(data.get("weights"), len(labels))
        questions = []
        for i, raw in enumerate(data.get("questions", [])):
            where = f"questions[{i}]"
            applies_to = _req(raw, "applies_to", where)
            if applies_to not in ITEM_KINDS:
                raise CodebookError(
                    f"{where}.applies_to: expected one of {', '.join(ITEM_KINDS)}, got {applies_to!r}"
                )
            questions.append(QuestionSpec(_req(raw, "key", where), applies_to, _req(raw, "text", where)))
        _check_severity(data.get("severity"))
        known = {"key", "version", "title", "kind", "ordinal", "description", "labels", "questions",
                 "scale", "weights"}
        return Codebook(
            key=key,
            version=version,
            title=title,
            kind=kind,
            ordinal=ordinal,
            description=str(data.get("description", "")).strip(),
            labels=tuple(labels),
            questions=tuple(questions),
            source=source,
            extra={k: v for k, v in data.items() if k not in known},
            scale=scale,
            weights=weights,
        )
    except CodebookError as exc:
        raise CodebookError(f"{source}: {exc}") from None


SCALES = ("nominal", "ordinal", "interval")


def _scale(data: dict[str, Any], ordinal: bool, labels: list[Label]) -> str:
    """The optional `scale`: nominal, ordinal (a scale of any length: 5- or 7-point) or
    interval (ordered labels with a number each, increasing in label order)."""
    scale = data.get("scale")
    if scale is None:
        if any(label.value is not None for label in labels):
            raise CodebookError('labels: a label has a value, but the codebook is not '
                                'scale = "interval"')
        return "ordinal" if ordinal else "nominal"
    if scale not in SCALES:
        raise CodebookError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
    if scale == "nominal" and ordinal:
        raise CodebookError('scale: "nominal" contradicts ordinal = true')
    if scale == "interval":
        missing = [i for i, label in enumerate(labels) if label.value is None]
        if missing:
            raise CodebookError(f"labels[{missing[0]}].value: an interval scale needs a number "
                                "for every label")
        values = [label.value for label in labels]
        if any(b <= a for a, b in zip(values, values[1:], strict=False)):
            raise CodebookError("labels: on an interval scale the values must increase in "
                                f"label order, got {values}")
    elif any(label.value is not None for label in labels):
        raise CodebookError(f'labels: values are for scale = "interval", not {scale!r}')
    return scale


def _weights(raw: Any, k: int) -> tuple[tuple[float, ...], ...] | None:
    """Optional agreement `weights`: k rows of k numbers from 0 to 1, in label order,
    1 on the diagonal, symmetric."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != k:
        raise CodebookError(f"weights: expected {k} rows (one per label), got {raw!r}")
    rows = []
    for i, row in enumerate(raw):
        if (not isinstance(row, list) or len(row) != k
                or any(isinstance(x, bool) or not isinstance(x, int | float) for x in row)):
            raise CodebookError(f"weights[{i}]: expected {k} numbers, got {row!r}")
        if any(not 0 <= x <= 1 for x in row):
            raise CodebookError(f"weights[{i}]: every weight is from 0 to 1, got {row!r}")
        if row[i] != 1:
            raise CodebookError(f"weights[{i}][{i}]: a label agrees fully with itself: "
                                f"expected 1, got {row[i]!r}")
        rows.append(tuple(float(x) for x in row))
    for i in range(k):
        for j in range(k):
            if rows[i][j] != rows[j][i]:
                raise CodebookError(f"weights[{i}][{j}]: the table must be symmetric "
                                    f"({rows[i][j]} vs weights[{j}][{i}] {rows[j][i]})")
    return tuple(rows)


def _check_severity(levels: Any) -> None:
    """An optional `[[severity]]` list: levels 1..5 in order, each named and defined."""
    if levels is None:
        return
    if not isinstance(levels, list) or not levels:
        raise CodebookError("severity: expected a list of [[severity]] tables")
    for i, raw in enumerate(levels):
        where = f"severity[{i}]"
        if not isinstance(raw, dict):
            raise CodebookError(f"{where}: expected a table, got {raw!r}")
        level = raw.get("level")
        if level != i + 1 or isinstance(level, bool):
            raise CodebookError(f"{where}.level: expected {i + 1} (levels run 1..5 in order), got {level!r}")
        _req(raw, "name", where)
        _req(raw, "definition", where)
    if len(levels) > 5:
        raise CodebookError("severity: at most five levels (1..5)")


def load_codebook_file(path: str | Path) -> Codebook:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CodebookError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise CodebookError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_codebook(data, source=str(path))


@cache
def builtin_codebooks() -> dict[str, Codebook]:
    """The codebooks shipped in codebook/data, by key."""
    books = {}
    for path in sorted(DATA_DIR.glob("*.toml")):
        book = load_codebook_file(path)
        if book.key in books:
            raise CodebookError(f"{path}: key: {book.key!r} is also defined in {books[book.key].source}")
        books[book.key] = book
    return books


def codebook(key: str) -> Codebook:
    return builtin_codebooks()[key]


CODE_LEAD = re.compile(r"^([0-9][A-Z])_")
"""The short form of a CARE-Bench code (`1B` of `1B_ESCALATION_URGENT_CARE`)."""


def label_words(code: str | None, researcher: bool = False, book: Codebook | None = None) -> str:
    """A stored answer in a clinician's words: a label's short name ("Urgent
    care", "Wrong tool"), "met", "not met", "cannot assess" (None), never the code
    it is stored as. `researcher`: the code beside the words, for an export that
    may be read back against the data ("Urgent care (1B)", "Wrong tool
    (wrong_tool)"). `book`: the codebook (the version in force), else the
    shipped ones."""
    if code is None:
        return "cannot assess"
    for candidate in ([book] if book is not None else []) + list(builtin_codebooks().values()):
        for label in candidate.labels:
            if label.code == code:
                if not researcher:
                    return label.short
                lead = CODE_LEAD.match(code)
                return f"{label.short} ({lead.group(1) if lead else code})"
    words = {"met": "met", "not_met": "not met", "cannot_assess": "cannot assess"}.get(code)
    if words:
        return words
    return code if researcher else code.replace("_", " ")


def question_specs() -> dict[str, tuple[Codebook, QuestionSpec]]:
    """Every question the shipped codebooks define, by key."""
    out = {}
    for book in builtin_codebooks().values():
        for q in book.questions:
            out[q.key] = (book, q)
    return out
