"""How many reviewers one `carelens serve` holds: Streamlit's own protocol, replayed.

First a real Chromium tab opens the Review screen and answers three items by
key, and every message it sends on Streamlit's websocket is recorded
(tests/ws_reviewers.py `record_loop`); a light client's messages for the same
loop are checked to be of the same kinds. Then many light clients
(`LightReviewer`: asyncio and websockets, a few kilobytes each, in worker
processes of their own), each a different reviewer of the same database,
open the Review screen over the websocket and answer one item every 10 s
(a clinician's pace), as the recorded tab did: the first run, the keys'
"live" state, then one rerun with an answer button's trigger per answer,
with the widget ids the server sent.

Measured over a window after every client has connected:
- key -> next: from sending an answer until the server's run that commits it
  and draws the next item has finished (its last message received), p50, p95,
  p99 and the worst;
- the server's CPU (user + system, its whole process group) per answer and
  in cores, the machine's load average, the clients' own CPU;
and afterwards every answer is checked in the database: each reviewer's
answers are exactly the ones their client gave, to the items it was shown,
in order, and nothing else.

One server "holds" a number of reviewers when every answer was recorded as
given and p95 key -> next stays under 500 ms (issue 29, point 8).

    python bench/bench_load_reviewers.py [--reviewers 100,200] [--seconds 120]
        [--pace 10] [--ramp 60] [--workers 2] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_server_cpu import group_cpu  # noqa: E402
from review.datasets.demo import load_demo  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.browser import running_server  # noqa: E402
from tests.ws_reviewers import LightReviewer, record_loop, shape  # noqa: E402

P95_BAR = 0.5


def names(n: int) -> list[str]:
    return [f"Dr. Load {i:03d}" for i in range(n)]


async def clients(url: str, who: list[str], pace: float, start: float, ramp: float,
                  stop: float) -> list[dict]:
    """Each of `who` connects at its moment of the ramp (from `start`, a
    time.time()), then answers every `pace` seconds, from a random phase,
    until `stop`; returns what each gave."""
    async def one(name: str, at: float) -> dict:
        await asyncio.sleep(max(0.0, at - time.time()))
        r = LightReviewer(url, name)
        out = {"name": name, "answers": [], "errors": [], "opened": None}
        try:
            t0 = time.time()
            await r.open()
            out["opened"] = time.time() - t0
            next_at = time.time() + random.uniform(1.0, pace)
            while True:
                await asyncio.sleep(max(0.0, next_at - time.time()))
                if time.time() >= stop or r.item_id is None:
                    break
                sent = time.time()
                a = await r.answer()
                out["answers"].append({"item": a.item_id, "code": a.code, "sent": sent,
                                       "latency": a.latency, "next": a.next_item})
                next_at += pace
        except Exception as exc:  # said in the report, never silent
            out["errors"].append(repr(exc))
        finally:
            out["errors"] += r.errors
            await r.close()
        return out

    step = ramp / max(1, len(who))
    return await asyncio.gather(*(one(n, start + i * step) for i, n in enumerate(who)))


def worker(args: tuple) -> str:
    url, who, pace, start, ramp, stop, path = args
    random.seed(hash(who[0]) if who else 0)
    got = asyncio.run(clients(url, who, pace, start, ramp, stop))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(path).write_text(json.dumps({"clients": got, "cpu": usage.ru_utime + usage.ru_stime}))
    return path


def check_database(db: Path, results: list[dict]) -> list[str]:
    """Every answer recorded as given, nothing else: what is wrong (empty: all right)."""
    wrong = []
    with open_store(db) as s:
        for c in results:
            rows = [(r["item_id"], r["value"]) for r in s.query(
                "SELECT a.item_id, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
                " WHERE r.name = ? ORDER BY a.id", (c["name"],))]
            given = [(a["item"], a["code"]) for a in c["answers"]]
            if rows != given:
                wrong.append(f"{c['name']}: gave {given[:4]}... ({len(given)}), recorded "
                             f"{rows[:4]}... ({len(rows)})")
            for a in c["answers"]:
                if a["latency"] is not None and a["next"] == a["item"]:
                    wrong.append(f"{c['name']}: item {a['item']} still on screen after its answer")
    return wrong


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")


def run_step(n: int, pace: float, seconds: float, ramp: float, workers: int,
             tmp: Path) -> dict:
    db = tmp / f"load-{n}.db"
    with open_store(db) as s:
        load_demo(s, tmp / f"files-{n}")
        for name in names(n):
            ensure_reviewer(s, name)
    who = names(n)
    with running_server(db) as (url, proc):
        start = time.time() + 2.0
        window = start + ramp + pace  # every client connected, and one answer each since
        stop = window + seconds
        parts = [who[i::workers] for i in range(workers)]
        jobs = [(url, part, pace, start + i * ramp / max(1, n), ramp, stop,
                 str(tmp / f"clients-{n}-{i}.json")) for i, part in enumerate(parts) if part]
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            pending = pool.map_async(worker, jobs)
            time.sleep(max(0.0, window - time.time()))
            cpu0, load0, t0 = group_cpu(proc.pid), os.getloadavg()[0], time.time()
            time.sleep(max(0.0, stop - time.time()))
            cpu1, load1, t1 = group_cpu(proc.pid), os.getloadavg()[0], time.time()
            files = pending.get(timeout=stop - time.time() + 600)
    results, client_cpu = [], 0.0
    for f in files:
        got = json.loads(Path(f).read_text())
        results += got["clients"]
        client_cpu += got["cpu"]
    in_window = [a for c in results for a in c["answers"] if t0 <= a["sent"] < t1]
    latencies = [a["latency"] for a in in_window if a["latency"] is not None]
    lost = sum(1 for a in in_window if a["latency"] is None)
    wrong = check_database(db, results)
    errors = [f"{c['name']}: {e}" for c in results for e in c["errors"]]
    opened = [c["opened"] for c in results if c["opened"] is not None]
    return {"n": n, "answers": len(in_window), "per_s": len(in_window) / (t1 - t0),
            "p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95),
            "p99": percentile(latencies, 0.99), "max": max(latencies, default=float("nan")),
            "lost": lost, "cpu_cores": (cpu1 - cpu0) / (t1 - t0),
            "cpu_per_answer": (cpu1 - cpu0) / max(1, len(in_window)),
            "load": (load0, load1), "client_cpu": client_cpu, "wrong": wrong,
            "errors": errors, "connected": len(opened), "open_p50": percentile(opened, 0.5),
            "all_answers": sum(len(c["answers"]) for c in results)}


def check_replay(tmp: Path) -> None:
    """Chromium's messages for a reviewer's loop, recorded, against the light client's."""
    db = tmp / "record.db"
    with open_store(db) as s:
        load_demo(s, tmp / "files-record")
        ensure_reviewer(s, "Dr. Recorded")
        ensure_reviewer(s, "Dr. Replayed")
    with running_server(db) as (url, _proc):
        recorded = record_loop(url, "Dr. Recorded", answers=3)

        async def replay() -> list[bytes]:
            r = LightReviewer(url, "Dr. Replayed")
            await r.open()
            for code in ("0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
                         "1A_ESCALATION_NONURGENT_CARE"):
                await asyncio.sleep(0.7)  # as the tab: once the item has been read
                await r.answer(code)
            await r.close()
            return r.sent

        from streamlit.proto.BackMsg_pb2 import BackMsg

        sent = []
        for payload in asyncio.run(replay()):
            msg = BackMsg()
            msg.ParseFromString(payload)
            sent.append(msg)
    with open_store(db) as s:
        def given(name: str) -> list:
            return [tuple(r) for r in s.query(
                "SELECT i.uid, a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
                " JOIN items i ON i.id = a.item_id WHERE r.name = ? ORDER BY a.id", (name,))]
        same_answers = [u for u, _ in given("Dr. Recorded")] == [u for u, _ in given("Dr. Replayed")]
    kinds_chromium = {shape(m) for m in recorded if m.WhichOneof("type") == "rerun_script"}
    kinds_light = {shape(m) for m in sent}
    print(f"recorded: Chromium sent {len(recorded)} messages for the loop "
          f"({sum(m.WhichOneof('type') == 'rerun_script' for m in recorded)} reruns); "
          f"the light client {len(sent)}")
    print(f"  kinds of message, Chromium: {sorted(kinds_chromium)}")
    print(f"  kinds of message, replayed: {sorted(kinds_light)}")
    print(f"  same kinds: {'yes' if kinds_light <= kinds_chromium else 'NO'}; the same items "
          f"answered in the same order: {'yes' if same_answers else 'NO'}")


