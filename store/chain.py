"""The record's chain: every sealed row (`store.sealed`) takes the next position
of the record and a hash that follows from the one before it, under the
record's key.

A row's hash is HMAC-SHA256, keyed with the record's key (`store.key`), over
the previous position's hash, a newline, the row's position (`seq`), a newline,
its table, a newline, and its fields as SQLite's `json_array` writes them (the
fields are in `store.sealed.SEALED`). The first position's previous hash is
empty. A changed row's version (`row_versions`) carries a sha256 digest of the
row's fields (`carelens_digest`), and is chained like any other row.

SQLite has no such function of its own, so every connection the store opens
registers `carelens_seal`, `carelens_version` and `carelens_digest`
(`register_keyed`); the triggers of migration m110 call them as each row is
inserted or changed, inside that transaction: a chained row takes its place
and hash at once; a versioned row's change writes a version, which the store
seals (`seal_versions`) just before that transaction commits. A program
without them (the sqlite3 shell) cannot write a sealed table at all ("no such
function: carelens_seal"); a program that registers functions of those names
without the key writes hashes that `store.verify` finds wrong, or versions it
finds unsealed.

Before m110 the chain was sha256 without a key, one chain per table
(`carelens_chain`, `chain_hash`): the migrations up to m110 still call it, so it
is registered too (`register_functions`); no trigger calls it after m110.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3

from store.key import RecordKey

CHAIN_FUNCTION = "carelens_chain"
SEAL_FUNCTION = "carelens_seal"
DIGEST_FUNCTION = "carelens_digest"
VERSION_FUNCTION = "carelens_version"


def chain_hash(previous: str | None, body: str) -> str:
    """The hash of a row before m110, unkeyed (m015, m041 and the check m110 makes of
    the old chains): sha256 of the previous hash, a newline and the row's fields."""
    return hashlib.sha256(f"{previous or ''}\n{body}".encode()).hexdigest()


def register_functions(conn: sqlite3.Connection) -> None:
    """The hash function of the chains before m110 (their migrations call it)."""
    conn.create_function(CHAIN_FUNCTION, 2, chain_hash, deterministic=True)


class Sealer:
    """The record's hash under one key."""

    def __init__(self, key: RecordKey):
        self.key = key
        self._base = hmac.new(key.secret, digestmod=hashlib.sha256)
        self.moved = False
        """Set when a trigger sealed a row on the connection it is registered on (the
        store clears it as a transaction begins: did this one move the head?)."""
        self.versions: list[tuple[str, int, str | None, str]] = []
        """The rows of versioned tables the current transaction inserted or changed, in
        order (table, rowid, digest of its fields before the change or None, digest
        after it), as their triggers named them: sealed as versions before it commits
        (`seal_versions`)."""

    def version(self, table: str, rowid: int, previous: str | None, after: str) -> None:
        """Called by a versioned table's triggers as a row is inserted or changed."""
        self.versions.append((table, rowid, previous, after))

    def seal(self, previous: str | None, seq: int, table: str, body: str) -> str:
        self.moved = True
        h = self._base.copy()
        h.update(f"{previous or ''}\n{seq}\n{table}\n{body}".encode())
        return h.hexdigest()

    def mac(self, text: str) -> str:
        """A keyed hash of other text (a line of the witness file)."""
        h = self._base.copy()
        h.update(b"witness\n" + text.encode())
        return h.hexdigest()[:32]


def digest(body: str) -> str:
    """A row version's digest: sha256 of its fields (the version is chained under the key)."""
    return hashlib.sha256(body.encode()).hexdigest()


class _NoKey:
    def __init__(self, why: str):
        self.why = why

    def __call__(self, *args: object) -> str:
        raise sqlite3.OperationalError(self.why)


def register_keyed(conn: sqlite3.Connection, key: RecordKey | None, why: str = "",
                   sealer: Sealer | None = None) -> Sealer | None:
    """Make the record's keyed hash known to this connection (through `sealer`, or
    a new one for `key`, which it returns); without a key (None), a function that
    refuses (`why` says why), so nothing unverifiable is appended."""
    if key is None:
        refuse = _NoKey(why or "the record's key is not here")
        conn.create_function(SEAL_FUNCTION, 4, refuse)
        conn.create_function(VERSION_FUNCTION, 4, refuse)
    else:
        sealer = sealer or Sealer(key)
        conn.create_function(SEAL_FUNCTION, 4, sealer.seal)
        conn.create_function(VERSION_FUNCTION, 4, sealer.version)
    conn.create_function(DIGEST_FUNCTION, 1, digest, deterministic=True)
    return sealer


def seal_versions(conn: sqlite3.Connection, sealer: Sealer) -> int:
    """Write the versions of the rows the current transaction inserted or changed
    (`Sealer.versions`, with the digests their triggers took), sealed: each takes
    the record's next position and its hash. Returns how many were written. Done
    by the store just before the transaction commits, in one statement for the
    rows of a whole import. (A statement that fails after changing rows undoes
    them; carelens never commits a transaction after one, so every version
    written is of a change that is in the record.)"""
    from store.sealed import VERSIONS

    pending, sealer.versions = sealer.versions, []
    if not pending:
        return 0
    vid, seq, head = conn.execute(
        "SELECT (SELECT coalesce(max(id), 0) FROM row_versions), last_id, hash FROM chain_heads"
        " WHERE name = 'record'").fetchone()
    rows = []
    for table, rowid, previous, after in pending:
        vid += 1
        seq += 1
        # The fields as SQLite's json_array writes them (a table's name, hex digests).
        fields = f'[{vid},"{table}",{rowid},"{after}",' + (
            f'"{previous}"]' if previous is not None else "null]")
        head = sealer.seal(head, seq, VERSIONS, fields)
        rows.append((vid, table, rowid, after, previous, seq, head))
    conn.executemany("INSERT INTO row_versions (id, tbl, row_id, digest, previous, seq, chain)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("UPDATE chain_heads SET last_id = ?, hash = ? WHERE name = 'record'",
                 (seq, head))
    conn.execute("UPDATE chain_heads SET last_id = ? WHERE name = ?", (vid, VERSIONS))
    return len(rows)
