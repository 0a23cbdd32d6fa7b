"""A consistent copy of a database while the app keeps serving it.

SQLite's online backup API copies the database as one read transaction sees
it: in WAL mode a reader neither waits for writers nor holds them up, so the
reviewers go on answering while the copy is made, and the copy holds exactly
the answers committed when it began. The copy is a single file (its journal
mode set back to DELETE: no write-ahead log beside it), written under a
temporary name and renamed when complete and verified, so a backup that
stopped half-way is never mistaken for one.

Restore: stop the app, put the backup file in the database's place (and
remove any `-wal` / `-shm` file left beside the old one), run `carelens
verify` on it, start the app again.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from store.db import connect, create_private
from store.verify import Verdict, verify


class BackupError(ValueError):
    """The backup cannot be made; the message says why, in one line."""


@dataclass
class Backup:
    """A backup made."""

    path: Path
    """The backup file."""
    bytes: int
    """Its size."""
    verdict: Verdict
    """`carelens verify` on the copy."""


def backup(source: str | Path, out: str | Path) -> Backup:
    """Copy the database at `source` to `out` (which must not exist yet)."""
    out = Path(out)
    if out.exists():
        raise BackupError(f"{out}: already exists; a backup never overwrites a file (give a new"
                          " name, e.g. with the date)")
    if out.resolve() == Path(source).resolve():
        raise BackupError(f"{out}: is the database itself")
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    src = connect(source)
    try:
        create_private(partial)  # mode 0600: the copy holds what the database holds
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            src.backup(dst)  # all pages in one step: one consistent read of the source
            dst.execute("PRAGMA journal_mode = DELETE")
            verdict = verify(dst)
        finally:
            dst.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    os.replace(partial, out)
    return Backup(out, out.stat().st_size, verdict)
