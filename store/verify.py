"""Whether the record is whole: `carelens verify` and the Progress and audit screen.

Each problem found is one line, in words:
- **the schema is carelens's own**: every table, index, view and trigger a
  carelens database of this version has is there and reads exactly as the
  migrations wrote it (its SQL, not only its name), and there is no other: a
  view that decides which answer is in force, a trigger that refuses a change,
  a unique index that refuses a row all change what the record says or takes;
  each sealed table (`store.sealed`) has all its protections;
- **no row names a row that is not there** (SQLite's foreign_key_check);
- **the record's chain is whole under its key** (`store.chain`): every row of
  every chained table, in the order of its position, has the hash that follows
  from the position before it under the record's key, and the head
  (`chain_heads`) is its last position; so a row removed, changed, reordered or
  slipped in shows, and so do hashes recomputed without the key;
- **each row of a versioned table is as carelens last sealed it**: its fields'
  digest is its last version's (`row_versions`), and every row sealed is there;
- **the witness agrees** (`store.witness`): its lines carry the record's seal,
  and the record holds every head witnessed, up to the furthest one, so a
  record cut short (its head repointed) or an older copy put in its place
  shows; and so does a head written down elsewhere (`verify(head=...)`);
- the file reads cleanly (SQLite's quick_check) and every migration is applied.

It reads only, on the connection it is given (`verify_file` opens one without
migrating, so that a database is checked as it is). Without the record's key
the chain and the witness cannot be checked: that is said, in one line, and
the record is not called whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from sqlite_utils import Database

from store.chain import Sealer, digest, register_functions
from store.db import record_key_of, record_of
from store.migrations import migrations
from store.sealed import CHAINED, SEALED, VERSIONS, body, chained_tables, versioned_tables
from store.witness import HEAD_CHARS, Witnessed, read, witness_path


@dataclass
class Verdict:
    """What `verify` found."""

    problems: list[str] = field(default_factory=list)
    """One line per problem, in words; empty when the record is whole."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows checked in each sealed table."""
    head: tuple[int, str] | None = None
    """The record's head: its last position and that position's hash, to write
    down and give later (`verify --head`)."""
    protections: int = 0
    """Triggers found in place, as the migrations made them."""
    key_id: str | None = None
    """The fingerprint of the key the record is sealed with."""
    witnessed: Witnessed | None = None
    """The furthest head the witness file holds."""
    unsealed: set[tuple[str, int]] = field(default_factory=set)
    """Rows of versioned tables with a version never sealed (named once)."""

    @property
    def whole(self) -> bool:
        return not self.problems

    @property
    def head_text(self) -> str:
        """The head as `verify` prints it and `--head` takes it."""
        if self.head is None:
            return "none"
        return f"{self.head[0]:,}:{(self.head[1] or '')[:HEAD_CHARS]}"

    def summary(self) -> str:
        """One line: the verdict when the record is whole."""
        answers, entries = self.rows.get("annotations", 0), self.rows.get("audit_log", 0)
        others = sum(n for t, n in self.rows.items() if t not in ("annotations", "audit_log"))
        seen = (f", witnessed {self.witnessed.at}" if self.witnessed is not None
                and self.head is not None and self.witnessed.seq == self.head[0] else "")
        return (f"record whole: {answers:,} answers and {entries:,} audit entries chained, and"
                f" {others:,} other sealed rows, under key {self.key_id}; {self.protections}"
                f" protections in place and the schema as carelens made it; head"
                f" {self.head_text}{seen}")

    def lines(self) -> list[str]:
        """What `carelens verify` prints: the problems, or the summary."""
        return list(self.problems) if self.problems else [self.summary()]


_PROTECTS = {
    "no_update": "refuses UPDATE", "no_delete": "refuses DELETE",
    "no_replace": "refuses an INSERT that takes an existing row (INSERT OR REPLACE)",
    "chain": "chains each new row under the record's key", "search": "indexes new notes for search",
    "identity_fixed": "refuses a change of who or what a row is (name, login; id, text)",
    "seal_insert": "seals each new row", "seal_update": "seals each change of a row",
    "no_insert": "refuses a second row", "forward_only": "moves only one position at a time",
}

