"""Progress and audit: each reviewer's counts and pace, and the audit log."""

from __future__ import annotations

import json
from datetime import date, timedelta

import streamlit as st

from pages._shared import require_reviewer, store
from review.reviewing.names import plural
from review.team.activity import (
    audit_actions,
    audit_actors,
    audit_entries,
    audit_lines,
    reviewer_progress,
)
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

def pace(p) -> str:
    """Seconds per item and answers per hour, a dash where there is nothing to measure."""
    if p.median_seconds is None and p.per_hour is None:
        return "—"
    return (f"{p.median_seconds:.0f} s/item" if p.median_seconds is not None else "—") + (
        f" · {p.per_hour:.0f}/h" if p.per_hour is not None else "")


def besides(p) -> str:
    """Revisions, skips, 'cannot assess' and flags, only those there are."""
    parts = [(p.revisions, "revised"), (p.skips, "skipped"), (p.cannot_assess, "cannot assess"),
             (p.flags, "flagged")]
    return " · ".join(f"{n} {word}" for n, word in parts if n)


with progress_tab:
    st.caption("Answers: given in the app, revisions included, and the items they are on; "
               "imported: brought in with an import (a spreadsheet, a study's files), counted "
               "apart. Pace counts active time in the app only: gaps over ten minutes are left "
               "out. Last active: UTC.")
    # Columns sized to fit a laptop's screen (1280 px) without scrolling sideways.
    st.dataframe(
        [{"Reviewer": p.name, "Role": p.role,
          "Answers": f"{p.answers} on {plural(p.items, 'item')}" if p.answers else "0",
          "Of them": besides(p), "Imported": p.imported, "Pace": pace(p),
          "Last active": (p.last_active or "")[5:16].replace("T", " ")}
         for p in reviewer_progress(db)],
        hide_index=True, width="stretch",
        column_config={"Reviewer": st.column_config.TextColumn(width=150),
                       "Role": st.column_config.TextColumn(width=85),
                       "Answers": st.column_config.TextColumn(width=105),
                       "Of them": st.column_config.TextColumn(
                           width=140, help="Revisions, skips, 'cannot assess' answers and flags"),
                       "Imported": st.column_config.NumberColumn(width=70),
                       "Pace": st.column_config.TextColumn(width=120),
                       "Last active": st.column_config.TextColumn(width=100)},
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
    action = c[1].selectbox("Action", audit_actions(db), index=None, placeholder="Any action",
                            format_func=lambda a: a.replace("_", " "))
    since = c[2].date_input("From", value=date.today() - timedelta(days=30))
    until = c[3].date_input("Until", value=date.today())
    entries = audit_entries(db, actor, action, since.isoformat(),
                            (until + timedelta(days=1)).isoformat(), viewer=me)
    raw = st.toggle("Show the raw entries (JSON)", key="audit_raw",
                    help="As the database keeps them: table, row id, value before and after")
    st.caption(f"{len(entries)} entries, newest first (at most 500 shown). The log is "
               "append-only: the database refuses to change or delete its rows.")
    if raw:
        st.dataframe(
            [{"when": e.at[:19].replace("T", " "), "who": e.actor, "action": e.action,
              "what": f"{e.entity} {e.entity_id or ''}".strip(),
              "before": json.dumps(e.old, ensure_ascii=False) if e.old is not None else "",
              "after": json.dumps(e.new, ensure_ascii=False) if e.new is not None else ""}
             for e in entries],
            hide_index=True, width="stretch",
        )
    else:
        st.dataframe(
            [{"When": line.entry.at[:16].replace("T", " "), "Who": line.entry.actor,
              "Did": line.what, "Item": line.item, "Change": line.change}
             for line in audit_lines(db, entries)],
            hide_index=True, width="stretch",
            column_config={"When": st.column_config.TextColumn(width="small"),
                           "Did": st.column_config.TextColumn(width="medium"),
                           "Change": st.column_config.TextColumn(width="medium")},
        )
