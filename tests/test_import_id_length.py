"""Ids have a length limit (`store.writer.MAX_ID_CHARS`): an item, prompt, run or
rater id longer than that is refused in one line naming the file, the line and
the field, and the database is left as it was. An id of exactly the limit is
accepted. Rows are invented."""

from __future__ import annotations

import json

import pytest

from review.datasets.sources import InputError, import_file
from review.datasets.sources.base import ImportOptions
from store.writer import MAX_ID_CHARS
from tests.helpers import one_line, run_cli, table_counts, write_jsonl
from tests.test_import_integrity import GENERATION, PREFIX
from tests.test_sources_healthbench import PROMPT
from tests.test_sources_trajectories import kb_row, make_trial

LONG = "x" * (MAX_ID_CHARS + 1)


def two_rows(tmp_path, good: dict, bad: dict, name: str = "rows.jsonl"):
    return write_jsonl(tmp_path / name, [good, bad])


def refused(store, path, fmt=None, options=None) -> str:
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path, fmt, options)
    message = str(err.value)
    assert "\n" not in message and len(message) < 500, message
    assert LONG not in message  # the value is quoted short
    assert table_counts(store) == before
    return message


def test_a_long_healthbench_prompt_id(store, tmp_path):
    path = two_rows(tmp_path, PROMPT, dict(PROMPT, prompt_id=LONG))
    message = refused(store, path)
    assert message.startswith(f"{path}:2: field 'prompt_id': the id 'xxx")
    assert f"is {MAX_ID_CHARS + 1:,} characters long; an id has at most {MAX_ID_CHARS}" in message


def test_a_long_carebench_prefix_id_and_model(store, tmp_path):
    prefixes = two_rows(tmp_path, PREFIX, dict(PREFIX, prefix_id=LONG), "prefixes.jsonl")
    assert refused(store, prefixes, "carebench-prefixes").startswith(
        f"{prefixes}:2: field 'prefix_id': the id")
    generations = two_rows(tmp_path, GENERATION, dict(GENERATION, model_requested=LONG,
                                                      model_actual=None), "gens.jsonl")
    assert refused(store, generations, "carebench-generations").startswith(
        f"{generations}:2: field 'model': the id")
    generations = two_rows(tmp_path, GENERATION, dict(GENERATION, prefix_id=LONG), "gens2.jsonl")
    assert refused(store, generations, "carebench-generations").startswith(
        f"{generations}:2: field 'prefix_id': the id")


@pytest.mark.parametrize("field", ["trial_name", "task_id", "run"])
def test_a_long_klinikebench_run_id(store, tmp_path, field):
    bad = kb_row(**{"trial_name": "second__bb", field: LONG})
    path = two_rows(tmp_path, kb_row(), bad)
    assert refused(store, path, "klinikebench").startswith(
        f"{path}:2: field {field!r}: the id")


def test_a_long_rater_and_item_in_a_label_file(store, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(f"item_id,rater,value\nhb:p1,{LONG},met\n", encoding="utf-8")
    assert refused(store, path, "labels-long").startswith(f"{path}:2: field 'rater': the id")
    path.write_text(f"item_id,rater,value\n{LONG},Dr A,met\n", encoding="utf-8")
    assert refused(store, path, "labels-long").startswith(f"{path}:2: field 'item_id': the id")


def test_a_long_rater_named_for_the_file(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [PROMPT]))
    grades = write_jsonl(tmp_path / "g.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": None, "criterion": "Advises stopping the new soap.",
         "criteria_met": True}])
    message = refused(store, grades, "healthbench-grades", ImportOptions(rater=LONG))
    assert message.startswith(f"{grades}: the rater named for the file: rater name 'xxx")


def test_an_id_made_of_two_fields_is_refused_where_it_is_made(store, tmp_path):
    half = "y" * (MAX_ID_CHARS // 2 + 5)  # each field fits; the completion's uid does not
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [dict(PROMPT, prompt_id=half)]))
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"prompt_id": half, "completion_id": half, "model": "m", "completion": "text"}])
    message = refused(store, path, "healthbench-completions")
    assert message.startswith(f"{path}:1: item id 'hb:yyy")
    assert "characters long; an id has at most" in message


def test_a_long_harbor_trial_name(store, tmp_path):
    job = tmp_path / "job"
    make_trial(job, "trial-1", rewards={"reward": 1.0})
    make_trial(job, "trial-2", rewards={"reward": 0.0},
               result={"task_name": "t2", "trial_name": LONG})
    message = refused(store, job, "harbor")
    assert message.startswith(f"{job}:2: item id 'harbor:xxx")


def test_an_id_of_exactly_the_limit_is_accepted(store, tmp_path):
    prefix_id = "z" * MAX_ID_CHARS
    path = write_jsonl(tmp_path / "prefixes.jsonl", [dict(PREFIX, prefix_id=prefix_id)])
    assert import_file(store, path, "carebench-prefixes").items == 1
    assert store.scalar("SELECT COUNT(*) FROM items WHERE uid = ?", (prefix_id,)) == 1


def test_the_command_line_refuses_in_one_line_exit_2(tmp_path, capsys):
    path = two_rows(tmp_path, PROMPT, dict(PROMPT, prompt_id=LONG))
    code, _, err = run_cli(capsys, "--db", str(tmp_path / "x.db"), "import", str(path))
    assert code == 2
    assert f"{path}:2: field 'prompt_id': the id" in one_line(err)
    assert json.dumps(LONG) not in err
