"""Progress and audit: each reviewer's counts and pace, and the audit log."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import date, timedelta

import streamlit as st

from pages._shared import require_reviewer, store
from review.team.activity import audit_actions, audit_actors, audit_entries, reviewer_progress
from review.team.reviewers import can_adjudicate
from review.text import safe_markdown
from store.verify import verify

st.title("Progress and audit", anchor=False)
me = require_reviewer()
db = store()
whole_log = can_adjudicate(me)
# The record's verdict, as `carelens verify` gives it.
verdict = verify(db.conn)
if verdict.whole:
    st.success(safe_markdown(verdict.summary()), icon=":material/verified:")
else:
    st.error("The record is not whole (`carelens verify` says the same):\n\n"
             + "\n".join(f"- {safe_markdown(line)}" for line in verdict.problems), icon=":material/gpp_bad:")
progress_tab, audit_tab = st.tabs(["Reviewers", "Audit log"])

with progress_tab:
    rows = [asdict(p) for p in reviewer_progress(db)]
    for row in rows:  # a pace with nothing to measure is a dash, not "None"
        row["median_seconds"] = "—" if row["median_seconds"] is None else f"{row['median_seconds']:.1f}"
        row["per_hour"] = "—" if row["per_hour"] is None else f"{row['per_hour']:.0f}"
    st.caption("Answers: given in the app, revisions included; imported: brought in with an "
               "import (a spreadsheet, a study's files), counted apart. Pace counts active time "
               "in the app only: gaps over ten minutes are left out.")
    st.dataframe(
        rows, hide_index=True, width="stretch",
        column_config={
            "name": "Reviewer", "role": "Role", "specialty": "Specialty",
            "answers": st.column_config.NumberColumn("Answers"),
            "imported": st.column_config.NumberColumn("Imported"),
            "items": st.column_config.NumberColumn("Items"),
            "revisions": st.column_config.NumberColumn("Revisions"),
            "skips": st.column_config.NumberColumn("Skips"),
            "cannot_assess": st.column_config.NumberColumn("Cannot assess"),
            "flags": st.column_config.NumberColumn("Flags"),
            "median_seconds": st.column_config.TextColumn("Median s / item"),
            "per_hour": st.column_config.TextColumn("Answers / hour"),
            "last_active": "Last active",
        },
    )

with audit_tab:
    c = st.columns(4)
    if whole_log:
        actor = c[0].selectbox("Who", audit_actors(db), index=None, placeholder="Anyone")
    else:
        # The log holds every answer given: a reviewer reads only their own entries.
        actor = me.name
        c[0].selectbox("Who", [me.name], disabled=True,
                       help="Reviewers see their own entries; adjudicators and admins see all.")
    action = c[1].selectbox("Action", audit_actions(db), index=None, placeholder="Any action")
    since = c[2].date_input("From", value=date.today() - timedelta(days=30))
    until = c[3].date_input("Until", value=date.today())
    entries = audit_entries(db, actor, action, since.isoformat(),
                            (until + timedelta(days=1)).isoformat(), viewer=me)
    st.caption(f"{len(entries)} entries, newest first (at most 500 shown). The log is "
               "append-only: the database refuses to change or delete its rows.")
    st.dataframe(
        [{"when": e.at[:19].replace("T", " "), "who": e.actor, "action": e.action,
          "what": f"{e.entity} {e.entity_id or ''}".strip(),
          "before": json.dumps(e.old, ensure_ascii=False) if e.old is not None else "",
          "after": json.dumps(e.new, ensure_ascii=False) if e.new is not None else ""}
         for e in entries],
        hide_index=True, width="stretch",
    )
