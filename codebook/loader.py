"""Codebooks: versioned label sets and rubrics, kept as TOML data files.

The shipped codebooks live in `codebook/data`; a study's own are added to its
database (`carelens codebook add`, `review.team.codebook_versions`) and held to
the very same rules: every field is checked, a field the format does not have
is refused (a misspelt `sclae` would otherwise be dropped without a word), and
an error names the file, the line and the field. One concept, one place: the
order of a label set, the label a shortcut picks, the normalisation of a label
given by a file, which keys a codebook may not take (carelens's own), and the
TOML a codebook is written back as (`dump_codebook`) all live here.

The format (every field of the shipped files, and the few a study adds):

- `key`, `version`, `title`, `kind` (`labelset`: choose a code; `rubric`: met /
  not met per criterion), `description`;
- `scale`: `nominal`, `ordinal` (of any length) or `interval` (each label has a
  number, `value`); `ordinal = true` is the older spelling of an ordinal scale;
- `weights`: the agreement weights of the labels (K rows of K numbers);
- `choice`: `single` (the default) or `multi` (several labels at once);
- `rationale`: `optional` (the default) or `required` (an answer given in
  carelens must say why);
- `[risk]` on an ordered scale: `action_from` (the first label that calls for
  action) and `urgent` (the most urgent; by default the last), which give the
  triage-style metrics (missed, unnecessary and urgent care) their meaning;
- `[[labels]]`: `code`, `short`, `shortcut` (one key), `definition`, `rules`,
  `example`, `value` (interval scales);
- `[[questions]]`: `key`, `applies_to` (a kind of item), `text`;
- `[[criteria]]` (a rubric's checklist): `key`, `applies_to`, `text`, `points`
  (negative: an error), `must_not`;
- `[[severity]]` (levels 1..5) and `[criterion_fields]` (words), as shipped.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from codebook.vocabulary import ITEM_KINDS, LABEL_KINDS, MET, NOT_MET, RUBRIC_KINDS, SCREEN_KEYS

DATA_DIR = Path(__file__).parent / "data"


class CodebookError(ValueError):
    """A codebook file is malformed; the message names file (and line) and field."""


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
class Criterion:
    """One criterion of a rubric codebook's checklist: asked (met / not met) of every
    item of a kind, worth `points` (negative, or `must_not`: meeting it is an error)."""

    key: str
    applies_to: str
    text: str
    points: float
    must_not: bool


@dataclass(frozen=True)
class Risk:
    """An ordered scale's risk order: from `action_from` up, a label calls for action;
    `urgent` is the most urgent (CARE-Bench: escalation from 1A, urgent 1B)."""

    action_from: str
    urgent: str


CHOICES = ("single", "multi")
RATIONALES = ("optional", "required")
SCALES = ("nominal", "ordinal", "interval")


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
    source: str = field(default="", compare=False)
    """File (or database row) the codebook was loaded from."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The shipped files' descriptive tables: `severity`, `criterion_fields`."""
    scale: str = ""
    """nominal | ordinal | interval: how answers are compared (from ``scale``, else from
    ``ordinal``). An interval scale is ordered and its labels carry numbers (``value``)."""
    weights: tuple[tuple[float, ...], ...] | None = None
    """Agreement weights a codebook may define (a K x K table in label order: 1 on the
    diagonal, partial credit off it) for weighted kappa and Gwet's AC2."""
    choice: str = "single"
    """single: one label per answer; multi: several at once (stored as the codes in
    label order, joined by `MULTI_SEPARATOR`)."""
    rationale_required: bool = False
    """An answer given in carelens must carry a rationale."""
    criteria: tuple[Criterion, ...] = ()
    """A rubric codebook's checklist (asked of every item of each criterion's kind)."""
    risk: Risk | None = None

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

    @property
    def multi(self) -> bool:
        return self.choice == "multi"

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
        leading part (``1B`` for ``1B_ESCALATION_URGENT_CARE``). A multi-choice
        codebook takes several, joined by ``|`` (or a JSON list), and stores them
        in label order, each once."""
        if self.multi:
            return self._normalise_many(value)
        return self._normalise_one(value)

    def _normalise_one(self, value: str) -> str:
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

    def _normalise_many(self, value: Any) -> str:
        if isinstance(value, list | tuple):
            parts = [str(v) for v in value]
        else:
            text = str(value).strip()
            if text.startswith("["):
                import json

                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if isinstance(parsed, list):
                    return self._normalise_many(parsed)
            parts = text.split(MULTI_SEPARATOR) if text else []
        chosen = {self._normalise_one(p) for p in parts if str(p).strip()}
        if not chosen:
            raise CodebookError(f"no label in {value!r}; choose one or more of "
                                f"{', '.join(self.codes)} (joined by {MULTI_SEPARATOR})")
        return MULTI_SEPARATOR.join(c for c in self.codes if c in chosen)

    def chosen(self, value: str | None) -> list[str]:
        """The codes an answer's stored value names (one, or a multi-choice's several)."""
        if value is None:
            return []
        return value.split(MULTI_SEPARATOR) if self.multi else [value]

    def to_dict(self) -> dict[str, Any]:
        """The codebook as data: what `parse_codebook` takes back as the same codebook
        (stored as a version's content; written as TOML by `dump_codebook`)."""
        return {
            "key": self.key,
            "version": self.version,
            "title": self.title,
            "kind": self.kind,
            "ordinal": self.ordinal,
            "description": self.description,
            **({"scale": self.scale} if self.scale != ("ordinal" if self.ordinal
                                                        else "nominal") else {}),
            **({"choice": self.choice} if self.choice != "single" else {}),
            **({"rationale": "required"} if self.rationale_required else {}),
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
            **({"weights": [list(r) for r in self.weights]} if self.weights else {}),
            **({"risk": {"action_from": self.risk.action_from, "urgent": self.risk.urgent}}
               if self.risk else {}),
            "questions": [
                {"key": q.key, "applies_to": q.applies_to, "text": q.text} for q in self.questions
            ],
            **({"criteria": [{"key": c.key, "applies_to": c.applies_to, "text": c.text,
                              "points": c.points, "must_not": c.must_not}
                             for c in self.criteria]} if self.criteria else {}),
            **self.extra,
        }

    @property
    def severity(self) -> list[dict[str, Any]]:
        """Severity levels (1 mildest .. 5 worst) a marked error may carry, if the codebook has them."""
        return list(self.extra.get("severity", []))


MULTI_SEPARATOR = "|"
"""Between the codes of a multi-choice answer, as stored and exported."""

TOP_FIELDS = ("key", "version", "title", "kind", "ordinal", "scale", "choice", "rationale",
              "description", "labels", "weights", "risk", "questions", "criteria", "severity",
              "criterion_fields")
"""Every field a codebook may have; any other is refused (`parse_codebook`)."""
EXTRA_FIELDS = ("severity", "criterion_fields")
"""Descriptive tables kept as written (`Codebook.extra`)."""
LABEL_FIELDS = ("code", "short", "shortcut", "definition", "rules", "example", "value")
QUESTION_FIELDS = ("key", "applies_to", "text")
CRITERION_FIELDS = ("key", "applies_to", "text", "points", "must_not")
RISK_FIELDS = ("action_from", "urgent")
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A codebook's key: letters, digits, `.`, `_`, `-`, at most 64 (it names files and
question sets: `criteria:<key>`)."""
QUESTION_KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
"""A question's or criterion's key: stored with every answer and named in files."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _req(data: dict, name: str, where: str, typ: type | tuple[type, ...] = str) -> Any:
    if name not in data:
        raise CodebookError(f"{where}.{name}: missing required field" if where else f"{name}: missing required field")
    value = data[name]
    if isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        value = None  # a true/false is not a number or a text here
    if not isinstance(value, typ) or (isinstance(value, str) and not value.strip()):
        kind = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        label = f"{where}.{name}" if where else name
        raise CodebookError(f"{label}: expected a non-empty {kind}, got {data[name]!r}")
    return value


