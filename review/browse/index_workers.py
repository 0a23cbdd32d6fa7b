"""The search index of a large import, its text extracted by worker processes.

After a large import (`review.browse.search.ensure_index` with many items due),
reading each item's payload back and turning it into searchable text is most
of the work, and it is Python: one process does it on one core. Here worker
processes (`python -m review.browse.search`, the module whose function makes
the text, started afresh: they
inherit no threads and run none of the caller's code) each read their share of
the items, a chunk at a time, through their own read-only connection, and send
back the text (`search.item_text`); the calling process writes it
(`search.write_docs`), one transaction per batch as before, while the workers
extract the next chunks (a worker waits when the pipe to it is full, so memory
stays bounded). What is stored is exactly what the one-process path stores:
the same function makes the text, the same one writes it. Those functions
are given by the caller (this module imports nothing of the search's, so the
two depend one way: search -> index_workers).

An item changed after a worker read it (a placeholder filled in by another
import meanwhile: its `import_id` is then another) is extracted again in the
writing transaction. Whatever a worker does not deliver (it could not start,
died, or sent something unreadable) is indexed in this process.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

PARALLEL_FROM = 3000
"""Items due from which workers are worth their start (about a second each)."""
PARALLEL_PAYLOAD = 8000
"""...and the mean payload (characters) from which they are: an agent run's text
(tens of kilobytes) is worth sending to a worker; a model reply's (a few) is
extracted here faster than a worker starts (CARE-Bench's 19,425 rows: 0.56 s
here, 1.2 s with workers; bench/bench_import_carebench.py)."""
MAX_WORKERS = 4
CHUNK = 100
"""Items a worker reads at a time: a trajectory's payload, parsed, takes a few
times its size in memory, so a worker stays small."""
_HEADER = 8
"""Bytes of the length before each chunk's pickled docs on a worker's stdout."""

Doc = tuple[int, "int | None", str, "str | None"]
"""(item id, its import id as read, body, parts)."""

ItemText = Callable[[str, "str | bytes"], tuple[str, "str | None"]]
"""(kind, payload) -> (body, parts): `search.item_text`."""
IndexItems = Callable[[sqlite3.Connection, list[int]], int]
"""Index these items in this process: `search.index_items`."""
WriteDocs = Callable[[sqlite3.Connection, list[tuple[int, str, "str | None"]]], int]
"""Write extracted docs: `search.write_docs`."""

ENTRY = "review.browse.search"
"""The module a worker runs (`python -m`): it hands `serve` its `item_text`."""


WORKERS_ENV = "CARELENS_INDEX_WORKERS"
"""Environment variable: how many worker processes at most (0: none, the index is
made in the importing process alone)."""


def workers() -> int:
    """How many worker processes: the processors this process may use, up to
    MAX_WORKERS (or CARELENS_INDEX_WORKERS; 0 when that says none)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    wanted = os.environ.get(WORKERS_ENV, "").strip()
    if wanted.isdigit():
        return min(int(wanted), MAX_WORKERS)
    return max(1, min(MAX_WORKERS, cpus))


def extract(db_path: str, ids: list[int], item_text: ItemText) -> list[Doc]:
    """The searchable text of these items, read from the database file."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT id, import_id, kind, payload FROM items WHERE id IN"
                            " (SELECT value FROM json_each(?)) ORDER BY id",
                            (json.dumps(ids),)).fetchall()
    finally:
        conn.close()
    return [(item_id, import_id, *item_text(kind, payload))
            for item_id, import_id, kind, payload in rows]


def serve(db_path: str, item_text: ItemText) -> int:
    """A worker (run as `python -m ENTRY DB`): its chunks of item ids as one JSON
    list on stdin; for each, in order, the length and the pickled docs on stdout."""
    chunks = json.loads(sys.stdin.buffer.readline())
    out = sys.stdout.buffer
    for chunk in chunks:
        data = pickle.dumps(extract(db_path, chunk, item_text), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(data).to_bytes(_HEADER, "big"))
        out.write(data)
        out.flush()
    return 0


def _start(db_path: str, shares: list[list[list[int]]]) -> list[subprocess.Popen | None]:
    """One worker per share of chunks (None where one could not start)."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    procs: list[subprocess.Popen | None] = []
    for share in shares:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", ENTRY, db_path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env, cwd=package_root)
            proc.stdin.write(json.dumps(share).encode() + b"\n")
            proc.stdin.close()
        except OSError:
            proc = None
        procs.append(proc)
    return procs


def _receive(proc: subprocess.Popen | None) -> list[Doc] | None:
    """A worker's next chunk of docs, or None if it cannot give it."""
    if proc is None:
        return None
    try:
        head = _read(proc.stdout, _HEADER)
        docs = pickle.loads(_read(proc.stdout, int.from_bytes(head, "big")))
    except Exception:  # noqa: BLE001 - a worker's trouble: this process does its chunks
        return None
    return docs if isinstance(docs, list) else None


def _read(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError("the worker ended early")
    return data


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
    proc.stdout.close()
    proc.wait()


def index_in_parallel(store, ids: list[int], batch: int,
                      progress: Callable[[int, int], None] | None, due: int, *,
                      index_items: IndexItems, write_docs: WriteDocs) -> int:
    """Index these items (ids in order) with worker processes; returns how many
    were indexed. Whatever the workers do not deliver is indexed here
    (`index_items`); what they deliver is written by `write_docs`."""
    chunks = [ids[i:i + CHUNK] for i in range(0, len(ids), CHUNK)]
    n = min(workers(), len(chunks))
    procs = _start(store.path, [chunks[k::n] for k in range(n)])
    done = 0
    ready: list[tuple[list[int], list[Doc] | None]] = []
    try:
        for i, chunk in enumerate(chunks):
            proc = procs[i % n]
            docs = _receive(proc)
            if docs is None and proc is not None:
                _stop(proc)  # it gives nothing more: its chunks are done here
                procs[i % n] = None
            ready.append((chunk, docs))
            if sum(len(c) for c, _ in ready) < batch and i + 1 < len(chunks):
                continue
            # One transaction per batch, as the one-process path; a bulk write: the
            # log is copied into the database file on a thread of its own.
            with store.transaction(bulk=True) as conn:
                for part, part_docs in ready:
                    done += index_items(conn, part) if part_docs is None \
                        else _write_checked(conn, part_docs, index_items, write_docs)
            ready = []
            if progress is not None:
                progress(done, max(due, done))
    finally:
        for proc in procs:
            _stop(proc)
    return done


def _write_checked(conn: sqlite3.Connection, docs: list[Doc], index_items: IndexItems,
                   write_docs: WriteDocs) -> int:
    """Write the docs of items still unindexed and unchanged since a worker read
    them; an item changed since is extracted again here. Returns how many were
    indexed."""
    ids = json.dumps([d[0] for d in docs])
    now = dict(conn.execute(
        "SELECT i.id, i.import_id FROM items i WHERE i.id IN (SELECT value FROM json_each(?))"
        " AND NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.source = 'item'"
        " AND d.item_id = i.id)", (ids,)).fetchall())
    same = [(item_id, body, parts) for item_id, import_id, body, parts in docs
            if item_id in now and now[item_id] == import_id]
    changed = [item_id for item_id, import_id, _, _ in docs
               if item_id in now and now[item_id] != import_id]
    write_docs(conn, same)
    return len(same) + (index_items(conn, changed) if changed else 0)

