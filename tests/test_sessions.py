"""Sessions that end: a sign-in is a row on the server, and ending it ends every
copy of its cookie.

The adversarial run signed out in one tab while a second tab of the same
browser went on answering (4 of 4 answers written under the person's name), and
a copy of the `_streamlit_user` cookie taken before sign-out still signed in
from a fresh browser. Here the sign-in's session is ended by the person, by an
admin, by the operator and by idleness, and after each the same claims (any
tab, any copy of the cookie) are refused and a store acting in the session
writes nothing. The same runs end to end, through the real login and two
browser tabs, in tests/test_browser_sessions.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from review.reviewing.commit import commit_answer
from review.team.access import NotAllowed
from review.team.identity import admins_from, identity_from_claims
from review.team.reviewers import ensure_reviewer
from review.team.sessions import (
    DEFAULT_IDLE,
    IDLE_ENV,
    SIGN_IN_WINDOW,
    NoSession,
    binding_of,
    enter,
    idle_limit,
    parse_duration,
    sign_out,
    sign_out_person,
    signed_in,
)
from store.sessions import SessionEnded
from tests.helpers import table_counts, write_prefixes

IDP = "https://idp.example.org"
HOUR = timedelta(hours=1)


def claims(sub="rev-1", nonce="nonce-1", iat=None, **more):
    return {"iss": IDP, "sub": sub, "name": f"Dr. {sub}", "iat": iat or int(time.time()),
            "nonce": nonce, **more}


def come_in(store, c, idle=HOUR, now=None):
    return enter(store, identity_from_claims(c), c, admins_from("admin@example.org"), idle, now)


def acting(path, session_id):
    """A store for a request of that session (as the app opens one)."""
    from review.workspace import open_store

    s = open_store(path)
    s.session_id = session_id
    return s


def answer(store, entry):
    item = store.scalar("SELECT id FROM items WHERE kind = 'prefix' ORDER BY id LIMIT 1")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    return commit_answer(store, entry.reviewer, item, qid, "1B_ESCALATION_URGENT_CARE")


def audited(store, action):
    return store.scalar("SELECT COUNT(*) FROM audit_log WHERE action = ?", (action,))


def test_a_fresh_sign_in_starts_a_session_and_every_copy_of_its_cookie_joins_it(store):
    c = claims()  # one sign-in: the same claims in every tab and copy
    first = come_in(store, c)
    assert first.reviewer is not None and first.session_id is not None
    again = come_in(store, c)  # another tab, or a copy of the cookie
    assert again.session_id == first.session_id
    assert audited(store, "session_start") == 1


def test_each_sign_in_is_a_session_of_its_own():
    a, b = claims(nonce="n1"), claims(nonce="n2")
    assert binding_of(a) != binding_of(b)
    assert binding_of(a) != binding_of(claims(nonce="n1", iat=a["iat"] + 1))
    assert binding_of(a) == binding_of(dict(a, name="another display name"))


def test_after_sign_out_no_tab_and_no_copy_of_the_cookie_gets_in(store, tmp_path):
    c = claims()  # one sign-in: the same claims in every tab and copy
    write_prefixes(store, 3)
    entry = come_in(store, c)
    other_tab = acting(store.path, entry.session_id)
    answer(other_tab, entry)  # in force: it writes
    assert sign_out(store, entry.session_id)
    assert audited(store, "sign_out") == 1
    before = table_counts(store)
    with pytest.raises(SessionEnded, match="you signed out"):
        answer(other_tab, entry)
    assert table_counts(store) == before  # nothing written, not even an audit entry
    refused = come_in(store, c)  # the same cookie, from any browser
    assert refused.reviewer is None and "signed out" in refused.refused
    assert not sign_out(store, entry.session_id)  # once


def test_signing_in_again_after_sign_out_is_a_new_session(store):
    old = come_in(store, claims(nonce="first"))
    sign_out(store, old.session_id)
    new = come_in(store, claims(nonce="second"))
    assert new.reviewer is not None and new.session_id != old.session_id


def test_an_admin_signs_a_person_out_of_every_session(store):
    write_prefixes(store, 3)
    admin = ensure_reviewer(store, "Dr. Admin", role="admin")
    devices = [claims(nonce="laptop"), claims(nonce="phone")]
    laptop, phone = (come_in(store, c) for c in devices)
    assert [s.sessions for s in signed_in(store)] == [2]
    with pytest.raises(NotAllowed, match="only an admin"):
        sign_out_person(store, laptop.reviewer, "Dr. rev-1")
    assert sign_out_person(store, admin, "Dr. rev-1") == 2
    assert signed_in(store) == [] and audited(store, "signed_out_by_admin") == 2
    for entry, c in zip((laptop, phone), devices, strict=True):
        assert "an admin signed you out" in come_in(store, c).refused
        with pytest.raises(SessionEnded, match="an admin"):
            answer(acting(store.path, entry.session_id), entry)
    actor = store.scalar("SELECT actor FROM audit_log WHERE action = 'signed_out_by_admin'")
    assert actor == "Dr. Admin"


def test_the_operator_signs_a_person_out(store):
    c = claims()  # one sign-in: the same claims in every tab and copy
    entry = come_in(store, c)
    assert sign_out_person(store, None, "Dr. rev-1", operator="cli:ops") == 1
    assert "operator" in come_in(store, c).refused
    assert store.scalar("SELECT ended_by FROM sessions WHERE id = ?", (entry.session_id,)) \
        == "cli:ops"
    with pytest.raises(LookupError):
        sign_out_person(store, None, "Dr. Nobody", operator="cli:ops")


def test_a_session_idle_past_its_limit_ends_and_writes_nothing(store):
    write_prefixes(store, 3)
    start = datetime.now(UTC)
    entry = come_in(store, claims(iat=int(start.timestamp())), idle=HOUR, now=start)
    # Used within the limit, it goes on; each request pushes the end out.
    assert come_in(store, claims(iat=int(start.timestamp())), now=start + 50 * timedelta(
        minutes=1)).session_id == entry.session_id
    assert come_in(store, claims(iat=int(start.timestamp())), now=start + 100 * timedelta(
        minutes=1)).session_id == entry.session_id
    late = start + 100 * timedelta(minutes=1) + HOUR + timedelta(seconds=1)
    refused = come_in(store, claims(iat=int(start.timestamp())), now=late)
    assert refused.reviewer is None and "expired" in refused.refused
    assert audited(store, "session_expired") == 1


def test_a_write_after_the_expiry_is_refused_before_anyone_notices_it(store):
    c = claims()  # one sign-in: the same claims in every tab and copy
    write_prefixes(store, 3)
    entry = come_in(store, c)
    store.conn.execute("UPDATE sessions SET expires_at = '2000-01-01T00:00:00.000000+00:00'")
    with pytest.raises(SessionEnded, match="expired"):
        answer(acting(store.path, entry.session_id), entry)


def test_a_cookie_the_server_does_not_know_and_that_is_not_fresh_is_refused(store):
    old = int((datetime.now(UTC) - SIGN_IN_WINDOW - timedelta(minutes=1)).timestamp())
    refused = come_in(store, claims(iat=old))
    assert refused.reviewer is None and "not on record" in refused.refused
    assert store.scalar("SELECT COUNT(*) FROM raters WHERE login_subject = 'rev-1'") == 0
    assert store.scalar("SELECT COUNT(*) FROM sessions") == 0


def test_claims_without_an_issue_time_make_no_session(store):
    c = claims()
    del c["iat"]
    with pytest.raises(NoSession, match="iat"):
        come_in(store, c)


def test_an_ended_session_is_never_reopened_nor_deleted(store):
    c = claims()  # one sign-in: the same claims in every tab and copy
    entry = come_in(store, c)
    sign_out(store, entry.session_id)
    with pytest.raises(Exception, match="never reopened"):
        store.conn.execute("UPDATE sessions SET ended_at = NULL, end_reason = NULL")
    with pytest.raises(Exception, match="never deleted"):
        store.conn.execute("DELETE FROM sessions")


def test_the_idle_limit_comes_from_the_environment_or_the_secrets(monkeypatch):
    monkeypatch.delenv(IDLE_ENV, raising=False)
    assert idle_limit() == DEFAULT_IDLE == timedelta(hours=8)
    assert idle_limit("45m") == timedelta(minutes=45)
    monkeypatch.setenv(IDLE_ENV, "2h")
    assert idle_limit("45m") == timedelta(hours=2)
    assert parse_duration("90") == timedelta(minutes=90)
    assert parse_duration("2d") == timedelta(days=2)
    for bad in ("soon", "0", "-5m", "8 hours"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)


def test_local_mode_and_the_command_line_act_in_no_session(store):
    write_prefixes(store, 3)
    me = ensure_reviewer(store, "Dr. Local")
    assert store.session_id is None
    item = store.scalar("SELECT id FROM items ORDER BY id LIMIT 1")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    assert commit_answer(store, me, item, qid, "1B_ESCALATION_URGENT_CARE")


def test_the_command_line_lists_and_ends_sessions(store, capsys):
    c = claims()  # one sign-in: the same claims in every tab and copy
    from tests.helpers import one_line, run_cli

    code, out, _ = run_cli(capsys, "--db", store.path, "sessions")
    assert code == 0 and out == "nobody is signed in\n"
    entry = come_in(store, c)
    code, out, _ = run_cli(capsys, "--db", store.path, "sessions")
    assert code == 0 and out.startswith("Dr. rev-1\t1 session\tlast request ")
    code, out, _ = run_cli(capsys, "--db", store.path, "sessions", "--end", "Dr. rev-1")
    assert code == 0 and out == "Dr. rev-1: signed out (1 session ended)\n"
    assert "operator" in come_in(store, c).refused
    assert store.scalar("SELECT ended_by FROM sessions WHERE id = ?",
                        (entry.session_id,)).startswith("cli:")
    code, _, err = run_cli(capsys, "--db", store.path, "sessions", "--end", "Dr. Nobody")
    assert code == 2 and "no person named" in one_line(err)


def test_a_tab_whose_sign_in_was_refused_writes_nothing(store):
    """The app's stores act in `NOT_IN_FORCE` (0) until a sign-in is found in force."""
    write_prefixes(store, 3)
    entry = come_in(store, claims())
    refused = acting(store.path, 0)
    before = table_counts(store)
    with pytest.raises(SessionEnded, match="not on record"):
        answer(refused, entry)
    with pytest.raises(SessionEnded):
        refused.require_session()
    assert table_counts(store) == before
