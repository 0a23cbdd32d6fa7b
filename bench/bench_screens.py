"""Each reviewer's screen in Chromium: first render, and key -> next item readable.

Starts the real server (`carelens serve`) on a demo database and opens it in
headless Chromium (Debian's /usr/bin/chromium). For each screen (Review with
prefixes, Review with responses, Trajectories, Graded conversations):

- a new tab until its content is shown, in a fresh browser context (nothing
  cached) and in a warm tab (a reload of a tab that has shown it): from the
  start of the navigation until the judged text is in view and a button to
  answer with is drawn (no skeleton left in the main area), against
  Streamlit's near-empty app measured between the screens, round by round
  (issue 29, point 7: within 1.2x of it); then until ready for keys (the
  script has run and every element is drawn). Measured in the page
  (performance.now()).
- key -> next item readable, at 1280x800: from the key press (keydown, in the
  page) until the next item's judged text (the reply, the latest patient
  turn, the step, the completion) has changed and is in the window; how often
  it was in the window at all.
- a key pressed as soon as the item appears after a reload (before anyone
  could have read it): how often it was taken (never, by design: issue 29's
  least dwell), and how often the screen said it was not.

The reference, measured in the same run on the same machine: Streamlit's own
near-empty app (a title, a line of text, a button with a shortcut), served
the same way, and a static HTML page. Ratios are to the Streamlit app: what
no Streamlit screen can beat.

With --long, 200 generated replies of about 1,100 characters (10 prefixes,
20 models; invented filler) come first in the Review queues, as in the
issue's side-by-side measurement.

    python bench/bench_screens.py [--repeat 5] [--answers 20] [--early 10] [--long]
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gen_carebench import generate  # noqa: E402
from review.datasets.demo import load_demo  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.browser import (  # noqa: E402
    READ,
    SETTLED,
    chromium,
    running_app,
    running_streamlit,
)

WHO = "Dr.+Bench"
JUDGED = {
    # Where the judged text is: the page marks it (.st-key-judged), else, on
    # Review, the last chat message (the reply, or the latest patient turn).
    "review": "[data-testid=stMain] [data-testid=stChatMessage]",
    "trajectories": ".st-key-trj_step",
    "graded": ".st-key-hb_completion",
    "reference": "[data-testid=stMain] [data-testid=stMarkdown]",
    "static": "#judged",
}
SCREENS = [
    ("Review, prefixes", f"/?reviewer={WHO}", "review", "1-4"),
    ("Review, responses", f"/?reviewer={WHO}&kind=response", "review", "1-4"),
    ("Trajectories", f"/trajectories?reviewer={WHO}", "trajectories", "ArrowRight"),
    ("Graded conversations", f"/graded?reviewer={WHO}", "graded", "ArrowRight"),
]
FIND_JUDGED = """sel => {
    const marked = document.querySelector('.st-key-judged');
    if (marked) return marked;
    const all = document.querySelectorAll(sel);
    return all.length ? all[all.length - 1] : null;
}"""
READY = f"""sel => {{
    const judged = ({FIND_JUDGED})(sel);
    if (sel === '#judged') return !!judged;
    return !!judged && ({SETTLED})()
        && !!document.querySelector('[data-testid=stMain] button:not([disabled])');
}}"""
SHOWN = f"""sel => {{
    // The content is on screen: the judged text in view, and a button to answer
    // with drawn (no skeleton left in the main area), whatever runs after.
    const judged = ({FIND_JUDGED})(sel);
    if (sel === '#judged') return !!judged;
    return !!judged && judged.checkVisibility({{visibilityProperty: true}})
        && !!document.querySelector('[data-testid=stMain] button:not([disabled])')
        && ![...document.querySelectorAll('[data-testid=stMain] [data-testid]')]
            .some(e => /Skeleton/.test(e.dataset.testid));
}}"""
WATCH = f"""sel => {{
    // Record, in the page, when the content is first shown and when the screen
    // is first ready for keys (settled).
    window.__shown = null;
    window.__ready = null;
    const shown = {SHOWN};
    const ready = {READY};
    const iv = setInterval(() => {{
        if (window.__shown === null && shown(sel)) window.__shown = performance.now();
        if (window.__ready === null && ready(sel)) {{
            window.__ready = performance.now();
            if (window.__shown === null) window.__shown = window.__ready;
            clearInterval(iv);
        }}
    }}, 5);
}}"""
VISIBLE = """el => {
    // Pixels of `el` in the window, clipped by every scrolling box around it.
    const r = el.getBoundingClientRect();
    let top = Math.max(r.top, 0), bottom = Math.min(r.bottom, window.innerHeight);
    for (let p = el.parentElement; p; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (/(auto|scroll|hidden)/.test(s.overflowY)) {
            const pr = p.getBoundingClientRect();
            top = Math.max(top, pr.top);
            bottom = Math.min(bottom, pr.bottom);
        }
    }
    return [Math.max(0, bottom - top), r.height];
}"""
NEXT = f"""sel => new Promise(resolve => {{
    // From the next keydown until the judged text has changed (rendered) and
    // is in the window (readable: at least 120 px of it, or all of it).
    const find = {FIND_JUDGED};
    const visible = {VISIBLE};
    const before = (find(sel) || {{innerText: ''}}).innerText;
    let t0 = null, rendered = null, shown = null;
    const settled = {SETTLED};
    const made = performance.now();
    window.addEventListener('keydown', () => {{ t0 = performance.now(); }},
                            {{capture: true, once: true}});
    const iv = setInterval(() => {{
        const now = performance.now();
        if (t0 === null) {{
            if (now - made > 60000) {{ clearInterval(iv); resolve({{rendered: null, readable: null}}); }}
            return;
        }}
        const el = find(sel);
        if (el && rendered === null && el.innerText !== before) rendered = now;
        if (rendered !== null) {{
            // Readable: in the window since `shown`, and still there once the screen
            // has settled (a banner drawn above it later pushes it out).
            const [seen, height] = visible(el);
            shown = seen >= Math.min(height, 120) - 1 ? (shown === null ? now : shown) : null;
            if (settled()) {{
                clearInterval(iv);
                resolve({{rendered: rendered - t0, readable: shown === null ? null : shown - t0}});
                return;
            }}
        }}
        if (now - t0 > 20000) {{ clearInterval(iv); resolve({{rendered: null, readable: null}}); }}
    }}, 4);
}})"""

REFERENCE_APP = '''import streamlit as st

st.title("Reference", anchor=False)
st.write("A line of text to read, as the judged text of a review screen.")
if st.button("One", shortcut="1"):
    st.session_state["n"] = st.session_state.get("n", 0) + 1
st.write(f"Pressed {st.session_state.get('n', 0)} times.")
'''
STATIC_PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><title>Reference</title></head>
<body><h1>Reference</h1><p id="judged">A line of text to read.</p>
<button id="one">One</button><script>
document.addEventListener('keydown', e => { if (e.key === '1') document.getElementById('one').click(); });
</script></body></html>"""