SEALED_TRIGGERS = {CHAINED: ("no_update", "no_delete", "no_replace", "chain"),
                   "versioned": ("seal_insert", "seal_update")}
"""The triggers every sealed table has, by its kind (`store.sealed`)."""

SEALED_APPEND_ONLY = ("no_update", "no_delete", "no_replace")
"""The three protections every append-only table has."""

IDENTITY = {"raters": ("identity_fixed", "no_delete", "no_replace"),
            "items": ("identity_fixed", "no_delete", "no_replace"),
            "questions": ("identity_fixed", "no_delete", "no_replace")}
"""Tables whose rows are changed in part (a rater's role, a placeholder item or
question filled in) but whose identity is sealed (m040, m042)."""

_VIEWS = {
    "current_annotations": "it decides which answer of each rater is in force",
    "current_item_tags": "it decides which tags are on an item",
    "current_round_members": "it decides who is in a round",
}


def append_only_tables() -> list[str]:
    """Every append-only table: the chained tables of `store.sealed` there are."""
    tables = {name for (kind, name) in _expected() if kind == "table"}
    return sorted(t for t in chained_tables() if t in tables)


def required_protections() -> dict[str, tuple[str, str]]:
    """{trigger name: (table, what it does)} that must be in place: those of every
    sealed table (by its kind), and the identity triggers of raters, items and
    questions."""
    tables = {name for (kind, name) in _expected() if kind == "table"}
    required = {}
    for table, seal in SEALED.items():
        if table in tables:
            required.update({f"{table}_{kind}": (table, _PROTECTS[kind])
                             for kind in SEALED_TRIGGERS[seal.kind]
                             if not (table == VERSIONS and kind == "chain")})
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


_expected_schema: dict[tuple[str, str], tuple[str, str]] | None = None


def _schema(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple[str, str]]:
    """{(type, name): (table, SQL)} of every table, index, view and trigger that is
    not SQLite's own."""
    return {(r[0], r[1]): (r[2], _normal(r[3])) for r in conn.execute(
        "SELECT type, name, tbl_name, sql FROM main.sqlite_master"
        " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")}


def _expected() -> dict[tuple[str, str], tuple[str, str]]:
    """The schema as the migrations make it, read from a new database in memory
    (so it can never drift from the migrations)."""
    global _expected_schema
    if _expected_schema is None:
        from store.chain import register_keyed

        conn = sqlite3.connect(":memory:", isolation_level=None)
        register_functions(conn)
        register_keyed(conn, None)
        migrations.apply(Database(conn))
        _expected_schema = _schema(conn)
        conn.close()
    return _expected_schema


def expected_triggers() -> dict[str, tuple[str, str]]:
    """{trigger name: (table, SQL)} as the migrations make them."""
    return {name: v for (kind, name), v in _expected().items() if kind == "trigger"}


def verify(conn: sqlite3.Connection, *, head: tuple[int, str] | None = None) -> Verdict:
    """Check the database on `conn` (read only; see the module's note), and that it
    holds `head` (position, hash or its first 16+ hex digits) if one is given.

    The witness file is read first, then the database in one read transaction: a
    line is appended only after its transaction commits, so every head read is in
    the snapshot, however many reviewers answer meanwhile."""
    register_functions(conn)
    verdict = Verdict()
    record = record_of(conn)
    database = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    key, why = record_key_of(conn, database or ":memory:") if record else (None, None)
    witnessed = _read_witness(Path(database), Sealer(key), record[0], verdict) \
        if record and key and database else None
    snapshot = not conn.in_transaction
    if snapshot:
        conn.execute("BEGIN")
    try:
        _check_all(conn, verdict, record, key, why, witnessed, head)
    finally:
        if snapshot and conn.in_transaction:
            conn.execute("ROLLBACK")
    return verdict


