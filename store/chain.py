"""The hash chain that seals the record: each answer and each audit entry
carries a hash of its own content and of the hash of the row before it.

SQLite has no hash function of its own, so every connection the store opens
registers `carelens_chain` (`register_functions`); the triggers of migration
m015 call it as each row is inserted, inside the inserting transaction, so
no code path can add a row that is not chained. A program without it (the
sqlite3 shell) cannot append to a chained table at all: it stops at "no such
function: carelens_chain". `store.verify` recomputes the chain.

A row's hash is sha256 over the previous row's hash, a newline, and the row's
fields as SQLite's `json_array` writes them (the field lists are in
`store.migrations.chained_tables()`). The first row's previous hash is empty.
"""

from __future__ import annotations

import hashlib
import sqlite3

CHAIN_FUNCTION = "carelens_chain"


def chain_hash(previous: str | None, body: str) -> str:
    """The hash of a row whose fields, as a JSON array, are `body`, after the row
    whose hash is `previous` (None for the first row)."""
    return hashlib.sha256(f"{previous or ''}\n{body}".encode()).hexdigest()


def register_functions(conn: sqlite3.Connection) -> None:
    """Make the chain's hash function known to this connection."""
    conn.create_function(CHAIN_FUNCTION, 2, chain_hash, deterministic=True)
