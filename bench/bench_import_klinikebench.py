"""Import 14,000 KlinikeBench episodes of the published shape; print speed, memory and the ratio to parsing.

    .venv/bin/python bench/bench_import_klinikebench.py [--episodes 14000] [--steps 30]
                                                        [--workdir /tmp/carelens-bench] [--keep]
                                                        [--index-workers N]

Steps, each timed in its own child process so its peak RSS is its own:
1. write the file with bench/gen_klinikebench.py (once; reused when present): the
   dataset card's shape - verifier scores as 0..1 floats, `transcript`,
   `agent_steps` (a whole ATIF trajectory), `gates` and `meta` as JSON strings;
2. baseline: merely parse it - `json.loads` of every line and of its four
   JSON-string fields (transcript, agent_steps, gates, meta);
3. import it with `import_file` into a fresh database (one transaction), then
   the search index it builds after the commit (timed apart; the target is
   held by the two together), its text extracted by worker processes
   (`review.browse.index_workers`), whose processor time is counted with the
   import's;
4. open a 200-step trajectory through the display model, server side.
Targets (issue 16): import under 60 s and 1 GB peak RSS (the commit and the
search index together); opening under 300 ms (issue 3).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMPORT_LIMIT_S = 60.0
RSS_LIMIT_MB = 1024.0
OPEN_LIMIT_MS = 300.0
JSON_FIELDS = ("transcript", "agent_steps", "gates", "meta")


def peak_rss_mb() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_parse(path: Path) -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    rows = 0
    with path.open("r", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            for name in JSON_FIELDS:
                if isinstance(row.get(name), str):
                    json.loads(row[name])
            rows += 1
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu,
            "rows": rows, "peak_rss_mb": peak_rss_mb()}


def child_import(path: Path, db: Path) -> dict:
    from review.datasets.sources import import_file
    from review.workspace import open_store

    store = open_store(db)
    sampler = _TotalRss()
    started, cpu = time.perf_counter(), time.process_time()
    children = _children_cpu()
    result = import_file(store, path, "klinikebench")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    workers_cpu = _children_cpu() - children  # the search index's worker processes
    sampler.stop()
    counts = {t: store.scalar(f"SELECT COUNT(*) FROM {t}") for t in ("items", "questions", "annotations")}
    store.close()
    return {"seconds": seconds, "cpu_seconds": cpu + workers_cpu, "workers_cpu_seconds": workers_cpu,
            "commit_seconds": result.seconds, "index_seconds": result.index_seconds,
            "indexed": result.indexed, "rows": result.rows, "peak_rss_mb": peak_rss_mb(),
            "total_peak_rss_mb": max(sampler.peak_mb, peak_rss_mb()), **counts}


class _TotalRss(threading.Thread):
    """The resident memory of this process and its children (the index's workers)
    together, sampled four times a second; `peak_mb` is the most seen. (A child's
    own ru_maxrss is no use: it counts the parent's pages between fork and exec.)"""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mb, self._done = 0.0, threading.Event()
        self.start()

    def run(self) -> None:
        me = os.getpid()
        while not self._done.wait(0.25):
            pids = [me] + [int(p) for p in _children_of(me)]
            total = sum(_rss_kib(p) for p in pids)
            self.peak_mb = max(self.peak_mb, total / 1024)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _children_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children_cpu() -> float:
    """Processor time of this process's ended children (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_open(db: Path, workdir: Path) -> dict:
    from bench.gen_klinikebench import episode
    from review.datasets.sources import import_file
    from review.reviewing.trajectory import load_trajectory
    from review.workspace import open_store

    long_file = workdir / "klinikebench-200-steps.jsonl"
    row = next(r for r in (episode(i, seed=11, steps=200) for i in range(50)) if not r["exception"])
    row["trial_name"] = "long-run__200-steps"  # not one of the imported episodes
    long_file.write_text(json.dumps(row) + "\n", encoding="utf-8")
    store = open_store(db)  # the big database: the trajectory is opened among 14,000 others
    import_file(store, long_file, "klinikebench")
    uid = store.scalar("SELECT uid FROM items WHERE uid LIKE '%long-run__200-steps'")
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        view = load_trajectory(store, uid)
        timings.append((time.perf_counter() - started) * 1000)
    store.close()
    return {"steps": len(view.steps), "first_ms": timings[0], "median_ms": sorted(timings)[2]}


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], check=True,
                         capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=14_000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/carelens-bench"))
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--index-workers", type=int, metavar="N",
                        help="worker processes for the search index (0: none, as before them;"
                             " default: one per processor, up to 4)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        result = {"parse": lambda: child_parse(Path(rest[0])),
                  "import": lambda: child_import(Path(rest[0]), Path(rest[1])),
                  "open": lambda: child_open(Path(rest[0]), Path(rest[1]))}[kind]()
        print(json.dumps(result))
        return 0

    from bench.gen_klinikebench import write_jsonl
    from review.browse.index_workers import WORKERS_ENV

    if args.index_workers is not None:  # the import's child process inherits it
        os.environ[WORKERS_ENV] = str(args.index_workers)

    args.workdir.mkdir(parents=True, exist_ok=True)
    data = args.workdir / f"klinikebench-published-{args.episodes}x{args.steps}.jsonl"
    if not data.exists():
        started = time.perf_counter()
        write_jsonl(data, args.episodes, steps=args.steps)
        print(f"generated {data} in {time.perf_counter() - started:.1f} s")
    size_mb = data.stat().st_size / 1e6
    db = args.workdir / "bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    parse = run_child("parse", str(data))
    imp = run_child("import", str(data), str(db))
    opened = run_child("open", str(db), str(args.workdir))
    db_mb = db.stat().st_size / 1e6

    ok_time = imp["seconds"] < IMPORT_LIMIT_S
    ok_rss = imp["total_peak_rss_mb"] < RSS_LIMIT_MB
    ok_open = opened["first_ms"] < OPEN_LIMIT_MS
    print(f"file: {data.name}, {parse['rows']} episodes, {size_mb:.0f} MB "
          f"({size_mb * 1e3 / max(parse['rows'], 1):.0f} KB an episode), {os.cpu_count()} CPUs")
    print(f"parse only (json.loads of each line and its 4 JSON strings): {parse['seconds']:.1f} s, "
          f"{parse['rows'] / parse['seconds']:.0f} rows/s, peak RSS {parse['peak_rss_mb']:.0f} MB")
    print(f"import (one transaction, start to commit): {imp['commit_seconds']:.1f} s, "
          f"{imp['rows'] / imp['commit_seconds']:.0f} rows/s -> {imp['items']} items, "
          f"{imp['questions']} questions, {imp['annotations']} annotations")
    print(f"search index after the commit: {imp['indexed']} items in {imp['index_seconds']:.1f} s; "
          f"together {imp['seconds']:.1f} s, peak RSS {imp['peak_rss_mb']:.0f} MB; database {db_mb:.0f} MB")
    print(f"the index's worker processes: {imp['workers_cpu_seconds']:.1f} s of processor time"
          f" (counted below); peak RSS of the import and its workers together (sampled)"
          f" {imp['total_peak_rss_mb']:.0f} MB")
    print(f"import / parse time: {imp['commit_seconds'] / parse['seconds']:.1f}x; "
          f"with the index {imp['seconds'] / parse['seconds']:.1f}x")
    print(f"processor time (all threads; what a busy machine does not stretch): parse "
          f"{parse['cpu_seconds']:.1f} s, import with the index {imp['cpu_seconds']:.1f} s "
          f"({imp['cpu_seconds'] / parse['cpu_seconds']:.1f}x); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"open a {opened['steps']}-step trajectory: first {opened['first_ms']:.1f} ms, "
          f"median of 5 {opened['median_ms']:.1f} ms")
    print(f"targets: import < {IMPORT_LIMIT_S:.0f} s {'PASS' if ok_time else 'FAIL'}; "
          f"peak RSS < {RSS_LIMIT_MB:.0f} MB {'PASS' if ok_rss else 'FAIL'}; "
          f"open < {OPEN_LIMIT_MS:.0f} ms {'PASS' if ok_open else 'FAIL'}")
    if not args.keep:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return 0 if ok_time and ok_rss and ok_open else 1


if __name__ == "__main__":
    sys.exit(main())