_WHAT = {"": "a codebook", "labels": "a label", "questions": "a question",
         "criteria": "a criterion", "risk": "[risk]", "severity": "a severity level"}


def _known(data: dict, allowed: tuple[str, ...], where: str) -> None:
    """Refuse a field the format does not have (a misspelling is not dropped unheard)."""
    for name in data:
        if name not in allowed:
            at = f"{where}.{name}" if where else str(name)
            what = _WHAT.get(where.split("[")[0], where)
            raise CodebookError(f"{at}: not a field of {what} (its fields: {', '.join(allowed)})")


def _table(raw: Any, where: str) -> dict:
    if not isinstance(raw, dict):
        raise CodebookError(f"{where}: expected a table, got {raw!r}")
    return raw


def _code(raw: dict, where: str) -> str:
    code = _req(raw, "code", where)
    if code != code.strip() or _CONTROL.search(code) or len(code) > 200:
        raise CodebookError(f"{where}.code: a code is stored and exported as written: no "
                            f"spaces at its ends, no control characters, at most 200 characters;"
                            f" got {code!r}")
    return code


def parse_codebook(data: dict[str, Any], source: str = "<codebook>") -> Codebook:
    """Validate a codebook given as a dict (from TOML or the database)."""
    try:
        return _parse(data, source)
    except CodebookError as exc:
        raise CodebookError(f"{source}: {exc}") from None


