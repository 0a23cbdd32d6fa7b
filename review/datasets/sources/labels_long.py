"""Generic long-format labels: `item_id,rater,value[,question,rationale,confidence]`.

A CSV (or the same columns as JSONL or Parquet). Optional columns: `status`
(answered | cannot_assess | skipped), `phase` (blind | after_reveal |
suggested; default imported), `rater_kind` (human | machine | reference;
default human, or the kind of an existing rater), `rater_role`, `specialty`
and `seniority` (kept for a rater the file creates; see below), and for
step-level error marks on an agent run `target` (`step:N`) with `severity`
(1 negligible .. 5 critical; required unless the value is `no_error`).

For labels collected in a spreadsheet. A rater not yet known is created as a
human rater (or as the kind given by an optional `rater_kind` column). The
question defaults to the one asked of the item's kind; `value` may be a label
code, met / not met, or empty with `status` = cannot_assess. A rater's
answers to one item and question are taken in the rows' order: the last one
is the answer in force.

The annotation export (`carelens export --what annotations`, CSV or JSONL)
goes back in as it is: its other columns are ignored, a CSV cell it quoted
with a leading apostrophe so that a spreadsheet would not run it as a formula
(`'=...`, `'-...`) is read as the text it quoted, and its `skipped` rows (a
reviewer passed, or a settled answer was withdrawn) are recorded as skips,
with no value, so that each rater's answer in force is the same as in the
database exported. A file with an `annotation_id` column (the export's) is
taken in the order of those ids, not of its rows, so an export sorted in a
spreadsheet goes back in the same; its ids must be whole numbers, each on one
row, and its `supersedes` and `current` columns must agree with them (a file
with rows left out, whose answer in force would change, is refused).

Rater profile: in a file that describes its raters (it has `rater_role` or
`rater_kind`, or is an annotation export), a rater the file creates keeps
the file's `specialty`, `seniority` and `rater_role` (a lone `specialty`
column of a spreadsheet may be each case's, and is not read as the
rater's), except a role that grants something in the app (adjudicator,
admin: every role of `review.team.reviewers.ROLES` but reviewer), which a file
never gives: such a rater is created as a reviewer, the role the
file named kept in the rater's meta (`role_not_granted`) for an admin to
grant or not. A rater that exists already is left exactly as it is.

What a file may write is the import's rules (`review.datasets.sources.rules`):
raters the file brings in come with its phases and history; a rater who
exists gets new answers only, their answers in force replaced only with
`--replace` (each audited); a person who reviews here is never given a blind
answer; no file takes the settled answers or a name the system uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from review.datasets.sources.base import Format, ImportOptions, rater_record_for, register
from review.datasets.sources.fields import as_bool, as_int, id_length
from review.datasets.sources.readers import file_kind, read_csv, read_rows
from review.team.reviewers import ROLES
from store.db import to_json
from store.records import AnnotationRecord, RaterRecord, Record
from store.spreadsheet import unquote_cell
from store.writer import InputError

REQUIRED = ("item_id", "rater", "value")
STATUSES = ("answered", "cannot_assess", "skipped")
PHASES = ("imported", "blind", "after_reveal", "suggested")
PRIVILEGED_ROLES = frozenset(ROLES) - {"reviewer"}
"""Roles that grant something in the app (adjudicate, administer): never taken from a
file, only granted by an admin (`review.team.reviewers.grant_role`)."""


def _is_no_error(value: str) -> bool:
    """Whether a step mark says the step has no error, in any spelling the
    trajectory-errors codebook takes."""
    from codebook import builtin_codebooks

    book = builtin_codebooks().get("trajectory-errors")
    try:
        return book is not None and book.normalise(value) == "no_error"
    except (KeyError, ValueError):
        return False


def _cell(value: Any) -> str:
    """A JSONL or Parquet value as the text a CSV cell would hold."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return to_json(value)  # a list or an object: its JSON text (refused where a label is due)


def _rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows, every value as text: a CSV's with the export's formula quote taken
    off; a JSONL or Parquet file's (which the export does not quote) as they are."""
    if file_kind(path) == "csv":
        for line, quoted in read_csv(path):
            yield line, {k: unquote_cell(v) for k, v in quoted.items()}
        return
    for line, row in read_rows(path):
        yield line, {k: _cell(v) for k, v in row.items()}


