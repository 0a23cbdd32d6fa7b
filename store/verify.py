"""Whether the record is whole: `carelens verify` and the Progress and audit screen.

Four checks, each problem found reported as one line:
- the protections are in place: every trigger a carelens database of this
  version has (append-only, no replace, the hash chain, the search index, the
  sealed identity of raters and items) is there and reads exactly as the
  migrations wrote it, and there is no other; every append-only table
  (`append_only_tables`) has all three of no update, no delete, no replace;
  and every table is there;
- no row names a row that is not there (SQLite's foreign_key_check: an item
  or rater replaced from a program that does not check references);
- the hash chains are whole (`store.chain`): each answer's, audit entry's,
  tag row's, flag row's, reveal's and choice to see the labels' hash follows from its own fields and the row before it, and the
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
from store.migrations import (
    APPEND_ONLY,
    APPEND_ONLY_LATER,
    APPEND_ONLY_M019,
    chained_body,
    chained_tables,
    migrations,
)


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
    "identity_fixed": "refuses a change of who or what a row is (name, login; id, text)",
}

SEALED = ("no_update", "no_delete", "no_replace")
"""The three protections every append-only table has."""

IDENTITY = {"raters": ("identity_fixed", "no_delete", "no_replace"),
            "items": ("identity_fixed", "no_delete", "no_replace"),
            "questions": ("identity_fixed", "no_delete", "no_replace")}
"""Tables whose rows are changed in part (a rater's role, a placeholder item or
question filled in) but whose identity is sealed (m040, m042)."""


def append_only_tables() -> list[str]:
    """Every append-only table: those the constants of the migrations name, and any
    table a migration gave a trigger that refuses UPDATE, DELETE or a replacement
    (so that a new append-only table is held to all three)."""
    named = set(APPEND_ONLY) | set(APPEND_ONLY_LATER) | set(APPEND_ONLY_M019)
    for name, (table, _) in expected_triggers().items():
        if table not in IDENTITY and table != "chain_heads" and any(
                name == f"{table}_{kind}" for kind in SEALED):
            named.add(table)
    return sorted(named)


def required_protections() -> dict[str, tuple[str, str]]:
    """{trigger name: (table, what it does)} that must be in place: the three of
    every append-only table, and the identity triggers of raters and items."""
    required = {f"{t}_{kind}": (t, _PROTECTS[kind]) for t in append_only_tables()
                for kind in SEALED}
    for table, kinds in IDENTITY.items():
        required.update({f"{table}_{kind}": (table, _PROTECTS[kind]) for kind in kinds})
    return required


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
    tables = _check_tables(conn, verdict)
    _check_triggers(conn, verdict, tables)
    _check_references(conn, verdict)
    for table in chained_tables():
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


def _check_tables(conn: sqlite3.Connection, verdict: Verdict) -> set[str]:
    """The tables there; one line for each a fully migrated database should have
    and has not (dropped, with its rows and its protections)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not migrations.pending(Database(conn)):
        for table in sorted({t for t, _ in expected_triggers().values()} - tables):
            verdict.problems.append(f"table missing: {table} is not there (dropped with its rows"
                                    " and its protections)")
    return tables


def _check_references(conn: sqlite3.Connection, verdict: Verdict) -> None:
    """Rows that name a row no longer there (an item or a rater replaced or removed
    from a program that does not check references): one line per table and parent."""
    missing: dict[tuple[str, str], list[int]] = {}
    for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
        missing.setdefault((table, parent), []).append(rowid)
    for (table, parent), rowids in sorted(missing.items()):
        shown = ", ".join(str(r) for r in rowids[:5]) + (", ..." if len(rowids) > 5 else "")
        verdict.problems.append(f"{table}: {len(rowids)} row(s) ({shown}) name a row of {parent}"
                                " that is not there (replaced or removed)")


def _check_triggers(conn: sqlite3.Connection, verdict: Verdict, tables: set[str]) -> None:
    found = {r[0]: (r[1], _normal(r[2])) for r in conn.execute(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")}
    expected = expected_triggers()
    pending = bool(migrations.pending(Database(conn)))
    for name, (table, words) in sorted(required_protections().items()):
        if name not in expected:  # a migration forgot it: carelens itself is at fault
            verdict.problems.append(f"protection missing: {table} {words}: carelens makes no"
                                    f" trigger {name} (a fault of this version)")
    for name, (table, sql) in sorted(expected.items()):
        if table not in tables:
            continue  # not there: the table line (or the schema line) says why
        if name not in found:
            verdict.problems.append(
                f"protection missing: {table} no longer {_what(name)} (trigger {name} was"
                " dropped)" if not pending else
                f"protection not made yet: trigger {name} on {table} ({_what(name)}): a"
                " migration is not applied")
        elif found[name] != (table, sql):
            if pending:
                continue  # a later migration remakes it: the schema line says to apply them
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


_ROW_WORDS = {"annotations": "answer", "audit_log": "audit entry", "item_tags": "tag row",
              "flags": "flag row", "reveals": "reveal", "labels_opened": "choice to see the labels"}


def _check_chain(conn: sqlite3.Connection, table: str, verdict: Verdict) -> None:
    """Each row's hash follows from its fields and the hash of the row before it;
    the head is the last row. One line per break, not one per row after it."""
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    if "chain" not in columns:
        return  # not migrated yet: the schema line says so
    word = _ROW_WORDS[table]
    previous_id = previous = None
    n = 0
    for row_id, stored, body in conn.execute(
            f"SELECT id, chain, {chained_body(table)} FROM {table} ORDER BY id"):
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
