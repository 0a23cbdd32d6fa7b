"""carelens: the browser face. Page router, who is reviewing, settings.

Run with `carelens serve` (or `make run`); the database is $CARELENS_DB.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

if __name__ == "__main__" and not st.runtime.exists():  # pragma: no cover - a new process
    # `carelens serve` runs this file as a program, and it becomes the server.
    # Streamlit treats a `pages/` folder beside the entry script as a legacy
    # multipage app until some session has run `st.navigation`; until then a deep
    # link such as /review would run pages/review.py alone, without this file's
    # sidebar, login gate and router. carelens routes with st.navigation only, so
    # the server starts with the legacy mode off. The switch is private: Streamlit
    # 1.67 has no public one (`client.showSidebarNavigation` only hides the legacy
    # menu; the per-process flag is set by the first PagesManager from whether
    # `pages/` exists, and only a call to st.navigation clears it). Hence the exact
    # pin `streamlit==1.67.*` in pyproject.toml: on a version where this attribute
    # has moved, setting it would fail silently and deep links would bypass app.py
    # (tests/test_browser_* open deep links and would notice).
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli as streamlit_cli

    from pages._uploads import install as spool_uploads

    PagesManager.uses_pages_directory = False
    spool_uploads()  # uploads kept on disk, not in the server's memory (pages/_uploads.py)
    sys.argv[0] = "streamlit"
    sys.exit(streamlit_cli.main())

from pages._keys import page_keys
from pages._shared import (
    SWITCH_TO,
    address_follows,
    begin_run,
    current_reviewer,
    login_identity,
    note_page,
    record_key_problem,
    server_mode,
    sign_in,
    sign_out,
    store,
)
from pages._steps import code_span
from review.team.reviewers import (
    ROLES,
    can_adjudicate,
    ensure_reviewer,
    is_admin,
    list_reviewers,
)
from review.text import safe_markdown
from review.workspace import default_db_path
from store.sessions import SessionEnded

# A local icon: a Material icon name as page_icon makes the browser fetch
# the favicon from a font CDN, and nothing may call out unasked.
ASSETS = Path(__file__).resolve().parent / "assets"
ICON = str(ASSETS / "icon.png")
st.set_page_config(page_title="carelens", page_icon=ICON, layout="wide")
begin_run()
st.html(ASSETS / "carelens.css")  # the compact layout for laptop screens: style only
page_keys()  # the focus back to the page after a choice in any drop-down list
if (problem := record_key_problem()) is not None:
    # Nothing can be written that would verify: said once, and nothing else is shown.
    st.error(safe_markdown(problem), icon=":material/key_off:")
    st.stop()


def reviewer_sidebar() -> None:
    """Local mode: choose or add your name; kept in the URL so a reload or a
    reopened tab comes back as the same reviewer."""
    with st.sidebar:
        st.markdown("**Who is reviewing**")
        reviewers = list_reviewers(store())
        names = [r.name for r in reviewers]
        current = current_reviewer()
        added = st.session_state.pop(SWITCH_TO, None)
        if added in names:
            # A reviewer just added: the list shows them, or its old value would switch back.
            st.session_state["reviewer_select"] = added
        choice = st.selectbox(
            "Reviewer", names,
            index=None if added or not current else names.index(current.name),
            placeholder="Choose your name", label_visibility="collapsed", key="reviewer_select",
        )
        if choice and (current is None or choice != current.name):
            st.session_state["reviewer"] = choice
            st.query_params["reviewer"] = choice
            st.rerun()
        if current:
            if st.query_params.get("reviewer") != current.name:
                # Another screen's address starts without it: put it back, so a
                # reload or a bookmark of any screen comes back as this reviewer.
                st.query_params["reviewer"] = current.name
            profile = ", ".join(p for p in (current.specialty, current.seniority) if p)
            st.caption(f"{current.role}" + (f" · {safe_markdown(profile)}" if profile else ""))
        elif st.query_params.get("reviewer"):
            # A link naming someone who is not in this database: say so, never guess.
            st.warning(f"No reviewer named {code_span(st.query_params['reviewer'])} here: "
                       "choose your name, or add yourself below.", icon=":material/person_off:")
        with st.popover("Add a reviewer", icon=":material/person_add:", width="stretch"):
            with st.form("add_reviewer", clear_on_submit=True, border=False):
                name = st.text_input("Name")
                specialty = st.text_input("Specialty", placeholder="e.g. emergency medicine")
                seniority = st.text_input("Seniority", placeholder="e.g. consultant, resident")
                role = st.selectbox("Role", ROLES, help="Local mode trusts this machine's users;"
                                    " in server mode roles are granted by an admin.")
                if st.form_submit_button("Add and switch to this reviewer", type="primary"):
                    try:
                        added = ensure_reviewer(store(), name, specialty, seniority, role)
                    except ValueError as exc:
                        st.error(safe_markdown(str(exc)))
                    else:
                        st.session_state["reviewer"] = added.name
                        st.session_state[SWITCH_TO] = added.name
                        st.query_params["reviewer"] = added.name
                        st.rerun()
        st.caption(f"Database: `{default_db_path()}`")


def signed_in_sidebar() -> None:
    """Server mode: the reviewer is whoever signed in, known by their login
    provider's issuer and subject (`review.team.identity`)."""
    if not st.user.is_logged_in:
        st.title("carelens", anchor=False)
        st.write("Sign in to review.")
        st.button("Sign in", on_click=st.login, type="primary", icon=":material/login:")
        st.stop()
    try:
        entry = sign_in()
    except ValueError as exc:  # a session idle limit that is not a duration
        st.error(safe_markdown(str(exc)), icon=":material/settings:")
        st.stop()
    identity = login_identity()
    if entry is None or identity is None:
        st.title("carelens", anchor=False)
        st.error("Your login did not say who you are (no issuer and subject): sign in again, or"
                 " ask whoever runs carelens to check the login provider.",
                 icon=":material/person_off:")
        st.button("Sign out", on_click=st.logout, icon=":material/logout:")
        st.stop()
    if entry.reviewer is None:  # signed out, expired, or not on record: nothing is served
        st.title("carelens", anchor=False)
        st.warning(safe_markdown(f"{entry.refused} Sign in again to review."),
                   icon=":material/lock_clock:")
        cols = st.columns([1, 1, 3])
        cols[0].button("Sign in", on_click=st.login, type="primary", icon=":material/login:")
        cols[1].button("Forget this sign-in", on_click=st.logout, icon=":material/logout:",
                       help="Remove the ended sign-in from this browser")
        st.stop()
    reviewer = entry.reviewer
    with st.sidebar:
        st.markdown(f"**{safe_markdown(reviewer.name)}**")
        st.caption(f"{reviewer.role} · signed in as {safe_markdown(identity.shown)}")
        st.button("Sign out", on_click=sign_out, icon=":material/logout:")