def _check_all(conn: sqlite3.Connection, verdict: Verdict, record: tuple[str, str] | None,
               key, why: str | None, witnessed: tuple[Path, list[Witnessed]] | None,
               head: tuple[int, str] | None) -> None:
    _check_file(conn, verdict)
    pending = bool(migrations.pending(Database(conn)))
    found = _schema(conn)
    _check_triggers(verdict, found, pending)
    if not pending:
        _check_schema(verdict, found)
    _check_references(conn, verdict)
    if record is None or record_of(conn) != record:
        return  # not sealed under a key yet: the schema line says to migrate
    verdict.key_id = record[1]
    tables = {name for (kind, name) in found if kind == "table"}
    positions = _check_chain(conn, Sealer(key) if key else None, verdict, tables)
    _check_versions(conn, verdict, tables)
    if key is None:
        verdict.problems.append(f"{why}: its chain and its witness were not checked")
        return
    last = verdict.head[0] if verdict.head else 0
    if witnessed is not None:
        _check_witness(*witnessed, positions, last, verdict)
    if head is not None:
        _check_given_head(head, positions, last, verdict)


def verify_file(path: str | Path, *, head: tuple[int, str] | None = None) -> Verdict:
    """Check a database file as it is, without migrating it first."""
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True,
                           isolation_level=None)
    try:
        return verify(conn, head=head)
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


def _check_references(conn: sqlite3.Connection, verdict: Verdict) -> None:
    """Rows that name a row no longer there (an item or a rater replaced or removed
    from a program that does not check references): one line per table and parent."""
    missing: dict[tuple[str, str], list[int]] = {}
    for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
        missing.setdefault((table, parent), []).append(rowid)
    for (table, parent), rowids in sorted(missing.items()):
        verdict.problems.append(f"{table}: {len(rowids)} row(s) ({_some(rowids)}) name a row of"
                                f" {parent} that is not there (replaced or removed)")


def _some(ids: list, n: int = 5) -> str:
    return ", ".join(str(i) for i in ids[:n]) + (", ..." if len(ids) > n else "")


def _check_triggers(verdict: Verdict, found: dict, pending: bool) -> None:
    have = {name: v for (kind, name), v in found.items() if kind == "trigger"}
    tables = {name for (kind, name) in found if kind == "table"}
    expected = expected_triggers()
    for name, (table, words) in sorted(required_protections().items()):
        if name not in expected:  # a migration forgot it: carelens itself is at fault
            verdict.problems.append(f"protection missing: {table} {words}: carelens makes no"
                                    f" trigger {name} (a fault of this version: a migration"
                                    " must call store.migrations.seal_tables)")
    for name, (table, sql) in sorted(expected.items()):
        if table not in tables:
            continue  # not there: the table line (or the schema line) says why
        if name not in have:
            verdict.problems.append(
                f"protection missing: {table} no longer {_what(name)} (trigger {name} was"
                " dropped)" if not pending else
                f"protection not made yet: trigger {name} on {table} ({_what(name)}): a"
                " migration is not applied")
        elif have[name] != (table, sql):
            if pending:
                continue  # a later migration remakes it: the schema line says to apply them
            verdict.problems.append(
                f"protection changed: trigger {name} on {table} is not the one carelens made"
                f" ({_what(name)})")
        else:
            verdict.protections += 1
    for name, (table, _) in sorted(have.items()):
        if name not in expected:
            verdict.problems.append(
                f"unknown trigger {name} on {table}: carelens made no such trigger"
                + (" (a sealed table)" if table in SEALED else ""))