@dataclass
class _Answer:
    """One row read: its annotation, and the fields that order and check it."""

    line: int
    record: AnnotationRecord
    rater_kind: str
    kind_assumed: bool
    profile: dict[str, str]
    """The row's `PROFILE` columns, as given."""
    annotation_id: int | None = None
    supersedes: int | None = None
    current: bool | None = None
    model: str | None = None
    """The row's `model` (an annotation export's): the item must be of a run of it."""

    @property
    def unit(self) -> tuple[str, str, str, str]:
        r = self.record
        return (r.rater, r.item_uid, r.question_key, r.target)

    @property
    def withheld(self) -> bool:
        """An item the export withheld (`withheld-<annotation id>`): one the writer
        refuses as unknown, whatever its ids say."""
        return self.record.item_uid == f"withheld-{self.annotation_id}"


def read_labels_long(path: Path, options: ImportOptions) -> Iterator[Record]:
    answers = _answers(path)
    first = next(answers, None)
    if first is None:
        return
    raters = _Raters(path)
    runs = _RunCheck(options.query)
    if first.annotation_id is None:  # row order is time, as a spreadsheet of labels is written
        ordered: Iterable[_Answer] = chain([first], answers)
    elif _ids_ascending(path):
        # The export as written, oldest first: streamed, checked as it goes.
        ordered = _checked_in_order(path, chain([first], answers))
    else:
        # The export's annotation ids are its database's order of answers: rows sorted
        # in a spreadsheet go back in the order they were given.
        ordered = _in_id_order(path, [first, *answers])
    for answer in ordered:
        runs.check(answer, f"{path}:{answer.line}")
        yield from raters.announce(answer)
        yield answer.record


class _RunCheck:
    """A row that names the model of its item (an annotation export's `model` column)
    is refused when the item belongs to a run of another model (`store.runs`): the
    label was given for a response of that model, not for this one."""

    def __init__(self, query) -> None:
        self.query = query
        self._names: dict[str, tuple[set[str], str] | None] = {}

    def check(self, answer: _Answer, where: str) -> None:
        uid, model = answer.record.item_uid, answer.model
        if not model or self.query is None:
            return
        if uid not in self._names:
            rows = self.query(
                "SELECT i.model, json_extract(i.meta, '$.model_actual'), r.id,"
                " r.model_requested, r.model_actual FROM items i LEFT JOIN runs r"
                " ON r.id = i.run_id WHERE i.uid = ?", (uid,))
            if not rows or rows[0][2] is None:
                self._names[uid] = None  # no such item (the writer says so), or of no run
            else:
                item_model, served, run_id, requested, actual = rows[0]
                aliases = {a for (a,) in self.query(
                    "SELECT alias FROM run_aliases WHERE run_id = ?", (run_id,))}
                names = {n for n in (item_model, served, requested, actual) if n} | aliases
                self._names[uid] = (names, f"run {run_id} (model {requested or item_model})")
        known = self._names[uid]
        if known is not None and model not in known[0]:
            raise InputError(f"{where}: item {uid!r} is of {known[1]}, not of model {model!r}:"
                             " a label belongs to the run it was given for")


def _answers(path: Path) -> Iterator[_Answer]:
    with_ids = None
    describes_raters = False
    for line, row in _rows(path):
        where = f"{path}:{line}"
        if with_ids is None:
            missing = [c for c in REQUIRED if c not in row]
            if missing:
                raise InputError(f"{path}:{line}: missing column(s) {', '.join(missing)}; "
                                 f"expected item_id,rater,value[,question,rationale,confidence]")
            with_ids = "annotation_id" in row
            describes_raters = bool({"annotation_id", "rater_kind", "rater_role"} & set(row))
        answer = _answer(row, line, where)
        if not describes_raters:
            # A spreadsheet's lone `specialty` may well be the case's, row by row: the
            # profile columns describe raters in a file that says it describes them.
            answer.profile = {}
        if with_ids:
            answer.annotation_id = as_int(row.get("annotation_id"), "annotation_id", where)
            if answer.annotation_id is None or answer.annotation_id < 1:
                raise InputError(
                    f"{where}: field 'annotation_id' must be a whole number from 1, got "
                    f"{row.get('annotation_id')!r} (it orders each rater's answers; delete the "
                    "column to take the rows' order as time)")
            answer.supersedes = as_int(row.get("supersedes"), "supersedes", where)
            if row.get("current"):
                answer.current = as_bool(row["current"], "current", where)
        yield answer


