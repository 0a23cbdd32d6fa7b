"""The import pipeline's fast paths hold to the slow ones: the JSONL reader,
field names under drift, batched writes, the digest check and the search index
built after the commit."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime

import pytest

from review.browse.search import ensure_index, search, unindexed_count
from review.datasets.sources import InputError, import_file
from review.datasets.sources.fields import ALIASES, Fields, pick
from review.datasets.sources.readers import read_jsonl
from store import to_json
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests.helpers import CODES, table_counts, write_jsonl


def generation(prefix_id: str, model: str, text: str = "Invented reply.", **extra) -> dict:
    row = {"prefix_id": prefix_id, "split": "validation", "round_id": 1,
           "patient_information_available_so_far": "Invented: a sore knee.",
           "model_requested": model, "raw_model_response": text, "generation_failed": False,
           "error_message": None}
    row.update(extra)
    return row


def prefix(prefix_id: str, turn: str = "Invented: a sore knee.", gold: str = CODES[0]) -> dict:
    return {"prefix_id": prefix_id, "round_id": 1, "split": "validation", "gold_label": gold,
            "input_patient_turns": [turn]}


# -- the JSONL reader -----------------------------------------------------------

def test_reader_takes_what_python_writes_and_skips_blank_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode() + b"\n\n   \n"
                     + b'{"b": NaN, "c": 123456789012345678901234567890}\n'
                     + '{"d": "caf\u00e9 \u2014 ok"}\n'.encode())
    rows = list(read_jsonl(path))
    assert [line for line, _ in rows] == [1, 4, 5]
    assert rows[0][1] == {"a": 1}
    assert math.isnan(rows[1][1]["b"]) and rows[1][1]["c"] == 123456789012345678901234567890
    assert rows[2][1] == {"d": "caf\u00e9 \u2014 ok"}


@pytest.mark.parametrize("content, message", [
    (b'{"a": 1}\n{"a": \n', ":2: not valid JSON"),
    (b'{"a": 1}\n[1, 2]\n', ":2: expected a JSON object, got list"),
    (b'{"a": 1}\n{"a": "\xff\xfe"}\n', ":2: not UTF-8 text"),
])
def test_reader_names_the_line_and_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        list(read_jsonl(path))
    assert str(err.value).startswith(f"{path}{message}")


def test_to_json_is_compact_and_valid_for_what_the_standard_encoder_takes():
    assert to_json({"a": [1, None, "é"], 3: True}) == '{"a":[1,null,"é"],"3":true}'
    assert to_json(2 ** 70) == str(2 ** 70)  # beyond orjson: the standard encoder
    assert to_json({"n": math.nan}) == '{"n":null}'  # the database's json_valid() refuses NaN
    assert json.loads(to_json({"at": datetime(2026, 11, 30, tzinfo=UTC)}))["at"].startswith("2026-11-30")


# -- field names under drift ----------------------------------------------------

def test_fields_picks_exactly_as_pick_does_on_every_row_shape():
    rng = random.Random(5)
    fields = ("prefix_id", "model", "generation_failed", "raw_model_response", "case_id",
              "round_id", "split", "error_message")
    names = sorted({n for f in fields for n in ALIASES.get(f, (f,))})
    values = [None, "", "x", "y", 0, 3, False, True]
    picker = Fields(*fields)
    for _ in range(3000):
        row = {n: rng.choice(values) for n in rng.sample(names, rng.randint(0, len(names)))}
        if rng.random() < 0.5:  # a few shapes seen over and over, as in a real file
            row = dict(sorted(row.items())[:4])
        assert list(picker(row)) == [pick(row, f) for f in fields], row


def test_fields_on_one_shape_row_after_row_falls_back_as_pick_does():
    """The fast path (every field present, one getter) must step aside for a
    row whose first name is empty or null and a later name is filled in."""
    rng = random.Random(7)
    fields = ("prefix_id", "model", "round_id", "error_message")
    picker = Fields(*fields)
    for _ in range(2000):
        row = {"prefix_id": rng.choice(["p1", "", None]), "model_requested": rng.choice(["m", "", None]),
               "model_actual": rng.choice(["m-2026", "", None]), "round_id": rng.choice([1, 0, None, ""]),
               "error_message": rng.choice([None, "timeout", ""])}
        assert list(picker(row)) == [pick(row, f) for f in fields], row
    # Same keys in another order, then a row missing a name: a plan of its own.
    assert list(picker({"model_actual": "a", "prefix_id": "p", "model_requested": "",
                        "error_message": None, "round_id": 2})) == ["p", "a", 2, None]
    assert list(picker({"prefix_id": "p", "model_actual": "a"})) == ["p", "a", None, None]


# -- generations: bad rows anywhere in a large file -----------------------------

@pytest.mark.parametrize("bad, message", [
    ({"model_requested": None}, "missing required field 'model'"),
    ({"raw_model_response": 42}, "field 'raw_model_response' must be text"),
    ({"raw_model_response": None}, "missing 'raw_model_response' on a row not marked generation_failed"),
    ({"generation_failed": "perhaps"}, "field 'generation_failed' must be true or false"),
    ({"round_id": "two"}, "field 'round_id' must be a whole number"),
])
def test_a_bad_generation_after_thousands_of_good_ones_changes_nothing(store, tmp_path, bad, message):
    rows = [generation(f"g_case_{i // 20:04d}_r01", f"m{i % 20:02d}") for i in range(2500)]
    rows[2345].update(bad)
    path = write_jsonl(tmp_path / "raw_generations.jsonl", rows)
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path, "carebench-generations")
    assert str(err.value).startswith(f"{path}:2346: {message}")
    assert table_counts(store) == before


def test_generations_in_batches_keep_file_order_parents_and_stubs(store, tmp_path):
    rows = [generation(f"g_case_{i // 3:04d}_r01", f"m{i % 3}") for i in range(3000)]
    rows[10]["case_id"] = "explicit"
    result = import_file(store, write_jsonl(tmp_path / "raw.jsonl", rows))
    assert (result.rows, result.items) == (3000, 4000)  # 1,000 stub prefixes made on the way
    got = store.query("SELECT i.uid, i.kind, p.uid AS parent, i.case_id FROM items i"
                      " LEFT JOIN items p ON p.id = i.parent_id ORDER BY i.id")
    responses = [tuple(r) for r in got if r["kind"] == "response"]
    stubs = [tuple(r) for r in got if r["kind"] == "prefix"]
    assert responses == [(f"{row['prefix_id']}::m{i % 3}", "response", row["prefix_id"],
                          "explicit" if i == 10 else row["prefix_id"][:11]) for i, row in enumerate(rows)]
    assert stubs == [(row["prefix_id"], "prefix", None, row["prefix_id"][:11]) for row in rows[::3]]


# -- batched writes: stub replacements and answers waiting for their items --------

def test_prefixes_replace_stubs_in_a_batch_and_leave_full_items_alone(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "raw.jsonl",
                                   [generation(f"s_case_{i:04d}_r01", "m") for i in range(1500)]))
    import_file(store, write_jsonl(tmp_path / "p1.jsonl", [prefix("s_case_0000_r01", "First text.")]))
    result = import_file(store, write_jsonl(tmp_path / "p2.jsonl", [
        prefix(f"s_case_{i:04d}_r01", f"Invented turn {i}.") for i in range(1500)] + [
        prefix("s_case_9999_r01", "A new one.")]))
    assert result.items == 1  # the stubs were replaced, not added
    rows = store.query("SELECT uid, payload, meta FROM items WHERE kind = 'prefix' ORDER BY id")
    assert len(rows) == 1501
    turns = {r["uid"]: json.loads(r["payload"])["turns"] for r in rows}
    assert turns["s_case_0000_r01"] == ["First text."]  # a full item is never overwritten
    assert turns["s_case_0777_r01"] == ["Invented turn 777."]
    assert not any(json.loads(r["meta"]).get("stub") for r in rows)
    assert store.scalar("SELECT COUNT(*) FROM current_annotations") == 1501


def test_answers_waiting_for_their_items_keep_order_and_revisions(store):
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord("dr-a", "human"))
        w.item(ItemRecord("w1", "prefix", "test", {"turns": ["Invented."]}))
        w.annotation(AnnotationRecord("w1", "carebench.escalation_needed", "dr-a", CODES[0]))
        w.annotation(AnnotationRecord("w1", "carebench.escalation_needed", "dr-a", CODES[0]))  # same: skipped
        w.annotation(AnnotationRecord("w1", "carebench.escalation_needed", "dr-a", CODES[2],
                                      rationale="on second thoughts"))
        w.flush()
        assert (w.n_items, w.n_annotations, w.n_skipped) == (1, 2, 1)
    rows = store.query("SELECT id, value, supersedes_id, rationale FROM annotations ORDER BY id")
    assert [r["value"] for r in rows] == [CODES[0], CODES[2]]
    assert rows[1]["supersedes_id"] == rows[0]["id"]
    current = store.query("SELECT value FROM current_annotations")
    assert [r["value"] for r in current] == [CODES[2]]
    assert search(store, "thoughts").total == 1  # the rationale is searchable at once


# -- re-imports: the digest, computed while the rows are read ---------------------

@pytest.mark.parametrize("n", [3, 1200])
def test_the_same_file_again_is_recognised_whatever_its_size(store, tmp_path, n):
    path = write_jsonl(tmp_path / "raw.jsonl", [generation(f"r_case_{i:04d}_r01", "m") for i in range(n)])
    assert import_file(store, path).items == 2 * n
    before = table_counts(store)
    again = import_file(store, path)
    assert again.already_imported and table_counts(store) == before
    digest = store.scalar("SELECT sha256 FROM imports")
    assert len(digest) == 64 and not digest.startswith("pending")
    path.write_text(path.read_text() + json.dumps(generation("r_case_9999_r01", "m")) + "\n")
    assert import_file(store, path).items == 2


# -- the search index, built after the commit -----------------------------------

def test_an_import_commits_first_and_indexes_after(store, tmp_path):
    path = write_jsonl(tmp_path / "raw.jsonl",
                       [generation(f"x_case_{i:04d}_r01", "m", text=f"Invented reply about gout {i}.")
                        for i in range(700)])
    result = import_file(store, path, index=False)
    assert result.items == 1400 and result.indexed == 0
    assert unindexed_count(store) == 1400 and search(store, "gout").total == 0
    assert ensure_index(store) == 1400
    assert search(store, "gout").total == 700
    other = write_jsonl(tmp_path / "more.jsonl", [generation("y_case_0001_r01", "m", text="Invented: podagra.")])
    result = import_file(store, other)
    assert result.indexed == 2 and unindexed_count(store) == 0
    assert search(store, "podagra").total == 1
    assert "search index 2 items" in result.summary()


def test_a_replaced_stub_loses_its_old_text_before_the_catch_up(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "raw.jsonl", [
        generation("t_case_0001_r01", "m", patient_information_available_so_far="Invented: placeholder.")]))
    assert search(store, "placeholder").total == 2  # the stub, and its response through it
    import_file(store, write_jsonl(tmp_path / "p.jsonl", [prefix("t_case_0001_r01", "Invented: tophus.")]),
                index=False)
    assert search(store, "placeholder").total == 0  # never a hit on text the item no longer has
    ensure_index(store)
    assert {h.uid for h in search(store, "tophus").hits} == {"t_case_0001_r01", "t_case_0001_r01::m"}
    assert unindexed_count(store) == 0


def test_killed_during_the_index_catch_up_the_rows_stay_and_search_catches_up(tmp_path):
    """SIGKILL while the search index is being built after the commit: every
    imported row is kept, and the next catch-up indexes the rest."""
    import signal
    import subprocess
    import sys
    import time

    from review.workspace import open_store

    db = tmp_path / "k.db"
    rows = [generation(f"k_case_{i // 10:05d}_r01", f"m{i % 10}", text=f"Invented reply {i} about sciatica.")
            for i in range(30000)]
    path = write_jsonl(tmp_path / "raw_generations.jsonl", rows)
    open_store(db).close()
    proc = subprocess.Popen([sys.executable, "-m", "cli", "--db", str(db), "import", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watcher = open_store(db)
    deadline = time.monotonic() + 120
    while True:  # wait for the commit, then for the first indexed batches
        assert proc.poll() is None, "the import and its index finished before the kill"
        assert time.monotonic() < deadline
        if watcher.scalar("SELECT COUNT(*) FROM search_docs WHERE source = 'item'") >= 1000:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert watcher.scalar("SELECT COUNT(*) FROM items WHERE kind = 'response'") == 30000
    assert 0 < unindexed_count(watcher) < 33000
    assert watcher.scalar("PRAGMA integrity_check") == "ok"
    assert ensure_index(watcher) > 0 and unindexed_count(watcher) == 0
    assert search(watcher, "sciatica").total > 0
    watcher.close()


def test_an_import_reports_how_far_it_is(store, tmp_path):
    path = write_jsonl(tmp_path / "raw.jsonl", [generation(f"p_case_{i:05d}_r01", "m") for i in range(5000)])
    heard: list[tuple] = []
    result = import_file(store, path, progress=lambda *a: heard.append(a))
    rows = [a for a in heard if a[0] == "rows"]
    index = [a for a in heard if a[0] == "index"]
    assert rows == [("rows", 2048, None), ("rows", 4096, None)]
    assert index[-1] == ("index", 10000, 10000) and result.indexed == 10000
    assert [a[1] for a in index] == sorted(a[1] for a in index)


# -- what a review of the fast paths found ---------------------------------------

def test_integers_beyond_64_bits_stay_exact(store, tmp_path):
    """orjson reads them as floats: two ids would become one and a row vanish."""
    rows = [generation(12345678901234567890123, "m"), generation(12345678901234567890124, "m"),
            generation("big_case_0001_r01", "m", error_message={"request_id": int("1" + "0" * 400)},
                       raw_model_response=None, generation_failed=True)]
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [r["prefix_id"] for _, r in read_jsonl(path)][:2] == [12345678901234567890123,
                                                                 12345678901234567890124]
    result = import_file(store, path)
    assert (result.rows, result.items, result.indexed) == (3, 6, 6)
    uids = {r[0] for r in store.query("SELECT uid FROM items WHERE kind = 'response'")}
    assert {"12345678901234567890123::m", "12345678901234567890124::m"} <= uids
    error = json.loads(store.scalar("SELECT payload FROM items WHERE uid = 'big_case_0001_r01::m'"))["error"]
    assert error == '{"request_id":1' + "0" * 400 + "}"  # an error object is kept, as text
    assert search(store, "request_id").total == 1


def test_ids_follow_the_file_when_answers_wait_on_batched_items(store, tmp_path):
    rows = [{"prompt_id": f"P{i}", "completion_id": "c", "completion": f"Invented reply {i}.",
             "rubric": "Asks about fever.", "prompt": [{"role": "user", "content": f"Invented question {i}"}],
             "binary_labels": [True], "anonymized_physician_ids": ["doc1"]} for i in range(3)]
    import_file(store, write_jsonl(tmp_path / "meta.jsonl", rows), "healthbench-meta")
    assert [r[0] for r in store.query("SELECT uid FROM items ORDER BY id")] == [
        "hb:P0", "hb:P0::c", "hb:P1", "hb:P1::c", "hb:P2", "hb:P2::c"]


def test_reader_takes_unicode_blank_lines_bare_carriage_returns_and_a_bom_without_a_suffix(tmp_path):
    from review.datasets.sources.readers import file_kind, header_fields

    nbsp = tmp_path / "nbsp.jsonl"
    nbsp.write_bytes('{"a": 1}\n\u00a0\n{"a": 2}\n'.encode())
    assert list(read_jsonl(nbsp)) == [(1, {"a": 1}), (3, {"a": 2})]
    cr = tmp_path / "cr.jsonl"
    cr.write_bytes(b'{"a": 1}\r{"a": 2}\r')
    assert list(read_jsonl(cr)) == [(1, {"a": 1}), (2, {"a": 2})]
    bom = tmp_path / "export"
    bom.write_bytes(b'\xef\xbb\xbf{"prefix_id": "x_r01", "input_patient_turns": ["Invented."]}\n')
    assert file_kind(bom) == "jsonl" and header_fields(bom) == {"prefix_id", "input_patient_turns"}


def test_a_progress_listener_that_raises_cannot_throw_the_import_away(store, tmp_path):
    """Streamlit raises from a status update when the user clicks during a long
    import: the rows are committed and indexed first, then that is raised."""
    class Rerun(Exception):
        pass

    def listener(phase, done, total):
        raise Rerun

    path = write_jsonl(tmp_path / "raw.jsonl", [generation(f"l_case_{i:05d}_r01", "m") for i in range(5000)])
    with pytest.raises(Rerun):
        import_file(store, path, progress=listener)
    assert store.scalar("SELECT COUNT(*) FROM items WHERE kind = 'response'") == 5000
    assert unindexed_count(store) == 0 and store.scalar("SELECT COUNT(*) FROM imports") == 1


def test_a_file_that_is_not_utf8_gets_a_message_not_a_trace(store, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_bytes("item_id,rater,value\nx,Dr. \xe9,0A\n".encode("latin-1"))
    before = table_counts(store)
    with pytest.raises(InputError, match="not UTF-8 text"):
        import_file(store, path)
    assert table_counts(store) == before
