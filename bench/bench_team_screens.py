"""First render and each facet click of the team's screens, in a real browser.

Starts the app with `carelens serve` on a demo database (and, with --items, on a
synthetic CARE-Bench-shaped database of that many items, as bench_agreement.py
builds it), opens each screen in a fresh browser context (an empty cache, as a
new user's browser) in headless Chromium, and measures the time from opening
the address until the screen is drawn and ready (Streamlit's script has run
and nothing is still loading). Then, on Agreement and Browse, each facet click:
from the click until the screen is redrawn; and on Agreement, its triage tab: from the
click on the tab until the leaderboard is drawn (shown in the first-render column).

The references, measured in the same run: the Codebook screen's first render
(a screen that reads a few rows and draws text), on the same server; and
Streamlit's own near-empty app (bench/bench_screens.py), served beside it and
opened between the screens: issue 29, point 7 asks a new tab to show its
content within 1.2x of it.

    .venv/bin/python bench/bench_team_screens.py [--items 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import TimeoutError as PlaywrightTimeout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_agreement import synthetic  # noqa: E402
from bench.bench_screens import reference_app  # noqa: E402
from review.datasets.demo import load_demo  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.browser import chromium, running_app, wait_for_app  # noqa: E402

ADMIN = "Jordan Lee"
SCREENS = {  # name: (address, text that says the screen is there)
    "Codebook (reference)": ("codebook", "Codebook"),
    "Agreement": ("agreement", "Confusion matrix"),
    "Browse": ("browse", "Narrow down"),
    "Rounds and people": ("rounds", "People"),
    "Progress and audit": ("activity", "Progress and audit"),
    "Adjudicate": ("adjudicate", "Adjudicate"),
    "Data": ("data", "Imports so far"),
}
TRIAGE_TAB = ("Triage & leaderboard", "Would the mapper have changed the leaderboard?")
EMPTY = "Streamlit's empty app"
"""The near-empty app's row (bench/bench_screens.py REFERENCE_APP)."""


def ready(page, text: str) -> None:
    page.wait_for_function("t => document.body.innerText.includes(t)", arg=text, timeout=120_000,
                           polling=20)
    wait_for_app(page, timeout=120_000, read=False)  # drawn (a key's dwell is the reader's)