def _parse(data: dict[str, Any], source: str) -> Codebook:
    _known(data, TOP_FIELDS, "")
    key = _req(data, "key", "")
    if not KEY_PATTERN.fullmatch(key):
        raise CodebookError(f"key: letters, digits, '.', '_' and '-' only (at most 64), "
                            f"starting with a letter or digit; got {key!r}")
    version = _req(data, "version", "", (str, int, float))
    version = str(version).strip()
    if _CONTROL.search(version) or len(version) > 64:
        raise CodebookError(f"version: a short text, got {version!r}")
    title = _req(data, "title", "")
    kind = _req(data, "kind", "")
    if kind not in ("labelset", "rubric"):
        raise CodebookError(f"kind: expected 'labelset' or 'rubric', got {kind!r}")
    ordinal = data.get("ordinal", False)
    if not isinstance(ordinal, bool):
        raise CodebookError(f"ordinal: expected true or false, got {ordinal!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise CodebookError(f"description: expected a text, got {description!r}")
    raw_labels = _req(data, "labels", "", list)
    labels: list[Label] = []
    seen_codes: set[str] = set()
    seen_keys: dict[str, int] = {}
    for i, raw in enumerate(raw_labels):
        where = f"labels[{i}]"
        raw = _table(raw, where)
        _known(raw, LABEL_FIELDS, where)
        code = _code(raw, where)
        if code in seen_codes:
            raise CodebookError(f"{where}.code: duplicate code {code!r}")
        seen_codes.add(code)
        rules = raw.get("rules", [])
        if not isinstance(rules, list) or not all(isinstance(r, str) and r.strip() for r in rules):
            raise CodebookError(f"{where}.rules: expected a list of non-empty strings")
        shortcut = raw.get("shortcut")
        if shortcut is not None:
            if isinstance(shortcut, bool):
                raise CodebookError(f"{where}.shortcut: expected one letter or digit, got {shortcut!r}")
            shortcut = str(shortcut)
            if len(shortcut) != 1 or not shortcut.isascii() or not shortcut.isalnum():
                raise CodebookError(f"{where}.shortcut: expected one letter or digit, got {shortcut!r}")
            if shortcut.lower() in seen_keys:
                raise CodebookError(f"{where}.shortcut: {shortcut!r} is used twice (also by "
                                    f"labels[{seen_keys[shortcut.lower()]}]; keys ignore capitals)")
            seen_keys[shortcut.lower()] = i
        value = raw.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value)):
            raise CodebookError(f"{where}.value: expected a number, got {value!r}")
        example = raw.get("example", "")
        if kind == "labelset":
            example = _req(raw, "example", where)
        elif not isinstance(example, str):
            raise CodebookError(f"{where}.example: expected a text, got {example!r}")
        labels.append(
            Label(
                code=code,
                short=_req(raw, "short", where),
                definition=_req(raw, "definition", where),
                rules=tuple(rules),
                example=example,
                shortcut=shortcut,
                value=float(value) if value is not None else None,
            )
        )
    if len(labels) < 2:
        raise CodebookError("labels: a codebook needs at least two labels")
    scale = _scale(data, ordinal, labels)
    ordinal = ordinal or scale in ("ordinal", "interval")
    weights = _weights(data.get("weights"), len(labels))
    choice = data.get("choice", "single")
    if choice not in CHOICES:
        raise CodebookError(f"choice: expected one of {', '.join(CHOICES)}, got {choice!r}")
    rationale = data.get("rationale", "optional")
    if rationale not in RATIONALES:
        raise CodebookError(f"rationale: expected one of {', '.join(RATIONALES)}, got {rationale!r}")
    if choice == "multi":
        if kind != "labelset":
            raise CodebookError('choice: "multi" is for a label set (a rubric is met / not met)')
        if scale != "nominal" or weights is not None:
            raise CodebookError('choice: a "multi" choice is nominal (each label chosen or not):'
                                " no ordinal or interval scale, no weights")
        for i, label in enumerate(labels):
            if MULTI_SEPARATOR in label.code:
                raise CodebookError(f"labels[{i}].code: a multi-choice code cannot hold "
                                    f"{MULTI_SEPARATOR!r} (it joins the codes of one answer)")
    if kind == "rubric":
        if set(seen_codes) != {MET, NOT_MET}:
            raise CodebookError(f"labels: a rubric's labels are {MET!r} and {NOT_MET!r} (its "
                                "criteria are met or not met); got " + ", ".join(sorted(seen_codes)))
        if scale != "nominal" or weights is not None:
            raise CodebookError("scale: a rubric's verdicts (met / not met) are not a scale")
    risk = _risk(data.get("risk"), scale, labels)
    questions = []
    for i, raw in enumerate(data.get("questions", [])):
        where = f"questions[{i}]"
        raw = _table(raw, where)
        _known(raw, QUESTION_FIELDS, where)
        qkey = _question_key(raw, where)
        questions.append(QuestionSpec(qkey, _applies_to(raw, where), _req(raw, "text", where)))
    if questions and kind == "rubric":
        raise CodebookError("questions: a rubric asks its [[criteria]], not [[questions]]")
    criteria = _criteria(data.get("criteria"), kind)
    seen: dict[str, str] = {}
    for what, keys in (("questions", [q.key for q in questions]),
                       ("criteria", [c.key for c in criteria])):
        for i, qkey in enumerate(keys):
            if qkey in seen:
                raise CodebookError(f"{what}[{i}].key: {qkey!r} again (also {seen[qkey]})")
            seen[qkey] = f"{what}[{i}]"
    _check_severity(data.get("severity"))
    _check_words(data.get("criterion_fields"), "criterion_fields")
    book = Codebook(
        key=key,
        version=version,
        title=title,
        kind=kind,
        ordinal=ordinal,
        description=description.strip(),
        labels=tuple(labels),
        questions=tuple(questions),
        source=source,
        extra={k: data[k] for k in EXTRA_FIELDS if k in data},
        scale=scale,
        weights=weights,
        choice=choice,
        rationale_required=rationale == "required",
        criteria=criteria,
        risk=risk,
    )
    _check_keys(book)
    return book


