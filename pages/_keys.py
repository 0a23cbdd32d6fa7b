"""Keys that never go astray, and count only on what was read: the page side
of assets/keys.js and of `review.reviewing.presses` (the rule).

A screen calls `screen_keys` once per run, before the item it shows, with
its shortcuts, the buttons they press and a token naming what its keys act
on (the item and its answers, the criterion, the step, the unit to settle);
the same token keys the `marker` around that text. The script in
assets/keys.js (mounted as a Streamlit component, loading nothing from
elsewhere, given no text from the data: only class names made of our own
keys and numbers, and our own words) then

- refuses a key that answers, picks or settles when what it acts on has been
  on screen for less than the least dwell (`review.reviewing.presses`), or
  right behind a refused key, and says so beside the answers (`notice_after`);
- holds a shortcut pressed while the screen is redrawn and, once it is
  still, presses its button if the screen still shows what it showed at the
  press, or if it is a relative move (`relative`: Left, Right, Up, Down, and
  the screen's undo); else refuses it, and says so;
- gives the focus back to the page after a choice in any drop-down list,
  puts the focus in a box on a key (`focus`) and scrolls the judged text
  into view inside its box (`scroll`).

On the server, `screen_keys` records when it sent each token (the server's
clock), and a callback asks `press` for the press it runs for: the commit
path checks it (`review.reviewing.presses.check_press`), so a script that
presses buttons straight through Streamlit's websocket is held to the same
rule. `app.py` mounts the script without shortcuts, for the drop-down lists
of every screen.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import streamlit as st

from review.reviewing.presses import TOO_SOON, Press, min_dwell, refusal

_JS = (Path(__file__).resolve().parents[1] / "assets" / "keys.js").read_text()
_keys = st.components.v2.component("carelens_keys", js=_JS)

NAV = ("left", "right", "up", "down")
"""Relative moves: a press held during a redraw still means "one more", and
no dwell applies (moving on is not answering)."""
_SHOWN = "_keys_shown"
"""Session key: {screen name: (token, when the server sent it or its keys went
live: time.monotonic(), whether they were live)}."""
_REFUSED = "_keys_refused"
"""Session key: {screen name: when the server last refused a press on it}."""
_ALIASES = {"arrowleft": "left", "arrowright": "right", "arrowup": "up", "arrowdown": "down",
            "control": "ctrl", "cmd": "meta", "command": "meta", "option": "alt",
            "return": "enter", "esc": "escape"}
_MODS = ("ctrl", "alt", "shift", "meta")


def css_class(key: str) -> str:
    """The class Streamlit gives the element keyed `key`."""
    return "st-key-" + re.sub(r"[^A-Za-z0-9_-]", "-", key.strip())


def canonical(shortcut: str) -> str:
    """A shortcut as assets/keys.js reads a key press: "shift+1", "left", "f"."""
    parts = [_ALIASES.get(p.strip().lower(), p.strip().lower()) for p in shortcut.split("+")]
    mods = [m for m in _MODS if m in parts[:-1]]
    return "+".join([*mods, parts[-1]])


def marker(name: str, token: str) -> str:
    """The key of the container around what screen `name` shows, and its keys
    act on (`token`: letters, digits and _ only, e.g. "12_0" or "12_s3"): keys
    are checked against it, and timed from when it was drawn."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", token):
        raise ValueError(f"a screen marker takes letters, digits and _ only: {token!r}")
    return f"{_marker_prefix(name)}{token}"


def _marker_prefix(name: str) -> str:
    return f"at_{css_class(name)[len('st-key-'):]}__"


def screen_keys(name: str, buttons: Mapping[str, str], *, token: str,
                focus: Mapping[str, str] | None = None, scroll: Iterable[str] = (),
                relative: Iterable[str] = (), too_soon: str = TOO_SOON,
                notice_after: str | None = None) -> None:
    """Mount the keys of a screen (see the module's docstring), before what
    they act on. `buttons`: {shortcut: key of the button it presses};
    `focus`: {shortcut: key of the text box it puts the focus in}; `scroll`:
    keys of elements to keep in view inside their scrolling box; `token`:
    what the keys act on now (the marker's: letters, digits and _), changed
    whenever that changes, an answer changed in place included; `relative`:
    shortcuts besides the arrows that act on no item shown (an undo of the
    last answer) - every other shortcut answers, picks or settles, and counts
    only after the least dwell; `too_soon`: the words said beside the answers
    when a press is refused, under the element keyed `notice_after` (default:
    the marker's), beside the answers. (No timer reruns a screen: a run costs the
    server as much as an answer, so what falls due, a reveal, waits for the
    next run.)

    The server's clock for `token` starts when this run sends it, and starts
    again once the browser says the screen's keys are live (its script is
    running and timing what it draws: the first run after a page load draws
    the item at once, and the script says so a moment later). Until then no
    press on the screen counts: a key pressed before the script that times
    the text was there could come before anyone read it."""
    live = not st.context.headers or bool(
        (st.session_state.get(f"keys_{name}") or {}).get("live"))
    marker(name, token)  # the same rule for both
    _keys(
        key=f"keys_{name}",
        data={
            "id": css_class(f"keys_{name}")[len("st-key-"):],
            "token": token,
            "buttons": {canonical(k): css_class(v) for k, v in buttons.items()},
            "nav": list(NAV),
            "relative": [canonical(k) for k in relative],
            "focus": {canonical(k): css_class(v) for k, v in (focus or {}).items()},
            "scroll": [css_class(k) for k in scroll],
            "gate": not live,
            "dwell_ms": round(min_dwell() * 1000),
            "too_soon": too_soon,
            "slot": css_class(notice_after) if notice_after else css_class(_marker_prefix(name)),
            "marker": css_class(_marker_prefix(name)),
        },
        default={"live": False},
        on_live_change=lambda: None,
        height=0,
    )
    shown = st.session_state.setdefault(_SHOWN, {})
    before = shown.get(name)
    if before is None or before[0] != token or (live and not before[2]):
        # Sent in this run (or, the keys just live, timed from now on): the server's clock.
        shown[name] = (token, time.monotonic(), live)


def press(name: str, token: str) -> Press | None:
    """The press a callback of screen `name` runs for, pressed on `token`
    (what the button was drawn for), on the server's clock: for the commit
    path to check (`review.reviewing.presses.check_press`). None without a
    browser (Streamlit's AppTest runs the script in-process: no screen was
    drawn, no key was pressed; a client of the real server always has
    headers, a script talking to the websocket included)."""
    if not st.context.headers:
        return None
    token_at = st.session_state.get(_SHOWN, {}).get(name)
    live = bool(token_at and token_at[2])  # before the keys are live, nothing is on screen
    return Press(pressed_on=token, showing=token_at[0] if live else None,
                 shown_at=token_at[1] if live else None, at=time.monotonic(),
                 refused_at=st.session_state.get(_REFUSED, {}).get(name))


def refused(name: str) -> None:
    """Record that a press on screen `name` was refused: the next counts only
    once the least dwell has passed since (a burst stays refused)."""
    st.session_state.setdefault(_REFUSED, {})[name] = time.monotonic()


def press_counts(name: str, token: str) -> bool:
    """For a press that writes no answer (a pick, a flag, a confidence): the
    same rule as the commit path's (`review.reviewing.presses.refusal`);
    a press that does not count is recorded as refused. True when it counts."""
    p = press(name, token)
    if p is None or refusal(p) is None:
        return True
    refused(name)
    return False


def page_keys() -> None:
    """The drop-down lists' focus, on every screen (app.py)."""
    _keys(key="keys_page", data={}, height=0)
