"""Small pieces every screen uses: the store for this run, who is reviewing,
and safe text rendering. Layout only; no SQL and no statistics here."""

from __future__ import annotations

import threading

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from review.reviewing.blinding import (
    adopt_visitor_opening,
    labels_mark,
    open_labels,
    what_reviewer_sees,
)
from review.team.access import Viewer, open_for, viewer_scope
from review.team.identity import (
    Identity,
    NoIdentity,
    configured_admins,
    find_signed_in,
    identity_from_claims,
)
from review.team.reviewers import Reviewer, find_reviewer
from review.team.sessions import Entry, NoSession, enter, idle_limit, in_force
from review.team.sessions import sign_out as end_session
from review.text import safe_markdown, split_long, text_blocks
from review.workspace import default_db_path, open_store
from store import Store
from store.key import RecordKeyError, use_secret

_RUN_KEY = "_carelens_run"


def begin_run() -> None:
    """Called by app.py at the start of every script run: forget the last
    run's connection (a rerun may be on another thread; the old connection
    is closed when collected), and pass the record's key from the secrets
    (`[carelens] record_key`) to the store, which reads no secrets itself."""
    st.session_state[_RUN_KEY] = {}
    try:
        secret = st.secrets.get("carelens", {}).get("record_key")
    except Exception:  # no secrets file, or no [carelens] section
        secret = None
    use_secret(secret)


def record_key_problem() -> str | None:
    """Why this database cannot be written (its record's key is not here, or the
    key given is unusable), in one line; None when it can."""
    try:
        return store().no_key
    except RecordKeyError as exc:
        return str(exc)


SESSION = "_carelens_session"
"""Server mode: the id of the sign-in (`review.team.sessions`) this browser tab
acts in, as the last sign-in check found it in force; None when it was refused."""


def store() -> Store:
    """A store for this script run: one connection per run and thread, never
    shared across sessions. (Widget callbacks run before app.py starts the
    next run, possibly on another thread: they get their own connection.)

    Server mode: the store acts in the tab's session (`Store.session_id`), so
    every write it makes first checks that the session is in force. A widget's
    callback, or a fragment's rerun, comes before app.py's sign-in check: there
    a session found ended stops the action and reruns the app, which shows the
    sign-in screen, and nothing is written."""
    run = st.session_state.setdefault(_RUN_KEY, {})
    key = threading.get_ident()
    if key not in run:
        run[key] = open_store(default_db_path())
        run[key].session_id = acting_session()
    found = run[key]
    if found.session_id is not None and _before_the_sign_in_check() \
            and not in_force(found, found.session_id):
        st.session_state.pop(SESSION, None)
        st.rerun()
    return found


def own_store() -> Store:
    """A store of its own (to close after use: a widget's callback that may run on
    another thread), acting in the tab's session as `store()` does."""
    own = open_store(default_db_path())
    own.session_id = acting_session()
    if own.session_id is not None and _before_the_sign_in_check() \
            and not in_force(own, own.session_id):
        own.close()
        st.session_state.pop(SESSION, None)
        st.rerun()
    return own


NOT_IN_FORCE = 0
"""The session a tab acts in on a server while no sign-in of it is found in force
(refused, or not checked yet): no session has this id, so every write is refused."""


def acting_session() -> int | None:
    """The session this tab acts in: None in local mode (no sessions); on a server,
    the one its last sign-in check found in force, else `NOT_IN_FORCE`."""
    if not server_mode():
        return None
    return st.session_state.get(SESSION) or NOT_IN_FORCE


def _before_the_sign_in_check() -> bool:
    """Whether this code runs where app.py's sign-in check has not run first: a
    widget's callback (before the script starts) or a fragment's own rerun."""
    ctx = get_script_run_ctx()
    return ctx is not None and (not ctx.has_script_started or bool(ctx.fragment_ids_this_run))