def _check_schema(verdict: Verdict, found: dict) -> None:
    """Tables, indexes and views as carelens made them (triggers: `_check_triggers`)."""
    expected = _expected()
    for (kind, name), (table, sql) in sorted(expected.items()):
        if kind == "trigger":
            continue
        here = found.get((kind, name))
        if kind == "table":
            if here is None:
                verdict.problems.append(f"table missing: {name} is not there (dropped with its"
                                        " rows and its protections)")
            elif here[1] != sql:
                verdict.problems.append(f"table changed: {name} is not as carelens made it (its"
                                        " columns or their constraints were changed)")
        elif kind == "view":
            if here is None:
                verdict.problems.append(f"view missing: {name} is not there (dropped)")
            elif here[1] != sql:
                verdict.problems.append(f"view changed: {name} is not the one carelens made ("
                                        f"{_VIEWS.get(name, 'part of the schema')})")
        elif kind == "index" and here is None:
            verdict.problems.append(f"index missing: {name} on {table} is not there (dropped)")
        elif kind == "index" and here != (table, sql):
            verdict.problems.append(f"index changed: {name} on {table} is not the one carelens"
                                    " made (a unique or partial index changes which rows a"
                                    " table takes)")
    for (kind, name), (table, _) in sorted(found.items()):
        if kind == "trigger" or (kind, name) in expected:
            continue
        verdict.problems.append({
            "table": f"unknown table {name}: carelens made no such table",
            "view": f"unknown view {name}: carelens made no such view",
            "index": f"unknown index {name} on {table}: carelens made no such index (a unique"
                     " or partial index changes which rows a table takes)",
        }.get(kind, f"unknown {kind} {name}: carelens made no such thing"))


def _ranges(ids: list[int]) -> str:
    """1, 2, 3, 7 -> '1-3, 7' (at most five ranges, then how many more)."""
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    shown = [f"{a:,}" if a == b else f"{a:,}-{b:,}" for a, b in spans[:5]]
    return ", ".join(shown) + (f" and {len(spans) - 5} more ranges" if len(spans) > 5 else "")


def _plural(word: str) -> str:
    if word.endswith("entry"):
        return word[:-1] + "ies"
    return word.replace("choice to see", "choices to see") if word.startswith("choice") \
        else word + "s"


def _rows_words(rows: list[tuple[str, int, int]]) -> str:
    """[(table, first row id, last row id), ...] -> 'answers 7-12, audit entry 3'."""
    by_table: dict[str, list[int]] = defaultdict(list)
    for table, lo, hi in rows:
        by_table[table].extend(range(lo, min(hi, lo + 10_000) + 1))
    return ", ".join(
        f"{SEALED[t].word if len(ids) == 1 else _plural(SEALED[t].word)} {_ranges(ids)}"
        for t, ids in by_table.items())


def _tables_prefix(rows: list[tuple[str, int, int]]) -> str:
    """'annotations: ' when the rows are of one table, 'record: ' otherwise."""
    tables = {t for t, _, _ in rows}
    return f"{next(iter(tables))}: " if len(tables) == 1 else "record: "


def _check_chain(conn: sqlite3.Connection, sealer: Sealer | None, verdict: Verdict,
                 tables: set[str]) -> dict[int, str]:
    """Every chained row, in the order of its position: its hash follows from the
    position before it under the record's key (not checked without the key); the
    positions run without a gap; the head is the last. Returns {position: hash}."""
    rows = []
    for table in chained_tables():
        if table not in tables:
            continue
        columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if "seq" not in columns or "chain" not in columns:
            continue  # the schema line says it changed
        n = 0
        unchained = []
        for seq, rowid, stored, fields in conn.execute(
                f"SELECT seq, rowid, chain, {body(table)} FROM {table}"):
            n += 1
            if seq is None or stored is None:
                unchained.append(rowid)
            else:
                rows.append((seq, table, rowid, stored, fields))
        verdict.rows[table] = n
        if unchained and table == VERSIONS:
            _report_unsealed_versions(conn, unchained, verdict)
        elif unchained:
            verdict.problems.append(
                f"{table}: {_rows_words([(table, r, r) for r in unchained])} have no place in the"
                " record: added without its chain trigger" if len(unchained) > 1 else
                f"{table}: {SEALED[table].word} {unchained[0]:,} has no place in the record: added"
                " without its chain trigger")
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    heads = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT name, last_id, hash FROM"
                                                       " chain_heads")}
    positions = {}
    previous_seq, previous = 0, None
    gaps: list[tuple[int, int, int]] = []  # (first missing, last missing, index of next row)
    broken: list[int] = []  # indexes of rows whose hash does not follow
    for i, (seq, table, rowid, stored, fields) in enumerate(rows):
        if seq != previous_seq + 1:
            if seq <= previous_seq:
                verdict.problems.append(f"record: position {seq:,} is taken twice ({table} row"
                                        f" {rowid} and another): a row was slipped in")
            else:
                gaps.append((previous_seq + 1, seq - 1, i))
        if sealer is not None and stored != sealer.seal(previous, seq, table, fields):
            broken.append(i)
        positions[seq] = stored
        previous_seq, previous = seq, stored
    last = (rows[-1][0], rows[-1][3]) if rows else (0, None)
    verdict.head = last
    head = heads.get("record")
    if head is None:
        verdict.problems.append("record: its head is missing from chain_heads")
    elif head[0] is not None and head[0] > last[0]:
        gaps.append((last[0] + 1, head[0], len(rows)))  # removed from its end
    elif head[0] != last[0]:
        verdict.problems.append(f"record: rows after its head ({head[0]:,}) up to position"
                                f" {last[0]:,}: added without the chain")
    elif head[1] != last[1]:
        verdict.problems.append(f"record: its head does not match its last position"
                                f" ({last[0]:,})")
    _report_gaps(rows, gaps, _table_tails(rows, heads, tables, verdict), verdict)
    _report_broken(conn, rows, broken, {g[2] for g in gaps}, verdict)
    return positions


