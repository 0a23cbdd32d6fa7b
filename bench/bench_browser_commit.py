"""From a key press to the next item on screen, in a real browser.

Starts the app with `carelens serve` on a demo database, opens it in
headless Chromium (Debian's /usr/bin/chromium), and answers 30 prefixes with
the keyboard. For each answer it measures the time from the key press until
the progress line shows the new count (the server has committed, found and
rendered the next item). The reference is a plain page reload of the same
screen, measured in the same run.

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
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/?reviewer=Dr.%20Bench")
            wait_for_app(page)
            ready_for_keys(page)
            times = []
            for n in range(1, answers + 1):
                page.evaluate("document.activeElement && document.activeElement.blur()")
                t0 = time.perf_counter()
                page.keyboard.press(str(1 + n % 4))
                page.wait_for_function(
                    "t => (document.querySelector('[data-testid=\"stProgress\"]') || {innerText: ''})"
                    ".innerText.includes(t)", arg=f"{n} of 85", polling=5)
                times.append((time.perf_counter() - t0) * 1000)
                wait_for_app(page)
            reloads = []
            for _ in range(5):
                t0 = time.perf_counter()
                page.reload()
                wait_for_app(page)
                reloads.append((time.perf_counter() - t0) * 1000)
        times.sort()
        print(f"key press -> next item shown, {answers} answers: median {statistics.median(times):.0f} ms, "
              f"p95 {times[int(0.95 * (len(times) - 1))]:.0f} ms, max {times[-1]:.0f} ms")
        print(f"reference, a full reload of the screen: median {statistics.median(reloads):.0f} ms; "
              f"ratio {statistics.median(times) / statistics.median(reloads):.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=30)
    main(ap.parse_args().answers)