def first_render(browser, url: str, path: str, text: str, who: str) -> tuple[float, object]:
    """Seconds from opening the address in a fresh context until the screen is ready;
    the context is returned open (the caller closes it)."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(f"{url}/{path}?reviewer={quote(who)}")
    ready(page, text)
    # wait_for_app waits 300 ms to see that no second run begins: not the screen's time.
    return time.perf_counter() - t0 - 0.3, (ctx, page)


def timed_click(page, do) -> float:
    t0 = time.perf_counter()
    do()
    with contextlib.suppress(PlaywrightTimeout):  # a run over before it was seen running
        page.wait_for_function(
            "() => document.querySelector('[data-testid=\"stApp\"]').dataset.testScriptState"
            " === 'running'", timeout=5_000, polling=5)
    wait_for_app(page, timeout=120_000, read=False)
    return time.perf_counter() - t0 - 0.3


def browse_clicks(page) -> list[float]:
    """Each facet click of Browse: responses, then the validation split, then responses off."""
    import re

    main = page.get_by_test_id("stMain")
    out = []
    for name in (r"^Responses \(", r"^validation \(", r"^Responses \("):
        button = main.get_by_role("button", name=re.compile(name)).first
        out.append(timed_click(page, button.click))
    return out


def agreement_clicks(page) -> list[float]:
    """Each filter change of Agreement: the clinicians' current answers, then back to the
    default (blind ones)."""
    from labels.phases import CURRENT, DEFAULT_PHASE, SHORT_WORDS

    out = []
    side = page.get_by_test_id("stSidebar")
    for choice in (SHORT_WORDS[CURRENT], SHORT_WORDS[DEFAULT_PHASE]):
        box = side.get_by_label("Clinicians' answers", exact=True)
        for _ in range(5):  # the first click may only focus the box
            box.click()
            if page.get_by_role("option", name=choice, exact=True).count():
                break
            page.wait_for_timeout(200)

        def pick(choice=choice):
            page.get_by_role("option", name=choice, exact=True).click()
        out.append(timed_click(page, pick))
    return out


def triage_tab(page) -> float:
    """Agreement's triage tab, opened from the screen's first tab: from the click until
    the leaderboard is drawn."""
    name, text = TRIAGE_TAB
    t0 = time.perf_counter()
    page.get_by_role("tab", name=name).click()
    ready(page, text)
    return time.perf_counter() - t0 - 0.3


def measure(url: str, repeat: int, screens: dict,
            empty_url: str | None = None) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    with chromium() as browser:
        # One warm-up visit: the server imports its modules on the first session.
        seconds, (ctx, _) = first_render(browser, url, "codebook", "Codebook", ADMIN)
        ctx.close()
        for _ in range(repeat):
            if empty_url:
                seconds, (ctx, _) = first_render(browser, empty_url, "", "Pressed 0 times", ADMIN)
                out.setdefault(EMPTY, {"first": [], "clicks": []})["first"].append(seconds)
                ctx.close()
            for name, (path, text) in screens.items():
                seconds, (ctx, page) = first_render(browser, url, path, text, ADMIN)
                row = out.setdefault(name, {"first": [], "clicks": []})
                row["first"].append(seconds)
                if name == "Browse":
                    row["clicks"] += browse_clicks(page)
                elif name == "Agreement":
                    row["clicks"] += agreement_clicks(page)
                    tab = out.setdefault("Agreement, triage tab", {"first": [], "clicks": []})
                    tab["first"].append(triage_tab(page))
                ctx.close()
    return out


def report(title: str, results: dict) -> None:
    """Median and best of the runs: on a shared machine the best is the screen's own cost,
    the median what a user meets; each with its ratio to the reference's."""
    ref = results["Codebook (reference)"]["first"]
    ref_med, ref_min = statistics.median(ref), min(ref)
    empty = statistics.median(results[EMPTY]["first"]) if EMPTY in results else None
    print(f"\n{title}: seconds over {len(ref)} runs (ratio to the Codebook's)"
          + (f"; ratio to {EMPTY}, measured between them" if empty else ""))
    print(f"{'screen':<24}{'first render: median':>22}{'best':>14}{'facet click: median':>22}"
          f"{'max':>7}" + (f"{'/ empty app':>13}" if empty else ""))
    for name, row in results.items():
        med, best = statistics.median(row["first"]), min(row["first"])
        click = (f"{statistics.median(row['clicks']):>22.2f}{max(row['clicks']):>7.2f}"
                 if row["clicks"] else f"{'—':>22}{'—':>7}")
        print(f"{name:<24}{med:>14.2f} ({med / ref_med:.1f}x){best:>8.2f} ({best / ref_min:.1f}x)"
              f"{click}" + (f"{med / empty:>12.2f}x" if empty else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000,
                        help="items of the synthetic database (0: the demo only)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="",
                        help="comma-separated screens to measure on the demo (the reference "
                             "is always measured), e.g. Agreement,Data")
    args = parser.parse_args()
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    screens = {name: value for name, value in SCREENS.items()
               if not only or name in only or name == "Codebook (reference)"}
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo.db"
        with open_store(demo) as s:
            load_demo(s, Path(tmp) / "files")
        with running_app(demo) as url, reference_app(Path(tmp)) as (empty_url, _):
            report("Demo database", measure(url, args.repeat, screens, empty_url))
        if args.items:
            big = Path(tmp) / "big.db"
            synthetic(big, args.items)
            with open_store(big) as s:
                ensure_reviewer(s, ADMIN, role="admin")
            with running_app(big) as url:
                report(f"{args.items:,} items", measure(url, args.repeat, {
                    name: SCREENS[name] for name in ("Codebook (reference)", "Agreement")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
