"""Import speed at the size of a full study, against merely parsing the files.

925 prefixes and 18,500 raw generations (bench/gen_carebench.py) are imported
into a fresh database; the reference is reading and `json.loads`-ing every
line of the same files in the same run. Bar: the import runs at no less than
one third of raw-parse speed (ratio >= 0.33).

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
from review.sources import import_file  # noqa: E402
from review.workspace import open_store  # noqa: E402


def parse_only(paths: list[Path]) -> int:
    n = 0
    for p in paths:
        with p.open("r", encoding="utf-8") as fh:
            for line in fh:
                json.loads(line)
                n += 1
    return n


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = list(generate(tmp / "files"))
        size = sum(p.stat().st_size for p in paths) / 1e6
        parse_times, import_times = [], []
        rows = 0
        for r in range(repeats):
            t0 = time.perf_counter()
            rows = parse_only(paths)
            parse_times.append(time.perf_counter() - t0)
            store = open_store(tmp / f"bench{r}.db")
            t0 = time.perf_counter()
            for p in paths:
                import_file(store, p)
            import_times.append(time.perf_counter() - t0)
            items = store.scalar("SELECT COUNT(*) FROM items")
            store.close()
        parse, imp = statistics.median(parse_times), statistics.median(import_times)
        print(f"files: {rows:,} rows, {size:.1f} MB; items stored: {items:,}")
        print(f"parse only (json): {parse:.2f} s  = {rows / parse:,.0f} rows/s")
        print(f"import (one transaction per file): {imp:.2f} s  = {rows / imp:,.0f} rows/s")
        print(f"ratio import/parse speed: {parse / imp:.2f}  (bar: >= 0.33; median of {repeats})")


if __name__ == "__main__":
    main()