def main(steps: list[int], pace: float, seconds: float, ramp: float, workers: int,
         record: bool) -> None:
    os.environ.setdefault("CARELENS_REVEAL_DELAY", "5")  # the default undo window
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if record:
            check_replay(tmp)
        print(f"\nlight reviewers on one `carelens serve`, one answer every {pace:g} s each, "
              f"measured over {seconds:g} s once all were connected ({os.cpu_count()} cores):")
        for n in steps:
            r = run_step(n, pace, seconds, ramp, workers, tmp)
            held = not r["wrong"] and not r["lost"] and not r["errors"] and r["p95"] < P95_BAR
            print(f"  {n:4d} reviewers: {r['answers']} answers ({r['per_s']:.1f}/s); key -> next "
                  f"p50 {r['p50'] * 1000:.0f} ms, p95 {r['p95'] * 1000:.0f} ms, p99 "
                  f"{r['p99'] * 1000:.0f} ms, worst {r['max'] * 1000:.0f} ms; server CPU "
                  f"{r['cpu_cores']:.2f} cores, {r['cpu_per_answer'] * 1000:.0f} ms per answer; "
                  f"load average {r['load'][0]:.1f} -> {r['load'][1]:.1f}; clients' own CPU "
                  f"{r['client_cpu']:.0f} s; connected {r['connected']} of {n} (first screen "
                  f"p50 {r['open_p50']:.2f} s)")
            print(f"       database: {r['all_answers']} answers given, "
                  + ("every one recorded as given, nothing else" if not r["wrong"]
                     else f"{len(r['wrong'])} WRONG: {r['wrong'][:3]}")
                  + (f"; {r['lost']} answers with no end of run" if r["lost"] else "")
                  + (f"; {len(r['errors'])} client errors: {r['errors'][:3]}" if r["errors"]
                     else ""))
            print(f"       {'HELD' if held else 'NOT HELD'} (every answer recorded, p95 under "
                  f"{P95_BAR * 1000:.0f} ms)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reviewers", default="100,200",
                    help="comma-separated numbers of reviewers, one server each")
    ap.add_argument("--pace", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--ramp", type=float, default=60.0,
                    help="seconds over which the reviewers connect")
    ap.add_argument("--workers", type=int, default=2, help="client processes")
    ap.add_argument("--no-record", action="store_true",
                    help="skip recording Chromium's messages first")
    a = ap.parse_args()
    main([int(x) for x in a.reviewers.split(",")], a.pace, a.seconds, a.ramp, a.workers,
         not a.no_record)