def _question_key(raw: dict, where: str) -> str:
    key = _req(raw, "key", where)
    if not QUESTION_KEY_PATTERN.fullmatch(key):
        raise CodebookError(f"{where}.key: letters, digits, '.', ':', '_' and '-' only (at most "
                            f"200), starting with a letter or digit; got {key!r}")
    return key


def _applies_to(raw: dict, where: str) -> str:
    applies_to = _req(raw, "applies_to", where)
    if applies_to not in ITEM_KINDS:
        raise CodebookError(
            f"{where}.applies_to: expected one of {', '.join(ITEM_KINDS)}, got {applies_to!r}"
        )
    return applies_to


def _criteria(raw: Any, kind: str) -> tuple[Criterion, ...]:
    """A rubric's `[[criteria]]`: its checklist, each met or not met on every item of a kind."""
    if raw is None:
        return ()
    if kind != "rubric":
        raise CodebookError('criteria: a checklist of criteria is a rubric\'s (kind = "rubric")')
    if not isinstance(raw, list) or not raw:
        raise CodebookError("criteria: expected a list of [[criteria]] tables")
    out = []
    for i, entry in enumerate(raw):
        where = f"criteria[{i}]"
        entry = _table(entry, where)
        _known(entry, CRITERION_FIELDS, where)
        points = _req(entry, "points", where, (int, float))
        if not math.isfinite(points) or points == 0:
            raise CodebookError(f"{where}.points: expected a finite number other than 0, got "
                                f"{points!r} (negative: meeting the criterion is an error)")
        must_not = entry.get("must_not", points < 0)
        if not isinstance(must_not, bool):
            raise CodebookError(f"{where}.must_not: expected true or false, got {must_not!r}")
        if points < 0 and not must_not:
            raise CodebookError(f"{where}.must_not: negative points make a MUST-NOT criterion "
                                "(meeting it is an error); say must_not = true, or give "
                                "positive points")
        applies_to = _applies_to(entry, where)
        if applies_to not in LABEL_KINDS:
            raise CodebookError(
                f"{where}.applies_to: a study's checklist is asked of every {' or '.join(LABEL_KINDS)}"
                f" (one criterion at a time, on the Review screen), not of each {applies_to}: an"
                " agent run's or graded conversation's criteria come with its file")
        out.append(Criterion(_question_key(entry, where), applies_to,
                             _req(entry, "text", where), float(points), must_not))
    return tuple(out)


