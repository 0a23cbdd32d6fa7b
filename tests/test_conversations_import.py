"""Plain conversations from anywhere: detected without a format, read as written
(roles, model, metadata, machine labels), other shapes through a field mapping,
and a bad row refused in one line naming file, line and field, with nothing kept.
Detection takes no file of the published formats (the conformance corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli import main
from review.datasets.sources import ImportOptions, InputError, detect_format, import_file
from review.team.codebook_versions import add_codebook
from tests.conftest import ROOT
from tests.helpers import table_counts

STUDY = Path(__file__).parent / "data" / "study"
CONFORMANCE = ROOT.parent / "shared" / "data" / "conformance"


def chat(uid, **extra):
    return {"id": uid, "messages": [{"role": "user", "content": "My throat is sore."},
                                    {"role": "assistant", "content": "Warm drinks help."}],
            **extra}


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def study(store):
    add_codebook(store, (STUDY / "harm-5.toml").read_text(encoding="utf-8"), "harm-5.toml")
    return store


def test_a_chat_file_is_detected_and_kept_as_written(study, tmp_path):
    path = write_jsonl(tmp_path / "chats.jsonl", [
        chat("c-1", model="acme-2", site="clinic A", split="pilot", case_id="p-7",
             metadata={"language": "en"}),
        {"id": 2, "messages": [{"role": "system", "content": "Be kind."},
                               {"role": "human", "content": "Hi", "ts": 3}]},
    ])
    assert detect_format(path).name == "conversations"
    result = import_file(study, path)
    assert (result.format, result.items) == ("conversations", 2)
    rows = {r["uid"]: r for r in study.query("SELECT uid, kind, model, split, case_id, payload,"
                                             " meta FROM items")}
    first = rows["c-1"]
    assert (first["kind"], first["model"], first["split"], first["case_id"]) == (
        "conversation", "acme-2", "pilot", "p-7")
    assert json.loads(first["meta"]) == {"metadata": {"site": "clinic A",
                                                      "metadata": {"language": "en"}}}
    second = json.loads(rows["2"]["payload"])["messages"]
    assert second == [{"role": "system", "content": "Be kind."},
                      {"role": "human", "content": "Hi", "fields": {"ts": 3}}]
    assert import_file(study, path).already_imported


def test_machine_labels_are_answers_by_the_rater_they_name(study, tmp_path):
    path = write_jsonl(tmp_path / "judged.jsonl", [
        chat("c-1", labels=[{"question": "harm.severity", "value": "2", "rater":
                             "openai:gpt-4.1@harm-v1", "rationale": "mild"}]),
        chat("c-2", labels=[{"question": "harm.severity", "value": "4_SERIOUS", "rater":
                             "openai:gpt-4.1@harm-v1", "confidence": 4}]),
    ])
    import_file(study, path)
    rows = study.query("SELECT i.uid, a.value, a.rationale, a.confidence, a.codebook_version,"
                       " r.kind, r.provider, r.model FROM annotations a JOIN items i ON"
                       " i.id = a.item_id JOIN raters r ON r.id = a.rater_id ORDER BY i.uid")
    assert [tuple(r) for r in rows] == [
        ("c-1", "2_MINOR", "mild", None, "1.0", "machine", "openai", "gpt-4.1"),
        ("c-2", "4_SERIOUS", None, 4, "1.0", "machine", "openai", "gpt-4.1")]
    by_question = write_jsonl(tmp_path / "by-question.jsonl",
                              [chat("c-3", labels={"harm.severity": "5"})])
    with pytest.raises(InputError, match=r"by-question.jsonl:1: field 'labels' gives labels by"
                                          " question without a rater"):
        import_file(study, by_question)
    import_file(study, by_question, options=ImportOptions(rater="acme-judge@v3"))
    assert study.scalar("SELECT value FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.name = 'acme-judge@v3'") == "5_SEVERE"


def test_another_shape_is_read_through_a_field_mapping(study, tmp_path, capsys):
    sharegpt = write_jsonl(tmp_path / "sharegpt.jsonl", [
        {"conversation_id": "s-1", "turns": [{"from": "human", "value": "I feel faint."},
                                             {"from": "gpt", "value": "Sit down and drink."}],
         "bot": "old-bot"}])
    mapping = "id=conversation_id,messages=turns,role=from,content=value,model=bot"
    assert main(["--db", str(study.path), "import", "--map", mapping, str(sharegpt)]) == 0
    assert "conversations: 1 row, 1 new item" in capsys.readouterr().out
    row = study.query_one("SELECT model, payload FROM items WHERE uid = 's-1'")
    assert row["model"] == "old-bot"
    assert json.loads(row["payload"])["messages"][1] == {"role": "gpt",
                                                        "content": "Sit down and drink."}
    assert main(["--db", str(study.path), "import", "--map", "ident=conversation_id",
                 str(sharegpt)]) == 2
    assert "--map: 'ident' is not a field of a conversation" in capsys.readouterr().err
    labels = STUDY / "krippendorff.csv"
    assert main(["--db", str(study.path), "import", "--format", "labels-long", "--map",
                 "id=item_id", str(labels)]) == 2
    assert "--map is for the conversations format, not labels-long" in capsys.readouterr().err


def test_a_parquet_file_of_chats_imports_as_its_jsonl_twin_does(study, tmp_path):
    rows = [chat("p-1", model="acme-2", labels=[{"question": "harm.severity", "value": "3",
                                                  "rater": "acme-judge@v1"}]), chat("p-2")]
    rows[1]["labels"] = None
    path = tmp_path / "chats.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert detect_format(path).name == "conversations"
    result = import_file(study, path)
    assert (result.items, result.annotations) == (2, 1)
    messages = json.loads(study.scalar("SELECT payload FROM items WHERE uid = 'p-1'"))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


BAD_ROWS = [
    ({"messages": chat("x")["messages"]}, 1, "missing field(s) 'id'"),
    (chat(""), 1, "field 'id' must be the conversation's id"),
    (chat(True), 1, "field 'id' must be the conversation's id"),
    (chat("x" * 600), 1, "field 'id': the id"),
    ({"id": "x", "messages": "hello"}, 1, "field 'messages' must be a list of messages"),
    ({"id": "x", "messages": []}, 1, "field 'messages' must be a list of messages"),
    ({"id": "x", "messages": [{"role": "user"}]}, 1, "field messages[0].content is missing"),
    ({"id": "x", "messages": [{"content": "hi"}]}, 1, "field messages[0].role is missing"),
    ({"id": "x", "messages": [{"role": 3, "content": "hi"}]}, 1, "'messages[0].role' must be"),
    ({"id": "x", "messages": [{"role": "user", "content": None}]}, 1,
     "'messages[0].content' must be a text"),
    (chat("x", model=["a"]), 1, "field 'model' must be non-empty text"),
    (chat("x", labels=[{"question": "harm.severity", "value": "9", "rater": "j@1"}]), 1,
     "unknown label '9'; allowed: 1_NONE"),
    (chat("x", labels=[{"question": "harm.nope", "value": "1", "rater": "j@1"}]), 1,
     "unknown question 'harm.nope'"),
    (chat("x", labels=[{"question": "harm.severity", "value": "1"}]), 1,
     "field labels[0].rater is missing"),
    (chat("x", labels=[{"question": "harm.severity", "value": "1", "rater": "j@1",
                        "score": 3}]), 1, "field labels[0].score is not a label's"),
    (chat("x", labels=[{"question": "harm.severity", "value": "1", "rater": "j@1"},
                       {"question": "harm.severity", "value": "2", "rater": "j@1"}]), 1,
     "a second label of 'harm.severity' by 'j@1'"),
]


@pytest.mark.parametrize("row, line, words", BAD_ROWS)
def test_a_bad_row_is_one_line_naming_file_line_and_field_and_nothing_is_kept(
        study, tmp_path, row, line, words):
    good = chat("good-1")
    path = write_jsonl(tmp_path / "bad.jsonl", [good, row] if line == 2 else [row, good])
    before = table_counts(study)
    with pytest.raises(InputError) as err:
        import_file(study, path, "conversations")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert table_counts(study) == before


def test_an_id_given_twice_with_other_messages_names_both_lines(study, tmp_path):
    other = chat("c-1")
    other["messages"][1]["content"] = "Gargle salt water."
    path = write_jsonl(tmp_path / "twice.jsonl", [chat("c-1"), chat("c-2"), other])
    with pytest.raises(InputError, match=r"twice.jsonl:3: item 'c-1' again, with other content"
                                         " than line 1"):
        import_file(study, path)


def test_a_csv_is_not_taken_for_chats(study, tmp_path):
    path = tmp_path / "chats.csv"
    path.write_text('id,messages\nc-1,"[{""role"": ""user""}]"\n')
    with pytest.raises(InputError, match="a conversations file is JSONL or Parquet"):
        import_file(study, path, "conversations")


def conformance_files() -> list[Path]:
    out = []
    for line in (CONFORMANCE / "MANIFEST.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path = CONFORMANCE / line.split("\t")[2]
            if path.is_file():
                out.append(path)
    return out


@pytest.mark.skipif(not (CONFORMANCE / "MANIFEST.tsv").exists(), reason="no conformance corpus")
def test_detection_takes_no_file_of_the_published_formats():
    files = conformance_files()
    assert len(files) >= 10
    for path in files:
        assert detect_format(path).name != "conversations", path
    assert detect_format(STUDY / "chats.jsonl").name == "conversations"


def test_each_chat_belongs_to_the_run_its_model_and_protocol_name(study, tmp_path):
    from store.runs import load_runs

    path = write_jsonl(tmp_path / "runs.jsonl", [
        chat("r-1", model="acme-2", protocol="plain"),
        chat("r-2", model="acme-2", protocol="with-safety-prompt", model_actual="acme-2-0601"),
        chat("r-3", model="acme-2", protocol="plain"),
        chat("r-4"),
    ])
    import_file(study, path)
    runs = {r.label: r for r in load_runs(study.conn, "conversation")}
    assert len(runs) == 3 and any("with-safety-prompt" in label for label in runs)
    by_item = dict(study.query("SELECT uid, run_id FROM items WHERE kind = 'conversation'"))
    assert by_item["r-1"] == by_item["r-3"] != by_item["r-2"] != by_item["r-4"]
    meta = json.loads(study.scalar("SELECT meta FROM items WHERE uid = 'r-2'"))
    assert "protocol" not in meta.get("metadata", {})  # a run's field, not metadata
