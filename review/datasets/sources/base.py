"""The import pipeline shared by every format.

An importer is a function `read(path, options) -> Iterator[Record]` that
parses and validates a file row by row, registered under a format name with
a `detect(path, fields)` test. `import_file` runs it inside one transaction:
a bad row stops the import with `file:line: what is wrong` and the database
is left exactly as it was; the same file imported again changes nothing.

Whatever is wrong with the input, the caller hears one InputError of one line:
a path that is not a regular file or folder (a FIFO would block for ever) is
refused before anything is read, a file past the limits (`readers.Limits`)
is refused, a file with no rows is refused, values are quoted to about 200
characters, and a row that fails in a way its importer did not foresee is
named by its line (`readers.place`) rather than by a traceback.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from review.datasets.sources.readers import QUOTED, Limits, place, reading
from review.datasets.sources.rules import ImportRules
from review.team.access import require
from review.team.reviewers import Reviewer
from review.text import plural
from store import Store, utcnow
from store.records import RaterRecord, Record
from store.writer import MAX_ID_CHARS, InputError, RecordWriter, too_long

Reader = Callable[[Path, "ImportOptions"], Iterator[Record]]
Detector = Callable[[Path, set[str]], bool]
Progress = Callable[[str, int, "int | None"], None]
"""(phase, done, total): 'rows' - rows read so far (total unknown), every
few thousand rows; 'index' - items added to the search index of those due."""
PROGRESS_ROWS = 2048


class _Guard:
    """Whether the file was imported before: `poll()` checks once the file's
    digest is ready (it is computed while the rows are read), `final()`
    makes sure it was checked. Raises _AlreadyImported."""

    def __init__(self, check: Callable[[], None], ready: Callable[[], bool]):
        self._check, self._ready = check, ready

    def poll(self) -> None:
        if self._check is not None and self._ready():
            self.final()

    def final(self) -> None:
        if self._check is not None:
            check, self._check = self._check, None
            check()


@dataclass
class ImportOptions:
    rater: str | None = None
    """Name of the rater whose labels the file carries (machine rater files)."""
    dataset: str | None = None
    """Dataset name for the items; each format has a default."""
    actor: str = "cli"
    """Who imports, as the audit log names them: a person (the app), or the command and
    the account that ran it (`cli:alice`)."""
    replace: bool = False
    """Allow the file to replace answers in force of raters who already exist (each
    audited with its old and new value); without it such a row is refused
    (`review.datasets.sources.rules`)."""
    by: Reviewer | None = None
    """Who imports, in the app (None: the command line's operator)."""
    server: bool = False
    """Whether in server mode, where importing (and `replace`) is an admin's
    (`review.team.access`): anyone else is refused (NotAllowed)."""
    extra: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    """How the file is recorded and reported, when not by its path (an upload's own
    name, a hub file's `hf:` name): messages name it so, not by its path here."""
    left_out: list[str] = field(default_factory=list)
    """What the reader left out of the source, each in words (a Harbor trial still
    running); `import_file` reports it in the ImportResult."""
    query: Callable[[str, tuple], list[Any]] | None = None
    """Set by `import_file` for the reader: a read-only query of the database as
    the import's transaction sees it (`query(sql, params)` -> rows). A reader
    that labels items an earlier file brought (CARE-Bench mapped responses) uses
    it to find which of a row's names the item was imported under."""
    limits: Limits = field(default_factory=Limits)
    """Rows and bytes one file may bring in (see `readers.Limits`)."""
    attempt: int | None = None
    """Which attempt of its run(s) the file holds, when it repeats a run imported before
    (`store.runs`): part of each run's identity. None: what the file says, else the first."""


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
    seconds: float = 0.0
    """From the start to the commit: the rows are stored and can be reviewed."""
    indexed: int = 0
    """Items whose text was added to the search index after the commit."""
    completed: int = 0
    """Items an earlier file had only named (placeholders) that this one filled in."""
    index_seconds: float = 0.0
    left_out: list[str] = field(default_factory=list)
    """Parts of the source not imported, each with why (a Harbor trial still running)."""
    replaced: int = 0
    """Answers in force of raters who existed that this import replaced (`replace`)."""
    notes: list[str] = field(default_factory=list)
    """What else the summary says, each in words (items kept in the run another file
    brought them with)."""

    def summary(self) -> str:
        if self.already_imported:
            return f"{self.path}: already imported as {self.format}; nothing changed"
        return (self._summary()
                + (f"; left out: {'; '.join(self.left_out)}" if self.left_out else "")
                + "".join(f"; {note}" for note in self.notes))

    def _summary(self) -> str:
        return (
            f"{self.path}: {self.format}: {plural(self.rows, 'row')}, "
            f"{plural(self.items, 'new item')}, "
            + (f"{self.completed:,} filled in (named by an earlier file), " if self.completed else "")
            + plural(self.annotations, "new annotation")
            + (f" ({self.replaced:,} replacing answers in force, audited)" if self.replaced else "")
            + (f", {self.skipped:,} unchanged" if self.skipped else "")
            + f" ({self.seconds:.1f} s"
            + (f"; search index {plural(self.indexed, 'item')}, {self.index_seconds:.1f} s"
               if self.indexed else "")
            + ")"
        )


FORMATS: dict[str, Format] = {}

AUTO = "auto"
"""The format word for "detect it from the file" (`detect_format`), as no format
given: what the conformance corpus's MANIFEST.tsv and `carelens import --format
auto` say."""


def register(fmt: Format) -> Format:
    FORMATS[fmt.name] = fmt
    return fmt


def detect_format(path: Path) -> Format:
    from review.datasets.sources.readers import header_fields

    fields = set() if path.is_dir() else header_fields(path)
    if not fields and not path.is_dir() and _blank(path):
        raise InputError(f"{path}: empty file: it holds no rows")
    for fmt in FORMATS.values():
        if fmt.takes_directory != path.is_dir():
            continue
        if fmt.detect(path, fields):
            return fmt
    shown = ", ".join(sorted(fields)) or "none"
    raise InputError(
        f"{path}: cannot tell the format from its content (fields: {shown}); "
        "choose its format (--format on the command line, the Format box on the Data screen),"
        f" one of: {', '.join(FORMATS)}"
    )


def _blank(path: Path) -> bool:
    """Whether a file holds nothing but white space (and perhaps a byte-order mark)."""
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
        more = fh.read(1)
    return not more and not head.removeprefix(b"\xef\xbb\xbf").strip()


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(mode: int) -> str | None:
    """What a path is, when it is neither a regular file nor a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def check_path(path: Path, fmt: Format | None) -> None:
    """Refuse at once, in one line, a path that cannot be imported: missing, a link
    to nothing, a FIFO, socket or device (reading one can block for ever), a folder
    for a format that reads a file or a file for one that reads a folder, and a
    folder holding anything that is not a file or folder."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise InputError(f"{path}: a link to nothing ({os.readlink(path)} does not exist)")\
                from None
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read: {exc.strerror}") from None
    what = _not_regular(mode)
    if what is not None:
        raise InputError(f"{path}: is {what}, not a file: only files and folders are imported")
    is_dir = stat.S_ISDIR(mode)
    if fmt is not None and is_dir and not fmt.takes_directory:
        raise InputError(f"{path}: is a folder; the {fmt.name} format reads one file (give the"
                         " file, not its folder)")
    if fmt is not None and not is_dir and fmt.takes_directory:
        raise InputError(f"{path}: is a file; the {fmt.name} format reads a folder (a job or a"
                         " trial)")
    if is_dir:
        for folder, dirs, files in os.walk(path):
            for name in dirs + files:
                inner = Path(folder) / name
                try:
                    what = _not_regular(inner.stat().st_mode)
                except OSError:
                    continue  # a link to nothing: its importer says so if it reads it
                if what is not None:
                    raise InputError(f"{inner}: is {what}, not a file: only files and folders"
                                     " are imported")


def present(path: Path, where: str) -> bool:
    """Whether a file an importer reads inside a folder is there: True for a
    regular file, False when nothing is at that path; anything else there (a
    folder, a link to nothing, a FIFO) is an InputError naming `where`, not a
    missing file (a trial whose trajectory is a folder is not a failed run)."""
    if path.is_file():
        return True
    if path.is_symlink() and not path.exists():
        raise InputError(f"{where}: a link to nothing ({os.readlink(path)} does not exist)")
    if path.is_dir():
        raise InputError(f"{where}: is a folder, where a file is expected")
    if path.exists():
        raise InputError(f"{where}: not a regular file")
    return False


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


class _Digest(threading.Thread):
    """A file's digest, computed on another core while its rows are parsed
    (hashlib lets go of the GIL for large buffers): the import does not read
    the whole file once more before it starts."""

    def __init__(self, path: Path):
        super().__init__(name=f"digest {path.name}", daemon=True)
        self.path, self._value, self._error = path, "", None
        self.start()

    def run(self) -> None:
        try:
            self._value = file_digest(self.path)
        except BaseException as exc:  # handed to the importing thread
            self._error = exc

    def done(self) -> bool:
        return not self.is_alive()

    def result(self) -> str:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


class _Listener:
    """The caller's progress callback, which cannot abort the import: whatever
    it raises (Streamlit asks for a rerun this way when the user clicks during
    a long import) is kept and raised once the rows are committed and indexed,
    and the callback is not called again."""

    def __init__(self, progress: Progress | None):
        self.progress, self.raised = progress, None

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.progress is None:
            return
        try:
            self.progress(phase, done, total)
        except BaseException as exc:  # noqa: BLE001 - deferred, not swallowed
            self.raised, self.progress = exc, None

    def reraise(self) -> None:
        if self.raised is not None:
            raise self.raised


class _AlreadyImported(Exception):
    """The file's content was imported before: roll back what was begun."""


class _Counting:
    """Wraps a record stream to count the source rows it reports, and polls
    the guard every few hundred records."""

    def __init__(self, records: Iterator[Record], guard: _Guard, progress: Progress | None = None):
        self.records = records
        self.rows = 0
        self.guard = guard
        self.progress = progress

    def __iter__(self) -> Iterator[Record]:
        last = None
        n = 0
        for record in self.records:
            line = getattr(record, "line", None)
            if line is not None and line != last:
                self.rows += 1
                last = line
                if self.progress is not None and not self.rows % PROGRESS_ROWS:
                    self.progress("rows", self.rows, None)
            n += 1
            if not n & 255:
                self.guard.poll()
            yield record
        self.guard.final()


def import_file(store: Store, path: str | Path, fmt: str | None = None,
                options: ImportOptions | None = None,
                validate: Callable[[str, str | None], str | None] | None = None,
                index: bool = True, progress: Progress | None = None) -> ImportResult:
    """Import one file (or Harbor directory) as one transaction. Then, unless
    `index` is False, add the new items' text to the search index in small
    transactions of their own (`review.browse.search.ensure_index`): reviewers'
    answers are not held up behind the tokenising of a large file, and search
    catches up by itself before it runs if this step is skipped or killed.
    `progress`, if given, hears how far both steps are.

    Bad input of any kind raises one InputError of one line, naming the file
    (by `options.name` when given) and the line or field, and the database is
    left as it was."""
    path = Path(path)
    options = options or ImportOptions()
    require(options.by, "import", server=options.server)
    if options.replace:
        require(options.by, "replace_answers", server=options.server)
    listener = _Listener(progress)
    with reading(options.limits):
        try:
            result = _import(store, path, fmt, options, validate, listener)
        except InputError as exc:
            raise InputError(readable(str(exc), path, options.name)) from None
        except Exception as exc:
            if isinstance(exc, sqlite3.Error) and database_trouble(exc):
                raise  # the database's own trouble (locked, full disk), not the file's
            raise InputError(readable(_unforeseen(exc, path), path, options.name)) from exc
    if index and not result.already_imported:
        from review.browse.search import ensure_index

        started = time.perf_counter()
        result.indexed = ensure_index(store, progress=lambda done, due: listener("index", done, due))
        result.index_seconds = time.perf_counter() - started
    listener.reraise()
    return result


def _unforeseen(exc: Exception, path: Path) -> str:
    """One line for an error no check foresaw, naming the row being read."""
    if isinstance(exc, UnicodeDecodeError):
        return str(_not_utf8(path, exc))
    if isinstance(exc, RecursionError):
        return f"{path}: a value nested too deeply to read"
    if isinstance(exc, MemoryError):
        return f"{path}: too large to read into memory"
    at = place()
    where = f"{at[0]}:{at[1]}" if at is not None else str(path)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename or where}: cannot be read: {exc.strerror}"
    text = " ".join(str(exc).split())
    return f"{where}: cannot read this row: {type(exc).__name__}" + (f": {text}" if text else "")


