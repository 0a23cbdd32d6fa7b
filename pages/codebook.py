"""Codebook screen: every label set and rubric, with definitions, rules and
examples; its version history; and, for admins, editing a label's wording."""

from __future__ import annotations

import streamlit as st

from codebook import CodebookError, builtin_codebooks
from pages._shared import current_reviewer, store
from review.codebook_versions import codebook_history, current_codebook, edit_label
from review.reviewers import is_admin
from review.text import safe_markdown

st.title("Codebook", anchor=False)
db = store()
me = current_reviewer()
books = builtin_codebooks()
key = st.selectbox("Codebook", list(books), format_func=lambda k: books[k].title)
book = current_codebook(db, key) or books[key]
st.caption(f"`{book.key}` · version {book.version} · "
           f"{'ordinal, in this order' if book.ordinal else 'nominal'} · {book.kind}")
if book.description:
    st.markdown(book.description)
for label in book.labels:
    with st.container(border=True):
        head = f"**{label.short}**"
        if label.shortcut:
            head = f"`{label.shortcut}` · " + head
        st.markdown(f"{head} — `{label.code}`")
        st.markdown(label.definition)
        if label.rules:
            st.markdown("\n".join(f"- {rule}" for rule in label.rules))
        if label.example:
            st.caption(f"Example (invented): {label.example}")
severity = book.extra.get("severity") if book.extra else None
if severity:
    st.subheader("Severity", anchor=False)
    st.markdown("\n".join(f"- **{s.get('level')}** · {s.get('name', '')} — {s.get('definition', '')}"
                          for s in severity))
if book.questions:
    st.subheader("Questions that use it", anchor=False)
    for q in book.questions:
        st.markdown(f"- *{q.text}* — asked of each **{q.applies_to}** (`{q.key}`)")

st.subheader("Versions", anchor=False)
history = codebook_history(db, key)
st.dataframe([{"version": v.version, "answers given under it": v.answers, "note": v.note,
               "by": v.created_by, "when": v.created_at[:16].replace("T", " ")} for v in history],
             hide_index=True, width="stretch")

if is_admin(me):
    with st.expander("Edit a label's wording (makes a new version)", icon=":material/edit:"):
        st.caption("Codes stay fixed so that earlier answers keep their meaning; each answer keeps "
                   "the version it was given under.")
        code = st.selectbox("Label", book.codes,
                            format_func=lambda c: f"{book.label(c).short} — {c}")
        label = book.label(code)
        with st.form(f"edit:{key}:{code}:{book.version}"):
            short = st.text_input("Short name", label.short)
            definition = st.text_area("Definition", label.definition)
            rules = st.text_area("Decision rules, one per line", "\n".join(label.rules))
            example = st.text_area("Example (invented, never patient text)", label.example)
            note = st.text_input("Change note", placeholder="What changed and why")
            if st.form_submit_button("Save as a new version", type="primary"):
                changes = {"short": short, "definition": definition,
                           "rules": [r.strip() for r in rules.splitlines() if r.strip()],
                           "example": example}
                changes = {k: v for k, v in changes.items() if v != getattr(label, k) and
                           not (k == "rules" and tuple(v) == label.rules)}
                try:
                    version = edit_label(db, me, key, code, changes, note)
                except CodebookError as exc:
                    st.error(safe_markdown(str(exc)))
                else:
                    st.success(f"Saved as version {safe_markdown(version)}.")
                    st.rerun()
