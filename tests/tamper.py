"""The attacker's tools: nothing but the database file, the sqlite3 shell and
Python's sqlite3, with carelens's source at hand but not the record's key.

`attacker(path)` is a plain connection (foreign keys off, as the shell opens
one) on which the functions carelens's triggers call are registered the way
anyone reading `store/chain.py` could: the hash without the key (the
three-line sha256 chain of before m110, or an HMAC under a key of their own),
the digest (which needs no key) and the mark of a version (which the store seals
as its transaction commits: here nothing does)."""

from __future__ import annotations

import hashlib
import hmac
import shutil
import sqlite3
import subprocess

import pytest

needs_shell = pytest.mark.skipif(shutil.which("sqlite3") is None,
                                 reason="the sqlite3 shell is not installed")


def unkeyed(previous, seq, table, body) -> str:
    """The record's hash as it was before m110: sha256, no key."""
    return hashlib.sha256(f"{previous or ''}\n{seq}\n{table}\n{body}".encode()).hexdigest()


def guessed_key(previous, seq, table, body) -> str:
    """The record's hash under a key the attacker made up."""
    return hmac.new(b"a key of my own, 32 characters at least", f"{previous or ''}\n{seq}\n"
                    f"{table}\n{body}".encode(), hashlib.sha256).hexdigest()


def digest(body) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def attacker(path, seal=unkeyed) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("carelens_seal", 4, seal)
    conn.create_function("carelens_digest", 1, digest)
    conn.create_function("carelens_version", 4, lambda *named: None)
    return conn


def shell(path, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sqlite3", str(path), sql], capture_output=True, text=True)


def rows(path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
