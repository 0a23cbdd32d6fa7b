"""Row readers for JSONL, CSV and Parquet, streamed, with line numbers.

Every reader yields `(line, row)` where `line` is what an error message
should name: the 1-based line of a JSONL or CSV file (the header is line 1),
or the 1-based row of a Parquet file. Nothing is read whole into memory.

Each reader keeps to the limits of the import it serves (`Limits`: rows and
bytes per file, which a user can raise), refuses text holding a NUL
character, and notes where it is (`place`), so that a row that fails in a
way no format foresaw can still be named by its line.
"""

from __future__ import annotations

import csv
import json
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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

QUOTED = 200
"""Characters of a value an error message quotes: a message is one line, and a
20 MB value is not read in a terminal."""


def quote(value: Any, limit: int = QUOTED) -> str:
    """`repr(value)`, cut to about `limit` characters, saying how long it was."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


@dataclass(frozen=True)
class Limits:
    """How much one file may bring in. A small compressed file can stand for
    far more than its size (a Parquet file of 8 KB can hold a million repeated
    rows, 400 MB once stored): past these the file is refused, naming the
    limit, which the user can raise for a file they trust."""

    max_rows: int = 1_000_000
    """Rows of one file."""
    max_bytes: int = 4_000_000_000
    """Bytes of one file's rows as read: a text file's size; a Parquet file's
    after decompression."""

    def rows_exceeded(self, path: Path | str, rows: int | None = None) -> InputError:
        many = f"{rows:,} rows" if rows is not None else f"more than {self.max_rows:,} rows"
        return InputError(
            f"{path}: {many}, over the limit of {self.max_rows:,} rows a file (raise it with"
            " --max-rows on the command line, or 'Rows per file, at most' on the Data screen)")

    def bytes_exceeded(self, path: Path | str, what: str) -> InputError:
        return InputError(
            f"{path}: {what}, over the limit of {self.max_bytes:,} bytes a file (raise it with"
            " --max-bytes on the command line, or 'Megabytes per file, at most' on the Data"
            " screen)")


_state = threading.local()


def current_limits() -> Limits:
    """The limits of the import under way on this thread (the defaults outside one)."""
    return getattr(_state, "limits", None) or Limits()


class reading:
    """`with reading(limits):` an import's reading, on this thread: the readers
    keep to `limits`, and `place()` names the row last read."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()

    def __enter__(self) -> reading:
        self._saved = (getattr(_state, "limits", None), getattr(_state, "frames", None),
                       getattr(_state, "spent", None))
        _state.limits, _state.frames, _state.spent = self.limits, [], 0
        return self

    def __exit__(self, *exc: object) -> None:
        _state.limits, _state.frames, _state.spent = self._saved


def read_limited(path: Path, where: str) -> bytes:
    """The bytes of one file of a folder an import reads (a Harbor trial's
    trajectory, log or result), refused in one line naming `where` when it, or
    it with the files read before it in the same import, is past the byte limit:
    a job is one source, as a file is, and its files are read whole."""
    size = path.stat().st_size
    limits = current_limits()
    spent = getattr(_state, "spent", None) or 0
    if spent + size > limits.max_bytes:
        what = f"{size:,} bytes" if spent == 0 else \
            f"{size:,} bytes, after {spent:,} bytes of the files read before it"
        raise limits.bytes_exceeded(where, what)
    data = path.read_bytes()
    if getattr(_state, "spent", None) is not None:
        _state.spent = spent + len(data)
    return data


def _track(path: Path, counter: str) -> None:
    """Note the calling reader's frame: `place()` reads its `counter` (the
    line it is at) when a row fails. Nothing is done per row: a suspended
    generator's locals are there to be read."""
    frames = getattr(_state, "frames", None)
    if frames is not None:
        frames.append((path, sys._getframe(1), counter))


def place() -> tuple[Path, int] | None:
    """(file, line) of the row a reader of the current import gave last."""
    for path, frame, counter in reversed(getattr(_state, "frames", None) or ()):
        line = frame.f_locals.get(counter)
        if isinstance(line, int) and line > 0:
            return path, line
    return None


def _nul_field(row: Any, field: str = "") -> str | None:
    """The field (a dotted path) whose text or name holds a NUL character, or None."""
    t = type(row)
    if t is str:
        return field if "\x00" in row else None
    if t is dict:
        for key, value in row.items():
            name = f"{field}.{key}" if field else str(key)
            if "\x00" in str(key):
                return name
            found = _nul_field(value, name)
            if found is not None:
                return found
    elif t is list:
        for i, value in enumerate(row):
            found = _nul_field(value, f"{field}[{i}]")
            if found is not None:
                return found
    return None