@contextlib.contextmanager
def reference_app(tmp: Path):
    """Streamlit's near-empty app, served as `carelens serve` serves ours."""
    script = tmp / "reference_app.py"
    script.write_text(REFERENCE_APP)
    with running_streamlit(script, "--server.runOnSave", "false",
                           "--client.toolbarMode", "minimal") as served:
        yield served


@contextlib.contextmanager
def static_page():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(STATIC_PAGE)))
            self.end_headers()
            self.wfile.write(STATIC_PAGE)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def first_render(browser, url: str, judged: str, repeat: int, size=(1280, 800),
                 what: str = "__shown") -> tuple:
    """(fresh, warm) medians in ms: a new context each time, then reloads of its
    tab; until the content is shown (`what` "__shown") or the screen is ready
    for keys ("__ready")."""
    fresh, warm = [], []
    for _ in range(repeat):
        context = browser.new_context(viewport={"width": size[0], "height": size[1]})
        context.add_init_script(f"({WATCH})({judged!r})")
        page = context.new_page()
        page.goto(url, wait_until="commit")
        page.wait_for_function("() => window.__ready !== null", timeout=60_000)
        fresh.append(page.evaluate(f"window.{what}"))
        page.wait_for_timeout(500)
        page.reload(wait_until="commit")
        page.wait_for_function("() => window.__ready !== null", timeout=60_000)
        warm.append(page.evaluate(f"window.{what}"))
        context.close()
    return statistics.median(fresh), statistics.median(warm)


