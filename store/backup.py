"""A consistent copy of a database while the app keeps serving it.

SQLite's online backup API copies the database as one read transaction sees
it: in WAL mode a reader neither waits for writers nor holds them up, so the
reviewers go on answering while the copy is made, and the copy holds exactly
the answers committed when it began. The copy is a single file (its journal
mode set back to DELETE: no write-ahead log beside it), written under a
temporary name and renamed when complete and verified, so a backup that
stopped half-way is never mistaken for one.

The head the copy holds is witnessed twice (`store.witness`): in the database's
own witness file (`backup FILE`), and as the first line of the backup's witness
file beside it (`FILE.witness`, `copy of DATABASE`), so that the backup verifies
whole on its own, and a backup put back in the database's place later is seen
for what it is unless its witness comes with it.

Restore: stop the app; move the database, its `-wal` / `-shm` files and its
witness aside; put the backup file in the database's place and its witness
beside it under the database's name (`study.db.witness`); run `carelens
verify` (it says the record is whole, with the head the backup reported);
start the app again.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from store.chain import Sealer
from store.db import connect, create_private, record_key_of, record_of
from store.key import RecordKeyError
from store.verify import Verdict, verify
from store.witness import append, line, witness, witness_path


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
    head: tuple[int, str] | None = None
    """The record's head the copy holds (None: a record not sealed yet)."""


def backup(source: str | Path, out: str | Path) -> Backup:
    """Copy the database at `source` to `out` (which must not exist yet)."""
    out = Path(out)
    if out.exists():
        raise BackupError(f"{out}: already exists; a backup never overwrites a file (give a new"
                          " name, e.g. with the date)")
    if out.resolve() == Path(source).resolve():
        raise BackupError(f"{out}: is the database itself")
    if witness_path(out).exists():
        raise BackupError(f"{witness_path(out)}: already exists; a backup never overwrites a"
                          " file (give a new name, e.g. with the date)")
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    witness_path(partial).unlink(missing_ok=True)
    src = connect(source)
    head = None
    try:
        record = record_of(src)
        key, why = record_key_of(src, str(source))
        if record is not None and key is None:
            raise BackupError(f"{why}: its head cannot be witnessed, so no backup is made")
        create_private(partial)  # mode 0600: the copy holds what the database holds
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            src.backup(dst)  # all pages in one step: one consistent read of the source
            dst.execute("PRAGMA journal_mode = DELETE")
            if record is not None:
                head = tuple(dst.execute("SELECT last_id, hash FROM chain_heads"
                                         " WHERE name = 'record'").fetchone())
                append(witness_path(partial), line(Sealer(key), record[0], head[0], head[1],
                                                   f"copy of {Path(source).resolve()}"),
                       record[0])
            verdict = verify(dst)
        finally:
            dst.close()
    except RecordKeyError as exc:
        partial.unlink(missing_ok=True)
        witness_path(partial).unlink(missing_ok=True)
        raise BackupError(str(exc)) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        witness_path(partial).unlink(missing_ok=True)
        raise
    finally:
        src.close()
    if head is not None:
        os.replace(witness_path(partial), witness_path(out))
        witness(witness_path(source), Sealer(key), record[0], head[0], head[1],
                f"backup {out.resolve()}")
    os.replace(partial, out)
    return Backup(out, out.stat().st_size, verdict, head)
