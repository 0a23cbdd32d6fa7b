"""Whether a key counts: the one rule (ARCHITECTURE.md, One place per rule).

A key (or a click on a button a key presses) that answers, picks a verdict,
marks a step or settles counts only when it was pressed on what the screen
shows now, and what it acts on has been on screen long enough to be read:

- at least `min_dwell()` (``CARELENS_MIN_DWELL_MS``, default 500 ms) since
  it was drawn - the item, or the criterion, the step or the unit a key acts
  on (a screen's "token": it changes whenever what a key would act on does,
  an answer changed in place included);
- and as long since the last press refused on the same screen: a burst
  stays refused until it stops (five keys 150 ms apart answer at most one
  item, never one for each of five items).

An earlier press is refused, said beside the answers (`TOO_SOON`), never
queued onto the next item and never applied to an item already answered:
the clinician presses again once they have read what is on screen.

Two clocks apply this rule, each where it cannot be fooled:

- The browser's (`assets/keys.js`, given `min_dwell()` by `pages/_keys.py`):
  from when the text was drawn on this screen to when the key went down.
  Only the browser knows when a slow machine actually drew the text (the
  server sends an item well before a busy or throttled browser shows it),
  so it refuses at once, and the press never leaves the page.
- The server's (`check_press`, called by the commit path: `commit_answer`,
  `commit_answers`, `commit_verdicts`, `mark_step`, `skip_item`, and the
  settlements of `review.team.adjudication`; a screen's picks and flags ask
  `refusal` through `pages/_keys.py`): from when the server sent what
  the press acts on to when the press reached it, both read on the server's
  own monotonic clock (`Press`). A script that talks to Streamlit's websocket
  directly can claim any drawing or pressing time it likes, so no time a
  client reports is trusted here; it cannot make the server's clock run
  faster, nor press a button the server never drew. The server's measure is
  never stricter than the browser's (the item is drawn after it is sent, and
  the press reaches the server after it is made), so a key the browser took
  is never refused here, and a fast script is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MIN_DWELL_MS = 500
"""How long what a key acts on must have been on screen: the default of
``CARELENS_MIN_DWELL_MS``. Half a second is under any real reading of an item
(a clinician's median is several seconds) and over a double tap (100-400 ms)."""

DWELL_ENV = "CARELENS_MIN_DWELL_MS"

TOO_SOON = "Not recorded: too soon after the last answer. Press again to answer this one."
"""What a clinician reads beside the answers when a press is refused."""


def min_dwell() -> float:
    """The least time (seconds) what a key acts on must have been on screen:
    ``CARELENS_MIN_DWELL_MS`` (milliseconds, 0 or more), else `MIN_DWELL_MS`.
    A value that is not a number is not a reason to take keys early: the
    default holds."""
    raw = os.environ.get(DWELL_ENV, "").strip()
    try:
        ms = float(raw) if raw else MIN_DWELL_MS
    except ValueError:
        ms = MIN_DWELL_MS
    return max(0.0, ms if ms == ms else MIN_DWELL_MS) / 1000.0  # NaN: the default


@dataclass(frozen=True)
class Press:
    """A press as the server saw it, every time on the server's monotonic clock
    (seconds): what it was pressed on, what the screen shows, since when, and
    the screen's last refused press."""

    pressed_on: str
    """The token of what the button was drawn for (the item, criterion, step or unit)."""
    showing: str | None
    """The token of what the screen shows now (None: nothing sent yet)."""
    shown_at: float | None
    """When the server sent `showing` (None: never sent in this session)."""
    at: float
    """When the press reached the server."""
    refused_at: float | None = None
    """When the server last refused a press on this screen (None: never)."""


class TooSoon(ValueError):
    """A press that does not count (`check_press`); nothing was written. Its
    words are the screen's (`TOO_SOON` by default)."""

    def __init__(self, words: str = TOO_SOON, *, why: str = "too soon") -> None:
        super().__init__(words)
        self.why = why
        """'too soon' (on screen for less than the dwell, or right behind a
        refused press) or 'not on screen' (pressed on what the screen no
        longer shows)."""


def refusal(press: Press, dwell: float | None = None) -> str | None:
    """Why this press does not count (None: it counts). The rule itself: on
    what the screen shows now, shown at least `dwell` (default `min_dwell()`)
    before the press, and the press at least `dwell` after the screen's last
    refused one."""
    dwell = min_dwell() if dwell is None else dwell
    if press.showing is None or press.shown_at is None or press.pressed_on != press.showing:
        return "not on screen"
    if press.at - press.shown_at < dwell:
        return "too soon"
    if press.refused_at is not None and press.at - press.refused_at < dwell:
        return "too soon"
    return None


def check_press(press: Press | None, words: str = TOO_SOON) -> None:
    """Raise `TooSoon` (with `words`) when the press does not count; nothing
    when it does, or when there is no press (an import, the command line, a
    test: nothing was on a screen)."""
    if press is None:
        return
    why = refusal(press)
    if why is not None:
        raise TooSoon(words, why=why)
