"""Codebook screen: every label set and rubric in force (the shipped ones and the
study's own), with definitions, rules and examples; its version history; and, for
admins, adding a study's codebook from a file and editing a label's wording."""

from __future__ import annotations

import streamlit as st

from codebook import CodebookError, Label
from pages._shared import current_reviewer, server_mode, store
from review.team.access import NotAllowed, allowed
from review.team.codebook_versions import (
    add_codebook,
    codebook_history,
    edit_label,
    list_codebooks,
)
from review.team.reviewers import Reviewer, is_admin
from review.text import inline_code, plural, safe_markdown

FLASH = "codebook_flash"
EDIT_FLASH = "codebook_edit_flash"
ADDED = "codebook_added"

ASKED_OF = {"prefix": "conversation, after the patient's latest message",
            "response": "model's reply", "trajectory": "agent run",
            "graded_conversation": "graded conversation", "conversation": "chat"}
st.title("Codebook", anchor=False)
db = store()
me = current_reviewer()


def add_from_file(admin: Reviewer) -> None:
    """The upload's add: the file checked as `carelens codebook add` checks it, stored as a
    new version (the role is checked again in `add_codebook`)."""
    upload = st.session_state.get("codebook_file")
    if upload is None:
        st.session_state[FLASH] = ("warning", "Choose a codebook file (.toml) first.")
        return
    raw = upload.getvalue()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        st.session_state[FLASH] = ("error", safe_markdown(
            f"{upload.name}:{line}: not UTF-8 text (byte {exc.start}); nothing was stored"))
        return
    try:
        added = add_codebook(store(), text, upload.name, by=admin, server=server_mode(),
                             note=st.session_state.get("codebook_note") or None)
    except (CodebookError, NotAllowed) as exc:
        st.session_state[FLASH] = ("error", safe_markdown(f"{exc}; nothing was stored"))
        return
    book = added.book
    if added.stored:
        st.session_state[ADDED] = book.key
        asks = [q.text for q in book.questions] + [c.text for c in book.criteria]
        st.session_state[FLASH] = ("success", safe_markdown(
            f"Added “{book.title}” (version {book.version}, {plural(len(book.labels), 'label')})."
            + (f" It asks: {' · '.join(f'“{a}”' for a in asks)}." if asks else "")
            + " Its questions can now be imported, answered and compared."))
    else:
        st.session_state[FLASH] = ("info", safe_markdown(
            f"{book.title} version {book.version} is the version in force already: "
            "nothing changed."))


may_add = allowed(me, "add_codebook", server=server_mode())
flash = st.session_state.pop(FLASH, None)
if flash and may_add:
    getattr(st, flash[0])(flash[1])
if may_add and me is not None:
    # At the top, where an admin looks for it; open while a file is chosen or refused.
    with st.expander("Add a codebook from a file (this study's own, or a new version)",
                     icon=":material/upload_file:",
                     expanded=(flash is not None and flash[0] != "success")
                     or st.session_state.get("codebook_file") is not None):
        st.caption("A TOML file in the format carelens's own codebooks use (see "
                   "`carelens codebook export carebench-escalation`): labels with codes, keys, "
                   "definitions, rules and examples; a scale; the questions it asks. It is "
                   "checked whole; a file with a mistake is refused, naming its line, and "
                   "nothing is stored. `carelens codebook add FILE.toml` does the same.")
        st.file_uploader("Codebook file", type=["toml"], key="codebook_file")
        st.text_input("Note (optional)", placeholder="What this version is for",
                      key="codebook_note")
        st.button("Check and add", type="primary", icon=":material/add:",
                  on_click=add_from_file, args=(me,))


listed = {x.book.key: x for x in list_codebooks(db)}
wanted = st.session_state.pop(ADDED, None) or st.query_params.get("codebook")
keys = list(listed)
key = st.selectbox(
    "Codebook", keys, index=keys.index(wanted) if wanted in keys else 0,
    format_func=lambda k: f"{listed[k].book.title}"
    + ("" if listed[k].shipped else " (this study's)"))
st.query_params["codebook"] = key
book = listed[key].book
# Codebook wording is text, shown as written: an admin writes it (a file, an edit), and
# nothing in it may format, link, load an image or run (review.text.safe_markdown).
scale = {"ordinal": "ordinal: in this order", "interval": "interval: each label a number",
         "nominal": "nominal"}[book.scale]
facts = [f"version {safe_markdown(book.version)}", scale]
if book.multi:
    facts.append("several labels may apply")
if book.rationale_required:
    facts.append("a rationale with every answer")
facts.append("shipped with carelens" if listed[key].shipped else "added by this study")
st.caption(" · ".join(facts))
ADMIN = is_admin(me)
if ADMIN:  # what a researcher reads the data by; a clinician reads the words
    st.caption(f"stored as {inline_code(book.key)}, {book.kind}")
if book.description:
    st.markdown(safe_markdown(book.description))
for label in book.labels:
    with st.container(border=True):
        head = f"**{safe_markdown(label.short)}**"
        if label.shortcut:
            head = f"{inline_code(label.shortcut)} · " + head
        if label.value is not None:
            head += f" ({label.value:g})"
        st.markdown(head)
        if ADMIN:
            st.caption(f"stored as {inline_code(label.code)}")
        st.markdown(safe_markdown(label.definition))
        if label.rules:
            st.markdown("\n".join(f"- {safe_markdown(rule)}" for rule in label.rules))
        if label.example:
            st.caption(f"Example (invented): {safe_markdown(label.example)}")
if book.risk:
    first, urgent = book.label(book.risk.action_from), book.label(book.risk.urgent)
    st.caption(f"Risk order: from **{safe_markdown(first.short)}** up, an answer calls for "
               f"action; **{safe_markdown(urgent.short)}** is the most urgent (missed and "
               "unnecessary action, and urgent misses, are counted against it).")
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
if book.criteria:
    st.subheader("Its checklist", anchor=False)
    for c in book.criteria:
        st.markdown(f"- {safe_markdown(c.text)} — **{c.points:g} points**"
                    + (" · MUST NOT" if c.must_not else "")
                    + f", of each **{ASKED_OF.get(c.applies_to, safe_markdown(c.applies_to))}**"
                    + (f" :small[:gray[(stored as {inline_code(c.key)})]]" if ADMIN else ""))

st.subheader("Versions", anchor=False)
history = codebook_history(db, key)
st.dataframe([{"version": v.version, "answers given under it": v.answers, "note": v.note,
               "by": v.created_by, "when": v.created_at[:16].replace("T", " ")} for v in history],
             hide_index=True, width="stretch")


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
        st.session_state[EDIT_FLASH] = ("error", safe_markdown(str(exc)))
    else:
        st.session_state[EDIT_FLASH] = ("success", f"Saved as version {safe_markdown(version)}.")


if is_admin(me):
    edited = st.session_state.pop(EDIT_FLASH, None)
    if edited:
        getattr(st, edited[0])(edited[1])
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

