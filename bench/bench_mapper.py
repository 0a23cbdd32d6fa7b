"""Bench: map 2,000 CARE-Bench responses against the fake server at 50 ms a call.

    .venv/bin/python bench/bench_mapper.py [--n 2000] [--concurrency 16] [--latency 0.05]

Prints
1. the first run's time and its ratio to the floor that latency and
   concurrency allow (n x latency / concurrency = 6.25 s), target < 15 s;
2. the same run again: with nothing left to answer, and answering every item
   again from the cache (target < 1 s, no call reaches the server);
3. a run killed half-way with SIGKILL (a separate process) and resumed: it
   must end with exactly n responses mapped and no duplicate annotations.

The fake server runs in its own process, as a real provider would, so its
work does not share this interpreter's lock. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labels.llm import plan_map_run, run_map  # noqa: E402
from review.workspace import open_store  # noqa: E402
from store import Store  # noqa: E402
from store.records import ItemRecord, RaterRecord  # noqa: E402
from store.writer import RecordWriter  # noqa: E402

MODEL = "openai:bench-mapper"
KEY = "sk-bench-not-a-real-key"


def build_store(path: Path, n: int) -> None:
    """n invented response items, one per prefix, cases of three rounds."""
    records: list = [RaterRecord("carebench-gold", "reference")]
    for i in range(n):
        case, rnd = i // 3, i % 3 + 1
        prefix = f"bench_case_{case:05d}_r{rnd:02d}"
        turns = [f"Invented message {r} of case {case}: headache for {r + 1} days, "
                 f"no fever, eating normally." for r in range(1, rnd + 1)]
        records.append(ItemRecord(uid=prefix, kind="prefix", dataset="carebench-bench",
                                  case_id=f"bench_case_{case:05d}", round_id=rnd,
                                  payload={"turns": turns}))
        records.append(ItemRecord(uid=f"{prefix}::bench-model", kind="response",
                                  dataset="carebench-bench", parent_uid=prefix, round_id=rnd,
                                  model="bench-model",
                                  payload={"response": f"Invented reply {i}: rest, fluids, and see "
                                                       "a doctor if it gets worse.", "error": None}))
    store = open_store(path)
    with store.transaction() as conn:
        RecordWriter(conn, source="bench").write(records)
    store.close()


def start_fake_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_llm_server.py"),
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "PORT":
        proc.kill()
        raise SystemExit(f"the fake server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def mapped(path: Path, version: str) -> tuple[int, int, int]:
    """(annotations, distinct items, duplicated (item, question, rater) units) of a mapper."""
    with Store(path) as store:
        row = store.query_one(
            "SELECT COUNT(*), COUNT(DISTINCT a.item_id) FROM annotations a JOIN raters r"
            " ON r.id = a.rater_id WHERE r.name = ?", (f"{MODEL}@{version}",))
        dups = store.scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM annotations a JOIN raters r ON r.id = a.rater_id"
            " WHERE r.name = ? GROUP BY a.item_id, a.question_id, a.rater_id, a.target"
            " HAVING COUNT(*) > 1)", (f"{MODEL}@{version}",))
    return row[0], row[1], dups


def timed_run(path: Path, version: str, base_url: str, concurrency: int,
              include_answered: bool = False) -> tuple[float, float, object]:
    started = time.perf_counter()
    with open_store(path) as store:
        plan = plan_map_run(store, MODEL, version, include_answered=include_answered)
    planned = time.perf_counter()
    summary = run_map(str(path), plan, concurrency=concurrency, base_url=base_url,
                      keys={"openai": KEY})
    done = time.perf_counter()
    return planned - started, done - started, summary


def worker(path: str, base_url: str, version: str, concurrency: int) -> None:
    """The run the bench kills: plan and run, nothing else."""
    with open_store(path) as store:
        plan = plan_map_run(store, MODEL, version)
    run_map(path, plan, concurrency=concurrency, base_url=base_url)


def main() -> None:
    parser = argparse.ArgumentParser(description="Bench the LLM mapper against the fake server.")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--worker", nargs=3, metavar=("DB", "BASE_URL", "VERSION"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.concurrency)
        return

    floor = args.n * args.latency / args.concurrency
    server, base_url = start_fake_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            t0 = time.perf_counter()
            build_store(db, args.n)
            print(f"store: {args.n} responses written in {time.perf_counter() - t0:.2f} s")

            plan_s, total, summary = timed_run(db, "mapper-v1", base_url, args.concurrency)
            print(f"first run: {summary.answered} mapped in {total:.2f} s (plan {plan_s:.2f} s) "
                  f"with concurrency {args.concurrency} at {args.latency * 1000:.0f} ms a call; "
                  f"floor {floor:.2f} s; ratio {total / floor:.2f} (target < {15 / floor:.1f})")

            _, total, summary = timed_run(db, "mapper-v1", base_url, args.concurrency)
            print(f"run again, nothing left to do: {total:.2f} s ({summary.answered} requests sent)")
            _, total, summary = timed_run(db, "mapper-v1", base_url, args.concurrency,
                                          include_answered=True)
            print(f"run again answering every item from the cache: {total:.2f} s "
                  f"({summary.cached} from the cache, {summary.answered} sent; target < 1 s)")

            # A run killed half-way (SIGKILL: no cleanup at all), then resumed.
            env = {**os.environ, "OPENAI_API_KEY": KEY}
            proc = subprocess.Popen([sys.executable, __file__, "--concurrency",
                                     str(args.concurrency), "--worker", str(db), base_url,
                                     "mapper-v2"], env=env)
            deadline = time.monotonic() + 120
            while mapped(db, "mapper-v2")[0] < args.n // 2:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the run to be killed ended early or never got half-way")
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            at_kill = mapped(db, "mapper-v2")[0]
            _, total, summary = timed_run(db, "mapper-v2", base_url, args.concurrency)
            count, distinct, dups = mapped(db, "mapper-v2")
            ok = count == distinct == args.n and dups == 0
            print(f"killed at {at_kill} mapped; resumed and mapped {summary.answered} more in "
                  f"{total:.2f} s; now {count} annotations on {distinct} distinct responses, "
                  f"{dups} duplicates: {'OK' if ok else 'FAILED'}")
            if not ok:
                raise SystemExit(1)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
