"""Provenance: what every figure carelens reports was computed from, so a figure in a
paper can be traced and recomputed.

Every ``--json`` output, CSV or JSONL export and HTML report carries the object
:func:`provenance` builds::

    {"carelens_version": "0.1.0",
     "database": "sha256:…",        # digest of the data the figure was computed from
     "database_file": "study.db",
     "rows": 1234,                  # how many answers (or rows) that digest covers
     "phase": "blind",              # which of the clinicians' answers (labels.phases)
     "phase_words": "clinicians' blind answers (…)",
     "filters": {"dataset": "demo"},
     "generated_at": "2026-12-01T10:00:00.000000+00:00",
     ...}                           # anything else the figure depends on (seed, resamples)

``database`` is a digest of the *content* used, not of the file: each answer as
(question, item, part of the item, rater, answer), sorted, so the same answers in
another database (re-imported elsewhere) give the same digest and a recomputation can
be checked against it. A CSV is written with the object beside it, in a sidecar
``<file>.provenance.json`` (:func:`sidecar_path`): a comment line would stop
``pandas.read_csv`` reading the file as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from labels.phases import describe_phase, normalise_phase
from store.db import utcnow

SIDECAR_SUFFIX = ".provenance.json"
ALL_PHASES = "all"
"""The phase of a record export, which filters nothing."""


def carelens_version() -> str:
    try:
        return metadata.version("carelens")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class Digest:
    """A running sha256 over rows of data, in a canonical form: build it with
    :meth:`add` (any JSON-ready row), read it with :meth:`hexdigest`. Rows are sorted
    before hashing, so the order they were read in does not matter."""

    def __init__(self) -> None:
        self._rows: list[str] = []

    def add(self, *row: Any) -> None:
        # unit separators between fields: no field of carelens data holds one
        self._rows.append("\x1f".join(map(repr, row)))

    def update(self, other: Digest) -> None:
        self._rows += other._rows

    def __len__(self) -> int:
        return len(self._rows)

    def hexdigest(self) -> str:
        h = hashlib.sha256()
        for row in sorted(self._rows):
            h.update(row.encode("utf-8"))
            h.update(b"\n")
        return "sha256:" + h.hexdigest()


def answers_digest(*answers) -> Digest:
    """The digest of one or more ``labels.compare.answers.Answers`` reads: every answer
    used, as (question, item, target, rater, value)."""
    digest = Digest()
    for read in answers:
        for rater, column in read.values.items():
            for index, value in column.items():
                unit = read.units[index]
                digest.add(unit.question_key, unit.item_uid, unit.target, rater, value)
    return digest


def provenance(
    data: Digest | str | None = None,
    *,
    store=None,
    phase: str | None = None,
    filters: Mapping | Any | None = None,
    rows: int | None = None,
    database_file: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The provenance object of one figure or report. ``data``: a :class:`Digest` of the
    rows it was computed from (or a digest already taken); ``store``: the database (its
    file name is recorded); ``phase``: which clinicians' answers (None = the default);
    ``filters``: a ``Filters`` or a mapping; ``extra``: anything else the figure depends
    on (bootstrap resamples and seed, the grader, ...), added as given."""
    if isinstance(data, Digest):
        rows = len(data) if rows is None else rows
        data = data.hexdigest()
    if filters is not None and hasattr(filters, "as_dict"):
        filters = filters.as_dict()
    filters = {k: v for k, v in dict(filters or {}).items() if k != "phase"}
    if phase == ALL_PHASES:  # a record export: every answer, each with its phase
        words = "every answer of every phase, each with its phase (nothing filtered)"
    else:
        phase = normalise_phase(phase)
        words = describe_phase(phase)
    out: dict[str, Any] = {
        "carelens_version": carelens_version(),
        "database": data,
        "database_file": file_name(store) if store is not None else database_file,
        "rows": rows,
        "phase": phase,
        "phase_words": words,
        "filters": filters,
        "generated_at": utcnow(),
    }
    out.update(extra)
    return out


def file_name(store) -> str | None:
    """The database's file name (None in memory)."""
    path = getattr(store, "path", None)
    if path in (None, ":memory:"):
        return None
    return Path(str(path)).name


def sidecar_path(path: str | Path) -> Path:
    """Where a file's provenance is written beside it: ``labels.csv.provenance.json``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def write_sidecar(path: str | Path, record: Mapping[str, Any]) -> Path:
    """Write a file's provenance beside it (see :func:`sidecar_path`)."""
    out = sidecar_path(path)
    out.write_text(json.dumps({"provenance": dict(record)}, indent=2, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    return out


def file_digest(path: str | Path) -> str:
    """The sha256 of a file as written: an export's ``database`` digest (the data is the
    rows it holds)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def rows_digest(rows: Iterable[Mapping[str, Any]], columns: Iterable[str]) -> Digest:
    """The digest of exported rows, as written (the columns named, in that order)."""
    columns = list(columns)
    digest = Digest()
    for row in rows:
        digest.add(*[row.get(c) for c in columns])
    return digest