def _risk(raw: Any, scale: str, labels: list[Label]) -> Risk | None:
    """The optional `[risk]` table of an ordered scale."""
    if raw is None:
        return None
    raw = _table(raw, "risk")
    _known(raw, RISK_FIELDS, "risk")
    if scale == "nominal":
        raise CodebookError('risk: a risk order needs an ordered scale (scale = "ordinal" or '
                            '"interval")')
    codes = [label.code for label in labels]
    first = _req(raw, "action_from", "risk")
    if first not in codes:
        raise CodebookError(f"risk.action_from: expected one of the codes "
                            f"({', '.join(codes)}), got {first!r}")
    urgent = raw.get("urgent", codes[-1])
    if urgent not in codes:
        raise CodebookError(f"risk.urgent: expected one of the codes ({', '.join(codes)}), "
                            f"got {urgent!r}")
    if codes.index(first) == 0:
        raise CodebookError("risk.action_from: the lowest label cannot call for action (then "
                            "every answer would); name the first label that does")
    if codes.index(urgent) < codes.index(first):
        raise CodebookError(f"risk.urgent: {urgent!r} comes before action_from {first!r} in "
                            "the scale's order")
    return Risk(first, urgent)


def screens_of(book: Codebook) -> list[str]:
    """The screens a codebook's labels are picked on by key (`SCREEN_KEYS`' names)."""
    screens = {"adjudicate", "browser"}
    kinds = {q.applies_to for q in book.questions} | {c.applies_to for c in book.criteria}
    if book.criteria:
        screens.add("review")  # a checklist's criteria are answered one at a time there
    if book.kind == "labelset":
        if not kinds or kinds - set(RUBRIC_KINDS):
            screens.add("review")
        if kinds & set(RUBRIC_KINDS):
            screens.add("trajectories")
    return sorted(screens)


def _check_keys(book: Codebook) -> None:
    """No label's key may be one carelens uses on a screen the label is picked on."""
    for screen in screens_of(book):
        taken = SCREEN_KEYS[screen]
        for i, label in enumerate(book.labels):
            key = (label.shortcut or "").lower()
            if key in taken:
                where = ("in the browser" if screen == "browser"
                         else f"on the {screen.capitalize()} screen")
                raise CodebookError(
                    f"labels[{i}].shortcut: {label.shortcut!r} is carelens's key for "
                    f"{taken[key]} {where}; choose another")


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
        raw = _table(raw, where)
        _known(raw, ("level", "name", "definition"), where)
        level = raw.get("level")
        if level != i + 1 or isinstance(level, bool):
            raise CodebookError(f"{where}.level: expected {i + 1} (levels run 1..5 in order), got {level!r}")
        _req(raw, "name", where)
        _req(raw, "definition", where)
    if len(levels) > 5:
        raise CodebookError("severity: at most five levels (1..5)")


def _check_words(raw: Any, where: str) -> None:
    """An optional table of words (`criterion_fields`): each value a text."""
    if raw is None:
        return
    raw = _table(raw, where)
    for name, value in raw.items():
        if not isinstance(value, str):
            raise CodebookError(f"{where}.{name}: expected a text, got {value!r}")


# -- files: reading (with the line of a bad field) and writing --------------------------