def _refuse_nul(path: Path, line: int, row: Any) -> None:
    """A row whose text holds a NUL character is refused: SQLite's JSON and
    text functions stop at it, so what follows would silently be lost (an id
    could no longer be found, a reply shown cut short)."""
    field = _nul_field(row)
    if field is not None:
        raise InputError(f"{path}:{line}: field {field!r} holds a NUL character (U+0000); text"
                         " after it would be lost: remove it")


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


def non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """(where inside `value`, as `.key` / `[i]`, the number) of the first NaN or
    ±Infinity in a parsed value, or None. Cheap for the common case: a value
    with no float in it is walked without building a path."""
    t = type(value)
    if t is float:
        return None if value - value == 0.0 else (path, value)  # inf - inf and nan - nan: nan
    if t is dict:
        for key, v in value.items():
            tv = type(v)
            if tv is str or tv is int or tv is bool or v is None:
                continue
            found = non_finite(v, f"{path}.{key}")
            if found is not None:
                return found
    elif t is list:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str or tv is int or tv is bool or v is None:
                continue
            found = non_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def loads_strict(text: str | bytes, where: str) -> Any:
    """JSON text as Python's parser reads it, refused in one line naming the place
    when it holds NaN, Infinity or a number too large for a float (1e999): JSON
    has no such number, and the database would keep null. (orjson refuses them
    too: this is the reader for what orjson could not read.)"""
    odd: list[str] = []

    def constant(name: str) -> float:
        odd.append(name)
        return float(name)

    def number(text: str) -> float:
        value = float(text)
        if value - value != 0.0:
            odd.append(text)
        return value

    value = json.loads(text, parse_constant=constant, parse_float=number)
    if odd:
        found = non_finite(value)
        inner = (found[0].lstrip(".") or "the value") if found else "a value"
        raise InputError(f"{where}: {inner}: {odd[0]} is not a number JSON can hold (it would be"
                         " stored as null); write null for a value that is missing, or the number")
    return value


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
    limits = current_limits()
    _check_size(path, limits)
    line_no = 0
    _track(path, "line_no")
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
            if b"\\u0000" in line:
                _refuse_nul(path, line_no, row)
            if line_no > limits.max_rows:
                raise limits.rows_exceeded(path)
            yield line_no, row


def _check_size(path: Path, limits: Limits) -> None:
    """A text file larger than the byte limit is refused before it is read."""
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise limits.bytes_exceeded(path, f"{size:,} bytes")


def read_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a CSV (or, by its suffix, TSV) file as dicts by the header's
    names, stripped of surrounding spaces; a row with fewer fields than the header
    has None for the rest. A last row cut short (fewer fields, and no line end:
    the file was cut off in the middle of it) is refused, naming its line."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    limits = current_limits()
    _check_size(path, limits)
    cut = not _ends_a_line(path)
    nul = _holds_nul(path)
    line_no = 0
    _track(path, "line_no")
    with path.open("r", encoding="utf-8-sig", newline="") as fh:
        # strict: a quoted field the file never closes (a cut-off file) is an
        # error, not a value that runs silently to the end of the file.
        reader = csv.reader(fh, delimiter=delimiter, strict=True)
        try:
            header = next(reader, None)
            if not header:
                raise InputError(f"{path}:1: empty file: expected a header row")
            names = [name.strip() for name in header]
            width = len(names)
            line_no = reader.line_num
            short = None
            for fields in reader:
                if short is not None:  # not the last row: a short row, taken as before
                    yield short[0], short[1]
                    short = None
                line_no = reader.line_num
                if not fields:
                    continue  # a blank line
                n = len(fields)
                if n > width:
                    raise InputError(f"{path}:{line_no}: more fields than the header names")
                if line_no > limits.max_rows + 1:
                    raise limits.rows_exceeded(path)
                row = {k: v.strip() for k, v in zip(names, fields, strict=False)}
                if nul:
                    _refuse_nul(path, line_no, row)
                if n < width:
                    row.update(dict.fromkeys(names[n:]))
                    if cut:
                        short = (line_no, row, n, width)
                        continue
                yield line_no, row
            if short is not None:
                line_no, _, n, width = short
                raise InputError(f"{path}:{line_no}: the file ends in the middle of this row"
                                 f" ({n} of the header's {width} fields, and no line end):"
                                 " is the file cut off?")
        except csv.Error as exc:
            what = ("a quoted field is never closed (is the file cut off?)"
                    if "unexpected end of data" in str(exc) else f"not valid CSV: {exc}")
            raise InputError(f"{path}:{line_no + 1}: {what}") from None
        except UnicodeDecodeError:
            raise not_utf8(path) from None