def _answer(row: dict[str, str], line: int, where: str) -> _Answer:
    """One row as an answer and its rater, every field checked."""
    item_uid, rater = row["item_id"], row["rater"]
    if not item_uid:
        raise InputError(f"{where}: empty item_id")
    if not rater:
        raise InputError(f"{where}: empty rater")
    id_length(item_uid, "item_id", where)
    id_length(rater, "rater", where)
    status = row.get("status") or ("answered" if row["value"] else "")
    if not status:
        raise InputError(f"{where}: empty value; give a label, or status cannot_assess")
    if status not in STATUSES:
        raise InputError(f"{where}: status must be one of {', '.join(STATUSES)}, got {status!r}")
    if status == "skipped" and row["value"]:
        raise InputError(f"{where}: a skipped row has no value; got {row['value']!r}")
    confidence = as_int(row.get("confidence"), "confidence", where)
    if confidence is not None and not 1 <= confidence <= 5:
        raise InputError(f"{where}: confidence must be 1 to 5, got {confidence}")
    phase = row.get("phase") or "imported"
    if phase not in PHASES:
        raise InputError(f"{where}: phase must be one of {', '.join(PHASES)}, got {phase!r}")
    target = (row.get("target") or "").strip()
    severity = as_int(row.get("severity"), "severity", where)
    if target:
        number = target.removeprefix("step:")
        if not target.startswith("step:") or not number.isdigit() or int(number) < 1:
            raise InputError(f"{where}: target must be empty (the whole item) or step:N, "
                             f"got {target!r}")
        if _is_no_error(row["value"]) and severity is not None:
            raise InputError(f"{where}: a step marked no_error has no severity; got {severity}"
                             " (leave severity empty)")
        if not _is_no_error(row["value"]) and severity is None and status == "answered":
            raise InputError(f"{where}: a step error mark needs a severity, 1 to 5")
    if severity is not None:
        if not target:
            raise InputError(f"{where}: severity is for step marks: give target step:N")
        if not 1 <= severity <= 5:
            raise InputError(f"{where}: severity must be 1 to 5, got {severity}")
    kind = row.get("rater_kind") or "human"
    if kind not in ("human", "machine", "reference"):
        raise InputError(f"{where}: rater_kind must be human, machine or reference")
    record = AnnotationRecord(
        item_uid=item_uid, question_key=row.get("question") or "", rater=rater,
        value=row["value"] or None, status=status, rationale=row.get("rationale") or None,
        confidence=confidence, line=line, phase=phase, target=target,
        extra={"severity": severity} if severity is not None else {},
    )
    return _Answer(line, record, kind, not row.get("rater_kind"),
                   {c: row[c] for c in PROFILE if c in row}, model=row.get("model") or None)


PROFILE = ("rater_role", "specialty", "seniority")
"""The columns that describe a rater rather than an answer."""


def _rater_record(answer: _Answer) -> RaterRecord:
    """The rater as the row describes them: used only if the rater is new (the writer
    leaves an existing rater as it is). A privileged role is never taken from a file."""
    profile = answer.profile
    role = profile.get("rater_role") or None
    meta = {}
    if role in PRIVILEGED_ROLES:
        meta, role = {"role_not_granted": role}, None
    return rater_record_for(answer.record.rater, answer.rater_kind,
                            kind_assumed=answer.kind_assumed, role=role,
                            specialty=profile.get("specialty") or None,
                            seniority=profile.get("seniority") or None, meta=meta)


class _Raters:
    """Each rater's record once, before their first answer. Every row of a rater must
    describe them alike (`PROFILE`): which row's profile would a new rater get?"""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[str, _Answer] = {}

    def announce(self, answer: _Answer) -> Iterator[RaterRecord]:
        name = answer.record.rater
        first = self.seen.setdefault(name, answer)
        if first is answer:
            yield _rater_record(answer)
            return
        for column in PROFILE:
            was, now = first.profile.get(column, ""), answer.profile.get(column, "")
            if was != now:
                raise InputError(
                    f"{self.path}:{answer.line}: field {column!r} of rater {name!r} is {now!r};"
                    f" line {first.line} gives {was!r} (describe a rater alike on each row)")


def _ids_ascending(path: Path) -> bool:
    """Whether the file's annotation ids rise row by row (the export as written):
    one quick pass over that column alone. Anything else (a sorted spreadsheet, a
    repeated or unreadable id) is for `_in_id_order`, which orders and names it."""
    last = 0
    for _, row in _rows(path):
        try:
            number = int(row.get("annotation_id") or 0)
        except ValueError:
            return False
        if number <= last:
            return False
        last = number
    return True


