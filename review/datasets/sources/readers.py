"""Row readers for JSONL, CSV and Parquet, streamed, with line numbers.

Every reader yields `(line, row)` where `line` is what an error message
should name: the 1-based line of a JSONL or CSV file (the header is line 1),
or the 1-based row of a Parquet file. Nothing is read whole into memory.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from store.writer import InputError

csv.field_size_limit(1 << 30)


READ_BUFFER = 1 << 18
"""Bytes read from a file at a time. Python's default (8 KiB) holds about
three lines of a generations file: asking the operating system for more
every few lines made merely reading the lines of a full study take three
times as long as with this (24 against 8 ms for 52 MB; the import as a whole
went from 0.28 to 0.26 s, `bench/bench_import_carebench.py`)."""

BOM = b"\xef\xbb\xbf"
"""The byte-order mark some editors write at the start of a UTF-8 file."""


def file_kind(path: Path) -> str:
    """jsonl | csv | parquet, from the suffix, else from the first bytes."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    with path.open("rb") as fh:
        head = fh.read(8)
    if head[:4] == b"PAR1":
        return "parquet"
    return "jsonl" if head.removeprefix(BOM).lstrip()[:1] in (b"{", b"[") else "csv"


def _slow_row(path: Path, line_no: int, line: bytes) -> Any:
    """A line orjson refused or may have misread: a blank line (None), a
    byte-order mark, what Python's json writes but orjson does not (NaN,
    Infinity: read, and stored as null, as JSON has neither), an integer beyond
    64 bits (which orjson reads as a float: an id would change), or an error
    that names the line and what is wrong."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}:{line_no}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
    if line_no == 1:
        text = text.removeprefix("\ufeff")
    if not text.strip():
        return None
    text = text.rstrip("\r\n")  # an error in a cut-off line is placed on that line
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{line_no}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    return mend_surrogates(value) if "\\u" in text else value


def _mend(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # A pair written as two escapes is joined; a lone half becomes U+FFFD.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def mend_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its text replaced by U+FFFD (the
    replacement character). JSON may escape half of a character (Python's
    json writes a reply cut inside an emoji as "\\ud83d"); such text cannot
    be stored as UTF-8 or shown, and the half carries no meaning of its own."""
    t = type(value)
    if t is str:
        return _mend(value)
    if t is list:
        return [mend_surrogates(v) for v in value]
    if t is dict:
        return {_mend(k): mend_surrogates(v) for k, v in value.items()}
    return value


_HUGE = 9.2e18
"""orjson reads an integer outside the 64-bit range as a float: a float this large
sends the line to the standard parser, which keeps the integer exact."""


def _has_huge_float(value: Any) -> bool:
    t = type(value)
    if t is float:
        return not -_HUGE < value < _HUGE
    if t is dict:
        value = value.values()
    elif t is not list:
        return False
    for v in value:
        tv = type(v)
        if tv is not str and tv is not int and tv is not bool and v is not None and _has_huge_float(v):
            return True
    return False


def _lines(fh) -> Iterable[bytes]:
    """The file's lines (the file object itself, read line by line, unless its
    lines end in a bare carriage return, as old Mac editors wrote: then split
    on those)."""
    head = fh.peek(1 << 16)[: 1 << 16]
    if not (b"\r" in head and b"\n" not in head):
        return fh
    return _cr_lines(fh)


def _cr_lines(fh) -> Iterator[bytes]:
    rest = b""
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        *lines, rest = (rest + chunk).split(b"\r")
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


def _has_huge_float_in(row: dict[str, Any], only: frozenset[str]) -> bool:
    for key, v in row.items():
        tv = type(v)
        if tv is not str and tv is not int and tv is not bool and v is not None and key in only \
                and _has_huge_float(v):
            return True
    return False


def read_jsonl(path: Path, only: Iterable[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """`only`: the top-level fields the caller keeps, if it keeps only some.
    Only those are searched for a number orjson may have misread (see
    `_has_huge_float`): a field that is never stored cannot carry a changed
    value into the database, and skipping, say, a generation's copy of the
    conversation saves a walk through every message of every row."""
    loads, error = orjson.loads, orjson.JSONDecodeError  # the hot loop of every JSONL import
    kept = None if only is None else frozenset(only)
    with path.open("rb", buffering=READ_BUFFER) as fh:
        for line_no, line in enumerate(_lines(fh), start=1):
            try:
                row = loads(line)
                if _has_huge_float(row) if kept is None else (
                        type(row) is dict and _has_huge_float_in(row, kept)):
                    row = _slow_row(path, line_no, line)
            except error:
                row = _slow_row(path, line_no, line)
                if row is None:
                    continue
            if type(row) is not dict:
                raise InputError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            yield line_no, row


def read_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open("r", encoding="utf-8-sig", newline="") as fh:
        # strict: a quoted field the file never closes (a cut-off file) is an
        # error, not a value that runs silently to the end of the file.
        reader = csv.DictReader(fh, delimiter=delimiter, strict=True)
        line_no = 0
        try:
            if not reader.fieldnames:
                raise InputError(f"{path}:1: empty file: expected a header row")
            reader.fieldnames = [name.strip() for name in reader.fieldnames]
            line_no = reader.line_num
            for row in reader:
                line_no = reader.line_num
                if None in row:
                    raise InputError(f"{path}:{line_no}: more fields than the header names")
                yield line_no, {k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()}
        except csv.Error as exc:
            what = ("a quoted field is never closed (is the file cut off?)"
                    if "unexpected end of data" in str(exc) else f"not valid CSV: {exc}")
            raise InputError(f"{path}:{line_no + 1}: {what}") from None
        except UnicodeDecodeError:
            raise not_utf8(path) from None


def not_utf8(path: Path) -> InputError:
    """The error for a text file that is not UTF-8, naming the first line that is not."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return InputError(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the"
                                  " line); save the file as UTF-8")
    return InputError(f"{path}: not UTF-8 text; save the file as UTF-8")


def read_parquet(path: Path, batch_size: int = 2048) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"{path}: not a readable Parquet file: {exc}") from None
    row_no = 0
    for batch in pf.iter_batches(batch_size=batch_size):
        for row in batch.to_pylist():
            row_no += 1
            yield row_no, row


def read_rows(path: Path, only: Iterable[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a JSONL, CSV or Parquet file; `only` as in `read_jsonl`."""
    kind = file_kind(path)
    if kind == "parquet":
        return read_parquet(path)
    if kind == "csv":
        return read_csv(path)
    return read_jsonl(path, only)


def header_fields(path: Path) -> set[str]:
    """Field names of the first row, for format detection."""
    kind = file_kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return set(pq.ParquetFile(path).schema_arrow.names)
        except Exception as exc:
            raise InputError(f"{path}: not a readable Parquet file: {exc}") from None
    if kind == "csv":
        with path.open("r", encoding="utf-8-sig", newline="") as fh:
            first = fh.readline()
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        return {f.strip() for f in next(csv.reader([first], delimiter=delimiter), [])}
    with path.open("r", encoding="utf-8-sig") as fh:
        for line in fh:
            if line.strip():
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    return set()
                return set(row) if isinstance(row, dict) else set()
    return set()