def _holds_nul(path: Path) -> bool:
    """Whether a file holds a NUL byte anywhere (read in large blocks: fast)."""
    with path.open("rb") as fh:
        return any(b"\0" in block for block in iter(lambda: fh.read(1 << 20), b""))


def _ends_a_line(path: Path) -> bool:
    """Whether the file's last byte ends a line (or the file is empty)."""
    with path.open("rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) in (b"\n", b"\r")


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


PARQUET_SLICE_BYTES = 64 << 20
"""Bytes of a Parquet batch turned into Python rows at a time: a batch of a few
thousand large rows is read in slices, so memory holds about this much of it."""
FIXED_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
"""Bytes counted for a value of each Parquet physical type once read (a boolean as a
byte: more than Arrow's bit, less than Python's object)."""


def read_parquet(path: Path, batch_size: int = 2048) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a Parquet file. A file of more rows than the limit is refused
    before any is read (its footer says how many); a file that expands past the
    byte limit (`Limits.max_bytes`) is refused before any row is given, and is
    measured again as its rows are made; a damaged page, a value Python cannot
    hold (a date beyond year 9999) or text with a NUL character is refused naming
    the rows it is in.

    Decompression bombs. Bytes are counted as the rows hold them once read, every
    column (those no importer uses too), dictionary-encoded values once per row
    that refers to them: Parquet stores a repeated value once, and a 12 kB file
    whose extra column repeats a 1 MB value in 5,000 rows holds 5 GB. Three
    counts, each refusing in one line naming the file and the limit:
    1. the footer's own account (each column chunk's uncompressed pages, and its
       values at their width): a file that says it is larger is refused at once;
    2. before any row is given, the file is read once with its text columns kept
       dictionary-encoded (`read_dictionary`: a repeated value is not copied) and
       the bytes its rows would hold summed batch by batch (`_row_bytes`), unless
       the footer shows that no dictionary could take it past the limit;
    3. as the rows are made, the same count, batch by batch, so a footer that
       lies cannot take the file past the limit either; a batch is made into
       Python rows a slice of about PARQUET_SLICE_BYTES at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    limits = current_limits()
    try:
        pf = pq.ParquetFile(path)
        total = pf.metadata.num_rows
        texts = _text_leaves(pf)
        if texts:
            pf = pq.ParquetFile(path, read_dictionary=texts)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"{path}: not a readable Parquet file: {_one_line(exc)}") from None
    if total > limits.max_rows:
        raise limits.rows_exceeded(path, total)
    _check_expansion(path, pf, limits, batch_size)
    row_no = 0
    read = 0
    _track(path, "row_no")
    batches = pf.iter_batches(batch_size=batch_size)
    while True:
        first = row_no + 1
        try:
            batch = next(batches, None)
            if batch is None:
                break
            size = _row_bytes(batch)
            read += size
            if read > limits.max_bytes:
                raise _expanded_past(path, limits, first + batch.num_rows - 1)
            nul = _has_nul(batch)
            slices = slices_of(batch, size)
            rows = slices.pop(0).to_pylist() if slices else []
        except InputError:
            raise
        except (pa.ArrowException, OSError, ValueError, OverflowError, KeyError) as exc:
            last = min(first + batch_size - 1, total)
            raise InputError(f"{path}: rows {first:,} to {last:,}: cannot be read"
                             f" ({_one_line(exc)}); is the file damaged?") from None
        while True:
            for row in rows:
                row_no += 1
                if nul:
                    _refuse_nul(path, row_no, row)
                yield row_no, row
            if not slices:
                break
            try:
                rows = slices[0].to_pylist()
            except (pa.ArrowException, ValueError, OverflowError) as exc:
                raise InputError(f"{path}: rows {row_no + 1:,} to"
                                 f" {row_no + slices[0].num_rows:,}: cannot be read"
                                 f" ({_one_line(exc)}); is the file damaged?") from None
            slices.pop(0)