def _table_tails(rows: list, heads: dict, tables: set[str],
                 verdict: Verdict) -> list[tuple[str, int, int]]:
    """The last rows of each chained table that its head says were there and are
    not: [(table, first row id, last row id)]."""
    highest: dict[str, int] = defaultdict(int)
    for _, table, rowid, _, _ in rows:
        highest[table] = max(highest[table], rowid)
    tails = []
    for table in chained_tables():
        if table not in tables or table not in verdict.rows:
            continue
        if table not in heads:
            verdict.problems.append(f"{table}: its head is missing from chain_heads")
        elif (heads[table][0] or 0) > highest[table]:
            tails.append((table, highest[table] + 1, heads[table][0]))
    return tails


def _report_gaps(rows: list, gaps: list, tails: list, verdict: Verdict) -> None:
    """One line per run of positions missing: the rows gone, named where their
    table's row ids say which (row ids skipped between two rows of the table, or
    after its last row up to its head), or said to be the last of their tables."""
    by_table: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for seq, table, rowid, _, _ in rows:
        by_table[table].append((rowid, seq))
    named: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for table, ids in by_table.items():
        ids.sort()
        previous_rowid = previous_seq = 0
        for rowid, seq in ids:
            if rowid > previous_rowid + 1:
                # Gone between two rows of the table: in the first gap after the one before.
                k = next((k for k, (_, last, _) in enumerate(gaps) if last > previous_seq), None)
                if k is not None:
                    named[k].append((table, previous_rowid + 1, rowid - 1))
            previous_rowid, previous_seq = rowid, seq
    unexplained = [k for k in range(len(gaps)) if not named[k]]
    if len(unexplained) == 1 and tails:
        named[unexplained[0]].extend(tails)
        tails = []
    for table, lo, hi in tails:  # no run of positions missing says where they were
        verdict.problems.append(f"{table}: {_rows_words([(table, lo, hi)])} removed from the end"
                                " of its table")
    for k, (first, last, i) in enumerate(gaps):
        where = (f"the chain breaks at {SEALED[rows[i][1]].word} {rows[i][2]:,}, position"
                 f" {rows[i][0]:,}" if i < len(rows) else f"the record's head is at {last:,}")
        span = _ranges(list(range(first, min(last, first + 10_000) + 1)))
        end = " from its end" if i == len(rows) else ""
        if named[k]:
            verdict.problems.append(
                f"{_tables_prefix(named[k])}{_rows_words(named[k])} removed (record"
                f" position{'s' if last > first else ''} {span} gone{end}; {where})")
        else:
            verdict.problems.append(
                f"record: position{'s' if last > first else ''} {span} gone{end}: rows removed"
                f" ({where})")