def server_mode() -> bool:
    """True where Streamlit's OIDC login is configured ([auth] in secrets):
    the identity then comes from the login and cannot be chosen."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all: local mode
        return False


def login_identity() -> Identity | None:
    """Server mode: who signed in, as the login provider vouches for them (the
    issuer and subject of the ID token; `review.team.identity`). None when
    nobody is signed in or the login names nobody."""
    if not st.user.is_logged_in:
        return None
    try:
        return identity_from_claims(st.user.to_dict())
    except NoIdentity:
        return None


def _carelens_secret(name: str):
    try:
        return st.secrets.get("carelens", {}).get(name)
    except Exception:  # no secrets section for carelens
        return None


def sign_in() -> Entry | None:
    """Server mode, at the start of each run: the session of the login
    (`review.team.sessions.enter`): in force, with the reviewer behind it (made
    at their first sign-in; admins are those the configuration names,
    `CARELENS_ADMINS` or `admins` under `[carelens]` in the secrets), or refused
    (signed out, expired, not on record), with the reason. None when the login
    names nobody. Raises ValueError for an idle limit that is not a duration."""
    identity = login_identity()
    st.session_state.pop(SESSION, None)
    if identity is None:
        return None
    db = store()
    db.session_id = None  # the check itself acts in no session
    try:
        entry = enter(db, identity, st.user.to_dict(),
                      configured_admins(_carelens_secret("admins")),
                      idle_limit(_carelens_secret("session_idle")))
    except NoSession as exc:
        entry = Entry(refused=str(exc))
    if entry.session_id is not None:
        st.session_state[SESSION] = entry.session_id
    db.session_id = acting_session()  # NOT_IN_FORCE when refused: it writes nothing
    return entry


def sign_out() -> None:
    """Sign out (a widget's callback): the session ends on the server (every tab
    and every copy of its cookie stop at their next request), then Streamlit's
    logout forgets the cookie in this browser."""
    session_id = st.session_state.pop(SESSION, None)
    if session_id is not None:
        with open_store(default_db_path()) as db:  # acts in no session: it ends this one
            end_session(db, session_id)
    st.logout()


def viewer() -> Viewer | None:
    """What the reader of a screen that shows every rater's labels (Browse,
    Agreement, exports; asked after the labels gate) may read: None for every
    answer, else their own and the labels their blinding shows
    (`review.team.access`: reviewers in server mode)."""
    return viewer_scope(current_reviewer(), server=server_mode(), labels=True)


def viewer_store() -> Store:
    """A store for this run whose reads hold only what `viewer()` may read."""
    scope = viewer()
    if scope is None:
        return store()
    run = st.session_state.setdefault(_RUN_KEY, {})
    key = (threading.get_ident(), scope)
    if key not in run:
        run[key] = open_for(default_db_path(), scope)
        run[key].session_id = acting_session()  # its writes (tags, views) too
    return run[key]


def current_reviewer() -> Reviewer | None:
    """Who is reviewing. Server mode: the person signed in, found by their
    login's issuer and subject on every run (a name in the session or the
    address is never an identity). Local mode: the name chosen in the sidebar."""
    if server_mode():
        identity = login_identity()
        # Only a sign-in whose session was found in force this run (`sign_in`).
        reviewer = (find_signed_in(store(), identity)
                    if identity is not None and st.session_state.get(SESSION) is not None
                    else None)
    else:
        name = st.session_state.get("reviewer") or st.query_params.get("reviewer")
        reviewer = find_reviewer(store(), name) if name else None
    if reviewer:
        if st.session_state.get(WORK_OF, reviewer.name) != reviewer.name:
            # Another reviewer in this browser session: nothing the last one
            # typed, picked or had open carries over (their drafts are in the
            # database, under their name).
            for key in [k for k in st.session_state if k not in KEEP_ON_SWITCH]:
                del st.session_state[key]
        st.session_state[WORK_OF] = reviewer.name
        st.session_state["reviewer"] = reviewer.name
        seen = st.session_state.get(VISITOR_SAW)
        if seen and reviewer.id not in seen["recorded"]:
            # Labels seen before a name was chosen: whoever this session turns out
            # to be has seen them (review.reviewing.blinding.adopt_visitor_opening).
            adopt_visitor_opening(store(), reviewer, seen["screen"], tuple(seen["covered"]))
            seen["recorded"].append(reviewer.id)
    return reviewer


WORK_OF = "_session_reviewer"
"""Whose work the session's widget state is."""
SWITCH_TO = "_reviewer_added"
"""The reviewer just added with "Add and switch": the next run's list shows them
(the list's old value would otherwise switch the session back)."""
VISITOR_SAW = "_labels_seen_without_a_name"
"""A visitor with no name chose to see every rater's labels: {"screen", "covered"
(the labels_mark), "recorded" (the reviewers since recorded as having seen them)}."""
KEEP_ON_SWITCH = {"reviewer", WORK_OF, "reviewer_select", SWITCH_TO, VISITOR_SAW, SESSION}


