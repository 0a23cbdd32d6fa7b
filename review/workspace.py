"""Opening a carelens database ready for review.

`open_store` is how the app, the command line and the tests get a store: it
migrates the file (the store does) and records the shipped codebooks and
their questions, once per process and path.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import review.browse.search  # noqa: F401  (registers the search indexer with the writer)
from codebook import builtin_codebooks
from store import Store

DEFAULT_DB = "carelens.db"
_synced: set[str] = set()
_lock = threading.Lock()


def default_db_path() -> str:
    """`CARELENS_DB` when set, else carelens.db in the working directory."""
    return os.environ.get("CARELENS_DB") or DEFAULT_DB


def open_store(path: str | Path | None = None) -> Store:
    path = str(path or default_db_path())
    store = Store(path)
    key = str(Path(path).resolve()) if path != ":memory:" else None
    if key is None or key not in _synced:
        with _lock:
            store.sync_codebooks(list(builtin_codebooks().values()))
            if key:
                _synced.add(key)
    return store