def _report_broken(conn: sqlite3.Connection, rows: list, broken: list[int], after_gap: set[int],
                   verdict: Verdict) -> None:
    """One line per run of rows whose hash does not follow; the row just after a gap
    breaks because of it (the gap's line says so) unless the rows after it break too."""
    runs: list[list[int]] = []
    for i in broken:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        if len(run) == 1 and run[0] in after_gap:
            continue
        if run[0] in after_gap:
            run = run[1:]
        first = rows[run[0]]
        if len(run) == 1 and first[1] == "row_versions":
            # A version of a row of a versioned table: the row is what was changed.
            _, tbl, row_id, *_ = json.loads(first[4])
            verdict.problems.append(
                f"{tbl}: {_describe(conn, tbl, row_id)} changed outside carelens: its version"
                f" ({SEALED['row_versions'].word} {first[2]:,}, record position {first[0]:,}) does"
                " not follow from the record's key (written without it, or changed since)")
        elif len(run) == 1:
            verdict.problems.append(
                f"{first[1]}: {SEALED[first[1]].word} {first[2]:,} changed after it was written,"
                f" or written without the record's key (it does not match its hash; record"
                f" position {first[0]:,})")
        else:
            last = rows[run[-1]]
            verdict.problems.append(
                f"record: positions {first[0]:,}-{last[0]:,}"
                f" ({_rows_words([(rows[i][1], rows[i][2], rows[i][2]) for i in run])}) do not"
                " follow from the"
                " record's key: rewritten from there on, their hashes recomputed without it (or"
                " added without it)")


def _report_unsealed_versions(conn: sqlite3.Connection, ids: list[int],
                              verdict: Verdict) -> None:
    """Versions never sealed (written by a program without the key): one line per row."""
    rows: dict[tuple[str, int], list[int]] = defaultdict(list)
    for vid in ids:
        found = conn.execute("SELECT tbl, row_id FROM row_versions WHERE rowid = ?",
                             (vid,)).fetchone()
        rows[(found[0], found[1])].append(vid)
    for (table, row_id), vids in sorted(rows.items()):
        verdict.unsealed.add((table, row_id))
        verdict.problems.append(
            f"{table}: {_describe(conn, table, row_id)} changed outside carelens: its version"
            f"{'s' if len(vids) > 1 else ''} ({_rows_words([(VERSIONS, v, v) for v in vids])})"
            f" {'were' if len(vids) > 1 else 'was'} never sealed under the record's key")


def _check_versions(conn: sqlite3.Connection, verdict: Verdict, tables: set[str]) -> None:
    """Each row of a versioned table is as its last sealed version says, and each
    change started from the row as the version before left it; every row sealed is
    there, and every row there was sealed. (Rows with a version never sealed are
    named once, by `_check_chain`.)"""
    if VERSIONS not in tables:
        return
    latest: dict[tuple[str, int], str] = {}
    broken: dict[tuple[str, int], int] = {}  # row -> the version whose start was not sealed
    for vid, tbl, row_id, after, before in conn.execute(
            "SELECT id, tbl, row_id, digest, previous FROM row_versions WHERE seq IS NOT NULL"
            " ORDER BY seq, id"):
        unit = (tbl, row_id)
        if before is not None and unit in latest and latest[unit] != before \
                and unit not in broken:
            broken[unit] = vid
        latest[unit] = after
    for table in versioned_tables():
        if table not in tables:
            continue
        label = _LABELS.get(table)
        changed, unsealed = [], []
        n = 0
        for rowid, name, fields in conn.execute(
                f"SELECT rowid, {label or 'NULL'}, {body(table)} FROM {table} ORDER BY rowid"):
            n += 1
            sealed = latest.pop((table, rowid), None)
            if (table, rowid) in verdict.unsealed:
                continue
            shown = f"{rowid:,} ({name!r})" if label else f"{rowid:,}"
            if sealed is None:
                unsealed.append(shown)
            elif sealed != digest(fields):
                changed.append(shown)
        verdict.rows[table] = n
        word, words = SEALED[table].word, _plural(SEALED[table].word)
        if changed:
            verdict.problems.append(
                f"{table}: {word if len(changed) == 1 else words} {_some(changed)}"
                f" {'is' if len(changed) == 1 else 'are'} not as carelens last sealed"
                f" {'it' if len(changed) == 1 else 'them'}: changed outside carelens")
        if unsealed:
            verdict.problems.append(
                f"{table}: {word if len(unsealed) == 1 else words} {_some(unsealed)}"
                f" {'was' if len(unsealed) == 1 else 'were'} never sealed: added outside carelens")
        gone = sorted(r for (t, r) in latest if t == table)
        if gone:
            verdict.problems.append(
                f"{table}: {word if len(gone) == 1 else words} {_ranges(gone)} removed (sealed,"
                " and no longer there)")
        for (t, rowid), vid in sorted(broken.items()):
            if t == table:
                verdict.problems.append(
                    f"{table}: {_describe(conn, table, rowid)} was changed outside carelens"
                    f" before its change sealed as row version {vid:,} (that change did not start"
                    " from the row as carelens had sealed it)")
    strays = sorted({t for (t, _) in latest if t not in SEALED})
    if strays:
        verdict.problems.append(f"row_versions: versions of {', '.join(strays)}, which carelens"
                                " does not seal")