def load_codebook_text(text: str, source: str) -> Codebook:
    """A codebook from TOML text. An error names `source`, the line and the field:
    `harm.toml:14: labels[2].shortcut: ...`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CodebookError(f"{source}: not valid TOML: {exc}") from None
    try:
        return _parse(data, source)
    except CodebookError as exc:
        message = str(exc)
        line = line_of(text, message.split(":", 1)[0])
        raise CodebookError(f"{source}:{line}: {message}" if line else f"{source}: {message}") \
            from None


def load_codebook_file(path: str | Path) -> Codebook:
    path = Path(path)
    try:
        if not path.is_file():
            raise CodebookError(f"{path}: no such file" if not path.exists()
                                else f"{path}: not a file")
        raw = path.read_bytes()
    except OSError as exc:
        raise CodebookError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise CodebookError(f"{path}: {len(raw):,} bytes; a codebook file has at most "
                            f"{MAX_FILE_BYTES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise CodebookError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    return load_codebook_text(text, str(path))


MAX_FILE_BYTES = 1_000_000
"""A codebook file is words: a megabyte is far more than any needs."""

_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")
_PATH = re.compile(r"([A-Za-z_]+)(?:\[(\d+)\])?(?:\[\d+\])*")


def line_of(text: str, field_path: str) -> int | None:
    """The line (1-based) of the field a validation message names (`labels[2].shortcut`,
    `scale`, `risk.urgent`, `weights[1]`) in a codebook's TOML text: the field's own
    line, else its table's header, else None. For files written as carelens writes
    them (tables and arrays of tables); an inline table gives its key's line."""
    parts = [m.groups() for m in (_PATH.fullmatch(p) for p in field_path.split(".")) if m]
    if not parts or len(parts) != len(field_path.split(".")):
        return None
    lines = text.splitlines()
    table, count = "", {}
    starts: dict[tuple[str, int | None], int] = {}
    assigned: dict[tuple[str, int | None, str], int] = {}
    in_multiline = False
    for n, line in enumerate(lines, start=1):
        if in_multiline:
            if line.count('"""') % 2 or line.count("'''") % 2:
                in_multiline = False
            continue
        header = _HEADER.match(line)
        if header and not _ASSIGN.match(line):
            name = header.group(1).strip().strip('"')
            if line.strip().startswith("[["):
                count[name] = count.get(name, -1) + 1
                table = (name, count[name])
            else:
                table = (name, None)
            starts.setdefault(table, n)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            where = table if table else ("", None)
            assigned.setdefault((*where, assign.group(1)), n)
            if line.count('"""') % 2 or line.count("'''") % 2:
                in_multiline = True
    head, index = parts[0]
    index = int(index) if index is not None else None
    first = min((n for (name, _), n in starts.items() if name == head), default=None)
    if len(parts) == 1:
        found = assigned.get(("", None, head))
        if found is None and index is not None:
            found = starts.get((head, index))
        return found or starts.get((head, None)) or first
    name, _ = parts[1]
    return (assigned.get((head, index, name)) or starts.get((head, index))
            or assigned.get(("", None, head)))


def dump_codebook(book: Codebook) -> str:
    """The codebook as TOML, in the shipped files' layout: what `load_codebook_text`
    reads back as the same codebook (`carelens codebook export`)."""
    data = book.to_dict()
    data.pop("ordinal")  # said by the scale, written always
    data["scale"] = book.scale
    out = [f"# {book.title}, version {book.version}: written by carelens.", ""]
    tables = ("labels", "risk", "questions", "criteria", "severity", "criterion_fields")
    for name in TOP_FIELDS:
        if name in data and name not in tables and data[name] is not None:
            if name == "description" and not data[name]:
                continue
            out.append(f"{name} = {_toml_value(data[name], multiline=name == 'description')}")
    for name in ("risk", "criterion_fields"):
        if data.get(name):
            out += ["", f"[{name}]"]
            out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data[name].items()
                    if v is not None]
    for name in ("labels", "questions", "criteria", "severity"):
        for entry in data.get(name) or []:
            out += ["", f"[[{name}]]"]
            out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items()
                    if v is not None and not (k == "rules" and not v)
                    and not (k == "example" and v == "" and book.kind == "rubric")]
    return "\n".join(out) + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_string(text: str, multiline: bool = False) -> str:
    escaped = []
    for n, ch in enumerate(text):
        if ch == "\\":
            escaped.append("\\\\")
        elif ch == '"' and (not multiline or text[n + 1:n + 2] in ('"', "")):
            escaped.append('\\"')  # in a multi-line string only where quotes could close it
        elif ch == "\n" and multiline:
            escaped.append("\n")
        elif ch in "\n\t\r\b\f":
            escaped.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            escaped.append(f"\\u{ord(ch):04X}")
        else:
            escaped.append(ch)
    body = "".join(escaped)
    if multiline and "\n" in text:
        return f'"""\n{body}\n"""' if not text.endswith("\n") else f'"""\n{body}"""'
    return f'"{body}"'