if server_mode():
    signed_in_sidebar()
else:
    reviewer_sidebar()

me = current_reviewer()
PAGES = {
    "Review": [
        st.Page("pages/review.py", title="Review", icon=":material/rate_review:", default=True),
        st.Page("pages/trajectories.py", title="Trajectories", icon=":material/route:",
                url_path="trajectories"),
        st.Page("pages/graded.py", title="Graded conversations", icon=":material/checklist:",
                url_path="graded"),
    ],
    "Measure": [
        st.Page("pages/agreement.py", title="Agreement", icon=":material/balance:",
                url_path="agreement"),
        st.Page("pages/browse.py", title="Browse", icon=":material/manage_search:",
                url_path="browse"),
        # Opened from an Agreement cell's items, not from the menu.
        st.Page("pages/disagreement.py", title="Disagreement", icon=":material/call_split:",
                url_path="disagreement", visibility="hidden"),
    ],
    "Reference": [
        st.Page("pages/codebook.py", title="Codebook", icon=":material/menu_book:",
                url_path="codebook"),
        st.Page("pages/data.py", title="Data", icon=":material/database:", url_path="data"),
        st.Page("pages/activity.py", title="Progress and audit", icon=":material/history:",
                url_path="activity"),
    ],
}
if can_adjudicate(me):
    PAGES["Review"].append(st.Page("pages/adjudicate.py", title="Adjudicate",
                                   icon=":material/gavel:", url_path="adjudicate"))
if is_admin(me):
    PAGES["Review"].append(st.Page("pages/rounds.py", title="Rounds and people",
                                   icon=":material/group:", url_path="rounds"))
page = st.navigation(PAGES, position="sidebar")
note_page(page.url_path or "review")
try:
    page.run()
except SessionEnded as exc:  # ended while this run was under way: nothing was written
    st.warning(safe_markdown(f"{exc}."), icon=":material/lock_clock:")
    st.button("Sign in", on_click=st.login, type="primary", icon=":material/login:")
finally:
    address_follows()  # the address names the item drawn, once it is drawn
