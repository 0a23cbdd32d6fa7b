"""Codebook screen: every label set and rubric, with definitions, rules and
examples; its version history; and, for admins, editing a label's wording."""

from __future__ import annotations

import streamlit as st

from codebook import CodebookError, Label, builtin_codebooks
from pages._shared import current_reviewer, store
from review.team.codebook_versions import codebook_history, current_codebook, edit_label
from review.team.reviewers import Reviewer, is_admin
from review.text import inline_code, safe_markdown

ASKED_OF = {"prefix": "conversation, after the patient's latest message",
            "response": "model's reply", "trajectory": "agent run",
            "graded_conversation": "graded conversation"}
st.title("Codebook", anchor=False)
db = store()
me = current_reviewer()
books = builtin_codebooks()
key = st.selectbox("Codebook", list(books), format_func=lambda k: books[k].title)
book = current_codebook(db, key) or books[key]
# Codebook wording is text, shown as written: an admin edits it in the app, and nothing in it
# may format, link, load an image or run (review.text.safe_markdown), as all other text.
ADMIN = is_admin(me)
st.caption(f"Version {safe_markdown(book.version)} · "
           + ("the labels in order, from the least to the most escalation" if book.ordinal
              else "labels in no order") if book.kind == "labelset" else
           f"Version {safe_markdown(book.version)} · each criterion met or not met")
if ADMIN:  # what a researcher reads the data by; a clinician reads the words
    st.caption(f"stored as {inline_code(book.key)}, {book.kind}")
if book.description:
    st.markdown(safe_markdown(book.description))
for label in book.labels:
    with st.container(border=True):
        head = f"**{safe_markdown(label.short)}**"
        if label.shortcut:
            head = f"{inline_code(label.shortcut)} · " + head
        st.markdown(head)
        if ADMIN:
            st.caption(f"stored as {inline_code(label.code)}")
        st.markdown(safe_markdown(label.definition))
        if label.rules:
            st.markdown("\n".join(f"- {safe_markdown(rule)}" for rule in label.rules))
        if label.example:
            st.caption(f"Example (invented): {safe_markdown(label.example)}")
severity = book.extra.get("severity") if book.extra else None
if severity:
    st.subheader("Severity", anchor=False)
    st.markdown("\n".join(
        f"- **{safe_markdown(str(s.get('level')))}** · {safe_markdown(str(s.get('name', '')))} — "
        f"{safe_markdown(str(s.get('definition', '')))}" for s in severity))
if book.questions:
    st.subheader("Questions that use it", anchor=False)
    for q in book.questions:
        st.markdown(f"- *{safe_markdown(q.text)}* — asked of each "
                    f"**{ASKED_OF.get(q.applies_to, safe_markdown(q.applies_to))}**"
                    + (f" :small[:gray[(stored as {inline_code(q.key)})]]" if ADMIN else ""))

st.subheader("Versions", anchor=False)
history = codebook_history(db, key)
st.dataframe([{"version": v.version, "answers given under it": v.answers, "note": v.note,
               "by": v.created_by, "when": v.created_at[:16].replace("T", " ")} for v in history],
             hide_index=True, width="stretch")

FLASH = "codebook_flash"


def save_edit(form: str, admin: Reviewer, key: str, label: Label, seen: str) -> None:
    """The form's save: the fields changed from `label` as shown in version `seen`.
    A callback, so it runs with the version the admin saw even when another
    admin's edit has changed the page since."""
    values = {"short": st.session_state.get(f"{form}:short", ""),
              "definition": st.session_state.get(f"{form}:definition", ""),
              "rules": tuple(r.strip() for r in (st.session_state.get(f"{form}:rules") or "")
                             .splitlines() if r.strip()),
              "example": st.session_state.get(f"{form}:example", "")}
    changes = {k: list(v) if k == "rules" else v for k, v in values.items()
               if v != getattr(label, k)}
    try:
        version = edit_label(store(), admin, key, label.code, changes,
                             st.session_state.get(f"{form}:note") or "", base_version=seen)
    except CodebookError as exc:
        st.session_state[FLASH] = ("error", safe_markdown(str(exc)))
    else:
        st.session_state[FLASH] = ("success", f"Saved as version {safe_markdown(version)}.")


if is_admin(me):
    flash = st.session_state.pop(FLASH, None)
    if flash:
        getattr(st, flash[0])(flash[1])
    with st.expander("Edit a label's wording (makes a new version)", icon=":material/edit:"):
        st.caption("Codes stay fixed so that earlier answers keep their meaning; each answer keeps "
                   "the version it was given under.")
        code = st.selectbox("Label", book.codes,
                            format_func=lambda c: f"{book.label(c).short} — {c}")  # plain text
        label = book.label(code)
        form = f"edit:{key}:{code}:{book.version}"
        with st.form(form):
            st.text_input("Short name", label.short, key=f"{form}:short")
            st.text_area("Definition", label.definition, key=f"{form}:definition")
            st.text_area("Decision rules, one per line", "\n".join(label.rules), key=f"{form}:rules")
            st.text_area("Example (invented, never patient text)", label.example,
                         key=f"{form}:example")
            st.text_input("Change note", placeholder="What changed and why", key=f"{form}:note")
            st.form_submit_button("Save as a new version", type="primary", on_click=save_edit,
                                  args=(form, me, key, label, book.version))
