"""Comparisons over the store: who agrees with whom, on which items, and what follows.

Plain functions over a :class:`store.Store`, no Streamlit: the Agreement screen,
the exports and the command line call the same ones. ``labels.comparisons``
re-exports the public names.
"""
