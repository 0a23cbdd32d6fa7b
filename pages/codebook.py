"""Codebook screen: every label set and rubric, with definitions, rules and examples."""

from __future__ import annotations

import streamlit as st

from codebook import builtin_codebooks

st.title("Codebook", anchor=False)
books = builtin_codebooks()
key = st.selectbox("Codebook", list(books), format_func=lambda k: books[k].title)
book = books[key]
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
if book.questions:
    st.subheader("Questions that use it", anchor=False)
    for q in book.questions:
        st.markdown(f"- *{q.text}* — asked of each **{q.applies_to}** (`{q.key}`)")
