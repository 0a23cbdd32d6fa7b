"""The import pipeline shared by every format.

An importer is a function `read(path, options) -> Iterator[Record]` that
parses and validates a file row by row, registered under a format name with
a `detect(path, fields)` test. `import_file` runs it inside one transaction:
a bad row stops the import with `file:line: what is wrong` and the database
is left exactly as it was; the same file imported again changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store import Store, utcnow
from store.records import RaterRecord, Record
from store.writer import InputError, RecordWriter

Reader = Callable[[Path, "ImportOptions"], Iterator[Record]]
Detector = Callable[[Path, set[str]], bool]


@dataclass
class ImportOptions:
    rater: str | None = None
    """Name of the rater whose labels the file carries (machine rater files)."""
    dataset: str | None = None
    """Dataset name for the items; each format has a default."""
    actor: str = "cli"
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Format:
    name: str
    family: str
    """Dataset kind the format belongs to, and the default dataset name."""
    read: Reader
    detect: Detector
    description: str
    takes_directory: bool = False


@dataclass
class ImportResult:
    path: str
    format: str
    rows: int
    items: int
    annotations: int
    skipped: int
    already_imported: bool = False

    def summary(self) -> str:
        if self.already_imported:
            return f"{self.path}: already imported as {self.format}; nothing changed"
        return (
            f"{self.path}: {self.format}: {self.rows} rows, {self.items} new items, "
            f"{self.annotations} new annotations"
            + (f", {self.skipped} unchanged" if self.skipped else "")
        )


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    FORMATS[fmt.name] = fmt
    return fmt


def detect_format(path: Path) -> Format:
    from review.sources.readers import header_fields

    fields = set() if path.is_dir() else header_fields(path)
    for fmt in FORMATS.values():
        if fmt.takes_directory != path.is_dir():
            continue
        if fmt.detect(path, fields):
            return fmt
    shown = ", ".join(sorted(fields)) or "none"
    raise InputError(
        f"{path}: cannot tell the format from its content (fields: {shown}); "
        f"give --format, one of: {', '.join(FORMATS)}"
    )


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in paths:
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode())
        with p.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


class _Counting:
    """Wraps a record stream to count the source rows it reports."""

    def __init__(self, records: Iterator[Record]):
        self.records = records
        self.rows = 0

    def __iter__(self) -> Iterator[Record]:
        last = None
        for record in self.records:
            line = getattr(record, "line", None)
            if line is not None and line != last:
                self.rows += 1
                last = line
            yield record


def import_file(store: Store, path: str | Path, fmt: str | None = None,
                options: ImportOptions | None = None,
                validate: Callable[[str, str | None], str | None] | None = None) -> ImportResult:
    """Import one file (or Harbor directory) as one transaction."""
    path = Path(path)
    options = options or ImportOptions()
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if fmt is None:
        format_ = detect_format(path)
    elif fmt in FORMATS:
        format_ = FORMATS[fmt]
    else:
        raise InputError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    if validate is None:
        from review.answers import normalise_value as validate
    digest = file_digest(path)
    with store.transaction() as conn:
        rater_id = None
        if options.rater:
            row = conn.execute("SELECT id FROM raters WHERE name = ?", (options.rater,)).fetchone()
            rater_id = row[0] if row else None
        seen = conn.execute(
            "SELECT id FROM imports WHERE sha256 = ? AND format = ? AND rater_id IS ?",
            (digest, format_.name, rater_id),
        ).fetchone()
        if seen is not None:
            return ImportResult(str(path), format_.name, 0, 0, 0, 0, already_imported=True)
        cur = conn.execute(
            "INSERT INTO imports (path, format, sha256, n_rows, n_items, n_annotations, actor,"
            " imported_at) VALUES (?,?,?,0,0,0,?,?)",
            (str(path), format_.name, digest, options.actor, utcnow()),
        )
        import_id = cur.lastrowid
        writer = RecordWriter(conn, source="import", import_id=import_id, where=str(path),
                              validate=validate)
        records = _Counting(format_.read(path, options))
        writer.write(records)
        if options.rater:
            rater_id = writer.rater_id(options.rater)
        dataset_id = next(iter(writer._datasets.values()), None)
        conn.execute(
            "UPDATE imports SET dataset_id = ?, rater_id = ?, n_rows = ?, n_items = ?,"
            " n_annotations = ? WHERE id = ?",
            (dataset_id, rater_id, records.rows, writer.n_items, writer.n_annotations, import_id),
        )
        store.audit(options.actor, "import", "imports", import_id, None, {
            "path": str(path), "format": format_.name, "rows": records.rows,
            "items": writer.n_items, "annotations": writer.n_annotations,
        })
    return ImportResult(str(path), format_.name, records.rows, writer.n_items,
                        writer.n_annotations, writer.n_skipped)


def rater_record_for(name: str, kind: str, **kw: Any) -> RaterRecord:
    """A rater record whose provider/model are read from a name like
    `anthropic:claude-x@v2` where the name has that shape."""
    provider = model = version = None
    if kind == "machine":
        base, _, version = name.partition("@")
        provider, sep, model = base.partition(":")
        if not sep:
            provider, model = None, base
    return RaterRecord(name=name, kind=kind, provider=kw.pop("provider", provider),
                       model=kw.pop("model", model),
                       prompt_version=kw.pop("prompt_version", version or None), **kw)
