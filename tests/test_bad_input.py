"""Bad input, on the command line and on the Data screen: one line naming the
file and the line or field (values quoted to about 200 characters), exit
status 2, the database exactly as it was; never a traceback, never a hang.
Each case here was a traceback, a hang or an accepted file before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.mutants_importers import table_digest
from review.datasets.sources import InputError, import_file
from tests.conftest import ROOT, SHARED_DATA
from tests.helpers import one_line, run_cli, shown

CONFORMANCE = SHARED_DATA / "conformance"
PREFIXES = CONFORMANCE / "carebench" / "evaluation_prefixes_public.jsonl"
PREFIXES_PARQUET = CONFORMANCE / "carebench" / "evaluation_prefixes-train.parquet"
GENERATIONS = CONFORMANCE / "carebench" / "raw_generations.jsonl"
HEALTHBENCH = SHARED_DATA / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
TRIAL = CONFORMANCE / "harbor" / "jobs" / "2026-03-14__09-30-00" / "fix-unit-test__AbC1234"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_jsonl(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path, capsys) -> str:
    """A database holding the corpus's CARE-Bench prefixes (so a refusal has
    something to leave as it was)."""
    path = str(tmp_path / "bad.db")
    assert run_cli(capsys, "--db", path, "import", str(PREFIXES))[0] == 0
    return path


def refused(capsys, db: str, *argv: str) -> str:
    """The one line `carelens import ARGV` gives on stderr; exit 2, every table's
    rows exactly as they were, and the tally says the file was refused."""
    before = table_digest(db)
    code, out, err = run_cli(capsys, "--db", db, "import", *argv)
    assert code == 2, (out, err)
    assert out.strip().endswith("1 refused"), out
    assert table_digest(db) == before
    return one_line(err).removeprefix("carelens: ").rstrip("\n")


# -- values ---------------------------------------------------------------------

def test_a_nul_character_in_an_id_names_the_field(db, tmp_path, capsys):
    row = dict(rows(PREFIXES)[0], prefix_id="inv_case\x00_r01")
    path = write_jsonl(tmp_path / "nul.jsonl", [row])
    assert refused(capsys, db, str(path)) == (
        f"{path}:1: field 'prefix_id' holds a NUL character (U+0000); text after it would be lost:"
        " remove it")


def test_a_nul_character_in_parquet_text_names_its_row(db, tmp_path, capsys):
    table = pq.read_table(PREFIXES_PARQUET).to_pylist()
    table[5]["input_patient_turns"] = ["Invented.", "A turn\x00cut short"]
    path = tmp_path / "nul.parquet"
    pq.write_table(pa.Table.from_pylist(table), path)
    assert refused(capsys, db, str(path)) == (
        f"{path}:6: field 'input_patient_turns[1]' holds a NUL character (U+0000); text after it"
        " would be lost: remove it")


def test_example_tags_given_as_booleans_names_the_field(db, tmp_path, capsys):
    row = dict(rows(HEALTHBENCH)[0], example_tags=[True, False])
    path = write_jsonl(tmp_path / "tags.jsonl", [rows(HEALTHBENCH)[1], row])
    assert refused(capsys, db, str(path)) == (
        f"{path}:2: field 'example_tags' must be a list of text tags, got [True, False]")


def test_an_error_quotes_a_huge_value_to_200_characters(db, tmp_path, capsys):
    prefix_id = rows(PREFIXES)[0]["prefix_id"]
    path = tmp_path / "labels.csv"
    path.write_text(f"prefix_id,predicted_label\n{prefix_id},{'X' * 20_000_000}\n")
    line = refused(capsys, db, "--format", "label-csv", "--rater", "invented:model", str(path))
    assert line.startswith(f"{path}:2: unknown label '{'X' * 200}…' (20,000,000 characters);")
    assert len(line) < 1000


def test_a_row_no_check_foresaw_is_named_by_its_line(store, tmp_path, monkeypatch):
    """Whatever an importer trips over, the message names the file and the line
    being read, in one line, and nothing is kept."""
    from review.datasets.sources import FORMATS, carebench

    original = carebench.read_prefixes

    def trips(path, options):
        for n, record in enumerate(original(path, options)):
            if n == 7:
                raise TypeError("unhashable type: 'list'")
            yield record

    monkeypatch.setattr(FORMATS["carebench-prefixes"], "read", trips)
    with pytest.raises(InputError) as err:
        import_file(store, PREFIXES, "carebench-prefixes")
    assert str(err.value) == f"{PREFIXES}:4: cannot read this row: TypeError: unhashable type: 'list'"
    assert store.scalar("SELECT COUNT(*) FROM items") == 0


# -- files ----------------------------------------------------------------------

def test_damaged_parquet_pages_name_the_rows(db, tmp_path, capsys):
    data = bytearray(PREFIXES_PARQUET.read_bytes())
    for i in range(900, 1000):  # inside the compressed pages of the turns column
        data[i] ^= 0xFF
    path = tmp_path / "damaged.parquet"
    path.write_bytes(data)
    assert refused(capsys, db, str(path)) == (
        f"{path}: rows 1 to 8: cannot be read (Corrupt snappy compressed data.); is the file"
        " damaged?")


def test_a_folder_given_with_a_file_format_is_refused(db, capsys):
    folder = CONFORMANCE / "carebench"
    assert refused(capsys, db, "--format", "healthbench", str(folder)) == (
        f"{folder}: is a folder; the healthbench format reads one file (give the file, not its"
        " folder)")


def test_a_fifo_is_refused_at_once(tmp_path):
    """A FIFO blocked the import for ever: it is refused before it is opened."""
    fifo = tmp_path / "generations.jsonl"
    os.mkfifo(fifo)
    db = tmp_path / "fifo.db"
    done = subprocess.run([sys.executable, "-m", "cli", "--db", str(db), "import", str(fifo)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"carelens: {fifo}: is a FIFO (named pipe), not a file: only files and"
                           " folders are imported\n")


def test_an_empty_file_says_it_holds_no_rows(db, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    assert refused(capsys, db, str(empty)) == f"{empty}: empty file: it holds no rows"
    assert refused(capsys, db, "--format", "carebench-generations", str(empty)) == (
        f"{empty}: empty file: it holds no rows")
    parquet = tmp_path / "empty.parquet"
    parquet.write_bytes(b"")
    assert refused(capsys, db, "--format", "klinikebench", str(parquet)) == (
        f"{parquet}: empty file: it holds no rows")


def test_a_file_of_only_a_header_holds_no_rows(db, tmp_path, capsys):
    header = tmp_path / "predictions.csv"
    header.write_text("prefix_id,predicted_label\n")
    assert refused(capsys, db, "--rater", "invented:model", str(header)) == (
        f"{header}: it holds no rows (label-csv); nothing imported")
    table = tmp_path / "no_rows.parquet"
    pq.write_table(pq.read_table(PREFIXES_PARQUET).slice(0, 0), table)
    assert refused(capsys, db, str(table)) == (
        f"{table}: it holds no rows (carebench-prefixes); nothing imported")


def test_a_csv_cut_off_in_the_middle_of_a_row_names_the_line(db, tmp_path, capsys):
    ids = [r["prefix_id"] for r in rows(PREFIXES)]
    cut = tmp_path / "predictions.csv"
    cut.write_text(f"prefix_id,predicted_label,confidence\n{ids[0]},0A_NO_ESCALATION_INFO_NEEDED,3\n"
                   f"{ids[1]},0A_NO_ESCALATION_INFO_NEEDED")
    assert refused(capsys, db, "--format", "label-csv", "--rater", "invented:model", str(cut)) == (
        f"{cut}:3: the file ends in the middle of this row (2 of the header's 3 fields, and no"
        " line end): is the file cut off?")


# -- limits ---------------------------------------------------------------------

def test_a_small_parquet_file_of_a_million_rows_is_held_to_the_limit(db, tmp_path, capsys):
    """8 KB that would be 400 MB: refused from its footer, before a row is read."""
    row = rows(PREFIXES)[0]
    n = 1_000_001
    table = pa.table({"prefix_id": pa.array([row["prefix_id"]] * n),
                      "input_patient_turns": pa.array([row["input_patient_turns"]] * n),
                      "gold_label": pa.array([row["gold_label"]] * n)})
    path = tmp_path / "bomb.parquet"
    pq.write_table(table, path, use_dictionary=True, compression="zstd")
    assert path.stat().st_size < 64_000
    assert refused(capsys, db, str(path)) == (
        f"{path}: 1,000,001 rows, over the limit of 1,000,000 rows a file (raise it with"
        " --max-rows on the command line, or 'Rows per file, at most' on the Data screen)")


def test_the_row_limit_can_be_raised(db, tmp_path, capsys):
    assert refused(capsys, db, "--max-rows", "7", str(PREFIXES_PARQUET)).startswith(
        f"{PREFIXES_PARQUET}: 8 rows, over the limit of 7 rows a file")
    code, out, _ = run_cli(capsys, "--db", db, "import", "--max-rows", "8", str(PREFIXES_PARQUET))
    assert code == 0 and "carebench-prefixes: 8 rows" in out


def test_decompressed_bytes_are_held_to_the_limit(db, tmp_path, capsys):
    base = rows(PREFIXES)[0]
    turn = "An invented account of a headache, told at length. " * 100
    table = pa.Table.from_pylist([dict(prefix_id=f"inv_v1_case_{i:04d}_r01",
                                       input_patient_turns=[turn], gold_label=base["gold_label"])
                                  for i in range(200)])
    path = tmp_path / "expands.parquet"
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < 20_000
    line = refused(capsys, db, "--max-bytes", "500K", str(path))
    assert line.startswith(f"{path}: more than 500,000 bytes once decompressed (by row ")
    assert line.endswith("over the limit of 500,000 bytes a file (raise it with --max-bytes on the"
                         " command line, or 'Megabytes per file, at most' on the Data screen)")
    code, out, _ = run_cli(capsys, "--db", db, "import", str(path))
    assert code == 0 and "200 rows, 200 new items" in out


# -- Harbor ---------------------------------------------------------------------

@pytest.mark.parametrize("what", ["folder", "link to nothing"])
def test_a_trajectory_that_is_not_a_file_is_refused(db, tmp_path, capsys, what):
    trial = tmp_path / TRIAL.name
    shutil.copytree(TRIAL, trial)
    trajectory = trial / "agent" / "trajectory.json"
    trajectory.unlink()
    if what == "folder":
        trajectory.mkdir()
        expected = f"{TRIAL.name}/agent/trajectory.json: is a folder, where a file is expected"
    else:
        trajectory.symlink_to("gone.json")
        expected = f"{TRIAL.name}/agent/trajectory.json: a link to nothing (gone.json does not exist)"
    assert refused(capsys, db, str(trial)) == expected


def test_a_result_that_is_a_link_to_nothing_is_not_a_running_trial(db, tmp_path, capsys):
    """A trial without result.json is still running (left out); one whose
    result.json is a link to nothing or a folder is damaged, and refused."""
    job = tmp_path / "job"
    shutil.copytree(TRIAL.parent / "count-lines__XyZ9876", job / "count-lines__XyZ9876")
    shutil.copytree(TRIAL, job / TRIAL.name)
    result = job / TRIAL.name / "result.json"
    result.unlink()
    result.symlink_to("gone.json")
    assert refused(capsys, db, "--format", "harbor", str(job)) == (
        f"job/{TRIAL.name}/result.json: a link to nothing (gone.json does not exist)")


# -- the terminal ---------------------------------------------------------------

def test_search_on_a_terminal_shows_control_characters_as_symbols(tmp_path, capsys):
    """A model's name holding escape sequences (clear the screen, retitle the
    window) is printed with each control character as a visible symbol."""
    import pty

    row = dict(rows(GENERATIONS)[0], model_requested="Rest\x1b[2J\x1b]0;owned\x07 and",
               raw_model_response="Rest and fluids")
    path = write_jsonl(tmp_path / "generations.jsonl", [row])
    db = str(tmp_path / "term.db")
    assert run_cli(capsys, "--db", db, "import", str(path))[0] == 0
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "--db", db, "search", "fluids"],
                            cwd=ROOT, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    text = output.decode("utf-8")
    assert "Rest\u241b[2J\u241b]0;owned\u2407 and" in text
    assert "\x1b" not in text and "\x07" not in text
    # Piped, the text is as stored (a program reading it gets the data).
    code, out, _ = run_cli(capsys, "--db", db, "search", "fluids")
    assert code == 0 and "\x1b[2J" in out


def test_terminal_text_keeps_lines_and_tabs():
    from cli import TERMINAL_SAFE

    assert "a\tb\nc\rd\x9be\u202ef\x7f".translate(TERMINAL_SAFE) == \
        "a\tb\nc\u240dd\ufffde\ufffdf\u2421"


# -- the Data screen ------------------------------------------------------------

def test_the_data_screen_gives_each_bad_file_its_line_and_imports_the_rest(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    db = tmp_path / "screen.db"
    monkeypatch.setenv("CARELENS_DB", str(db))
    nul = json.dumps(dict(rows(PREFIXES)[0], prefix_id="inv\x00_r01")) + "\n"
    tags = json.dumps(dict(rows(HEALTHBENCH)[0], example_tags=[True])) + "\n"
    damaged = bytearray(PREFIXES_PARQUET.read_bytes())
    damaged[900:1000] = bytes(b ^ 0xFF for b in damaged[900:1000])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/data.py").run()
    at.file_uploader[0].set_value([
        ("nul.jsonl", nul.encode(), "application/jsonl"),
        ("tags.jsonl", tags.encode(), "application/jsonl"),
        ("damaged.parquet", bytes(damaged), "application/octet-stream"),
        ("evaluation_prefixes_public.jsonl", PREFIXES.read_bytes(), "application/jsonl"),
        ("empty.csv", b"", "text/csv"),
    ])
    at.button[0].click().run()
    assert not at.exception, at.exception
    errors = [shown(e.value) for e in at.error]
    assert errors == [
        "nul.jsonl: nothing was imported. nul.jsonl:1: field 'prefix_id' holds a NUL character"
        " (U+0000); text after it would be lost: remove it",
        "tags.jsonl: nothing was imported. tags.jsonl:1: field 'example_tags' must be a list of"
        " text tags, got [True]",
        "damaged.parquet: nothing was imported. damaged.parquet: rows 1 to 8: cannot be read"
        " (Corrupt snappy compressed data.); is the file damaged?",
        "empty.csv: nothing was imported. empty.csv: empty file: it holds no rows",
    ]
    assert all(str(tmp_path) not in e and "/tmp" not in e for e in errors)
    assert [shown(s.value).split(":")[0] for s in at.success] == ["evaluation_prefixes_public.jsonl"]
    from review.workspace import open_store

    s = open_store(db)
    assert s.scalar("SELECT COUNT(*) FROM items") == 8
    assert s.scalar("SELECT group_concat(path) FROM imports") == "upload:evaluation_prefixes_public.jsonl"
    s.close()
