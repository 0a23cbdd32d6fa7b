"""CARE-Bench importers and the long labels CSV: good files, bad files, re-imports."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from review.datasets.sources import ImportOptions, InputError, detect_format, import_file
from tests.helpers import table_counts, write_jsonl

PREFIXES = [
    {"prefix_id": "z_case_0001_r01", "case_id": "z_case_0001", "round_id": 1, "split": "validation",
     "gold_label": "0A_NO_ESCALATION_INFO_NEEDED", "input_patient_turns": ["Invented: my toe hurts."],
     "source_dataset": "invented", "specialty_or_domain": "orthopaedics"},
    {"prefix_id": "z_case_0001_r02", "case_id": "z_case_0001", "round_id": 2, "split": "validation",
     "gold_label": "1A_ESCALATION_NONURGENT_CARE",
     "input_patient_turns": ["Invented: my toe hurts.", "Invented: for three weeks now."]},
]


def generation(prefix_id, model, text="Invented reply.", failed=False):
    return {"prefix_id": prefix_id, "case_id": prefix_id[:11], "split": "validation", "round_id": 1,
            "protocol": "unprompted", "prompt_version": "p1",
            "patient_information_available_so_far": "Invented: my toe hurts.",
            "input_messages": [{"role": "user", "content": "Invented: my toe hurts."}],
            "model_requested": model, "model_actual": model + "-x", "provider": "fake",
            "raw_model_response": None if failed else text, "generation_failed": failed,
            "error_message": "timeout" if failed else None}


@pytest.fixture
def prefixes_file(tmp_path):
    return write_jsonl(tmp_path / "evaluation_prefixes_public.jsonl", PREFIXES)


def test_prefixes_import_with_gold_and_reimport_changes_nothing(store, prefixes_file):
    result = import_file(store, prefixes_file)
    assert (result.format, result.rows, result.items, result.annotations) == ("carebench-prefixes", 2, 2, 2)
    before = table_counts(store)
    again = import_file(store, prefixes_file)
    assert again.already_imported
    assert table_counts(store) == before
    gold = store.query("SELECT i.uid, a.value, r.kind FROM annotations a JOIN items i ON i.id = a.item_id"
                       " JOIN raters r ON r.id = a.rater_id ORDER BY i.id")
    assert [tuple(g) for g in gold] == [("z_case_0001_r01", "0A_NO_ESCALATION_INFO_NEEDED", "reference"),
                                        ("z_case_0001_r02", "1A_ESCALATION_NONURGENT_CARE", "reference")]
    meta = json.loads(store.scalar("SELECT meta FROM items WHERE uid = 'z_case_0001_r01'"))
    assert meta["source_dataset"] == "invented"


def test_same_rows_in_another_file_add_nothing(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    copy = write_jsonl(tmp_path / "copy.jsonl", list(reversed(PREFIXES)))
    result = import_file(store, copy)
    assert (result.items, result.annotations, result.skipped) == (0, 0, 2)


def test_parquet_and_csv_exports_of_the_hub_table(store, tmp_path):
    pq.write_table(pa.Table.from_pylist(PREFIXES[:1]), tmp_path / "p.parquet")
    assert import_file(store, tmp_path / "p.parquet").items == 1
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("prefix_id,round_id,split,gold_label,input_patient_turns\n"
                        "z_case_0002_r01,1,public,1B,Invented: crushing chest pain.\n")
    assert import_file(store, csv_path).annotations == 1


def test_split_name_drift_is_kept_as_published(store, tmp_path):
    rows = [dict(PREFIXES[0], prefix_id="z_case_0003_r01", split="public_test_1")]
    rows[0].pop("split")
    rows[0]["data_split"] = "public_test_1"
    import_file(store, write_jsonl(tmp_path / "drift.jsonl", rows))
    assert store.scalar("SELECT split FROM items WHERE uid = 'z_case_0003_r01'") == "public_test_1"


def test_generations_link_to_prefixes_and_keep_failures(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    gens = write_jsonl(tmp_path / "raw.jsonl", [
        generation("z_case_0001_r01", "model-a"), generation("z_case_0001_r01", "model-b", failed=True)])
    result = import_file(store, gens)
    assert result.format == "carebench-generations" and result.items == 2
    rows = store.query("SELECT i.uid, i.failed, p.uid AS parent, i.payload FROM items i"
                       " JOIN items p ON p.id = i.parent_id WHERE i.kind = 'response' ORDER BY i.uid")
    assert [(r["uid"], r["failed"], r["parent"]) for r in rows] == [
        ("z_case_0001_r01::model-a::unprompted@p1", 0, "z_case_0001_r01"),
        ("z_case_0001_r01::model-b::unprompted@p1", 1, "z_case_0001_r01")]
    assert json.loads(rows[1]["payload"])["error"] == "timeout"


def test_generations_before_prefixes_make_a_stub_that_the_prefix_replaces(store, prefixes_file, tmp_path):
    import_file(store, write_jsonl(tmp_path / "raw.jsonl", [generation("z_case_0001_r01", "m")]))
    assert json.loads(store.scalar("SELECT meta FROM items WHERE uid = 'z_case_0001_r01'")) == {"stub": True}
    result = import_file(store, prefixes_file)
    meta = json.loads(store.scalar("SELECT meta FROM items WHERE uid = 'z_case_0001_r01'"))
    assert meta.get("source_dataset") == "invented" and "stub" not in meta
    # Reported as filled in, not as nothing: the prefix was only named by the generations file.
    n_prefixes = store.scalar("SELECT COUNT(*) FROM items WHERE kind = 'prefix'")
    assert (result.items, result.completed) == (n_prefixes - 1, 1)
    assert "1 filled in (named by an earlier file)" in result.summary()
    assert store.query_one("SELECT n_items, n_completed FROM imports ORDER BY id DESC LIMIT 1")[:] == (
        n_prefixes - 1, 1)


def test_mapped_responses_are_machine_annotations(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    import_file(store, write_jsonl(tmp_path / "raw.jsonl", [generation("z_case_0001_r01", "model-a")]))
    mapped = write_jsonl(tmp_path / "mapped_responses.jsonl", [
        {"prefix_id": "z_case_0001_r01", "model": "model-a", "mapped_label": "1A"}])
    result = import_file(store, mapped, options=ImportOptions(rater="openai:gpt-x@v3"))
    assert result.format == "carebench-mapped" and result.annotations == 1
    row = store.query_one("SELECT r.name, r.kind, r.provider, r.model, r.prompt_version, a.value, q.key"
                          " FROM annotations a JOIN raters r ON r.id = a.rater_id"
                          " JOIN questions q ON q.id = a.question_id WHERE r.kind = 'machine'")
    assert tuple(row) == ("openai:gpt-x@v3", "machine", "openai", "gpt-x", "v3",
                          "1A_ESCALATION_NONURGENT_CARE", "carebench.response_action")


def test_direct_label_csv_names_its_rater_from_the_file(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    path = tmp_path / "model-z_submission.csv"
    path.write_text("prefix_id,predicted_label\nz_case_0001_r01,0B\nz_case_0001_r02,1B_ESCALATION_URGENT_CARE\n")
    result = import_file(store, path)
    assert result.format == "label-csv" and result.annotations == 2
    assert store.scalar("SELECT COUNT(*) FROM raters WHERE name = 'model-z_submission' AND kind = 'machine'") == 1


def test_long_labels_csv_from_a_spreadsheet(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    path = tmp_path / "labels.csv"
    path.write_text("item_id,rater,value,rationale,confidence\n"
                    "z_case_0001_r01,Dr. Sheet,0A,needs more history,4\n"
                    "z_case_0001_r02,Dr. Sheet,1B,,\n")
    result = import_file(store, path)
    assert result.format == "labels-long" and result.annotations == 2
    row = store.query_one("SELECT r.kind, a.rationale, a.confidence FROM annotations a"
                          " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'Dr. Sheet' ORDER BY a.id")
    assert tuple(row) == ("human", "needs more history", 4)


@pytest.mark.parametrize("name, content, message", [
    ("trunc.jsonl", json.dumps(PREFIXES[0]) + "\n" + json.dumps(PREFIXES[1])[:60] + "\n",
     ":2: not valid JSON"),
    ("missing.jsonl", json.dumps(PREFIXES[0]) + "\n" + json.dumps({"prefix_id": "q_r01", "gold_label": "0A"}) + "\n",
     ":2: missing required field 'input_patient_turns'"),
    ("badlabel.jsonl", json.dumps(PREFIXES[0]) + "\n" + json.dumps(dict(PREFIXES[1], gold_label="2C_SOMETHING")) + "\n",
     ":2: unknown label '2C_SOMETHING'; allowed: 0A_NO_ESCALATION_INFO_NEEDED"),
    ("badround.jsonl", json.dumps(dict(PREFIXES[0], round_id="first")) + "\n",
     ":1: field 'round_id' must be a whole number"),
    ("turns.jsonl", json.dumps(dict(PREFIXES[0], input_patient_turns=[1, 2])) + "\n",
     ":1: field 'input_patient_turns' must be a list of strings"),
])
def test_bad_prefix_file_names_file_and_line_and_changes_nothing(store, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path, "carebench-prefixes")
    assert str(path) + message in str(err.value)
    assert table_counts(store) == before


def test_bad_long_labels_row_rolls_back_the_whole_file(store, prefixes_file, tmp_path):
    import_file(store, prefixes_file)
    before = table_counts(store)
    path = tmp_path / "labels.csv"
    path.write_text("item_id,rater,value\nz_case_0001_r01,Dr. A,0A\nz_case_0001_r02,Dr. A,maybe\n")
    with pytest.raises(InputError, match=r"labels.csv:3: unknown label 'maybe'"):
        import_file(store, path)
    assert table_counts(store) == before
    path.write_text("item_id,rater,value\nz_case_9999_r01,Dr. A,0A\n")
    with pytest.raises(InputError, match=r"labels.csv:2: unknown item 'z_case_9999_r01'"):
        import_file(store, path)
    assert table_counts(store) == before


def test_format_detection_and_unknown_files(tmp_path):
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": 1}\n')
    with pytest.raises(InputError, match="cannot tell the format"):
        detect_format(odd)
    with pytest.raises(InputError, match="no such file"):
        from review.workspace import open_store
        import_file(open_store(tmp_path / "x.db"), tmp_path / "nope.jsonl")


def test_killed_import_leaves_nothing(tmp_path):
    """An import killed mid-way (SIGKILL) leaves the database as it was."""
    import signal
    import subprocess
    import sys
    import time

    from review.workspace import open_store

    db = tmp_path / "k.db"
    big = tmp_path / "big.jsonl"
    with big.open("w") as fh:
        for i in range(60000):
            fh.write(json.dumps(dict(PREFIXES[0], prefix_id=f"k_case_{i:06d}_r01")) + "\n")
    s = open_store(db)
    before = table_counts(s)
    s.close()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "--db", str(db), "import", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wal = tmp_path / "k.db-wal"
    deadline = time.monotonic() + 60
    # Kill it once it is writing inside its transaction, well before the end.
    while time.monotonic() < deadline and (not wal.exists() or wal.stat().st_size < 2_000_000):
        assert proc.poll() is None, "the import finished before it could be killed"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = open_store(db)
    assert table_counts(s) == before
    assert s.scalar("PRAGMA integrity_check") == "ok"