def require_reviewer() -> Reviewer:
    reviewer = current_reviewer()
    if reviewer is None:
        st.title("carelens", anchor=False)
        st.markdown(
            "Review what medical AI systems did, and measure how far the automated graders "
            "behind their benchmarks can be trusted. You answer first, blind to the gold label "
            "and the machine's label; they are shown after you commit, and every answer is kept."
        )
        st.info("Choose your name in the sidebar, or add yourself, to start reviewing.",
                icon=":material/person:")
        st.stop()
    return reviewer


_WRITTEN = "_items_put_in_address"
"""Item uids this session has put in the address (`?item=`), newest last."""


def item_asked_by_address(shown_uid: str | None) -> str | None:
    """The item the address (`?item=`) asks to open, when it is not the one
    shown (`shown_uid`, None when this session shows none yet): on a session's
    first screen (a reload, a link), on the browser's Back or Forward, on
    arriving from another screen (Adjudicate's "Read the item"), or when the
    address names an item this session never put there. On a rerun of the
    same screen, an address this session put there itself, earlier, is not a
    request to go back: it comes with a key pressed before the browser had
    caught up with the next item's address, and obeying it jumped back to an
    item already answered. (Under AppTest, which runs app.py once, every
    address is obeyed.)"""
    wanted = st.query_params.get("item")
    if not wanted or wanted == shown_uid:
        return None
    before, now = st.session_state.get(_PAGES, (None, None))
    if shown_uid is not None and wanted in st.session_state.get(_WRITTEN, {}) and before == now:
        ctx = get_script_run_ctx()
        if not (ctx is not None and getattr(ctx, "is_history_navigation", False)):
            return None
    return wanted


_PAGES = "_pages_run"
"""(the screen of the run before this one, this run's screen): `note_page`."""


def came_from_another_screen() -> bool:
    """Whether this run's screen follows another screen's run (not a rerun of itself)."""
    before, now = st.session_state.get(_PAGES, (None, None))
    return before is not None and before != now


def note_page(name: str) -> None:
    """Called by app.py with the screen each run shows, before running it."""
    st.session_state[_PAGES] = (st.session_state.get(_PAGES, (None, None))[1], name)


_PENDING = "_item_for_the_address"
"""The item uid this run shows, written into the address at the run's end
(`address_follows`)."""


def put_item_in_address(uid: str) -> None:
    """Keep the address on the item shown, so a reload or a shared link opens it
    again. Written once the run has drawn the item (`address_follows`): the
    browser applies a new address as soon as it arrives, and one sent before
    the item named the next item while the screen still showed the last."""
    written = st.session_state.setdefault(_WRITTEN, {})
    written.pop(uid, None)
    written[uid] = None
    while len(written) > 500:
        del written[next(iter(written))]
    st.session_state[_PENDING] = uid


def address_follows() -> None:
    """At the end of a run (app.py) or of a fragment's run (Review's item): the
    address names the item the run drew (`put_item_in_address`)."""
    uid = st.session_state.pop(_PENDING, None)
    if uid is not None and st.query_params.get("item") != uid:
        st.query_params["item"] = uid


