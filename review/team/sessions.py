"""Sessions that end (server mode): a sign-in is a row on the server, and ending
the row ends it everywhere.

Streamlit's `st.login` keeps who signed in in a signed cookie (`_streamlit_user`)
holding the ID token's claims, valid for 30 days wherever it is sent: its
`st.logout` only deletes the cookie in the browser that asks, and forgets the
identity of that one tab. Another tab already open kept answering as the person,
and a copy of the cookie signed in from any browser.

So carelens keeps its own record of each sign-in (the `sessions` table). The
cookie holds the ID token's claims; among them the provider's issue time (`iat`)
and the nonce carelens's login sent (`nonce`), which are new at every sign-in.
A session is known by a digest of those claims with the issuer and subject
(`binding_of`): every copy of a cookie is the same session, and a new sign-in
is a new one. At every request (`enter`):

- a session on record and in force goes on (its last request noted, at most
  once a minute, pushing its expiry out by the idle limit);
- a session ended (its person signed out, an admin or the operator signed them
  out, it expired) is refused: the request shows the sign-in screen and nothing
  is written, whichever tab or browser sends the cookie;
- a sign-in not on record is a new session only if its ID token was issued in
  the last `SIGN_IN_WINDOW` (the provider has just vouched for the person);
  a cookie older than that which the server does not know is refused. Nothing
  deletes a session, so an ended one stays ended.

A session expires after `idle_limit()` without a request (`CARELENS_SESSION_IDLE`
in the environment, else `session_idle` in the `[carelens]` section of the
secrets, e.g. `30m`, `8h`, `2d`; 8 hours by default) and at the latest
`MAX_AGE` after it began (Streamlit's cookie lifetime). Writes check the session
themselves (`store.sessions`, `Store.session_id`): a tab that missed the end of
its session writes nothing. Every start and end is in the audit log
(`session_start`, `sign_out`, `sign_out_by_admin`, `sign_out_by_operator`,
`session_expired`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from review.team.access import require
from review.team.identity import Admins, Identity, reviewer_for_identity
from review.team.people import Reviewer
from store import Store
from store.sessions import END_WORDS, why_not_in_force

IDLE_ENV = "CARELENS_SESSION_IDLE"
DEFAULT_IDLE = timedelta(hours=8)
"""Without a request for this long, a session ends (`idle_limit`)."""
MAX_AGE = timedelta(days=30)
"""A session ends this long after it began, however much it is used: the
lifetime of Streamlit's identity cookie."""
SIGN_IN_WINDOW = timedelta(minutes=10)
"""A sign-in the server has no record of starts a session only if the provider
issued its ID token less than this long ago (or ahead, for clocks apart)."""
TOUCH_EVERY = timedelta(seconds=60)
"""A session's last request is written down at most this often."""
BINDING_CLAIMS = ("iss", "sub", "iat", "nonce", "sid", "auth_time", "jti")
"""The ID token claims a session is known by: who, and which sign-in."""


class NoSession(ValueError):
    """The login's claims cannot make a session (no issue time)."""