def _toml_value(value: Any, multiline: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if value != value else
                                                         ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return _toml_string(value, multiline)
    if isinstance(value, list | tuple):
        inner = [_toml_value(v) for v in value]
        if sum(len(v) for v in inner) > 60:
            return "[\n" + "".join(f"  {v},\n" for v in inner) + "]"
        return "[" + ", ".join(inner) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()
                                if v is not None) + " }"
    raise CodebookError(f"cannot write {value!r} as TOML")


# -- where codebooks are found -----------------------------------------------------------

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
    """A shipped codebook, as its file says (the version in a database may be newer:
    `codebooks(db)`)."""
    return builtin_codebooks()[key]


CODE_LEAD = re.compile(r"^([0-9][A-Z])_")
"""The short form of a CARE-Bench code (`1B` of `1B_ESCALATION_URGENT_CARE`)."""


def label_words(code: str | None, researcher: bool = False, book: Codebook | None = None) -> str:
    """A stored answer in a clinician's words: a label's short name ("Urgent
    care", "Wrong tool"), "met", "not met", "cannot assess" (None), never the code
    it is stored as. `researcher`: the code beside the words, for an export that
    may be read back against the data ("Urgent care (1B)", "Wrong tool
    (wrong_tool)"). `book`: the codebook (the version in force), else the
    shipped ones and the study codebooks this process has read."""
    if code is None:
        return "cannot assess"
    for candidate in ([book] if book is not None else []) + known_codebooks():
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


IN_FORCE_SQL = ("SELECT v.codebook, v.content FROM codebook_versions v WHERE v.id ="
                " (SELECT MAX(w.id) FROM codebook_versions w WHERE w.codebook = v.codebook)"
                " ORDER BY v.id")
"""Each codebook's version in force: the newest row of `codebook_versions`."""


@lru_cache(maxsize=512)
def _stored(key: str, content: str) -> Codebook:
    import json

    return parse_codebook(json.loads(content), source=f"database codebook {key}")


def codebooks(db: Any = None) -> dict[str, Codebook]:
    """Every codebook, by key, at the version in force: the shipped ones, and with a
    database (a `Store`, or an sqlite3 connection inside a transaction) the newest
    version of each it holds: a study's own codebooks, and any newer version of a
    shipped one (an admin's edit). The one look-up every caller makes."""
    books = dict(builtin_codebooks())
    if db is None:
        return books
    rows = db.query(IN_FORCE_SQL) if hasattr(db, "query") else db.execute(IN_FORCE_SQL).fetchall()
    for key, content in rows:
        books[key] = _stored(key, content)
    _SEEN.update({key: books[key] for key, _ in rows})
    return books


_SEEN: dict[str, Codebook] = {}
"""The codebooks this process has read from a database at their version in force, by
key (the latest read): a study's own, and a shipped one an admin has edited."""


def known_codebooks() -> list[Codebook]:
    """For words shown where no database is at hand (a label code's short name): every
    codebook at the version in force this process last read (a shipped one an admin
    edited: the edit), then the shipped ones no database has given."""
    return list({**builtin_codebooks(), **_SEEN}.values())


def codebook_in_force(db: Any, key: str) -> Codebook | None:
    """One codebook at its version in force (see `codebooks`), or None."""
    return codebooks(db).get(key)


def question_specs(db: Any = None) -> dict[str, tuple[Codebook, QuestionSpec]]:
    """Every label question the codebooks define (with a database: its own too), by key."""
    out = {}
    for book in codebooks(db).values():
        for q in book.questions:
            out[q.key] = (book, q)
    return out
