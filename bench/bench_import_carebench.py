"""Import speed at the size of a full study, against merely parsing the files.

925 prefixes and 18,500 raw generations (bench/gen_carebench.py) are imported
into a fresh database; the reference is reading and `json.loads`-ing every
line of the same files in the same run. Bar: the import runs at no less than
one third of raw-parse speed (ratio >= 0.33).

The import is timed from start to commit: every row validated and stored,
readable by every other connection, ready to review. Its commit leaves the
WAL checkpoint (copying the new pages from the log into the database file)
to a background thread (`Store.transaction(bulk=True)`), which overlaps the
search indexing that follows. Printed beside it, from the same run:
- SQLite's share: the same item rows, already prepared, written with one
  `executemany` in a bulk transaction into a fresh database and committed.
  No import can be faster than parse + this;
- the search index that `import_file` builds after the commit, in
  transactions of its own (`review.browse.search.ensure_index`), and the wall time
  until both it and the background checkpoint are done.

    python bench/bench_import_carebench.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gen_carebench import generate  # noqa: E402
from review.browse.search import ensure_index  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.workspace import open_store  # noqa: E402
from store.db import wait_for_checkpoints  # noqa: E402


def parse_only(paths: list[Path]) -> int:
    n = 0
    for p in paths:
        with p.open("r", encoding="utf-8") as fh:
            for line in fh:
                json.loads(line)
                n += 1
    return n


def sqlite_only(store, rows: list[tuple]) -> float:
    """Seconds to write already-prepared item rows and commit them."""
    sql = ("INSERT INTO items (uid, dataset_id, kind, parent_id, case_id, round_id, split, model,"
           " failed, payload, meta, import_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
    with store.transaction() as conn:
        conn.execute("INSERT INTO datasets (name, kind, created_at) VALUES ('floor', 'generic', '')")
    t0 = time.perf_counter()
    with store.transaction(bulk=True) as conn:
        conn.executemany(sql, rows)
    seconds = time.perf_counter() - t0
    wait_for_checkpoints()
    return seconds


def main(repeats: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = list(generate(tmp / "files"))
        size = sum(p.stat().st_size for p in paths) / 1e6
        parse_times, import_times, index_times, floor_times, quiet_times = [], [], [], [], []
        rows = 0
        with open_store(tmp / "source.db") as source:
            for p in paths:
                import_file(source, p, index=False)
            prepared = [tuple(r) for r in source.query(
                "SELECT uid, dataset_id, kind, parent_id, case_id, round_id, split, model, failed,"
                " payload, meta, NULL, created_at FROM items ORDER BY id")]
        for r in range(repeats):
            with open_store(tmp / f"floor{r}.db") as floor:
                floor_times.append(sqlite_only(floor, prepared))
            t0 = time.perf_counter()
            rows = parse_only(paths)
            parse_times.append(time.perf_counter() - t0)
            store = open_store(tmp / f"bench{r}.db")
            t0 = time.perf_counter()
            for p in paths:
                import_file(store, p, index=False)
            import_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            indexed = ensure_index(store)
            index_times.append(time.perf_counter() - t0)
            wait_for_checkpoints()
            quiet_times.append(import_times[-1] + time.perf_counter() - t0)
            items = store.scalar("SELECT COUNT(*) FROM items")
            store.close()
        parse, imp = statistics.median(parse_times), statistics.median(import_times)
        idx, floor = statistics.median(index_times), statistics.median(floor_times)
        quiet = statistics.median(quiet_times)
        print(f"files: {rows:,} rows, {size:.1f} MB; items stored: {items:,}; indexed for search: {indexed:,}")
        print(f"parse only (json): {parse:.3f} s  = {rows / parse:,.0f} rows/s")
        print(f"import, start to commit (one transaction per file): {imp:.3f} s  = {rows / imp:,.0f} rows/s")
        print(f"ratio import/parse speed: {parse / imp:.2f}  (bar: >= 0.33; median of {repeats})")
        print(f"SQLite alone (the same rows prepared, one executemany + commit): {floor:.3f} s"
              f" = {floor / parse:.1f}x the parse; parse + SQLite alone = ratio {parse / (parse + floor):.2f}")
        print(f"search index after the commit: {idx:.3f} s; import + index: {imp + idx:.3f} s"
              f" = ratio {parse / (imp + idx):.2f}; until the index and the background checkpoint"
              f" are both done: {quiet:.3f} s")


if __name__ == "__main__":
    main()
