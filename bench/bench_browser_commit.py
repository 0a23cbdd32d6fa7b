"""From a key press to the next item on screen, in a real browser.

Starts the app with `carelens serve` on a demo database, opens it in
headless Chromium (Debian's /usr/bin/chromium), and answers 30 prefixes with
the keyboard, each once the item has been on screen long enough for a key to
count (as a clinician reads it first). For each answer it measures the time
from the key press until the progress line shows the new count (the server
has committed, found and rendered the next item). The reference is a plain
page reload of the same screen, measured in the same run.

Measured twice: with the browser's CPU at full speed, and throttled 4x
(DevTools' Emulation.setCPUThrottlingRate, as the browser tests run), each
with its own reference.

    python bench/bench_browser_commit.py [--answers 30]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from review.datasets.demo import load_demo  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.browser import chromium, ready_for_keys, running_app, wait_for_app  # noqa: E402


def loop(browser, url: str, answers: int, throttle: float) -> tuple[list[float], list[float]]:
    """(key -> next item times, reload times) in ms, with the CPU slowed `throttle` times."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    if throttle > 1:
        page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate",
                                                {"rate": throttle})
    page.goto(f"{url}/?reviewer=Dr.%20Bench")
    ready_for_keys(page)
    progress = page.evaluate(
        "() => (document.querySelector('[data-testid=\"stProgress\"]') || {innerText: ''})"
        ".innerText")
    done = int(progress.split(" of ")[0]) if " of " in progress else 0
    times = []
    for n in range(done + 1, done + answers + 1):
        page.evaluate("document.activeElement && document.activeElement.blur()")
        t0 = time.perf_counter()
        page.keyboard.press(str(1 + n % 4))
        page.wait_for_function(
            "t => (document.querySelector('[data-testid=\"stProgress\"]') || {innerText: ''})"
            ".innerText.includes(t)", arg=f"{n} of 85", polling=5)
        times.append((time.perf_counter() - t0) * 1000)
        wait_for_app(page)  # and the dwell: the next key counts
    reloads = []
    for _ in range(5):
        t0 = time.perf_counter()
        page.reload()
        wait_for_app(page, read=False)
        reloads.append((time.perf_counter() - t0 - 0.3) * 1000)  # wait_for_app's 300 ms
    page.close()
    return times, reloads


def main(answers: int) -> None:
    if not shutil.which("chromium") and not Path("/usr/bin/chromium").exists():
        sys.exit("needs Debian's chromium at /usr/bin/chromium")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "browser.db"
        s = open_store(db)
        load_demo(s, Path(tmp) / "files")
        ensure_reviewer(s, "Dr. Bench")
        s.close()
        with running_app(db) as url, chromium() as browser:
            for throttle in (1, 4):
                times, reloads = loop(browser, url, answers, throttle)
                times.sort()
                p90 = times[int(0.9 * (len(times) - 1) + 0.5)]
                what = "full speed" if throttle == 1 else f"CPU throttled {throttle}x"
                print(f"{what}: key press -> next item shown, {answers} answers: median "
                      f"{statistics.median(times):.0f} ms, p90 {p90:.0f} ms, max {times[-1]:.0f} ms")
                print(f"  reference, a full reload of the screen: median "
                      f"{statistics.median(reloads):.0f} ms; ratio "
                      f"{statistics.median(times) / statistics.median(reloads):.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=30)
    main(ap.parse_args().answers)
