"""Generic long-format labels CSV: `item_id,rater,value[,question,rationale,confidence]`.

Optional columns: `status` (answered | cannot_assess | skipped), `phase` (blind |
after_reveal | suggested; default imported), `rater_kind` (human |
machine | reference; default human, or the kind of an existing rater), and
for step-level error marks on an agent run `target` (`step:N`) with
`severity` (1 negligible .. 5 critical; required unless the value is
`no_error`).

For labels collected in a spreadsheet. A rater not yet known is created as a
human rater (or as the kind given by an optional `rater_kind` column). The
question defaults to the one asked of the item's kind; `value` may be a label
code, met / not met, or empty with `status` = cannot_assess.

The annotation export (`carelens export --what annotations`, CSV) goes back
in as it is: its other columns are ignored, a cell it quoted with a leading
apostrophe so that a spreadsheet would not run it as a formula (`'=...`,
`'-...`) is read as the text it quoted, and its `skipped` rows (a reviewer
passed, or a settled answer was withdrawn) are recorded as skips, with no
value, so that each rater's answer in force is the same as in the database
exported. Rows must stay in the export's order (oldest first) for that.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from review.sources.base import Format, ImportOptions, rater_record_for, register
from review.sources.fields import as_int
from review.sources.readers import read_csv
from store.records import AnnotationRecord, Record
from store.spreadsheet import unquote_cell
from store.writer import InputError

REQUIRED = ("item_id", "rater", "value")
STATUSES = ("answered", "cannot_assess", "skipped")
PHASES = ("imported", "blind", "after_reveal", "suggested")


def _is_no_error(value: str) -> bool:
    """Whether a step mark says the step has no error, in any spelling the
    trajectory-errors codebook takes."""
    from codebook import builtin_codebooks

    book = builtin_codebooks().get("trajectory-errors")
    try:
        return book is not None and book.normalise(value) == "no_error"
    except (KeyError, ValueError):
        return False


def read_labels_long(path: Path, options: ImportOptions) -> Iterator[Record]:
    announced: set[str] = set()
    first = True
    for line, quoted in read_csv(path):
        row = {k: unquote_cell(v) for k, v in quoted.items()}
        if first:
            missing = [c for c in REQUIRED if c not in row]
            if missing:
                raise InputError(f"{path}:1: missing column(s) {', '.join(missing)}; "
                                 f"expected item_id,rater,value[,question,rationale,confidence]")
            first = False
        where = f"{path}:{line}"
        item_uid, rater = row["item_id"], row["rater"]
        if not item_uid:
            raise InputError(f"{where}: empty item_id")
        if not rater:
            raise InputError(f"{where}: empty rater")
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
        assumed = not row.get("rater_kind")
        if kind not in ("human", "machine", "reference"):
            raise InputError(f"{where}: rater_kind must be human, machine or reference")
        if rater not in announced:
            announced.add(rater)
            yield rater_record_for(rater, kind, kind_assumed=assumed)
        yield AnnotationRecord(
            item_uid=item_uid, question_key=row.get("question") or "", rater=rater,
            value=row["value"] or None, status=status, rationale=row.get("rationale") or None,
            confidence=confidence, line=line, phase=phase, target=target,
            extra={"severity": severity} if severity is not None else {},
        )


register(Format(
    "labels-long", "generic", read_labels_long,
    lambda p, f: {"item_id", "rater", "value"} <= f,
    "long-format labels CSV item_id,rater,value[,question,rationale,confidence]",
))
