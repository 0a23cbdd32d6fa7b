"""Where a new tab's first screen spends the server's time: each script run profiled.

Starts the real app (app.py, served as `carelens serve` serves it, from the
checkout with its .streamlit/config.toml) with every script run profiled in
the thread that runs it (cProfile), opens each screen in fresh Chromium
contexts (a new tab, nothing cached; every earlier tab closed, as a clinician
opening the app anew), and prints, for each screen's first script run (the
server's very first run aside: it imports the modules), the time spent in:

- compiling the page scripts (Streamlit's script cache, emptied whenever every
  session has closed);
- opening the store and checking its migrations;
- database queries (sqlite3, time in the calls themselves);
- the CSS and the keys' script (st.html of assets/carelens.css, the keys
  component);
- Streamlit's element messages (building, hashing and queueing each delta);
- the rest of the page's own code;

and, in the browser, from the navigation until the content is shown, against
Streamlit's near-empty app (bench/bench_screens.py) in the same run, with
the number of Streamlit's own code chunks each loads (an element type's code
is fetched the first time it is drawn).

    python bench/profile_first_screen.py [--tabs 5]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCREENS = [
    ("Review, prefixes", "/?reviewer=Dr.+Bench", "review"),
    ("Review, responses", "/?reviewer=Dr.+Bench&kind=response", "review"),
    ("Trajectories", "/trajectories?reviewer=Dr.+Bench", "trajectories"),
    ("Graded conversations", "/graded?reviewer=Dr.+Bench", "graded"),
    ("Adjudicate", "/adjudicate?reviewer=Dr.+Sam+Rivera", "reference"),
]
PARTS = {
    # name: (module path fragment, function name) whose cumulative time is that part
    "compiling the page scripts": [("script_cache.py", "get_bytecode")],
    "opening the store, migrations check": [("review/workspace.py", "open_store")],
    "the CSS and the keys' script": [("elements/html.py", "html"), ("pages/_keys.py", "page_keys"),
                                     ("pages/_keys.py", "screen_keys")],
    "Streamlit's element messages": [("delta_generator.py", "_enqueue")],
}


def serve(port: int, out: Path) -> None:
    """The server, each script run profiled into `out` (run in a child process)."""
    from streamlit.runtime.scriptrunner import script_runner

    runs = [0]
    original = script_runner.ScriptRunner._run_script

    def profiled(self, rerun_data):
        runs[0] += 1
        n = runs[0]
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        try:
            return original(self, rerun_data)
        finally:
            prof.disable()
            prof.dump_stats(str(out / f"run-{n:04d}.prof"))
            with (out / "runs.tsv").open("a") as fh:
                fh.write(f"{n}\t{time.perf_counter() - t0:.5f}\t"
                         f"{int(bool(rerun_data.fragment_id_queue))}\n")

    script_runner.ScriptRunner._run_script = profiled
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli as streamlit_cli

    PagesManager.uses_pages_directory = False  # as app.py does when it becomes the server
    os.chdir(ROOT)
    sys.argv = ["streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
                "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    sys.exit(streamlit_cli.main())


def part_times(path: Path) -> dict[str, float]:
    """Seconds of one profiled run in each part (and 'queries', 'total', 'page code')."""
    stats = pstats.Stats(str(path)).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    out = {name: 0.0 for name in PARTS}
    total = queries = 0.0
    for (file, _line, func), (_cc, _nc, tt, ct, _callers) in stats.items():
        if func == "_run_script":
            total = max(total, ct)
        if "sqlite3" in func or func in ("<method 'execute' of 'sqlite3.Connection' objects>",
                                         "<method 'executemany' of 'sqlite3.Connection' objects>",
                                         "<method 'fetchall' of 'sqlite3.Cursor' objects>",
                                         "<method 'fetchone' of 'sqlite3.Cursor' objects>"):
            queries += tt
        for name, wanted in PARTS.items():
            if any(file.endswith(f) and func == fn for f, fn in wanted):
                out[name] += ct
    out["database queries"] = queries
    out["total"] = total
    out["the rest of the page's code"] = max(0.0, total - sum(
        v for k, v in out.items() if k != "total"))
    return out


def main(tabs: int) -> None:
    from bench.bench_screens import FIND_JUDGED, JUDGED, reference_app
    from review.datasets.demo import load_demo
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store
    from tests.browser import chromium, free_port, stop_group, wait_until_healthy

    if not Path("/usr/bin/chromium").exists():
        sys.exit("needs Debian's chromium at /usr/bin/chromium")
    shown_js = f"""sel => {{
        const j = ({FIND_JUDGED})(sel);
        return !!j && j.checkVisibility({{visibilityProperty: true}})
            && !!document.querySelector('[data-testid=stMain] button:not([disabled])');
    }}"""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "profile.db"
        with open_store(db) as s:
            load_demo(s, tmp / "files")
            ensure_reviewer(s, "Dr. Bench")
        out = tmp / "profiles"
        out.mkdir()
        port = free_port()
        env = dict(os.environ, CARELENS_DB=str(db))
        proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(out)],
                                env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, proc)
            with reference_app(tmp) as (ref_url, _), chromium() as browser:
                def open_tab(address: str, judged: str) -> tuple[float, int, int]:
                    before = sum(1 for _ in out.glob("run-*.prof"))
                    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
                    page = ctx.new_page()
                    page.goto(address, wait_until="commit")
                    page.wait_for_function(shown_js, arg=judged, timeout=60_000, polling=10)
                    shown = page.evaluate("performance.now()")
                    chunks = page.evaluate("performance.getEntriesByType('resource')"
                                           ".filter(r => r.name.includes('/static/js/')).length")
                    page.wait_for_timeout(1500)  # the runs after it (the keys going live)
                    ctx.close()
                    return shown, chunks, before

                open_tab(url + SCREENS[0][1], JUDGED["review"])  # the server imports its modules
                time.sleep(0.5)
                rows = []
                for name, path, judged in [("Streamlit's empty app", "", "reference"),
                                           *SCREENS]:
                    times, chunks, firsts = [], [], []
                    for _ in range(tabs):
                        address = ref_url if not path else url + path
                        shown, n, before = open_tab(address, JUDGED[judged])
                        times.append(shown)
                        chunks.append(n)
                        if path:
                            firsts.append(before + 1)  # this tab's first script run
                        time.sleep(0.5)  # every session closed: Streamlit empties its cache
                    rows.append((name, statistics.median(times), statistics.median(chunks),
                                 firsts))
        finally:
            stop_group(proc)
        ref = rows[0][1]
        print(f"a new tab until its content is shown (median of {tabs}), and the code chunks "
              "it loads:")
        for name, shown, chunks, _ in rows:
            print(f"  {name:<24} {shown:6.0f} ms ({shown / ref:4.2f}x the empty app), "
                  f"{chunks:.0f} chunks")
        print("\nthe first script run of each new tab on the server, median ms (cProfile on: "
              "about twice the real time, in proportion):")
        names = ["total", *PARTS, "database queries", "the rest of the page's code"]
        print(f"  {'':<38}" + "".join(f"{n[:14]:>16}" for n, *_ in rows[1:]))
        for part in names:
            cells = []
            for _name, _shown, _chunks, firsts in rows[1:]:
                got = [part_times(out / f"run-{n:04d}.prof")[part] * 1000 for n in firsts
                       if (out / f"run-{n:04d}.prof").exists()]
                cells.append(f"{statistics.median(got):>16.1f}" if got else f"{'-':>16}")
            print(f"  {part:<38}" + "".join(cells))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        ap.add_argument("--tabs", type=int, default=5)
        main(ap.parse_args().tabs)