_DATABASE_TROUBLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR",
                     "SQLITE_CORRUPT", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_CANTOPEN",
                     "SQLITE_NOTADB", "SQLITE_NOMEM", "SQLITE_INTERRUPT")


def database_trouble(exc: sqlite3.Error) -> bool:
    """Whether an SQLite error comes from the database file or another program
    (locked, full, damaged), not from what the file being imported holds."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return any(name == t or name.startswith(t + "_") for t in _DATABASE_TROUBLE)


_QUOTED_VALUE = re.compile(r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'|" + r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
"""A value as `repr` quotes it."""
MESSAGE = 1000
"""Characters of a message at most, once every quoted value is cut to QUOTED."""


def readable(message: str, path: Path | None = None, name: str | None = None) -> str:
    """An error message as it is shown: on one line, each quoted value cut to about
    QUOTED characters (saying how long it was), the whole to about MESSAGE, and the
    file named as the user knows it (`name`, for an upload or a hub file)."""
    if name and path is not None:
        message = message.replace(str(path), name)
    if "\n" in message or "\r" in message:
        message = " ".join(message.split())
    if len(message) > QUOTED:
        message = _QUOTED_VALUE.sub(_cut_quote, message)
    if len(message) > MESSAGE:
        cut = len(message) - MESSAGE
        message = f"{message[:MESSAGE * 2 // 3]}… ({cut:,} characters left out) …" \
                  f"{message[-MESSAGE // 3:]}"
    return message


def _cut_quote(match: re.Match) -> str:
    quoted = match.group(0)
    if len(quoted) <= QUOTED + 2:
        return quoted
    return f"{quoted[:QUOTED + 1]}…{quoted[0]} ({len(quoted) - 2:,} characters)"


def _import(store: Store, path: Path, fmt: str | None, options: ImportOptions,
            validate: Callable[[str, str | None], str | None] | None,
            listener: _Listener) -> ImportResult:
    """The file read and written in one transaction (not yet in the search index)."""
    started = time.perf_counter()
    if fmt is not None and fmt.strip().lower() == AUTO:
        fmt = None
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    check_path(path, FORMATS.get(fmt) if fmt else None)
    if fmt is None:
        format_ = detect_format(path)
    else:
        format_ = FORMATS[fmt]
        if path.is_file() and _blank(path):
            raise InputError(f"{path}: empty file: it holds no rows")
    if validate is None:
        from review.reviewing.answers import normalise_value as validate

    if options.rater is not None and len(options.rater) > MAX_ID_CHARS:
        raise InputError(f"{path}: the rater named for the file: "
                         f"{too_long(options.rater, 'rater name')}")
    shown = options.name or str(path)
    digest = _Digest(path)
    try:
        with store.transaction(bulk=True) as conn:
            rater_id = None
            if options.rater:
                row = conn.execute("SELECT id FROM raters WHERE name = ?", (options.rater,)).fetchone()
                rater_id = row[0] if row else None

            def seen_before() -> None:
                # Checked as soon as the digest is ready (it is computed while
                # the first rows are read): a file imported before is rolled
                # back after a small part of it.
                if conn.execute(
                    "SELECT 1 FROM imports WHERE sha256 = ? AND format = ? AND rater_id IS ?"
                    " AND id != ?", (digest.result(), format_.name, rater_id, import_id),
                ).fetchone():
                    raise _AlreadyImported

            cur = conn.execute(
                "INSERT INTO imports (path, format, sha256, n_rows, n_items, n_annotations, actor,"
                " imported_at) VALUES (?,?,?,0,0,0,?,?)",
                (shown, format_.name, f"pending:{uuid.uuid4()}", options.actor, utcnow()),
            )
            import_id = cur.lastrowid
            options = replace(options, left_out=[],
                              query=lambda sql, params=(): conn.execute(sql, params).fetchall())
            guard = _Guard(seen_before, digest.done)
            rules = ImportRules(store, conn, import_id, str(path), options.actor,
                                replace=options.replace, format_name=format_.name)
            writer = RecordWriter(conn, source="import", import_id=import_id, where=str(path),
                                  validate=validate, index_later=True, rules=rules,
                                  source_name=shown)
            records = _Counting(format_.read(path, options), guard, listener)
            writer.write(records)
            rows = records.rows
            if not (rows or writer.n_items or writer.n_annotations or writer.n_skipped
                    or writer.n_completed):
                raise InputError(f"{path}: it holds no rows ({format_.name}); nothing imported"
                                 + (f"; left out: {'; '.join(options.left_out)}"
                                    if options.left_out else ""))
            if writer.n_annotations:
                _reopen_broken(store, conn, import_id)
            notes = _joined_notes(conn, writer)
            if options.rater:
                # A rater the file gave no answers by (a format that names its own
                # raters, or rows without the grader's verdict) is not made: no rater.
                row = conn.execute("SELECT id FROM raters WHERE name = ?", (options.rater,)).fetchone()
                rater_id = row[0] if row else None
            dataset_id = next(iter(writer._datasets.values()), None)
            conn.execute(
                "UPDATE imports SET sha256 = ?, dataset_id = ?, rater_id = ?, n_rows = ?, n_items = ?,"
                " n_completed = ?, n_annotations = ? WHERE id = ?",
                (digest.result(), dataset_id, rater_id, rows, writer.n_items, writer.n_completed,
                 writer.n_annotations, import_id),
            )
            store.audit(options.actor, "import", "imports", import_id, None, {
                "path": shown, "format": format_.name, "rows": rows, "items": writer.n_items,
                "completed": writer.n_completed, "annotations": writer.n_annotations,
                "replaced": rules.replaced,
            })
    except _AlreadyImported:
        return ImportResult(shown, format_.name, 0, 0, 0, 0, already_imported=True)
    except InputError:
        # A row the import's rules refuse before the file's digest was ready: a file
        # imported before is said to be so (its rows meet their own answers), not refused.
        if _imported_before(store, digest, format_.name, options.rater):
            return ImportResult(shown, format_.name, 0, 0, 0, 0, already_imported=True)
        raise
    return ImportResult(shown, format_.name, rows, writer.n_items,
                        writer.n_annotations, writer.n_skipped,
                        seconds=time.perf_counter() - started, completed=writer.n_completed,
                        left_out=options.left_out, replaced=rules.replaced, notes=notes)


def _joined_notes(conn, writer: RecordWriter) -> list[str]:
    """In words, items the file gave that another file had brought in another run (a
    HealthBench completion is one completion whichever file names it): they stay in
    that run, and what this file says of them is added to them."""
    from store.runs import run_label_map

    if not writer.joined:
        return []
    labels = run_label_map(conn)
    return [f"{n:,} item{'' if n == 1 else 's'} already imported as part of run {run_id}"
            f" ({labels.get(run_id, '?')}): kept in that run, this file's answers added to"
            f" {'it' if n == 1 else 'them'}"
            for run_id, n in sorted(writer.joined.items()) if run_id not in writer.runs_made]


def _imported_before(store: Store, digest: _Digest, fmt: str, rater: str | None) -> bool:
    """Whether this file's content was imported before in this format (and for this rater)."""
    try:
        sha = digest.result()
    except OSError:
        return False
    rater_id = store.scalar("SELECT id FROM raters WHERE name = ?", (rater,)) if rater else None
    return store.scalar("SELECT 1 FROM imports WHERE sha256 = ? AND format = ? AND rater_id IS ?",
                        (sha, fmt, rater_id)) is not None


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> InputError:
    """A file that is not UTF-8 text, with the first line that is not."""
    if path.is_file():
        from review.datasets.sources.readers import not_utf8

        return not_utf8(path)
    return InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")


def _reopen_broken(store: Store, conn, import_id: int) -> None:
    """Clinicians' answers brought in by this import can break an agreement
    that settled on its own: withdraw those settlements (see
    `review.team.adjudication.reopen_broken`), in the import's transaction."""
    from review.team.adjudication import ADJUDICATED, reopen_broken

    adjudicated = conn.execute("SELECT id FROM raters WHERE name = ?", (ADJUDICATED,)).fetchone()
    if adjudicated is None:
        return  # nothing was ever settled
    units = conn.execute(
        "SELECT DISTINCT a.item_id, a.question_id, a.target FROM annotations a"
        " JOIN raters r ON r.id = a.rater_id WHERE a.import_id = ? AND r.kind = 'human'"
        " AND EXISTS (SELECT 1 FROM annotations s WHERE s.item_id = a.item_id"
        " AND s.question_id = a.question_id AND s.rater_id = ? AND s.target = a.target)",
        (import_id, adjudicated[0])).fetchall()
    reopen_broken(store, conn, [tuple(u) for u in units])


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
