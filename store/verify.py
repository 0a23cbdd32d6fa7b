"""Whether the record is whole: `carelens verify` and the Progress and audit screen.

Three checks, each problem found reported as one line:
- the protections are in place: every trigger a carelens database of this
  version has (append-only, no replace, the hash chain, the search index) is
  there and reads exactly as the migrations wrote it, and there is no other;
- the hash chains are whole (`store.chain`): each answer's and each audit
  entry's hash follows from its own fields and the row before it, and the
  chain's head (`chain_heads`) is its last row, so a row removed, changed or
  slipped in shows, at the end as anywhere else;
- the file itself reads cleanly (SQLite's quick_check) and every migration is
  applied.

It reads only, on the connection it is given (`verify_file` opens one without
migrating, so that a database is checked as it is). The hash chain detects
what was done without recomputing it; someone able to rewrite the file and
who recomputes every later hash is caught only by comparing the chain's head
with one written down earlier: the verdict names each head for that.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from sqlite_utils import Database

from store.chain import chain_hash, register_functions
from store.migrations import APPEND_ONLY, CHAINED, chain_body, migrations


@dataclass
class Verdict:
    """What `verify` found."""

    problems: list[str] = field(default_factory=list)
    """One line per problem, in words; empty when the record is whole."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows checked in each chained table."""
    heads: dict[str, str | None] = field(default_factory=dict)
    """Each chain's head (the last row's hash), to write down and compare later."""
    protections: int = 0
    """Triggers found in place, as the migrations made them."""

    @property
    def whole(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """One line: the verdict when the record is whole."""
        answers, entries = self.rows.get("annotations", 0), self.rows.get("audit_log", 0)
        heads = ", ".join(f"{t} {(h or 'empty')[:16]}" for t, h in self.heads.items())
        return (f"record whole: {answers:,} answers and {entries:,} audit entries chained, "
                f"{self.protections} protections in place; chain heads: {heads}")

    def lines(self) -> list[str]:
        """What `carelens verify` prints: the problems, or the summary."""
        return list(self.problems) if self.problems else [self.summary()]


_PROTECTS = {
    "no_update": "refuses UPDATE", "no_delete": "refuses DELETE",
    "no_replace": "refuses an INSERT that takes an existing row (INSERT OR REPLACE)",
    "chain": "chains each new row by its hash", "search": "indexes new notes for search",
}


def _what(name: str) -> str:
    for suffix, words in _PROTECTS.items():
        if name.endswith("_" + suffix):
            return words
    return "part of the schema"


def _normal(sql: str | None) -> str:
    return " ".join((sql or "").split())


_expected_triggers: dict[str, tuple[str, str]] | None = None


def expected_triggers() -> dict[str, tuple[str, str]]:
    """{trigger name: (table, SQL)} as the migrations make them, read from a new
    database in memory (so the list can never drift from the migrations)."""
    global _expected_triggers
    if _expected_triggers is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        register_functions(conn)
        migrations.apply(Database(conn))
        _expected_triggers = {
            r[0]: (r[1], _normal(r[2])) for r in conn.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")}
        conn.close()
    return _expected_triggers


def verify(conn: sqlite3.Connection) -> Verdict:
    """Check the database on `conn` (read only; see the module's note)."""
    register_functions(conn)
    verdict = Verdict()
    _check_file(conn, verdict)
    _check_triggers(conn, verdict)
    for table in CHAINED:
        _check_chain(conn, table, verdict)
    return verdict


def verify_file(path: str | Path) -> Verdict:
    """Check a database file as it is, without migrating it first."""
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True,
                           isolation_level=None)
    try:
        return verify(conn)
    finally:
        conn.close()


def _check_file(conn: sqlite3.Connection, verdict: Verdict) -> None:
    for (line,) in conn.execute("PRAGMA quick_check"):
        if line != "ok":
            verdict.problems.append(f"file: {line}")
    pending = [m.name for m in migrations.pending(Database(conn))]
    if pending:
        verdict.problems.append(
            f"schema: {len(pending)} migration(s) not applied ({', '.join(pending)}): open the"
            " database with this version of carelens (any command) to apply them, then verify")


def _check_triggers(conn: sqlite3.Connection, verdict: Verdict) -> None:
    found = {r[0]: (r[1], _normal(r[2])) for r in conn.execute(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for name, (table, sql) in sorted(expected_triggers().items()):
        if table not in tables:
            continue  # a table this database does not have yet: the schema line says why
        if name not in found:
            verdict.problems.append(
                f"protection missing: trigger {name} on {table} ({_what(name)}) was dropped")
        elif found[name] != (table, sql):
            verdict.problems.append(
                f"protection changed: trigger {name} on {table} is not the one carelens made"
                f" ({_what(name)})")
        else:
            verdict.protections += 1
    for name, (table, _) in sorted(found.items()):
        if name not in expected_triggers():
            verdict.problems.append(
                f"unknown trigger {name} on {table}: carelens made no such trigger"
                + (" (an append-only table)" if table in APPEND_ONLY else ""))


def _check_chain(conn: sqlite3.Connection, table: str, verdict: Verdict) -> None:
    """Each row's hash follows from its fields and the hash of the row before it;
    the head is the last row. One line per break, not one per row after it."""
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    if "chain" not in columns:
        return  # not migrated yet: the schema line says so
    word = {"annotations": "answer", "audit_log": "audit entry"}[table]
    previous_id = previous = None
    n = 0
    for row_id, stored, body in conn.execute(
            f"SELECT id, chain, {chain_body(table)} FROM {table} ORDER BY id"):
        n += 1
        if stored is None:
            verdict.problems.append(f"{table}: {word} {row_id} has no hash: it was added without"
                                    " the chain trigger")
        elif stored != chain_hash(previous, body):
            if previous_id is not None and row_id != previous_id + 1:
                gap = (f"{previous_id + 1}" if row_id == previous_id + 2
                       else f"{previous_id + 1}-{row_id - 1}")
                verdict.problems.append(
                    f"{table}: {word} {gap} removed (the chain breaks at {row_id}, whose hash"
                    f" follows another row than {previous_id})")
            elif previous_id is None and row_id != 1:
                verdict.problems.append(f"{table}: {word} 1-{row_id - 1} removed (the chain's"
                                        f" first row is now {row_id})")
            else:
                verdict.problems.append(
                    f"{table}: {word} {row_id} changed after it was written (its fields or the"
                    f" row before it no longer match its hash)")
        previous_id, previous = row_id, stored
    verdict.rows[table] = n
    head = conn.execute("SELECT last_id, hash FROM chain_heads WHERE name = ?",
                        (table,)).fetchone()
    verdict.heads[table] = previous
    if head is None:
        verdict.problems.append(f"{table}: the chain's head is missing from chain_heads")
    elif head[0] != previous_id:
        if head[0] is not None and (previous_id is None or head[0] > previous_id):
            gap = str(head[0]) if previous_id == head[0] - 1 else \
                f"{(previous_id or 0) + 1}-{head[0]}"
            verdict.problems.append(f"{table}: {word} {gap} removed from the end (the chain's"
                                    f" head is {head[0]})")
        else:
            verdict.problems.append(f"{table}: {word} {previous_id} is after the chain's head"
                                    f" ({head[0]}): added without the chain")
    elif head[1] != previous:
        verdict.problems.append(f"{table}: the chain's head does not match {word} {previous_id}")
