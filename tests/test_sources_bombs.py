"""Decompression bombs: no file expands past the byte limit (`Limits.max_bytes`).

A Parquet file stores a repeated value once (a dictionary page) and runs of one
value in a few bytes, compressed: a file of kilobytes can hold gigabytes of
rows. The files here are written with pyarrow as a hub export writes them (the
conformance corpus's Parquet files, with a column added), and each bomb is
refused in one line naming the file and the limit, before any row is given,
leaving the database as it was. Text files (JSONL, CSV, a JSON document, a
Harbor job's files) expand to no more than their size: they are measured by
it, a job's files together; no reader decompresses gzip (such a file is
refused as not UTF-8 text)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from review.datasets.sources import InputError, import_file, readers
from review.datasets.sources.base import ImportOptions
from review.datasets.sources.readers import Limits, read_parquet, reading
from tests.conftest import SHARED_DATA
from tests.helpers import table_counts

CONFORMANCE = SHARED_DATA / "conformance"
PREFIXES = CONFORMANCE / "carebench" / "evaluation_prefixes-train.parquet"
LEADERBOARD = CONFORMANCE / "klinikebench" / "leaderboard-00000-of-00001.parquet"
MB = 1_000_000


def repeated(value: str, n: int) -> pa.DictionaryArray:
    """`value` in each of n rows, dictionary-encoded: stored once, in every row once read."""
    return pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array([value]))


def prefixes_with_extra_column(path: Path, rows: int = 5000, value_bytes: int = MB,
                               store_schema: bool = True) -> Path:
    """The issue's file: the corpus's prefixes, repeated to `rows` rows, and an extra
    column carelens does not use holding one 1 MB value in every row."""
    table = pq.read_table(PREFIXES)
    table = table.take(pa.array([i % table.num_rows for i in range(rows)]))
    table = table.append_column("annotator_notes", repeated("n" * value_bytes, rows))
    pq.write_table(table, path, compression="zstd", store_schema=store_schema)
    return path


def refused(store, path: Path, fmt: str | None = None, **options) -> str:
    before = table_counts(store)
    with pytest.raises(InputError) as caught:
        import_file(store, path, fmt, options=ImportOptions(**options))
    assert table_counts(store) == before
    message = str(caught.value)
    assert "\n" not in message and path.name in message
    return message


def first_row(path: Path, limits: Limits | None = None):
    """What `read_parquet` does before it gives its first row."""
    with reading(limits or Limits()):
        return next(read_parquet(path))


@pytest.mark.parametrize("store_schema", [True, False], ids=["arrow-dictionary", "plain-string"])
def test_a_12_kb_file_whose_extra_column_repeats_1_mb_in_5000_rows_is_refused(
        store, tmp_path, store_schema):
    path = prefixes_with_extra_column(tmp_path / "train-00000-of-00001.parquet",
                                      store_schema=store_schema)
    assert path.stat().st_size < 40_000  # kilobytes on disk; 5 GB of rows once read
    message = refused(store, path)
    assert message == (
        f"{path}: more than 4,000,000,000 bytes once decompressed (by row 4,096; a value its"
        " dictionary repeats counted in every row that holds it), over the limit of"
        " 4,000,000,000 bytes a file (raise it with --max-bytes on the command line, or"
        " 'Megabytes per file, at most' on the Data screen)")
    with pytest.raises(InputError):
        first_row(path)  # refused before a single row is given: nothing is written


def test_under_the_limit_the_same_file_is_read_row_for_row(store, tmp_path):
    path = prefixes_with_extra_column(tmp_path / "p.parquet", rows=40, value_bytes=1000)
    with reading(Limits()):
        rows = [row for _, row in read_parquet(path)]
    assert rows == pq.read_table(path).to_pylist()
    assert rows[39]["annotator_notes"] == "n" * 1000
    assert import_file(store, path).items == 8  # the corpus's 8 prefixes, each given 5 times


def test_a_batch_of_large_rows_is_made_into_rows_a_slice_at_a_time(tmp_path, monkeypatch):
    path = prefixes_with_extra_column(tmp_path / "p.parquet", rows=300, value_bytes=10_000)
    monkeypatch.setattr(readers, "PARQUET_SLICE_BYTES", 200_000)
    texts = readers._text_leaves(pq.ParquetFile(path))
    batch = next(pq.ParquetFile(path, read_dictionary=texts).iter_batches(batch_size=300))
    size = readers._row_bytes(batch)
    assert 3_000_000 < size < 4_500_000  # 300 rows of 10 kB (the dictionary's value in each)
    slices = readers.slices_of(batch, size)
    assert sum(s.num_rows for s in slices) == 300 and len(slices) >= 15
    assert all(readers._row_bytes(s) <= 2 * 200_000 for s in slices)
    with reading(Limits()):
        rows = [row for _, row in read_parquet(path)]
    assert rows == pq.read_table(path).to_pylist()


def test_a_list_column_repeating_a_dictionary_value_is_refused(store, tmp_path):
    """The nested-list bomb: six KlinikeBench episodes, each with an extra list of a
    thousand references to one 1 MB note: 6 GB once read."""
    table = pq.read_table(LEADERBOARD)
    n, per = table.num_rows, 1000
    notes = pa.ListArray.from_arrays(pa.array(range(0, n * per + 1, per), pa.int32()),
                                     repeated("m" * MB, n * per))
    path = tmp_path / "leaderboard-00000-of-00001.parquet"
    pq.write_table(table.append_column("reviewer_notes", notes), path, compression="zstd")
    assert "more than 4,000,000,000 bytes once decompressed (by row 6" in refused(store, path)


def test_one_huge_compressed_row_is_refused_by_its_footer(store, tmp_path):
    table = pq.read_table(LEADERBOARD).slice(0, 1)
    path = tmp_path / "huge-row.parquet"
    pq.write_table(table.append_column("blob", pa.array(["z" * (30 * MB)])), path,
                   compression="zstd")
    assert path.stat().st_size < 100_000
    message = refused(store, path, limits=Limits(max_bytes=20 * MB))
    assert " bytes once decompressed, as its footer describes its pages, over the limit of" \
           " 20,000,000 bytes a file" in message


def test_a_run_of_one_number_in_a_list_column_is_refused_by_its_footer(store, tmp_path):
    """Values of a fixed width, run-length encoded: 3 million zeros a row cost a few
    bytes on disk and 24 MB a row once read."""
    table = pq.read_table(LEADERBOARD)
    n, per = table.num_rows, 3_000_000
    zeros = pa.ListArray.from_arrays(pa.array(range(0, n * per + 1, per), pa.int32()),
                                     pa.array([0] * (n * per), pa.int64()))
    path = tmp_path / "zeros.parquet"
    pq.write_table(table.append_column("samples", zeros), path, compression="zstd")
    assert path.stat().st_size < 2 * MB
    assert "as its footer describes its pages" in refused(store, path,
                                                          limits=Limits(max_bytes=100 * MB))


def test_a_footer_that_understates_cannot_take_a_file_past_the_limit(tmp_path, monkeypatch):
    """Without the count made before the rows (as if the footer lied), the rows are
    counted as they are made: refused before the limit is passed."""
    path = prefixes_with_extra_column(tmp_path / "p.parquet", rows=3000, value_bytes=10_000)
    monkeypatch.setattr(readers, "_check_expansion", lambda *a: None)
    given = 0
    with reading(Limits(max_bytes=20 * MB)), pytest.raises(InputError, match="by row 2,048"):
        for _ in read_parquet(path, batch_size=1024):
            given += 1
    assert given == 1024  # the first batch (13 MB), not a row of the second


def test_a_hub_file_that_is_a_bomb_is_refused_by_its_hub_name(tmp_path, monkeypatch, capsys):
    from tests.fake_hub import FakeHub
    from tests.helpers import run_cli
    from tests.test_hub import CAREBENCH, CAREBENCH_CONFIGS, card

    bomb = prefixes_with_extra_column(tmp_path / "bomb.parquet").read_bytes()
    with FakeHub() as fake:
        readme, data = card(CAREBENCH_CONFIGS)
        fake.add_dataset(CAREBENCH, {"README.md": readme,
                                     "evaluation_prefixes/train-00000-of-00001.parquet": bomb},
                         card_data=data)
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        code, out, err = run_cli(capsys, "--db", str(tmp_path / "hub.db"), "import",
                                 "hf:ningkko/CARE-Bench:evaluation_prefixes")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("carelens: hf:ningkko/CARE-Bench:evaluation_prefixes/evaluation_prefixes/"
                          "train-00000-of-00001.parquet: more than 4,000,000,000 bytes once"
                          " decompressed")


# -- text files and folders: their size is what they hold ----------------------------------

def test_a_harbor_trajectory_past_the_limit_is_refused_naming_it(store, tmp_path):
    from tests.test_sources_trajectories import make_trial

    make_trial(tmp_path / "job", "t1", rewards={"reward": 1})
    message = refused(store, tmp_path / "job", limits=Limits(max_bytes=1000))
    assert message.startswith("job/t1/agent/trajectory.json: ")
    assert " bytes, after 213 bytes of the files read before it, over the limit of 1,000" in message


def test_a_harbor_jobs_files_count_together(store, tmp_path):
    from tests.test_sources_trajectories import make_trial

    for name in ("t1", "t2", "t3"):
        make_trial(tmp_path / "job", name, rewards={"reward": 1})
    one_trial = sum(p.stat().st_size for p in (tmp_path / "job" / "t1").rglob("*.json"))
    message = refused(store, tmp_path / "job", limits=Limits(max_bytes=int(one_trial * 2.5)))
    assert "of the files read before it, over the limit of" in message
    assert message.startswith("job/t3/")


@pytest.mark.parametrize("fmt", [None, "healthbench-results"])
def test_a_results_document_past_the_limit_is_refused_before_it_is_read(store, tmp_path, fmt):
    path = tmp_path / "healthbench_x_allresults.json"
    path.write_text(json.dumps({"metadata": {"example_level_metadata": []}, "pad": "p" * 5000}))
    message = refused(store, path, fmt, limits=Limits(max_bytes=1000))
    assert message.endswith("allresults.json: 5,055 bytes, over the limit of 1,000 bytes a file"
                            " (raise it with --max-bytes on the command line, or 'Megabytes per"
                            " file, at most' on the Data screen)")


def test_a_gzipped_file_is_not_decompressed_but_refused(store, tmp_path):
    raw = (CONFORMANCE / "carebench" / "evaluation_prefixes_public.jsonl").read_bytes()
    path = tmp_path / "evaluation_prefixes_public.jsonl"
    path.write_bytes(gzip.compress(raw))
    message = refused(store, path)
    assert "not UTF-8 text" in message or "not valid JSON" in message