def first_screens(browser, url: str, ref_url: str, repeat: int, rounds: int = 3) -> None:
    """Each screen against Streamlit's near-empty app, interleaved (the reference
    measured between the screens, `rounds` times), so that a machine whose load
    changes loads both alike: median of the rounds' medians."""
    got: dict[str, list] = {"reference": []}
    for _ in range(rounds):
        got["reference"].append(first_render(browser, ref_url, JUDGED["reference"], repeat))
        for name, path, judged, _key in SCREENS:
            got.setdefault(name, []).append(first_render(browser, url + path, JUDGED[judged],
                                                         repeat))
    ref = (statistics.median(r[0] for r in got["reference"]),
           statistics.median(r[1] for r in got["reference"]))
    print(f"a new tab until its content is shown (the judged text in view, a button to answer "
          f"drawn), median of {rounds} rounds of {repeat} (1280x800), against Streamlit's "
          "near-empty app measured between them:")
    print(f"  {'screen':<24} {'fresh':>8} {'ratio':>6} {'warm':>8} {'ratio':>6}")
    for name, _path, _judged, _key in SCREENS:
        fresh = statistics.median(r[0] for r in got[name])
        warm = statistics.median(r[1] for r in got[name])
        print(f"  {name:<24} {fresh:>6.0f}ms {fresh / ref[0]:>6.2f} {warm:>6.0f}ms "
              f"{warm / ref[1]:>6.2f}")
    print(f"  reference: Streamlit's near-empty app {ref[0]:.0f} ms fresh, {ref[1]:.0f} ms warm")


def key_to_next(browser, url: str, judged: str, key: str, answers: int) -> dict:
    """Press `key` (1-4: the four answers in turn) `answers` times at 1280x800, a clinician's pace apart."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.add_init_script(f"({WATCH})({judged!r})")
    page.goto(url, wait_until="commit")
    page.wait_for_function("() => window.__ready !== null", timeout=60_000)
    rendered, readable = [], []
    for n in range(answers):
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.wait_for_timeout(300)
        page.wait_for_function(READ, timeout=30_000)  # as a reader: a key counts now
        page.evaluate(f"() => {{ window.__next = ({NEXT})({judged!r}); }}")
        page.keyboard.press(str(1 + n % 4) if key == "1-4" else key)
        got = page.evaluate("window.__next")
        if got["rendered"] is not None:
            rendered.append(got["rendered"])
        if got["readable"] is not None:
            readable.append(got["readable"])
        page.wait_for_function(SETTLED, timeout=30_000)
    page.close()
    return {"rendered": rendered, "readable": readable, "n": answers}


def early_key(browser, url: str, db: Path, judged: str, tries: int) -> tuple[int, int]:
    """A key pressed as soon as the judged text appears after a reload: (taken,
    said not taken) how often."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    page.wait_for_function(SETTLED, timeout=60_000)
    taken = said = 0
    for _ in range(tries):
        before = answers_by(db)
        page.reload(wait_until="commit")
        page.wait_for_function(  # in view: drawn, and not hidden
            f"sel => {{ const j = ({FIND_JUDGED})(sel);"
            " return !!j && j.checkVisibility({visibilityProperty: true}); }",
            arg=judged, polling=5, timeout=60_000)
        page.keyboard.press("2")
        page.wait_for_timeout(2500)
        page.wait_for_function(SETTLED, timeout=30_000)
        taken += answers_by(db) > before
        said += page.evaluate("() => { const n = document.getElementById('carelens-key-notice');"
                              " return !!n && n.checkVisibility(); }")
    page.close()
    return taken, said


