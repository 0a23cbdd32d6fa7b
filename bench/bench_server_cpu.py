"""The server's CPU time per answer: how many clinicians one server holds.

Starts the real server (`carelens serve`) on a demo database, opens the
Review screen in headless Chromium and answers N items with the keyboard,
waiting for each next item to be drawn. The figure is the CPU time (user +
system, every thread of the server's process group, from /proc) used across
those answers, divided by N; the CPU the same server spends idle with the
tab open, over the same wall time, is printed beside it.

The reference, measured in the same run: Streamlit's near-empty app (a title,
a line, a button with a shortcut) served the same way, CPU per press of its
button - the least any Streamlit screen can spend on one answer.

At one answer per 10 s per reviewer, two cores hold about
2 x 10 s / (CPU per answer) reviewers.

At a clinician's pace (--pace, one answer every 10 s; --paced answers of it)
the same figure is measured over the whole time, minus what the server spends
idle with the tab open over the same time: it is the quick loop's figure when
nothing runs between two answers (issue 29, point 8: a timer reran the screen
about 5 s after each answer, when its reveal fell due).

    python bench/bench_server_cpu.py [--answers 40] [--paced 12] [--pace 10] [--long]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_screens import JUDGED, NEXT, reference_app  # noqa: E402
from bench.gen_carebench import generate  # noqa: E402
from review.datasets.demo import load_demo  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.browser import READ, SETTLED, chromium, running_server  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def group_cpu(pgid: int) -> float:
    """Seconds of CPU (user + system) used so far by every process of a group."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state ppid pgrp ...
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def answer_by_key(page, judged: str, n: int, keys: str, pace: float = 0.0) -> float:
    """Press n keys (cycling through `keys`), each once the last item is drawn
    and, with `pace`, `pace` seconds after the last; returns the wall time taken."""
    t0 = time.perf_counter()
    for i in range(n):
        page.wait_for_function(READ, timeout=30_000)  # as a reader: a key counts now
        if pace:
            time.sleep(max(0.0, t0 + i * pace - time.perf_counter()))
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.evaluate(f"() => {{ window.__next = ({NEXT})({judged!r}); }}")
        page.keyboard.press(keys[i % len(keys)])
        page.evaluate("window.__next")
        page.wait_for_function(SETTLED, timeout=30_000)
    if pace:
        time.sleep(max(0.0, t0 + n * pace - time.perf_counter()))  # the last answer's time too
    return time.perf_counter() - t0


def measure(browser, url: str, pgid: int, judged: str, n: int, keys: str,
            pace: float = 0.0) -> tuple[float, float]:
    """(CPU ms per key press, idle CPU ms over the same wall time / n)."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    page.wait_for_function(SETTLED, timeout=60_000)
    page.wait_for_timeout(1000)
    cpu0 = group_cpu(pgid)
    wall = answer_by_key(page, judged, n, keys, pace)
    cpu1 = group_cpu(pgid)
    page.wait_for_timeout(500)
    idle0 = group_cpu(pgid)
    time.sleep(wall)
    idle1 = group_cpu(pgid)
    page.close()
    return (cpu1 - cpu0) * 1000 / n, (idle1 - idle0) * 1000 / n


def main(answers: int, long: bool, paced: int, pace: float) -> None:
    if not Path("/usr/bin/chromium").exists():
        sys.exit("needs Debian's chromium at /usr/bin/chromium")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "cpu.db"
        s = open_store(db)
        if long:
            for path in generate(tmp / "long", n_prefixes=10, n_models=20, seed=19):
                import_file(s, path)
        load_demo(s, tmp / "files")
        ensure_reviewer(s, "Dr. Bench")
        ensure_reviewer(s, "Dr. Paced")
        s.close()
        # The reveal of each answer falls due (after its undo window) before the next
        # answer in both loops, so that showing it is counted with the answers, as at
        # a clinician's pace (the 5 s default outlasts the quick loop's second).
        os.environ["CARELENS_REVEAL_DELAY"] = "0.3"
        with running_server(db) as (url, proc), reference_app(tmp) as (ref_url, ref_proc), \
                chromium() as browser:
            ref, ref_idle = measure(browser, ref_url, ref_proc.pid, JUDGED["reference"],
                                    answers, "1")
            print(f"server CPU per key press, {answers} presses (user + system, whole process "
                  "group):")
            quick = {}
            for name, path in (("Review, prefixes", "/?reviewer=Dr.+Bench"),
                               ("Review, responses", "/?reviewer=Dr.+Bench&kind=response")):
                cpu, idle = measure(browser, url + path, proc.pid, JUDGED["review"], answers,
                                    "1234")
                quick[name] = cpu - idle
                print(f"  {name:<20} {cpu:6.0f} ms per answer (idle over the same time: "
                      f"{idle:.0f} ms); ratio to the reference {cpu / ref:.1f}; about "
                      f"{2 * 10_000 / cpu:.0f} reviewers on two cores at one answer per 10 s")
            print(f"  reference: Streamlit's near-empty app {ref:.0f} ms per press (idle "
                  f"{ref_idle:.0f} ms)")
            if paced:
                cpu, idle = measure(browser, url + "/?reviewer=Dr.+Paced", proc.pid,
                                    JUDGED["review"], paced, "1234", pace)
                base = quick["Review, prefixes"]
                print(f"\nat a clinician's pace, one answer every {pace:g} s, {paced} answers "
                      "(Review, prefixes):")
                print(f"  {cpu:6.0f} ms per answer, of which idle over the same time {idle:.0f} ms:"
                      f" {cpu - idle:.0f} ms for the answer; the quick loop's {base:.0f} ms; "
                      f"ratio {(cpu - idle) / base:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=40)
    ap.add_argument("--paced", type=int, default=12,
                    help="answers at a clinician's pace (0: none)")
    ap.add_argument("--pace", type=float, default=10.0, help="seconds between paced answers")
    ap.add_argument("--long", action="store_true",
                    help="200 generated replies of about 1,100 characters first in the queues")
    a = ap.parse_args()
    main(a.answers, a.long, a.paced, a.pace)
