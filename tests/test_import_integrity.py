"""Imports keep every file's content whatever order the files come in, and a
row the database cannot hold is one `file:line: what is wrong` with the
database left as it was. Every row here is invented, except the real
HealthBench sample, read in place."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from review.datasets.sources import InputError, import_file
from review.datasets.sources.healthbench import criterion_key
from review.reviewing.trajectory import criterion_view
from tests.helpers import table_counts, write_jsonl
from tests.test_sources_healthbench import real_sample
from tests.test_sources_trajectories import make_trial

PREFIX = {"prefix_id": "inv_v1_case_0001_r01", "case_id": "inv_v1_case_0001", "round_id": 1,
          "split": "development", "gold_label": "0A_NO_ESCALATION_INFO_NEEDED",
          "input_patient_turns": ["An invented headache since this morning."]}
GENERATION = {"prefix_id": "inv_v1_case_0001_r01", "case_id": "inv_v1_case_0001", "round_id": 1,
              "split": "development", "protocol": "unprompted", "prompt_version": "v1",
              "patient_information_available_so_far": "An invented headache since this morning.",
              "input_messages": [{"role": "user", "content": "An invented headache."}],
              "model_requested": "model-a", "model_actual": "model-a-2026", "provider": "invented",
              "raw_model_response": "Rest, drink water, and see a doctor if it gets worse.",
              "generation_failed": False, "error_message": None}
MAPPED = {"prefix_id": "inv_v1_case_0001_r01", "model_requested": "model-a",
          "mapped_label": "0B_NO_ESCALATION_SELF_CARE_MONITOR", "mapper_model": "invented:mapper@v1"}


def refused(store, path: Path, line: int, fmt: str | None = None) -> str:
    """The one InputError importing `path` gives: it names the file and the line,
    and the database is exactly as it was."""
    before = table_counts(store)
    with pytest.raises(InputError) as caught:
        import_file(store, path, fmt)
    assert table_counts(store) == before
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    return message


# -- order of files -------------------------------------------------------------------

def test_a_mapped_file_before_its_generations_is_refused_naming_the_response(store, tmp_path):
    mapped = write_jsonl(tmp_path / "mapped.jsonl", [MAPPED])
    message = refused(store, mapped, 1)
    assert "no run of model_requested 'model-a' has been imported" in message
    assert "import its generations first" in message
    generations = import_file(store, write_jsonl(tmp_path / "gens.jsonl", [GENERATION]))
    result = import_file(store, mapped)
    assert (generations.items, result.items, result.annotations) == (2, 0, 1)
    # The mapper's label is on the response it was given for.
    assert store.scalar("SELECT a.value FROM annotations a JOIN items i ON i.id = a.item_id"
                        " WHERE i.uid = 'inv_v1_case_0001_r01::model-a::unprompted@v1'")\
        == MAPPED["mapped_label"]


def test_generations_before_the_mapped_file_are_kept_as_they_are(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "gens.jsonl", [GENERATION]))
    # A mapped file that carries the reply too is a mapped file (its labels count).
    mapped = import_file(store, write_jsonl(tmp_path / "mapped.jsonl", [
        {**MAPPED, "raw_model_response": "a mapper's copy of the reply"}]))
    assert (mapped.format, mapped.annotations) == ("carebench-mapped", 1)
    payload = store.scalar("SELECT payload FROM items"
                           " WHERE uid = 'inv_v1_case_0001_r01::model-a::unprompted@v1'")
    assert json.loads(payload)["response"] == GENERATION["raw_model_response"]


def test_a_criterion_named_first_by_a_meta_row_takes_its_points_from_the_rubric(store, tmp_path):
    rows = [json.loads(line) for line in real_sample().open(encoding="utf-8")]
    row, crit = next((r, c) for r in rows for c in r["rubrics"] if c["points"] < 0)
    meta_row = {"prompt": row["prompt"], "completion": "An invented answer.", "rubric": crit["criterion"],
                "binary_labels": [True, False], "anonymized_physician_ids": ["p1", "p2"],
                "category": "invented", "prompt_id": row["prompt_id"], "completion_id": "c1"}
    import_file(store, write_jsonl(tmp_path / "meta.jsonl", [meta_row]), "healthbench-meta")
    key = criterion_key(row["prompt_id"], crit["criterion"])
    assert store.scalar("SELECT points FROM questions WHERE key = ?", (key,)) is None
    import_file(store, real_sample(), "healthbench")
    question = store.query_one("SELECT key, text, points, meta FROM questions WHERE key = ?", (key,))
    view = criterion_view(question)
    assert view.points == crit["points"] < 0 and view.must_not
    meta = json.loads(question["meta"])
    assert "stub" not in meta and meta["category"] == "invented"
    assert meta["tags"] == crit["tags"]
    # The physicians' answers are on that one question, none lost.
    assert store.scalar("SELECT COUNT(*) FROM annotations a JOIN questions q ON q.id = a.question_id"
                        " WHERE q.key = ?", (key,)) == 2


def test_a_rubric_criterion_is_not_overwritten_by_a_later_meta_row(store, tmp_path):
    import_file(store, real_sample(), "healthbench")
    row = json.loads(real_sample().open(encoding="utf-8").readline())
    crit = row["rubrics"][0]
    key = criterion_key(row["prompt_id"], crit["criterion"])
    before = store.query_one("SELECT points, meta FROM questions WHERE key = ?", (key,))
    import_file(store, write_jsonl(tmp_path / "meta.jsonl", [{
        "prompt": row["prompt"], "completion": "An invented answer.", "rubric": crit["criterion"],
        "binary_labels": [True], "anonymized_physician_ids": ["p1"], "category": "c",
        "prompt_id": row["prompt_id"], "completion_id": "c1"}]), "healthbench-meta")
    assert tuple(store.query_one("SELECT points, meta FROM questions WHERE key = ?", (key,))) \
        == tuple(before)


# -- not measured is not a fail ---------------------------------------------------------

def test_a_nan_reward_is_not_measured_not_a_fail(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "t1", rewards={"reward": float("nan")})  # json.dumps writes NaN
    make_trial(job, "t2", rewards={"reward": 1.0})
    import_file(store, job, "harbor")
    verdicts = [tuple(r) for r in store.query(
        "SELECT i.uid, a.value FROM annotations a JOIN items i ON i.id = a.item_id"
        " JOIN raters r ON r.id = a.rater_id WHERE r.name = 'harbor-verifier' ORDER BY i.uid")]
    assert len(verdicts) == 1 and verdicts[0][1] == "met"


def test_an_infinite_reward_is_refused(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "t1", rewards={"reward": float("inf")})
    before = table_counts(store)
    with pytest.raises(InputError, match="reward.json: reward: expected a finite number"):
        import_file(store, job, "harbor")
    assert table_counts(store) == before


def test_a_nan_outcome_or_gate_score_is_not_measured(store, tmp_path):
    from tests.test_sources_trajectories import kb_row

    gates = {"diagnosis": {"score": float("nan")}, "safety_net": {"passed": True}}
    path = tmp_path / "kb.jsonl"
    path.write_text(json.dumps(kb_row(outcome_pass=float("nan"), reward=float("nan"),
                                      diagnosis=float("nan"), gates=json.dumps(gates))) + "\n")
    import_file(store, path, "klinikebench")
    answered = {r[0].rsplit(":", 1)[-1] if ":gate:" not in r[0] else r[0].split(":gate:")[1]: r[1]
                for r in store.query("SELECT q.key, a.value FROM annotations a"
                                     " JOIN questions q ON q.id = a.question_id")}
    assert "outcome" not in answered and "diagnosis" not in answered
    assert answered["safety_net"] == "met"


# -- rows the database cannot hold -----------------------------------------------------

@pytest.mark.parametrize(("field", "value", "says"), [
    ("round_id", 10 ** 30, "beyond a 64-bit integer"),
    ("round_id", math.inf, "must be a whole number"),
    ("round_id", 1.5, "must be a whole number"),
    ("round_id", True, "must be a whole number"),
    ("split", {"name": "dev"}, "field 'split': expected text or a number, got dict"),
    ("split", ["dev"], "field 'split': expected text or a number, got list"),
    ("case_id", {"id": 1}, "field 'case_id' must be text, got dict"),
])
def test_a_prefix_field_of_the_wrong_type_names_its_line(store, tmp_path, field, value, says):
    path = write_jsonl(tmp_path / "p.jsonl", [PREFIX, {**PREFIX, "prefix_id": "inv_v1_case_0001_r02",
                                                       field: value}])
    assert says in refused(store, path, 2)


def test_a_generation_round_beyond_64_bits_names_its_line(store, tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [GENERATION, {**GENERATION, "model_requested": "model-b",
                                                           "round_id": 2 ** 64}])
    assert "beyond a 64-bit integer" in refused(store, path, 2)


def test_a_whole_float_round_is_a_round(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "p.jsonl", [{**PREFIX, "round_id": 2.0}]))
    assert store.scalar("SELECT round_id FROM items") == 2


def test_half_a_character_is_mended_not_refused(store, tmp_path):
    """Python's json writes a reply cut inside an emoji as a lone escaped
    surrogate: it cannot be stored as UTF-8, so it becomes U+FFFD; a pair
    written as two escapes is the character."""
    path = tmp_path / "g.jsonl"
    path.write_text(
        json.dumps({**GENERATION, "raw_model_response": "Go now \ud83d"}) + "\n"
        + json.dumps({**GENERATION, "model_requested": "model-b",
                      "raw_model_response": "Fine \ud83d\ude00"}) + "\n", encoding="utf-8")
    assert "\\ud83d" in path.read_text()
    import_file(store, path)
    replies = [json.loads(p)["response"] for (p,) in store.query(
        "SELECT payload FROM items WHERE kind = 'response' ORDER BY uid")]
    assert replies == ["Go now \ufffd", "Fine \U0001F600"]


def test_a_mapped_file_error_names_the_file(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "gens.jsonl", [GENERATION]))
    path = write_jsonl(tmp_path / "mapped.jsonl",
                       [MAPPED, {k: v for k, v in MAPPED.items() if k != "prefix_id"}])
    assert "missing required field 'prefix_id'" in refused(store, path, 2)


def test_an_item_given_twice_with_other_content_is_refused_naming_both_lines(store, tmp_path):
    rows = [PREFIX, {**PREFIX, "prefix_id": "inv_v1_case_0002_r01"},
            {**PREFIX, "input_patient_turns": ["Invented crushing chest pain."]}]
    message = refused(store, write_jsonl(tmp_path / "p.jsonl", rows), 3)
    assert "'inv_v1_case_0001_r01' again, with other content than line 1" in message


def test_an_item_given_twice_after_its_batch_was_written_is_still_compared(store, tmp_path):
    rows = [{**GENERATION, "model_requested": f"model-{i:04d}"} for i in range(1100)]
    rows.append({**GENERATION, "model_requested": "model-0000", "raw_model_response": "Call 999."})
    message = refused(store, write_jsonl(tmp_path / "g.jsonl", rows), 1101)
    assert "again, with other content than line 1" in message


def test_an_item_given_twice_with_the_same_content_is_one_item(store, tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [GENERATION, dict(GENERATION)])
    result = import_file(store, path)
    assert result.items == 2  # the prefix it names and the response, once
    assert store.scalar("SELECT COUNT(*) FROM items WHERE kind = 'response'") == 1


def test_a_file_repeating_an_item_an_earlier_import_holds_is_not_compared_with_it(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "first.jsonl", [GENERATION]))
    changed = {**GENERATION, "raw_model_response": "A rerun's other reply."}
    import_file(store, write_jsonl(tmp_path / "second.jsonl", [changed, dict(changed)]))
    payload = store.scalar("SELECT payload FROM items WHERE kind = 'response'")
    assert json.loads(payload)["response"] == GENERATION["raw_model_response"]


def test_a_csv_cut_off_inside_a_quoted_field_is_refused(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "p.jsonl", [PREFIX]))
    path = tmp_path / "labels.csv"
    path.write_text("item_id,rater,value,rationale\n"
                    "inv_v1_case_0001_r01,Dr A,0A_NO_ESCALATION_INFO_NEEDED,plain\n"
                    'inv_v1_case_0001_r01,Dr B,0A_NO_ESCALATION_INFO_NEEDED,"Asks about onset and\n',
                    encoding="utf-8")
    assert "a quoted field is never closed" in refused(store, path, 3)


# -- drift that keeps its meaning -------------------------------------------------------

def test_harbor_json_files_with_a_byte_order_mark_are_read(store, tmp_path):
    trial = make_trial(tmp_path / "job", "t1", rewards={"reward": 1.0})
    for name in ("agent/trajectory.json", "verifier/reward.json", "result.json"):
        (trial / name).write_bytes(b"\xef\xbb\xbf" + (trial / name).read_bytes())
    result = import_file(store, tmp_path / "job", "harbor")
    assert result.items == 1 and result.annotations >= 1


def test_a_tsv_labels_file_is_recognised(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "p.jsonl", [PREFIX]))
    path = tmp_path / "labels.tsv"
    path.write_text("item_id\trater\tvalue\ninv_v1_case_0001_r01\tDr A\t1B_ESCALATION_URGENT_CARE\n")
    assert import_file(store, path).format == "labels-long"


def test_a_deeply_nested_first_row_is_an_input_error(store, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"prefix_id":"a_r01","input_patient_turns":["x"],"m":' + "[" * 100_000
                    + "]" * 100_000 + "}\n")
    before = table_counts(store)
    with pytest.raises(InputError, match=str(path)):
        import_file(store, path)
    assert table_counts(store) == before


def test_prefix_turns_in_a_csv_cell_as_a_json_list_stay_turns(store, tmp_path):
    path = tmp_path / "prefixes.csv"
    path.write_text("prefix_id,input_patient_turns,gold_label\n"
                    'inv_v1_case_0001_r02,"[""An invented headache."", ""Now I see double.""]",'
                    "1B_ESCALATION_URGENT_CARE\n"
                    "inv_v1_case_0002_r01,[Redacted] an invented rash.,0A_NO_ESCALATION_INFO_NEEDED\n",
                    encoding="utf-8")
    import_file(store, path)
    turns = [json.loads(p)["turns"] for (p,) in store.query("SELECT payload FROM items ORDER BY uid")]
    assert turns == [["An invented headache.", "Now I see double."], ["[Redacted] an invented rash."]]


def test_a_prefix_given_twice_with_two_gold_labels_is_refused(store, tmp_path):
    rows = [PREFIX, {**PREFIX, "gold_label": "1B_ESCALATION_URGENT_CARE"}]
    message = refused(store, write_jsonl(tmp_path / "p.jsonl", rows), 2)
    assert "line 1 gave it '0A_NO_ESCALATION_INFO_NEEDED'" in message


def test_a_csv_that_is_not_utf8_names_its_first_bad_line(store, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_bytes("item_id,rater,value\nx,Dr A,0A\nx,Dr Müller,0A\n".encode("latin-1"))
    assert "not UTF-8 text" in refused(store, path, 3)


def test_a_bad_field_on_a_generation_names_its_line(store, tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [GENERATION, {**GENERATION, "prefix_id": "inv_v1_case_0002_r01",
                                                           "split": ["dev"]}])
    assert "field 'split'" in refused(store, path, 2)


def test_a_cut_off_json_line_is_placed_on_that_line(store, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(PREFIX) + "\n" + json.dumps(PREFIX)[:40] + "\n")
    message = refused(store, path, 2)
    assert "(column 1)" not in message and "not valid JSON" in message


def test_the_rubric_codebook_names_the_keys_the_screens_bind():
    from codebook import builtin_codebooks

    book = builtin_codebooks()["rubric"]
    assert {lab.code: lab.shortcut for lab in book.labels} == {"met": "y", "not_met": "n"}