def _checked_in_order(path: Path, answers: Iterator[_Answer]) -> Iterator[_Answer]:
    """`_in_id_order`'s checks on answers already in id order, as they stream
    past: only what the checks need is kept (each id's line and unit; each unit's
    last answer), not every row. A problem found at the end still stops the
    import: nothing is committed until the whole file is read."""
    seen: dict[int, tuple[int, int]] = {}
    """annotation id -> (line, its unit's hash; 0 for a withheld item)"""
    last: dict[int, tuple[int, int, bool | None, bool]] = {}
    """unit's hash -> its last answer: (annotation id, line, current, withheld)"""
    for a in answers:
        where = f"{path}:{a.line}"
        unit = hash(a.unit)  # a unit's four texts, kept once per answer, would be most of it
        if a.supersedes is not None:
            if a.supersedes >= a.annotation_id:
                raise InputError(f"{where}: field 'supersedes' {a.supersedes} is not an earlier "
                                 f"annotation than this one ({a.annotation_id})")
            old = seen.get(a.supersedes)
            if old is not None and old[1] != unit and not a.withheld and old[1] != 0:
                raise InputError(f"{where}: field 'supersedes' names annotation {a.supersedes}"
                                 f" (line {old[0]}), another rater's answer or another item,"
                                 " question or step")
        before = last.get(unit)
        if before is not None and before[2] and not before[3]:
            raise InputError(
                f"{path}:{before[1]}: field 'current' says annotation {before[0]} is the answer"
                f" in force, but annotation {a.annotation_id} (line {a.line}) of the same"
                " rater, item and question is later")
        seen[a.annotation_id] = (a.line, 0 if a.withheld else unit)
        last[unit] = (a.annotation_id, a.line, a.current, a.withheld)
        yield a
    for annotation_id, line, current, withheld in sorted(last.values()):
        if current is False and not withheld:
            raise InputError(
                f"{path}:{line}: field 'current' says annotation {annotation_id} was"
                " superseded, but no later answer of the same rater to this item and question is"
                " in the file: rows were left out, and importing it would change the answer in"
                " force; keep every row of the export (or delete the current column)")


def _in_id_order(path: Path, answers: list[_Answer]) -> list[_Answer]:
    """The answers in the order of their annotation ids, after checking that the ids
    are each on one row and agree with `supersedes` and `current`."""
    by_id: dict[int, _Answer] = {}
    for a in answers:
        twin = by_id.setdefault(a.annotation_id, a)
        if twin is not a:
            raise InputError(
                f"{path}:{a.line}: field 'annotation_id' {a.annotation_id} again: line {twin.line}"
                " has it (an annotation is one row; files from two databases go in one by one)")
    ordered = sorted(answers, key=lambda a: a.annotation_id)
    last: dict[tuple, _Answer] = {}
    for a in ordered:
        where = f"{path}:{a.line}"
        if a.supersedes is not None:
            if a.supersedes >= a.annotation_id:
                raise InputError(f"{where}: field 'supersedes' {a.supersedes} is not an earlier "
                                 f"annotation than this one ({a.annotation_id})")
            old = by_id.get(a.supersedes)
            if old is not None and old.unit != a.unit and not (a.withheld or old.withheld):
                raise InputError(f"{where}: field 'supersedes' names annotation {a.supersedes}"
                                 f" (line {old.line}), another rater's answer or another item,"
                                 " question or step")
        last[a.unit] = a
    for a in ordered:
        if a.current is None or a.withheld:
            continue
        in_force = last[a.unit] is a
        if a.current and not in_force:
            later = last[a.unit]
            raise InputError(
                f"{path}:{a.line}: field 'current' says annotation {a.annotation_id} is the answer"
                f" in force, but annotation {later.annotation_id} (line {later.line}) of the same"
                " rater, item and question is later")
        if not a.current and in_force:
            raise InputError(
                f"{path}:{a.line}: field 'current' says annotation {a.annotation_id} was"
                " superseded, but no later answer of the same rater to this item and question is"
                " in the file: rows were left out, and importing it would change the answer in"
                " force; keep every row of the export (or delete the current column)")
    return ordered


register(Format(
    "labels-long", "generic", read_labels_long,
    lambda p, f: {"item_id", "rater", "value"} <= f,
    "long-format labels CSV (or JSONL) item_id,rater,value[,question,rationale,confidence];"
    " the annotation export",
))