def _describe(conn: sqlite3.Connection, table: str, rowid: int) -> str:
    """'rater 15 ('Dr. Tamper')': a row of a versioned table, named."""
    word = SEALED[table].word if table in SEALED else f"{table} row"
    label = _LABELS.get(table)
    if label is None:
        return f"{word} {rowid:,}"
    try:
        row = conn.execute(f"SELECT {label} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
    except sqlite3.Error:
        row = None
    return f"{word} {rowid:,}" + (f" ({row[0]!r})" if row else "")


_LABELS = {"raters": "name", "items": "uid", "questions": "key", "datasets": "name",
           "review_rounds": "name"}
"""The column that names a row of a versioned table in a verdict."""


def _read_witness(database: Path, sealer: Sealer, record: str,
                  verdict: Verdict) -> tuple[Path, list[Witnessed]] | None:
    """The heads the witness holds (its path and them), its problems in `verdict`;
    None when it holds none to check the record against."""
    path = witness_path(database)
    if path is None:
        return None
    if not path.exists():
        verdict.problems.append(
            f"witness: {path} is not there, so a record cut short or an older copy put in its"
            " place cannot be seen (a copy of a database goes with its witness; or give the"
            " head you wrote down: verify --head)")
        return None
    heads, bad = read(path, sealer, record)
    if bad:
        verdict.problems.append(
            f"witness: line{'s' if len(bad) > 1 else ''} {_some(bad)} of {path.name} do"
            f"{'es' if len(bad) == 1 else ''} not carry the record's seal: changed, written"
            " without its key, or another record's")
    if not heads:
        if not bad:
            verdict.problems.append(f"witness: {path.name} holds no head of this record")
        return None
    return path, heads


def _check_witness(path: Path, heads: list[Witnessed], positions: dict[int, str], last: int,
                   verdict: Verdict) -> None:
    """The record holds every head witnessed, up to the furthest."""
    furthest = max(heads, key=lambda w: (w.seq, w.line))
    verdict.witnessed = furthest
    if furthest.seq > last:
        verdict.problems.append(
            f"record: it ends at position {last:,}, but position {furthest.seq:,} was witnessed"
            f" at {furthest.at} ({path.name} line {furthest.line}): rows were cut from its end,"
            " or lost, or an older copy was put in its place")
    wrong = [w for w in heads if w.seq in positions and not positions[w.seq].startswith(w.head)]
    if wrong:
        w = min(wrong, key=lambda w: w.seq)
        verdict.problems.append(
            f"record: position {w.seq:,} is not the one witnessed at {w.at} ({path.name} line"
            f" {w.line}{f' and {len(wrong) - 1} more' if len(wrong) > 1 else ''}): the record was"
            " rewritten from there, or another copy was put in its place")


def _check_given_head(head: tuple[int, str], positions: dict[int, str], last: int,
                      verdict: Verdict) -> None:
    seq, prefix = head
    if seq > last:
        verdict.problems.append(
            f"record: it ends at position {last:,}, before the head you gave ({seq:,}): rows"
            " were cut from its end, or an older copy was put in its place")
    elif seq not in positions or not positions[seq].startswith(prefix):
        verdict.problems.append(
            f"record: position {seq:,} is not the head you gave: the record was rewritten"
            " from there, or this is another record")
