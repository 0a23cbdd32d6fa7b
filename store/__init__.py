"""Where it lives: the SQLite schema (as migrations), the store, read queries."""

from store.db import Store, connect
from store.values import from_json, to_json, utcnow

__all__ = ["Store", "connect", "from_json", "to_json", "utcnow"]