def answers_by(db: Path) -> int:
    s = open_store(db)
    try:
        return s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.name = 'Dr. Bench'")
    finally:
        s.close()


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms" if values else "-"


def main(repeat: int, answers: int, early: int, long: bool) -> None:
    if not Path("/usr/bin/chromium").exists():
        sys.exit("needs Debian's chromium at /usr/bin/chromium")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "bench.db"
        s = open_store(db)
        if long:  # first in the queues: 10 prefixes, 200 replies of about 1,100 characters
            for path in generate(tmp / "long", n_prefixes=10, n_models=20, seed=19):
                import_file(s, path)
            chars = s.scalar("SELECT AVG(length(json_extract(payload, '$.response')))"
                             " FROM items WHERE kind = 'response'")
            print(f"data: 200 generated replies first ({chars:,.0f} characters on average), "
                  "then the demo")
        load_demo(s, tmp / "files")
        ensure_reviewer(s, "Dr. Bench")
        s.close()
        with running_app(db) as url, reference_app(tmp) as (ref_url, _), static_page() as static, \
                chromium() as browser:
            first_screens(browser, url, ref_url, repeat)
            rows = []
            ref = first_render(browser, ref_url, JUDGED["reference"], repeat, what="__ready")
            stat = first_render(browser, static, JUDGED["static"], repeat, what="__ready")
            for name, path, judged, _key in SCREENS:
                rows.append((name, *first_render(browser, url + path, JUDGED[judged], repeat,
                                                 what="__ready")))
            print(f"\nfirst render until ready for keys (settled), median of {repeat} (1280x800):")
            print(f"  {'screen':<24} {'fresh':>8} {'ratio':>6} {'warm':>8} {'ratio':>6}")
            for name, fresh, warm in rows:
                print(f"  {name:<24} {fresh:>6.0f}ms {fresh / ref[0]:>6.2f} {warm:>6.0f}ms "
                      f"{warm / ref[1]:>6.2f}")
            print(f"  reference: Streamlit's near-empty app {ref[0]:.0f} ms fresh, {ref[1]:.0f} ms "
                  f"warm; a static page {stat[0]:.0f} ms fresh, {stat[1]:.0f} ms warm")
            print(f"\nkey -> next item, {answers} presses at 1280x800 (readable: the judged text "
                  "in the window):")
            for name, path, judged, key in SCREENS:
                got = key_to_next(browser, url + path, JUDGED[judged], key, answers)
                print(f"  {name:<24} rendered {med(got['rendered']):>7}, readable "
                      f"{med(got['readable']):>7}; in the window {len(got['readable'])} of "
                      f"{got['n']}")
            ref_keys = key_to_next(browser, ref_url, JUDGED["reference"], "1", 10)
            print(f"  reference: Streamlit's near-empty app, a button press re-run and drawn: "
                  f"{med(ref_keys['rendered'])}")
            if early:
                taken, said = early_key(browser, url + SCREENS[0][1], db, JUDGED["review"],
                                        early)
                print(f"\na key pressed as soon as the item appears after a reload: taken {taken} "
                      f"of {early}; not taken, and said beside the answers, {said} of {early}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--answers", type=int, default=20)
    ap.add_argument("--early", type=int, default=10, help="tries of a key pressed early (0: none)")
    ap.add_argument("--long", action="store_true",
                    help="put 200 generated replies of about 1,100 characters first in the queues")
    a = ap.parse_args()
    main(a.repeat, a.answers, a.early, a.long)
