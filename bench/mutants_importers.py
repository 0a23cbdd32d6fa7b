"""Malformed files against every importer: one line, never a traceback, never a
hang, never a change to the database.

Builds at least --mutants malformed files (default 500) from valid files of
every format `carelens formats` lists: the conformance corpus
(../shared/data/conformance, read in place and copied only to be mutated), the
demo's files and the project's generators' (bench/gen_carebench.py,
bench/gen_klinikebench.py). Mutations: truncation, bytes flipped, a field
given another type (at the top or deep inside, also inside JSON held in a
string), a field removed, NUL characters, huge values, deep nesting, other
encodings (UTF-16, Latin-1, bytes that are no encoding), empty, blank and
header-only files, lines that are not objects, conflicting repeated rows,
damaged Parquet pages and footers, a Parquet file of a million repeated rows,
folders, FIFOs and links to nothing in place of a file (and inside a Harbor
job), a file given to a folder format. Each is imported with `carelens
import` in its own process (at most --timeout seconds) into a fresh copy of
a database that holds the demo and the corpus, and counted:

- tracebacks: an exit status other than 0 or 2, or stderr holding
  "Traceback" or any line that is not carelens's own `carelens: ...`;
- hangs: still running after --timeout seconds (then killed);
- changes: a refused file (exit 2) after which any table's rows differ
  (a digest of every row of every table, before and after);
- messages: a refusal that is not exactly one line, or does not name the file
  (a line or field is named after it where there is one).

A mutant the importer accepts (exit 0: the file is in fact valid, e.g. bytes
flipped inside a reply's text) is counted apart, and may change the database.
Prints the counts per kind and per format, then exits 1 if any of the four
counts is above 0.

    .venv/bin/python bench/mutants_importers.py [--mutants 500] [--seed 0] [--jobs 2]
        [--timeout 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT.parent / "shared" / "data" / "conformance"
HEALTHBENCH_SAMPLE = ROOT.parent / "shared" / "data" / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
PROBLEMS = ("tracebacks", "hangs", "changes", "messages")


def table_digest(db: str | Path) -> str:
    """A digest of every row of every table (the search index's too): equal
    digests mean the database holds exactly what it held."""
    con = sqlite3.connect(str(db))
    try:
        h = hashlib.sha256()
        for (name,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
            h.update(name.encode() + b"\0")
            try:
                rows = con.execute(f'SELECT * FROM "{name}" ORDER BY rowid')
            except sqlite3.OperationalError:  # WITHOUT ROWID: in primary key order
                rows = con.execute(f'SELECT * FROM "{name}"')
            for row in rows:
                h.update(repr(row).encode() + b"\n")
        return h.hexdigest()
    finally:
        con.close()


# -- the valid files mutants are made from ---------------------------------------------

@dataclass(frozen=True)
class Seed:
    format: str
    path: Path
    args: tuple[str, ...] = ()
    """Further import arguments (a rater)."""

    @property
    def kind(self) -> str:
        if self.path.is_dir():
            return "dir"
        suffix = self.path.suffix.lower()
        return {".parquet": "parquet", ".csv": "csv", ".json": "json"}.get(suffix, "jsonl")


def seeds(work: Path) -> list[Seed]:
    """Valid files of every format: the corpus in place, the demo's and the generators'."""
    sys.path.insert(0, str(ROOT))
    from bench import gen_carebench, gen_klinikebench
    from review.datasets.demo import build_demo_files

    demo = build_demo_files(work / "demo")
    gen = work / "generated"
    gen.mkdir(parents=True, exist_ok=True)
    cb_prefixes, cb_generations = gen_carebench.generate(gen, 12, 2)
    kb_jsonl, kb_parquet = gen / "kb.jsonl", gen / "kb.parquet"
    gen_klinikebench.write_jsonl(kb_jsonl, 6, 1, 6)
    gen_klinikebench.write_parquet(kb_parquet, 6, 2, 6)
    hb = gen / "healthbench_sample5.jsonl"
    hb.write_text("".join(HEALTHBENCH_SAMPLE.read_text(encoding="utf-8").splitlines(True)[:5]),
                  encoding="utf-8")
    grades = _grades(demo["healthbench_rubrics"], demo["healthbench_completions"],
                     gen / "healthbench_grades.jsonl")
    examples = gen / "healthbench_gpt-4.1_20260314_examples.jsonl"  # one record a line
    examples.write_text("".join(json.dumps(e) + "\n" for e in json.loads(
        (CONFORMANCE / "healthbench" / "healthbench_gpt-4.1_20260314_allresults.json")
        .read_text(encoding="utf-8"))["metadata"]["example_level_metadata"]), encoding="utf-8")
    c = CONFORMANCE
    job = c / "harbor" / "jobs" / "2026-03-14__09-30-00"
    return [
        Seed("carebench-prefixes", c / "carebench" / "evaluation_prefixes_public.jsonl"),
        Seed("carebench-prefixes", c / "carebench" / "evaluation_prefixes-train.parquet"),
        Seed("carebench-prefixes", c / "carebench" / "evaluation_prefixes_from_parquet.csv"),
        Seed("carebench-prefixes", demo["prefixes"]),
        Seed("carebench-prefixes", cb_prefixes),
        Seed("carebench-generations", c / "carebench" / "raw_generations.jsonl"),
        Seed("carebench-generations", demo["generations"]),
        Seed("carebench-generations", cb_generations),
        Seed("carebench-mapped", c / "carebench" / "mapped_responses.jsonl"),
        Seed("carebench-mapped", demo["mapped_v1"]),
        Seed("label-csv", c / "carebench" / "predictions.csv", ("--rater", "my-direct-model")),
        Seed("labels-long", demo["labels"]),
        Seed("labels-long", demo["run_verdicts"]),
        Seed("klinikebench", c / "klinikebench" / "leaderboard.jsonl"),
        Seed("klinikebench", c / "klinikebench" / "leaderboard-00000-of-00001.parquet"),
        Seed("klinikebench", demo["runs"]),
        Seed("klinikebench", kb_jsonl),
        Seed("klinikebench", kb_parquet),
        Seed("healthbench", hb),
        Seed("healthbench", demo["healthbench_rubrics"]),
        Seed("healthbench-results", c / "healthbench" / "healthbench_gpt-4.1_20260314_allresults.json"),
        *(Seed("healthbench-results", demo[k], ("--rater", "healthbench-grader"))
          for k in sorted(demo) if k.startswith("healthbench_results_")),
        Seed("healthbench-examples", examples),
        Seed("healthbench-completions", demo["healthbench_completions"]),
        Seed("healthbench-completions", c / "healthbench" / "completions_msglist.jsonl"),
        Seed("healthbench-grades", grades),
        Seed("healthbench-meta", demo["healthbench_meta"]),
        Seed("healthbench-meta", c / "healthbench" / "meta_eval.jsonl"),
        Seed("harbor", job),
        Seed("harbor", job / "fix-unit-test__AbC1234"),
        Seed("harbor", job / "count-lines__XyZ9876"),
        Seed("clinicare-cohort", c / "clinicare" / "full750.csv"),
        Seed("clinicare", c / "clinicare" / "jobs" / "claude-opus5__full750__2026-03-14"),
    ]


def _grades(rubrics: Path, completions: Path, out: Path) -> Path:
    """A grader's results in the flat shape (`healthbench-grades`): a verdict on
    each criterion of each of the demo's completions."""
    criteria = {}
    for line in rubrics.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        criteria[row["prompt_id"]] = [r["criterion"] for r in row["rubrics"]]
    rows = []
    for n, line in enumerate(completions.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        for k, criterion in enumerate(criteria.get(row["prompt_id"], [])):
            rows.append({"prompt_id": row["prompt_id"], "completion_id": row["completion_id"],
                         "criterion": criterion, "criteria_met": (n + k) % 3 != 0,
                         "explanation": "Invented: the reply does as the criterion asks."})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def base_database(work: Path, seed_list: list[Seed]) -> Path:
    """The demo, then every seed that imports, in one database (checkpointed)."""
    from review.datasets.demo import load_demo
    from review.datasets.sources import InputError, import_file
    from review.datasets.sources.base import ImportOptions
    from review.workspace import open_store

    path = work / "base.db"
    store = open_store(path)
    load_demo(store, work / "demo-loaded")
    for seed in seed_list:
        rater = seed.args[1] if seed.args[:1] == ("--rater",) else None
        with contextlib.suppress(InputError):
            import_file(store, seed.path, seed.format, ImportOptions(rater=rater))
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


# -- mutations ----------------------------------------------------------------------

OTHER_VALUES: list[object] = [0, -1, 1.5, True, False, None, "", "invented text", [], {}, [1, "a"],
                              {"a": 1}, 2 ** 70, -(2 ** 70), 1e308, "NaN", "2026-13-45T99:99:99"]


@dataclass
class Mutant:
    name: str
    seed: Seed
    path: Path
    """What is imported (a file, a folder, a FIFO, a link)."""
    operator: str
    use_format: bool = True

    def argv(self) -> list[str]:
        fmt = ["--format", self.seed.format] if self.use_format else []
        return [*fmt, *self.seed.args, str(self.path)]


def _leaves(value: object, path: tuple = ()) -> Iterator[tuple]:
    """Paths to every value inside a JSON value (objects and lists walked)."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            yield from _leaves(v, (*path, i))


def _set(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    parent[path[-1]] = new  # type: ignore[index]
    return value


def _get(value: object, path: tuple) -> object:
    for key in path:
        value = value[key]  # type: ignore[index]
    return value


def _json_rows(data: bytes) -> tuple[list[object], bool]:
    """The rows of a JSONL file (or the one value of a JSON file) and whether it is JSONL."""
    text = data.decode("utf-8-sig")
    try:
        return [json.loads(text)], False
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()], True


def _json_bytes(rows: list[object], lines: bool) -> bytes:
    if lines:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    return json.dumps(rows[0], ensure_ascii=False, indent=1).encode()


def _change_json(data: bytes, rng: random.Random, change: Callable[[object, random.Random], object],
                 inner: bool = False) -> bytes:
    """Apply `change` at a random place of a random row (inside a JSON string held
    by a field, when `inner` and there is one)."""
    rows, lines = _json_rows(data)
    row_no = rng.randrange(len(rows))
    row = rows[row_no]
    places = [p for p in _leaves(row) if p]
    if inner:
        nested = [p for p in places if isinstance(_get(row, p), str)
                  and str(_get(row, p))[:1] in "[{"]
        for p in rng.sample(nested, len(nested)):
            try:
                doc = json.loads(str(_get(row, p)))
            except json.JSONDecodeError:
                continue
            spots = [q for q in _leaves(doc) if q] or [()]
            doc = _set(doc, rng.choice(spots), change(doc, rng))
            rows[row_no] = _set(row, p, json.dumps(doc))
            return _json_bytes(rows, lines)
    if not places:
        rows[row_no] = change(row, rng)
    else:
        rows[row_no] = _set(row, rng.choice(places), change(row, rng))
    return _json_bytes(rows, lines)


def _csv_rows(data: bytes) -> list[list[str]]:
    import csv

    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def _csv_bytes(rows: list[list[str]]) -> bytes:
    import csv

    out = io.StringIO(newline="")
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def _change_csv(data: bytes, rng: random.Random, cell: Callable[[random.Random], str]) -> bytes:
    rows = _csv_rows(data)
    if len(rows) < 2:
        return data + cell(rng).encode()
    r = rng.randrange(1, len(rows))
    c = rng.randrange(len(rows[r])) if rows[r] else 0
    if rows[r]:
        rows[r][c] = cell(rng)
    return _csv_bytes(rows)


def _deep(depth: int = 60_000) -> str:
    return "[" * depth + "]" * depth


TEXT_OPERATORS: dict[str, Callable[[bytes, random.Random, str], bytes]] = {}


def text_operator(name: str):
    def register(fn):
        TEXT_OPERATORS[name] = fn
        return fn
    return register


@text_operator("truncated")
def _truncated(data: bytes, rng: random.Random, kind: str) -> bytes:
    return data[:rng.randrange(1, max(2, len(data) - 1))]


@text_operator("bytes flipped")
def _flipped(data: bytes, rng: random.Random, kind: str) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 3, 20))):
        i = rng.randrange(len(out))
        out[i] ^= rng.choice((0x01, 0x20, 0x80, 0xFF))
    return bytes(out)


@text_operator("wrong type")
def _wrong_type(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        return _change_csv(data, rng, lambda r: r.choice(["", "-1", "NaN", "1e999", "true", "[1,2]",
                                                           '{"a": 1}', "99999999999999999999999"]))
    return _change_json(data, rng, lambda _row, r: r.choice(OTHER_VALUES))


@text_operator("wrong type inside a JSON string")
def _wrong_type_inner(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        return _wrong_type(data, rng, kind)
    return _change_json(data, rng, lambda _row, r: r.choice(OTHER_VALUES), inner=True)


@text_operator("field removed")
def _removed(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        rows = _csv_rows(data)
        if not rows or not rows[0]:
            return data
        c = rng.randrange(len(rows[0]))
        return _csv_bytes([r[:c] + r[c + 1:] for r in rows])
    rows, lines = _json_rows(data)
    row = rows[rng.randrange(len(rows))]
    places = [p for p in _leaves(row) if p and isinstance(_get(row, p[:-1]), dict)]
    if places:
        p = rng.choice(places)
        del _get(row, p[:-1])[p[-1]]  # type: ignore[union-attr]
    return _json_bytes(rows, lines)


@text_operator("NUL character")
def _nul(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        return _change_csv(data, rng, lambda r: "in\x00valid")

    def with_nul(row: object, r: random.Random) -> object:
        return "before\x00after"
    return _change_json(data, rng, with_nul)


@text_operator("huge value")
def _huge(data: bytes, rng: random.Random, kind: str) -> bytes:
    big = "A" * rng.choice((300, 5_000_000))
    if kind == "csv":
        return _change_csv(data, rng, lambda r: big)
    return _change_json(data, rng, lambda _row, r: big)


@text_operator("deep nesting")
def _nesting(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        return _change_csv(data, rng, lambda r: _deep())
    rows, lines = _json_rows(data)
    text = _json_bytes(rows, lines).decode()
    marker = '"__deep__"'
    changed = _change_json(text.encode(), rng, lambda _row, r: "__deep__").decode()
    return changed.replace(marker, _deep(), 1).encode()


@text_operator("other encoding")
def _encoding(data: bytes, rng: random.Random, kind: str) -> bytes:
    text = data.decode("utf-8-sig", errors="replace")
    choice = rng.randrange(4)
    if choice == 0:
        return text.encode("utf-16")
    if choice == 1:
        return text.replace("e", "\u00e9", 3).encode("latin-1", errors="replace")
    if choice == 2:
        i = rng.randrange(len(data))
        return data[:i] + b"\xff\xfe\xc0" + data[i:]
    return text.encode("utf-32")


@text_operator("empty")
def _empty(data: bytes, rng: random.Random, kind: str) -> bytes:
    return rng.choice((b"", b"\n\n  \n", b"\xef\xbb\xbf"))


@text_operator("header only")
def _header_only(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        return data.split(b"\n", 1)[0] + b"\n"
    return rng.choice((b"{}\n", b"[]\n"))


@text_operator("a line that is not an object")
def _not_object(data: bytes, rng: random.Random, kind: str) -> bytes:
    lines = data.splitlines(True)
    i = rng.randrange(len(lines)) if lines else 0
    return b"".join(lines[:i] + [rng.choice((b"[1, 2]\n", b"42\n", b"null\n", b'"text"\n',
                                             b"{\n", b"}{\n"))] + lines[i + 1:])


@text_operator("repeated row, other content")
def _repeated(data: bytes, rng: random.Random, kind: str) -> bytes:
    if kind == "csv":
        rows = _csv_rows(data)
        if len(rows) < 2:
            return data
        row = list(rows[rng.randrange(1, len(rows))])
        if row:
            row[-1] = "other"
        return _csv_bytes([*rows, row])
    rows, lines = _json_rows(data)
    if not lines:
        return _wrong_type(data, rng, kind)
    copy = json.loads(json.dumps(rows[rng.randrange(len(rows))]))
    places = [p for p in _leaves(copy) if p and isinstance(_get(copy, p), str)]
    if places:
        copy = _set(copy, rng.choice(places), "other content")
    return _json_bytes([*rows, copy], lines)


@text_operator("line ends and byte-order mark")
def _line_ends(data: bytes, rng: random.Random, kind: str) -> bytes:
    return rng.choice((b"\xef\xbb\xbf" + data, data.replace(b"\n", b"\r\n"),
                       data.replace(b"\n", b"\r"), data.rstrip(b"\n")))


PARQUET_OPERATORS: dict[str, Callable[[Path, random.Random, Path], None]] = {}


def parquet_operator(name: str):
    def register(fn):
        PARQUET_OPERATORS[name] = fn
        return fn
    return register


@parquet_operator("page damaged")
def _page(src: Path, rng: random.Random, out: Path) -> None:
    import pyarrow.parquet as pq

    data = bytearray(src.read_bytes())
    rg = pq.ParquetFile(src).metadata.row_group(0)
    column = rg.column(rng.randrange(rg.num_columns))
    start = column.dictionary_page_offset or column.data_page_offset
    end = start + column.total_compressed_size
    for _ in range(rng.choice((1, 8, 64))):
        i = rng.randrange(start, end)
        data[i] ^= rng.choice((0x01, 0xFF))
    out.write_bytes(data)


@parquet_operator("footer damaged")
def _footer(src: Path, rng: random.Random, out: Path) -> None:
    data = bytearray(src.read_bytes())
    for _ in range(rng.choice((1, 8))):
        i = rng.randrange(max(0, len(data) - 400), len(data) - 8)
        data[i] ^= 0xFF
    out.write_bytes(data)


@parquet_operator("truncated")
def _pq_truncated(src: Path, rng: random.Random, out: Path) -> None:
    data = src.read_bytes()
    out.write_bytes(data[:rng.randrange(1, len(data) - 1)])


def _rewrite(src: Path, out: Path, change: Callable[[list[dict]], list[dict]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = change(pq.read_table(src).to_pylist())
    pq.write_table(pa.Table.from_pylist(rows), out)


@parquet_operator("column of another type")
def _pq_type(src: Path, rng: random.Random, out: Path) -> None:
    import pyarrow.parquet as pq

    names = pq.ParquetFile(src).schema_arrow.names
    name = rng.choice(names)
    value = rng.choice([1, 2.5, True, "text", [1, 2], {"a": "b"}, None])
    _rewrite(src, out, lambda rows: [{**r, name: value} for r in rows])


@parquet_operator("column removed")
def _pq_removed(src: Path, rng: random.Random, out: Path) -> None:
    import pyarrow.parquet as pq

    name = rng.choice(pq.ParquetFile(src).schema_arrow.names)
    _rewrite(src, out, lambda rows: [{k: v for k, v in r.items() if k != name} for r in rows])


@parquet_operator("NUL character")
def _pq_nul(src: Path, rng: random.Random, out: Path) -> None:
    def change(rows: list[dict]) -> list[dict]:
        row = rows[rng.randrange(len(rows))]
        texts = [k for k, v in row.items() if isinstance(v, str)]
        if texts:
            row[rng.choice(texts)] += "\x00hidden"
        return rows
    _rewrite(src, out, change)


@parquet_operator("huge value")
def _pq_huge(src: Path, rng: random.Random, out: Path) -> None:
    def change(rows: list[dict]) -> list[dict]:
        row = rows[rng.randrange(len(rows))]
        texts = [k for k, v in row.items() if isinstance(v, str)]
        if texts:
            row[rng.choice(texts)] = "A" * 5_000_000
        return rows
    _rewrite(src, out, change)


@parquet_operator("no rows")
def _pq_empty(src: Path, rng: random.Random, out: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(src).slice(0, 0), out)


@parquet_operator("a million repeated rows")
def _pq_bomb(src: Path, rng: random.Random, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(src).slice(0, 1)
    n = 1_000_001
    indices = pa.array([0] * n)
    pq.write_table(table.take(indices), out, compression="zstd")


DIR_OPERATORS = ("json file damaged", "file as a FIFO", "file as a folder", "file as a link to nothing",
                 "file removed", "FIFO beside the files", "empty folder", "reward not a number")
PATH_OPERATORS = ("folder for a file format", "FIFO for the file", "link to nothing for the file",
                  "file for a folder format")


def make_mutant(seed: Seed, operator: str, rng: random.Random, out_dir: Path, n: int) -> Mutant:
    """Write mutant `n` of `seed` by `operator` under `out_dir`."""
    stem = f"m{n:04d}"
    if operator in PATH_OPERATORS:
        target = out_dir / f"{stem}{seed.path.suffix or '.d'}"
        if operator == "folder for a file format":
            target.mkdir()
            shutil.copy(seed.path, target / seed.path.name)
        elif operator == "FIFO for the file":
            os.mkfifo(target)
        elif operator == "link to nothing for the file":
            target.symlink_to(out_dir / f"{stem}-gone{seed.path.suffix}")
        else:  # a file for a folder format
            target = out_dir / f"{stem}.json"
            target.write_text('{"schema_version": "ATIF-v1.6"}\n')
        return Mutant(f"{stem} {seed.format} {operator}", seed, target, operator)
    if seed.kind == "dir":
        target = out_dir / stem
        shutil.copytree(seed.path, target, symlinks=True)
        for p in target.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        target.chmod(0o755)
        _mutate_dir(target, operator, rng)
        return Mutant(f"{stem} {seed.format} {operator}", seed, target, operator)
    target = out_dir / f"{stem}{''.join(seed.path.suffixes[-1:])}"
    if seed.kind == "parquet":
        PARQUET_OPERATORS[operator](seed.path, rng, target)
    else:
        target.write_bytes(TEXT_OPERATORS[operator](seed.path.read_bytes(), rng, seed.kind))
    return Mutant(f"{stem} {seed.format} {operator}", seed, target, operator,
                  use_format=rng.random() < 0.75)


def _mutate_dir(root: Path, operator: str, rng: random.Random) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    json_files = [p for p in files if p.suffix == ".json"]
    if operator == "empty folder":
        for p in sorted(root.iterdir()):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        return
    if operator == "FIFO beside the files":
        folder = rng.choice(sorted({p.parent for p in files}))
        fifo = folder / rng.choice(("report.md", "notes.txt", "trajectory.cont-1.json"))
        if fifo.exists():
            fifo.unlink()
        os.mkfifo(fifo)
        return
    if operator == "reward not a number":
        trial = rng.choice(sorted({p.parent.parent for p in files if p.parent.name == "verifier"}
                                  or {root}))
        (trial / "verifier").mkdir(exist_ok=True)
        for old in (trial / "verifier").glob("reward.*"):
            old.unlink()
        (trial / "verifier" / "reward.txt").write_text(rng.choice(("", "one", "nan", "1e999", "\x00")))
        return
    victim = rng.choice(json_files or files)
    if operator == "json file damaged":
        data = victim.read_bytes()
        choice = rng.choice(("truncated", "bytes flipped", "wrong type", "NUL character",
                             "deep nesting", "field removed", "empty", "other encoding",
                             "wrong type inside a JSON string", "huge value"))
        try:
            victim.write_bytes(TEXT_OPERATORS[choice](data, rng, "json"))
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            victim.write_bytes(_flipped(data, rng, "json"))
        return
    victim.unlink()
    if operator == "file as a FIFO":
        os.mkfifo(victim)
    elif operator == "file as a folder":
        victim.mkdir()
    elif operator == "file as a link to nothing":
        victim.symlink_to(victim.with_name(victim.name + ".gone"))
    # "file removed": gone


def operators_for(seed: Seed) -> list[str]:
    if seed.kind == "dir":
        ops = list(DIR_OPERATORS)
    elif seed.kind == "parquet":
        ops = list(PARQUET_OPERATORS)
    else:
        ops = list(TEXT_OPERATORS)
        if seed.kind == "json":
            ops.remove("header only")
    return ops + [p for p in PATH_OPERATORS
                  if (p == "file for a folder format") == (seed.kind == "dir")]


def build_mutants(seed_list: list[Seed], count: int, rng: random.Random, out_dir: Path) -> list[Mutant]:
    """At least `count` mutants, every format and every operator that applies to it
    in turn (the bomb of a million rows once per Parquet seed)."""
    by_format: dict[str, list[Seed]] = defaultdict(list)
    for seed in seed_list:
        by_format[seed.format].append(seed)
    plans: dict[str, Iterator[tuple[Seed, str]]] = {}

    def plan(fmt: str) -> Iterator[tuple[Seed, str]]:
        cycle = 0
        while True:
            for seed in by_format[fmt]:
                ops = operators_for(seed)
                if cycle:
                    ops = [o for o in ops if o != "a million repeated rows"]
                for op in rng.sample(ops, len(ops)):
                    yield seed, op
            cycle += 1

    mutants: list[Mutant] = []
    formats = sorted(by_format)
    while len(mutants) < count:
        for fmt in formats:
            seed, op = next(plans.setdefault(fmt, plan(fmt)))
            try:
                mutants.append(make_mutant(seed, op, rng, out_dir, len(mutants)))
            except (ValueError, IndexError, KeyError, json.JSONDecodeError, UnicodeDecodeError,
                    FileExistsError):
                continue  # this operator does not apply to this file's shape
    return mutants


# -- importing them -------------------------------------------------------------------

@dataclass
class Outcome:
    mutant: Mutant
    status: int | None
    """Exit status; None: still running at the timeout."""
    stdout: str = ""
    stderr: str = ""
    changed: bool = False
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.status == 0


def judge(outcome: Outcome) -> Outcome:
    """Which of the four problems an import shows."""
    m, err = outcome.mutant, outcome.stderr
    if outcome.status is None:
        outcome.problems.append("hangs")
        return outcome
    lines = err.splitlines()
    if outcome.status not in (0, 2) or "Traceback" in err or any(
            not line.startswith("carelens: ") for line in lines):
        outcome.problems.append("tracebacks")
    if outcome.status == 2:
        if outcome.changed:
            outcome.problems.append("changes")
        named = m.path.name
        if len(lines) != 1 or named not in lines[0] or len(lines[0]) > 1200:
            outcome.problems.append("messages")
    return outcome


def run_subprocess(mutant: Mutant, db: Path, timeout: float) -> Outcome:
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_OFFLINE="1",
               OPENAI_BASE_URL="http://127.0.0.1:9/", ANTHROPIC_BASE_URL="http://127.0.0.1:9/")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "--db", str(db), "import", *mutant.argv()],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        status = None
    return Outcome(mutant, status, out, err, seconds=time.perf_counter() - started)


def run_in_process(mutant: Mutant, db: Path, timeout: float) -> Outcome:
    """The same command in this process (for the test suite's sample: no start-up
    per file). A hang here is the test runner's timeout."""
    import traceback

    import cli

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(["--db", str(db), "import", *mutant.argv()])
        except BaseException:  # noqa: BLE001 - what a user would see as a traceback
            traceback.print_exc(file=err)
            status = 1
    return Outcome(mutant, status, out.getvalue(), err.getvalue(),
                   seconds=time.perf_counter() - started)


def try_mutant(mutant: Mutant, base: Path, base_digest: str, scratch: Path, timeout: float,
               runner: Callable[[Mutant, Path, float], Outcome]) -> Outcome:
    db = scratch / f"{mutant.path.name}.db"
    shutil.copy(base, db)
    try:
        outcome = runner(mutant, db, timeout)
        if outcome.status == 2:
            outcome.changed = table_digest(db) != base_digest
        return judge(outcome)
    finally:
        for p in db.parent.glob(db.name + "*"):
            p.unlink()


def run_all(count: int, seed: int = 0, jobs: int = 2, timeout: float = 20.0,
            keep: Path | None = None, in_process: bool = False,
            report: Callable[[str], None] = print) -> list[Outcome]:
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="carelens-mutants-")) if keep is None else keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        seed_list = seeds(work / "seeds")
        report(f"{len(seed_list)} valid files of {len({s.format for s in seed_list})} formats;"
               " building the database they go into")
        base = base_database(work, seed_list)
        base_digest = table_digest(base)
        out_dir = work / "mutants"
        out_dir.mkdir(exist_ok=True)
        mutants = build_mutants(seed_list, count, rng, out_dir)
        report(f"{len(mutants)} mutants; importing each into a copy of the database"
               f" ({'in this process' if in_process else f'{jobs} at a time, {timeout:g} s at most'})")
        scratch = work / "scratch"
        scratch.mkdir(exist_ok=True)
        runner = run_in_process if in_process else run_subprocess
        outcomes: list[Outcome] = []
        with ThreadPoolExecutor(max_workers=1 if in_process else jobs) as pool:
            for i, outcome in enumerate(pool.map(
                    lambda m: try_mutant(m, base, base_digest, scratch, timeout, runner), mutants), 1):
                outcomes.append(outcome)
                if outcome.problems:
                    report(f"  {', '.join(outcome.problems)}: {outcome.mutant.name}"
                           f" (exit {outcome.status}): {outcome.stderr.strip()[-400:]}")
                if not i % 50:
                    report(f"  {i} of {len(mutants)} done")
        return outcomes
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    tally = Counter(p for o in outcomes for p in o.problems)
    return {p: tally.get(p, 0) for p in PROBLEMS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcomes = run_all(args.mutants, args.seed, args.jobs, args.timeout, args.keep)
    by_format: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        by_format[o.mutant.seed.format]["accepted" if o.accepted else "refused"] += 1
    print(f"\n{len(outcomes)} mutants over {len(by_format)} formats in"
          f" {time.perf_counter() - started:.0f} s (slowest import"
          f" {max(o.seconds for o in outcomes):.1f} s):")
    for fmt, c in sorted(by_format.items()):
        print(f"  {fmt:26} {c['refused']:4} refused, {c['accepted']:3} accepted (valid after all)")
    result = counts(outcomes)
    print("tracebacks {tracebacks}, hangs over {t:g} s {hangs}, database changes {changes},"
          " messages not one line naming the file {messages}".format(t=args.timeout, **result))
    return 1 if any(result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
