"""The guard every write passes: the session it is made in must be in force.

In server mode each sign-in is a row of `sessions` (made and ended by
`review.team.sessions`). A store opened for a signed-in person's requests
carries that row's id (`Store.session_id`); every write transaction on it
(`Store.transaction`) checks, under the write lock, that the session is still
in force (not ended, not past its expiry) before anything is written, and
otherwise writes nothing and raises `SessionEnded`. So a tab still open after
Sign out in another, or a copied cookie, cannot commit, import, settle or tag
anything: the check is below every page and every function that acts.
"""

from __future__ import annotations

import sqlite3

from store.values import utcnow

END_WORDS = {
    "signed_out": "you signed out (in this browser or another tab)",
    "signed_out_by_admin": "an admin signed you out",
    "signed_out_by_operator": "the server's operator signed you out",
    "expired": "it expired after a time without use",
}
"""Why a session ended, in the words a person reads."""


class SessionEnded(PermissionError):
    """The session a write was made in is no longer in force; nothing was written."""

    def __init__(self, why: str):
        super().__init__(f"your session has ended ({why}): nothing was saved; sign in again")
        self.why = why


def why_not_in_force(conn: sqlite3.Connection, session_id: int, now: str | None = None) -> str | None:
    """Why the session is not in force (its words), or None when it is."""
    row = conn.execute("SELECT ended_at, end_reason, expires_at FROM sessions WHERE id = ?",
                       (session_id,)).fetchone()
    if row is None:
        return "it is not on record"
    if row[0] is not None:
        return END_WORDS.get(row[1], row[1])
    if row[2] <= (now or utcnow()):
        return END_WORDS["expired"]
    return None


def require_in_force(conn: sqlite3.Connection, session_id: int | None) -> None:
    """Raise SessionEnded unless the session is in force (None: no session is
    asked for, as in local mode and at the command line)."""
    if session_id is None:
        return
    why = why_not_in_force(conn, session_id)
    if why is not None:
        raise SessionEnded(why)
