"""Browser-test plumbing: the real `carelens serve` and Debian's Chromium.

`running_app(db)` starts the app exactly as a user does, on a free port, and
stops it afterwards; `chromium()` launches headless Chromium with the flags
this closed machine needs (no background networking, no sandbox as root).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT, chromium_or_skip

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(db: Path, timeout: float = 60, carelens: list[str] | None = None,
                cwd: Path = ROOT, env: dict[str, str] | None = None,
                base_env: dict[str, str] | None = None) -> Iterator[str]:
    """`carelens serve` on a free port, until the block ends. `carelens`: the
    command (default: this checkout's, `python -m cli`), run from `cwd`; `env`:
    more environment for the server (e.g. STREAMLIT_SECRETS_FILES for a login),
    over `base_env` (default: this process's environment)."""
    with running_server(db, timeout, carelens, cwd, env, base_env) as (url, _proc):
        yield url


@contextlib.contextmanager
def running_server(db: Path, timeout: float = 60, carelens: list[str] | None = None,
                   cwd: Path = ROOT, env: dict[str, str] | None = None,
                   base_env: dict[str, str] | None = None,
                   ) -> Iterator[tuple[str, subprocess.Popen]]:
    """`running_app`, with the server's process (its own process group): for
    benchmarks that read its CPU time."""
    port = free_port()
    env = dict(base_env if base_env is not None else os.environ, **(env or {}),
               CARELENS_DB=str(db))
    log = db.parent / f"server-{port}.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [*(carelens or [sys.executable, "-m", "cli"]), "--db", str(db), "serve",
             "--port", str(port)],
            cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole, nothing left running
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, proc, timeout, log)
        yield url, proc
    finally:
        stop_group(proc)


def wait_until_healthy(url: str, proc: subprocess.Popen, timeout: float = 60,
                       log: Path | None = None) -> None:
    """Until the Streamlit server at `url` answers its health check; a server that
    exits or is not up within `timeout` seconds raises, with its log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            said = log.read_text() if log is not None and log.exists() else "(no log)"
            raise RuntimeError(f"the server at {url} did not start:\n{said}")
        time.sleep(0.2)


@contextlib.contextmanager
def running_streamlit(script: Path, *options: str, timeout: float = 60
                      ) -> Iterator[tuple[str, subprocess.Popen]]:
    """A plain Streamlit script (the benches' reference: Streamlit's own near-empty
    app) served by `streamlit run` on a free port, headless, no usage statistics,
    with these extra `options`, in its own process group, until the block ends."""
    port = free_port()
    log = script.parent / f"{script.stem}-{port}.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
             "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--browser.serverAddress", "localhost", *options],
            cwd=script.parent, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, proc, timeout, log)
        yield url, proc
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen, grace: float = 10) -> None:
    """Stop a process started in its own session, and everything it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything of the group still running
    proc.wait()


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    path = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


SETTLED = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app && app.dataset.testScriptState === 'notRunning'
        && document.querySelector('[data-testid="stMain"] [data-testid="stElementContainer"]')
        && ![...document.querySelectorAll('[data-testid]')].some(e => /Skeleton/.test(e.dataset.testid));
}"""
"""The script has run (Streamlit marks the app root with its run state) and
every element it sent is on screen: Streamlit shows skeletons while an
element's code is still loading, and a button's keyboard shortcut only works
once the button itself is there."""

READ = """() => !(window.__carelensKeys && window.__carelensKeys.dwellOver
                 && !window.__carelensKeys.dwellOver())"""
"""What each screen's keys act on has been on screen long enough for a key to
count (the least dwell, review/reviewing/presses.py), as a clinician reads
before answering."""


QUIET = """() => !window.__carelensKeys || !window.__carelensKeys.quiet
                || window.__carelensKeys.quiet()"""
"""No key or click is in flight (assets/keys.js): a busy server may not have
begun the run a key asked for, and until it has, the screen looks settled."""


def wait_for_app(page, timeout: float = 30_000, read: bool = True) -> None:
    """Wait until Streamlit has run the script and drawn what it sent (the run
    of the last key or click included), and (with `read`) until a key would
    count on what is drawn (`READ`)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout)
    page.wait_for_function(QUIET, timeout=timeout)
    page.wait_for_function(SETTLED, timeout=timeout)
    page.wait_for_timeout(300)
    page.wait_for_function(SETTLED, timeout=timeout)  # not a second run just begun
    if read:
        try:
            page.wait_for_function(READ, timeout=timeout)
        except Exception:
            raise AssertionError("a key would still not count: " + str(page.evaluate(
                "() => window.__carelensKeys && [...window.__carelensKeys.screens.entries()]"
                ".map(([id, s]) => [id, s.live, s.token, s.dwell])"))) from None


