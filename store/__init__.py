"""Where it lives: the SQLite schema (as migrations), the store, read queries."""

from store.db import Store, connect, to_json, utcnow

__all__ = ["Store", "connect", "to_json", "utcnow"]
