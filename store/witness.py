"""The witness: every head the record takes, written down outside the file.

Beside each database `study.db` lies `study.db.witness`, a text file to which
carelens appends one line each time a transaction moves the record's head
(`store.chain`): the position, the head's hash (its first 32 hex digits), the
time, a seal (HMAC under the record's key of the record's id and the rest of
the line, so a line cannot be made or changed without the key), and what wrote
it (`write`; `backup FILE` when a backup copied that head; `copy of FILE` as the
first line of a backup's own witness). `carelens verify` checks the record
against the furthest head witnessed: a record cut short (its head repointed to
an earlier row) or an older copy put in the database's place no longer holds
it. A head written down anywhere else is checked the same way
(`carelens verify --head POSITION:HASH`).

The record may be ahead of its witness (a process killed between its commit
and the line), never behind it. Lines are appended with one `write` each
(O_APPEND: writers in several processes do not mix their lines), without
fsync: a line lost in a power cut only lets the witness lag.

What the witness cannot see: whoever holds the folder, not only the file, can
cut the witness's last lines along with the record's. Write the head down
elsewhere too (the backup's, a daily `carelens verify` in a log kept on
another machine) and check it with `--head`.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from store.chain import Sealer
from store.values import utcnow

SUFFIX = ".witness"
HEAD_CHARS = 32
"""Hex digits of a head written in the witness (128 bits)."""
HEADER = "carelens witness of record {record}: position head time seal event"


def witness_path(database: str | Path) -> Path | None:
    """The witness file of a database file (None for a database in memory)."""
    if str(database) in ("", ":memory:"):
        return None
    return Path(f"{Path(database).resolve()}{SUFFIX}")


def _sealed_text(record: str, seq: int, head: str, at: str, event: str) -> str:
    return f"{record}\n{seq}\n{head}\n{at}\n{event}"


def line(sealer: Sealer, record: str, seq: int, head: str, event: str = "write",
         at: str | None = None) -> str:
    at = at or utcnow()
    head = head[:HEAD_CHARS]
    seal = sealer.mac(_sealed_text(record, seq, head, at, event))
    return f"{seq} {head} {at} {seal} {event}\n"


def append(path: Path, text: str, record: str) -> None:
    """Append lines to a witness file (made, mode 0600, with its header line if new)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size == 0:
            text = HEADER.format(record=record) + "\n" + text
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class Witness:
    """A database's witness file, held open for appending while a store is (one
    `write` per line: no open and close per transaction)."""

    def __init__(self, path: Path):
        self.path = path
        self._file = None

    def append(self, sealer: Sealer, record: str, seq: int, head: str) -> None:
        """Like `witness`, on the file held open."""
        try:
            if self._file is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                self._file = os.fdopen(fd, "ab", buffering=0)
                text = line(sealer, record, seq, head)
                if os.fstat(fd).st_size == 0:
                    text = HEADER.format(record=record) + "\n" + text
            else:
                text = line(sealer, record, seq, head)
            self._file.write(text.encode())
        except OSError as exc:
            self.close()
            print(f"carelens: {self.path}: the record's head {seq} could not be witnessed"
                  f" ({exc.strerror}); verify will say the witness lags", file=sys.stderr)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None


def witness(path: Path | None, sealer: Sealer, record: str, seq: int, head: str,
            event: str = "write") -> None:
    """Append the head a transaction (or a backup) left to the witness file `path`
    (`witness_path`; None: a database in memory, none). Said in one line on stderr,
    not raised, if the file cannot be written: the transaction is committed, and a
    witness that lags is not a record that lies."""
    if path is None:
        return
    try:
        append(path, line(sealer, record, seq, head, event), record)
    except OSError as exc:
        print(f"carelens: {path}: the record's head {seq} could not be witnessed"
              f" ({exc.strerror}); verify will say the witness lags", file=sys.stderr)


@dataclass(frozen=True)
class Witnessed:
    seq: int
    head: str
    at: str
    event: str
    line: int
    """Its line number in the file."""


_LINE = re.compile(rf"(\d+) ([0-9a-f]{{{HEAD_CHARS}}}) (\S+) ([0-9a-f]{{32}}) (.+)")


def read(path: Path, sealer: Sealer, record: str) -> tuple[list[Witnessed], list[int]]:
    """The heads a witness file holds, and the numbers of its lines whose seal does
    not match (changed, made without the key, or another record's)."""
    heads: list[Witnessed] = []
    bad: list[int] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for number, text in enumerate(fh, 1):
            text = text.rstrip("\n")
            if not text.strip() or text.startswith("carelens witness of record"):
                continue
            m = _LINE.fullmatch(text)
            if m is None:
                bad.append(number)
                continue
            seq, head, at, seal, event = int(m[1]), m[2], m[3], m[4], m[5]
            if sealer.mac(_sealed_text(record, seq, head, at, event)) != seal:
                bad.append(number)
                continue
            heads.append(Witnessed(seq, head, at, event, number))
    return heads, bad


def parse_head(text: str) -> tuple[int, str]:
    """A head written down as `POSITION:HASH` (at least 16 hex digits of the hash;
    the thousands' commas `verify` prints are allowed). ValueError says what is wrong."""
    m = re.fullmatch(r"\s*([\d,]+)\s*:\s*([0-9a-fA-F]{16,64})\s*", text or "")
    if m is None:
        raise ValueError(f"--head {text!r}: give it as verify prints it, POSITION:HASH (e.g."
                         " 1,234:9f2c4e1a0b7d3e5f...), with at least 16 hex digits of the hash")
    return int(m[1].replace(",", "")), m[2].lower()