def ready_for_keys(page) -> None:
    """Before the first key press on a freshly loaded page: every element is
    drawn (so its shortcut is wired), and the focus is off any text box."""
    wait_for_app(page)
    page.evaluate("document.activeElement && document.activeElement.blur()")


def add_reviewers(db: Path, *names: str, role: str = "reviewer") -> None:
    """Reviewers in the database before the app opens it."""
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store

    with open_store(db) as s:
        for name in names:
            ensure_reviewer(s, name, role=role)


def release_focus(page) -> None:
    """Keys go to the page, not to a text box (as after a click on the page)."""
    page.evaluate("document.activeElement && document.activeElement.blur()")


def wait_for_progress(page, text: str) -> None:
    """Wait until the progress line says `text` ("3 of 85") and the screen is drawn."""
    page.wait_for_function(
        "t => (document.querySelector('[data-testid=\"stProgress\"]') || {innerText: ''})"
        ".innerText.includes(t)", arg=text)
    wait_for_app(page)


_KEYS = {"ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40, "Enter": 13}
_MODIFIERS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}


def press_at(page, keys: list[tuple[str, float]]) -> None:
    """Press keys at given moments (seconds after the first), as a clinician's
    fingers do, however busy the browser: each key event carries the time it
    was pressed (DevTools' Input.dispatchKeyEvent `timestamp`), so that a page
    slow to take it (a throttled CPU, a redraw under way) still sees the keys
    as far apart as they were pressed. Playwright's own key presses wait for
    the page to take each one, and a slow page spaced them out. `keys`:
    [(key as Playwright names it, e.g. "2", "y", "ArrowLeft", "Control+Enter";
    when, in seconds)]."""
    cdp = getattr(page, "_carelens_cdp", None)
    if cdp is None:
        cdp = page._carelens_cdp = page.context.new_cdp_session(page)
    t0 = time.time()
    for key, at in keys:
        time.sleep(max(0.0, t0 + at - time.time()))
        *mods, name = key.split("+")
        modifiers = sum(_MODIFIERS[m] for m in mods)
        if len(name) == 1:
            code = f"Digit{name}" if name.isdigit() else f"Key{name.upper()}"
            vk, text = ord(name.upper()), name if not modifiers else ""
        else:
            code, vk, text = name, _KEYS[name], "\r" if name == "Enter" and not modifiers else ""
        event = {"key": name, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers,
                 "timestamp": t0 + at}
        cdp.send("Input.dispatchKeyEvent", {**event, "type": "keyDown",
                                            **({"text": text} if text else {})})
        cdp.send("Input.dispatchKeyEvent", {**event, "type": "keyUp",
                                            "timestamp": t0 + at + 0.02})


SAID = """() => {
    // What the screen says about a key not taken, beside the answers: the
    // browser's notice (assets/keys.js), or the server's (a press it refused).
    const n = document.getElementById('carelens-key-notice');
    if (n && n.checkVisibility()) return n.innerText;
    const alert = [...document.querySelectorAll('[data-testid=stMain] [data-testid=stAlert]')]
        .find(a => /not (recorded|committed)/i.test(a.innerText));
    return alert ? alert.innerText : null;
}"""


def key_notice(page) -> str:
    """What the screen said about a key not taken (beside the answers)."""
    try:
        page.wait_for_function(SAID, timeout=30_000)
    except Exception:
        raise AssertionError("nothing said about a key not taken; the keys' log: "
                             f"{page.evaluate('(window.__carelensKeys || {}).log')}") from None
    return page.evaluate(SAID)