def show_text(text: str | None, key: str, empty: str = "(empty)") -> None:
    """Untrusted text exactly as written (`review.text.safe_markdown`), its
    fenced code blocks in code boxes; very long text is cut, with the rest
    behind an expander so the page never freezes."""
    if not text:
        st.caption(empty)
        return
    head, rest = split_long(text)
    _show_blocks(head)
    if rest:
        with st.expander(f"Show the remaining {len(rest):,} characters"):
            _show_blocks(rest)


CHAT_AVATARS = {"user": ":material/person:", "assistant": ":material/smart_toy:",
                "system": ":material/settings:", "tool": ":material/build:"}
"""A chat message's avatar by its role (any other role: a speech bubble)."""


def show_messages(messages, key: str, assistant: str | None = None) -> None:
    """A study's chat message by message, each role as the file gives it and each
    message's text exactly as written; `assistant`: who the assistant is, in words a
    reviewer may read ("model A")."""
    for n, message in enumerate(messages or [], start=1):
        role = str(message.get("role") or "")
        with st.chat_message("assistant" if role == "assistant" else "user",
                             avatar=CHAT_AVATARS.get(role.lower(), ":material/chat:")):
            st.caption(safe_markdown(role.capitalize())
                       + (f" ({safe_markdown(assistant)})" if role == "assistant" and assistant
                          else "") + f" · message {n}")
            show_text(message.get("content"), key=f"{key}:m{n}", empty="(an empty message)")


def _show_blocks(text: str) -> None:
    for kind, language, body in text_blocks(text):
        if kind == "code":
            st.code(body, language=language, wrap_lines=True)
        else:
            st.markdown(safe_markdown(body))


def labels_gate(screen: str, stop: bool = True) -> bool:
    """Before a screen (or a part of one: `stop` False) that shows every
    rater's labels (gold, mapper, judges): the blinding decision
    (`what_reviewer_sees` without an item) says whether they may be shown, or
    why not; a reviewer with items still waiting for their blind answer sees
    them only by choosing to, which is recorded. True when the labels may be
    shown."""
    who = current_reviewer()
    db = store()
    if who is None:
        return _visitor_gate(db, screen, stop)
    key, shown_key = f"labels_opened:{who.id}", f"labels_gate_shown:{who.id}"
    if st.session_state.get(key) == labels_mark(db):
        return True  # decided since the last items came in
    sight = what_reviewer_sees(db, who.id)
    if sight.shown:
        if sight.record:  # an answer changed after this is not a blind one: recorded
            open_labels(db, who, screen, sight.unanswered, sight.covers)
        st.session_state[key] = sight.covers
        return True
    # A click is an answer to the warning shown before it: what that warning
    # counted is what the choice covers (items imported meanwhile are asked about).
    shown_before, st.session_state[shown_key] = st.session_state.get(shown_key), sight.covers
    st.warning(sight.held, icon=":material/visibility_off:")
    cols = st.columns([2, 2, 3])
    if cols[0].button("Show the labels anyway", type="primary", key="labels_gate_open"):
        covered = tuple(shown_before) if shown_before else sight.covers
        open_labels(db, who, screen, sight.unanswered, covered)
        st.session_state[key] = covered
        st.rerun()
    cols[1].page_link("pages/review.py", label="Back to reviewing", icon=":material/rate_review:")
    if stop:
        st.stop()
    return False


def _visitor_gate(db: Store, screen: str, stop: bool) -> bool:
    """`labels_gate` for a visitor who has chosen no name: the labels only by
    choosing to, kept in the session and recorded against the name they choose
    (`current_reviewer`)."""
    seen = st.session_state.get(VISITOR_SAW)
    if seen and tuple(seen["covered"]) == labels_mark(db):
        return True
    sight = what_reviewer_sees(db, None)
    st.warning(sight.held, icon=":material/visibility_off:")
    cols = st.columns([2, 2, 3])
    if cols[0].button("Show the labels anyway", type="primary", key="labels_gate_open"):
        st.session_state[VISITOR_SAW] = {"screen": screen, "covered": list(sight.covers),
                                         "recorded": []}
        st.rerun()
    cols[1].page_link("pages/review.py", label="Choose a name and review",
                      icon=":material/rate_review:")
    if stop:
        st.stop()
    return False