def parse_duration(text: str) -> timedelta:
    """`90` (minutes), `45m`, `8h`, `2d`, `30s`: a positive duration."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text).lower())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{IDLE_ENV}: {text!r} is not a duration (e.g. 30m, 8h, 2d)")
    unit = {"s": "seconds", "m": "minutes", "": "minutes", "h": "hours", "d": "days"}[m.group(2)]
    return timedelta(**{unit: float(m.group(1))})


def idle_limit(from_secrets: Any = None) -> timedelta:
    """The idle limit in force: `CARELENS_SESSION_IDLE`, else the secrets'
    `session_idle`, else `DEFAULT_IDLE`. Raises ValueError for one that is not a
    duration (a server must not run on a limit nobody meant)."""
    configured = os.environ.get(IDLE_ENV) or from_secrets
    return parse_duration(configured) if configured else DEFAULT_IDLE


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _issued(claims: Mapping[str, Any]) -> datetime:
    iat = claims.get("iat")
    if isinstance(iat, bool) or not isinstance(iat, (int, float)):
        raise NoSession("the login's ID token carries no issue time (iat): no session can be"
                        " told from another; ask whoever runs carelens to check the provider")
    return datetime.fromtimestamp(float(iat), UTC)


def binding_of(claims: Mapping[str, Any]) -> str:
    """The digest a sign-in is known by: the issuer, subject, issue time, nonce (and
    `sid`, `auth_time`, `jti` when the provider gives them) of its ID token."""
    _issued(claims)
    kept = {k: claims[k] for k in BINDING_CLAIMS if claims.get(k) not in (None, "")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """What a request's sign-in comes to (`enter`)."""

    reviewer: Reviewer | None = None
    """The person, when their session is in force."""
    session_id: int | None = None
    refused: str | None = None
    """Why not, in words a sign-in screen shows."""


def _end(store: Store, conn, row, reason: str, by: str, now: str) -> None:
    conn.execute("UPDATE sessions SET ended_at = ?, end_reason = ?, ended_by = ? WHERE id = ?"
                 " AND ended_at IS NULL", (now, reason, by, row["id"]))
    person = conn.execute("SELECT name FROM raters WHERE id = ?", (row["rater_id"],)).fetchone()
    action = {"signed_out": "sign_out", "expired": "session_expired"}.get(reason, reason)
    store.audit(by, action, "sessions", row["id"], {"in_force": True},
                {"person": person[0] if person else None, "why": END_WORDS[reason]})


def _expired(row, now: datetime) -> bool:
    return (row["expires_at"] <= _stamp(now)
            or datetime.fromisoformat(row["started_at"]) + MAX_AGE <= now)


def enter(store: Store, identity: Identity, claims: Mapping[str, Any], admins: Admins | None,
          idle: timedelta, now: datetime | None = None) -> Entry:
    """The session a request's sign-in belongs to: in force (its person, made at
    their first sign-in), or refused with the reason. Raises NoSession for claims
    without an issue time. `store` must not act in a session of its own."""
    now = now or datetime.now(UTC)
    binding = binding_of(claims)
    row = store.query_one("SELECT * FROM sessions WHERE binding = ?", (binding,))
    if row is not None and row["ended_at"] is not None:
        return Entry(refused=f"Your session has ended: {END_WORDS[row['end_reason']]}.")
    if row is not None and _expired(row, now):
        with store.transaction() as conn:
            _end(store, conn, row, "expired", "system", _stamp(now))
        return Entry(refused=f"Your session has ended: {END_WORDS['expired']}.")
    if row is None:
        issued = _issued(claims)
        if abs(now - issued) > SIGN_IN_WINDOW:
            return Entry(refused="This sign-in is not on record here (it may be older than the"
                                 " server's record of sign-ins, or copied from elsewhere).")
    reviewer = reviewer_for_identity(store, identity, admins)
    if row is not None:
        _touch(store, row, idle, now)
        return Entry(reviewer, row["id"])
    return Entry(reviewer, _start(store, reviewer, binding, _issued(claims), idle, now))


def _start(store: Store, reviewer: Reviewer, binding: str, issued: datetime, idle: timedelta,
           now: datetime) -> int:
    stamp = _stamp(now)
    with store.transaction() as conn:
        cur = conn.execute(
            "INSERT OR IGNORE INTO sessions (rater_id, binding, issued_at, started_at,"
            " last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
            (reviewer.id, binding, _stamp(issued), stamp, stamp, _stamp(now + idle)))
        if cur.rowcount:  # not another tab's first request at the same moment
            store.audit(reviewer.name, "session_start", "sessions", cur.lastrowid, None,
                        {"issued_at": _stamp(issued), "idle_limit_minutes":
                         round(idle.total_seconds() / 60, 2)})
        _end_idle(store, conn, now)
        return conn.execute("SELECT id FROM sessions WHERE binding = ?", (binding,)).fetchone()[0]