def slices_of(batch: Any, size: int) -> list[Any]:
    """A record batch whose rows hold `size` bytes, as slices of about
    PARQUET_SLICE_BYTES each (at least a row each), to be made into rows in turn."""
    step = max(1, min(batch.num_rows, batch.num_rows * PARQUET_SLICE_BYTES // max(size, 1)))
    return [batch.slice(k, step) for k in range(0, batch.num_rows, step)]


def _text_leaves(pf: Any) -> list[str]:
    """The file's text and binary columns (nested ones by their leaf path, e.g.
    `turns.list.element`), read dictionary-encoded so a repeated value is held once."""
    schema = pf.metadata.schema
    out = []
    for i in range(len(schema)):
        column = schema.column(i)
        if column.physical_type == "BYTE_ARRAY" and column.logical_type.type in ("STRING", "NONE"):
            out.append(column.path)
    return out


def _expanded_past(path: Path, limits: Limits, row: int | None = None,
                   footer: int | None = None) -> InputError:
    if footer is not None:
        what = f"{footer:,} bytes once decompressed, as its footer describes its pages"
    else:
        what = (f"more than {limits.max_bytes:,} bytes once decompressed"
                f" (by row {row:,}; a value its dictionary repeats counted in every row that"
                " holds it)")
    return limits.bytes_exceeded(path, what)


def _check_expansion(path: Path, pf: Any, limits: Limits, batch_size: int) -> None:
    """Counts 1 and 2 of `read_parquet`: refuse, before any row is given, a file
    whose rows would hold more than the byte limit."""
    import pyarrow as pa

    meta = pf.metadata
    schema = meta.schema
    widths = [FIXED_WIDTH.get(schema.column(c).physical_type, 0) or
              (schema.column(c).length or 0 if schema.column(c).physical_type
               == "FIXED_LEN_BYTE_ARRAY" else 0) for c in range(len(schema))]
    footer = 0
    bound = 0
    """The most the rows could hold: each text value as long as its whole column
    chunk (a dictionary page is part of its chunk)."""
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            width = widths[c] if c < len(widths) else 0
            held = max(chunk.total_uncompressed_size, chunk.num_values * width)
            footer += held
            bound += chunk.num_values * max(chunk.total_uncompressed_size, 1) \
                if chunk.physical_type == "BYTE_ARRAY" else held
    if footer > limits.max_bytes:
        raise _expanded_past(path, limits, footer=footer)
    if bound <= limits.max_bytes:
        return  # no dictionary could take it past the limit: the rows are counted as made
    read = rows = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_size):
            rows += batch.num_rows
            read += _row_bytes(batch)
            if read > limits.max_bytes:
                raise _expanded_past(path, limits, rows)
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError, OverflowError, KeyError):
        return  # a damaged page: refused, naming its rows, when the rows are read


def _row_bytes(batch: Any) -> int:
    """The bytes a record batch's rows hold once read, every column: a
    dictionary-encoded value counted in each row that refers to it."""
    return sum(_array_bytes(column) for column in batch.columns)


def _array_bytes(array: Any) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = array.type
    if pa.types.is_dictionary(t):
        values = array.dictionary
        if len(array) == 0 or len(values) == 0:
            return array.indices.nbytes
        vt = values.type
        if (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_binary(vt)
                or pa.types.is_large_binary(vt)):
            each = pc.binary_length(values)
        else:  # a value of another type: its dictionary's size over its values, each
            each = pa.array([_array_bytes(values) // len(values) + 1] * len(values), pa.int64())
        held = pc.sum(pc.take(each, array.indices)).as_py() or 0
        return int(held) + array.indices.nbytes + 4 * len(array)
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_map(t)):
        return _array_bytes(array.flatten()) + 8 * len(array)
    if pa.types.is_struct(t):
        return sum(_array_bytes(f) for f in array.flatten()) + len(array) // 8 + 1
    return array.nbytes


def _has_nul(batch: Any) -> bool:
    """Whether any text in a record batch (nested lists and structs too) holds a NUL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def texts(array: Any) -> Iterator[Any]:
        t = array.type
        if pa.types.is_dictionary(t):
            yield from texts(array.dictionary)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            yield array
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from texts(array.flatten())
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from texts(array.field(i))
        elif pa.types.is_map(t):
            yield from texts(array.keys)
            yield from texts(array.items)

    for column in batch.columns:
        for array in texts(column):
            if len(array) and pc.any(pc.match_substring(array, "\x00")).as_py():
                return True
    return False


def _one_line(exc: BaseException) -> str:
    """An exception's text on one line, cut to a readable length."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 2 * QUOTED else text[:2 * QUOTED] + "…"


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
            raise InputError(f"{path}: not a readable Parquet file: {_one_line(exc)}") from None
    _check_size(path, current_limits())  # its first line may be all of it
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
