"""Keys that never go astray: the page side of assets/keys.js.

A screen calls `screen_keys` once per run, before the item it shows, with
its shortcuts and the buttons they press. The script in assets/keys.js
(mounted as a Streamlit component, loading nothing from elsewhere, given no
text from the data: only class names made of our own keys and numbers) then

- gives the focus back to the page after a choice in any drop-down list;
- holds a shortcut pressed while the screen is redrawn and, once it is
  still, presses its button if the screen still shows what it showed at the
  press (the `marker` around the judged text), or if it is a relative move;
  else refuses it with a notice;
- puts the focus in a box on a key (`focus`), scrolls the judged text into
  view inside its box (`scroll`), and reruns the screen (or its fragment)
  when a reveal falls due (`due_in`).

`app.py` mounts it without shortcuts, for the drop-down lists of every screen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import streamlit as st

_JS = (Path(__file__).resolve().parents[1] / "assets" / "keys.js").read_text()
_keys = st.components.v2.component("carelens_keys", js=_JS)

NAV = ("left", "right", "up", "down")
"""Relative moves: a press held during a redraw still means "one more"."""
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


def marker(token: str) -> str:
    """The key of the container around what the screen shows (`token`: ids and
    numbers only, e.g. "12" or "12_3"): keys are checked against it."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", token):
        raise ValueError(f"a screen marker takes letters, digits and _ only: {token!r}")
    return f"at_{token}"


def screen_keys(name: str, buttons: Mapping[str, str], *, token: str,
                focus: Mapping[str, str] | None = None, scroll: Iterable[str] = (),
                due_in: float = 0.0, on_due: Callable[[], None] | None = None,
                gate: bool = False) -> bool:
    """Mount the keys of a screen (see the module's docstring). `buttons`:
    {shortcut: key of the button it presses}; `focus`: {shortcut: key of the
    text box it puts the focus in}; `scroll`: keys of elements to keep in view
    inside their scrolling box; `token`: what the screen shows now (the
    marker's); `due_in`: seconds until the screen should run again (a reveal
    falls due), calling `on_due` first.

    `gate`: returns whether the keys are live in this browser session. Until
    they are (the first run after a page load), the screen shows a line and
    not its item: the script says so at once and the screen runs again, and
    a key pressed as soon as the item is in view is then never lost (the text
    could be drawn before the script that holds early keys); `waiting` draws
    that line. Without a browser (Streamlit's AppTest) there is nothing to
    wait for."""
    live_now = not gate or not st.context.headers or bool(
        (st.session_state.get(f"keys_{name}") or {}).get("live"))
    result = _keys(
        key=f"keys_{name}",
        data={
            "id": css_class(f"keys_{name}")[len("st-key-"):],
            "token": token,
            "buttons": {canonical(k): css_class(v) for k, v in buttons.items()},
            "nav": list(NAV),
            "focus": {canonical(k): css_class(v) for k, v in (focus or {}).items()},
            "scroll": [css_class(k) for k in scroll],
            "due_in": round(max(0.0, due_in), 2),
            "gate": not live_now,
        },
        default={"live": False},
        on_due_change=on_due or (lambda: None),
        on_live_change=lambda: None,
        height=0,
    )
    return live_now or bool(getattr(result, "live", False))


def waiting() -> None:
    """The line a gated screen shows for the moment its keys take to be live."""
    with st.container(key="keys_waiting"):
        st.caption("Opening the item…")


def page_keys() -> None:
    """The drop-down lists' focus, on every screen (app.py)."""
    _keys(key="keys_page", data={}, height=0)