def _touch(store: Store, row, idle: timedelta, now: datetime) -> None:
    if datetime.fromisoformat(row["last_seen_at"]) + TOUCH_EVERY > now:
        return
    with store.transaction() as conn:
        conn.execute("UPDATE sessions SET last_seen_at = ?, expires_at = ? WHERE id = ?"
                     " AND ended_at IS NULL", (_stamp(now), _stamp(now + idle), row["id"]))


def _end_idle(store: Store, conn, now: datetime) -> None:
    """Every session past its expiry is ended (audited), inside a transaction."""
    for row in conn.execute("SELECT * FROM sessions WHERE ended_at IS NULL AND (expires_at <= ?"
                            " OR started_at <= ?)",
                            (_stamp(now), _stamp(now - MAX_AGE))).fetchall():
        _end(store, conn, row, "expired", "system", _stamp(now))


def sign_out(store: Store, session_id: int) -> bool:
    """Its person ends their session (Sign out, in a tab acting in it): every tab
    and every copy of its cookie stop at their next request. False when it had
    ended already."""
    with store.transaction() as conn:
        row = conn.execute("SELECT s.*, r.name FROM sessions s JOIN raters r"
                           " ON r.id = s.rater_id WHERE s.id = ?", (session_id,)).fetchone()
        if row is None or row["ended_at"] is not None:
            return False
        _end(store, conn, row, "signed_out", row["name"], _stamp(datetime.now(UTC)))
    return True


def sign_out_person(store: Store, by: Reviewer | None, name: str, *, operator: str | None = None
                    ) -> int:
    """End every session of the person named `name`: an admin's act (`by`, checked:
    `end_sessions`), or the operator's at the command line (`operator`, e.g.
    `cli:ACCOUNT`, with `by` None). Returns how many were in force. Raises
    NotAllowed for someone else, LookupError for a name nobody has."""
    if operator is None:
        require(by, "end_sessions", server=True)
    actor, reason = ((by.name, "signed_out_by_admin") if operator is None
                     else (operator, "signed_out_by_operator"))
    with store.transaction() as conn:
        person = conn.execute("SELECT id FROM raters WHERE name = ? AND kind = 'human'",
                              (name,)).fetchone()
        if person is None:
            raise LookupError(f"no person named {name!r}")
        now = datetime.now(UTC)
        _end_idle(store, conn, now)
        rows = conn.execute("SELECT * FROM sessions WHERE rater_id = ? AND ended_at IS NULL",
                            (person[0],)).fetchall()
        for row in rows:
            _end(store, conn, row, reason, actor, _stamp(now))
    return len(rows)


@dataclass(frozen=True)
class Signed:
    """A person with sessions in force."""

    name: str
    sessions: int
    started_at: str
    """The earliest of their sessions in force began."""
    last_seen_at: str
    """Their latest request."""


def signed_in(store: Store, now: datetime | None = None) -> list[Signed]:
    """Who has a session in force now (not ended, not past its expiry), by name."""
    rows = store.query(
        "SELECT r.name, COUNT(*) AS n, MIN(s.started_at) AS started, MAX(s.last_seen_at) AS seen"
        " FROM sessions s JOIN raters r ON r.id = s.rater_id WHERE s.ended_at IS NULL"
        " AND s.expires_at > ? AND s.started_at > ? GROUP BY r.id ORDER BY r.name",
        (_stamp(now or datetime.now(UTC)), _stamp((now or datetime.now(UTC)) - MAX_AGE)))
    return [Signed(r["name"], r["n"], r["started"], r["seen"]) for r in rows]


def in_force(store: Store, session_id: int | None) -> bool:
    """Whether the session is in force now (a read: for a request that is about to
    act, e.g. a widget's callback, which no sign-in check preceded)."""
    return session_id is not None and why_not_in_force(store.conn, session_id) is None
