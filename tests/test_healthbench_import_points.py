"""HealthBench points that are not finite numbers: refused at import with one line
naming the file, the line and the field; and a database that already holds such
points (written before this check, or by another program) is scored without a
traceback, the examples concerned named as not scored. Rows are invented."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from review.datasets.sources import InputError, import_file
from tests.helpers import one_line, run_cli, table_counts, write_jsonl
from tests.test_healthbench_score import graded_store

PROMPT = {
    "prompt_id": "p-pts",
    "prompt": [{"role": "user", "content": "Is it safe to take two of my invented pills?"}],
    "rubrics": [
        {"criterion": "Says to check the label.", "points": 5, "tags": ["axis:accuracy"]},
        {"criterion": "Recommends doubling the dose.", "points": -4, "tags": ["axis:accuracy"]},
    ],
    "example_tags": ["theme:dosing"],
    "ideal_completions_data": None,
    "canary": "invented",
}

# (id, the points as written in the file's text, what the message says it got)
NOT_FINITE = [
    ("NaN", "NaN", "nan"),
    ("Infinity", "Infinity", "inf"),
    ("-Infinity", "-Infinity", "-inf"),
    ("1e999", "1e999", "inf"),
    ("-1e999", "-1e999", "-inf"),
    ("integer-beyond-any-float", "1" + "0" * 400, "1000000"),
]


def rubric_file(tmp_path: Path, points_text: str) -> Path:
    """Two rows; the second's second criterion has `points_text` as its points,
    written verbatim into the JSON text (Python's json writes NaN and Infinity)."""
    good = json.loads(json.dumps(PROMPT))
    good["prompt_id"] = "p-fine"
    bad = json.dumps(PROMPT).replace('"points": -4', f'"points": {points_text}')
    assert points_text in bad
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(good) + "\n" + bad + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name,text,got", NOT_FINITE, ids=[n[0] for n in NOT_FINITE])
def test_points_that_are_not_finite_are_refused_with_file_line_and_field(
        store, tmp_path, name, text, got):
    path = rubric_file(tmp_path, text)
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: rubrics[1].points: expected a finite number, got {got}")
    assert "\n" not in message and len(message) < 400
    assert table_counts(store) == before


@pytest.mark.parametrize("points", ["5", True, [5], {"n": 5}], ids=["text", "bool", "list", "obj"])
def test_points_that_are_not_numbers_are_refused(store, tmp_path, points):
    row = json.loads(json.dumps(PROMPT))
    row["rubrics"][0]["points"] = points
    path = write_jsonl(tmp_path / "rows.jsonl", [row])
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"^{path}:1: rubrics\[0\].points: expected a number"):
        import_file(store, path)
    assert table_counts(store) == before


def test_the_command_line_refuses_them_in_one_line_exit_2(tmp_path, capsys):
    db = tmp_path / "hb.db"
    path = rubric_file(tmp_path, "1e999")
    code, _, err = run_cli(capsys, "--db", str(db), "import", str(path))
    assert code == 2
    assert one_line(err).rstrip("\n") == (
        f"carelens: {path}:2: rubrics[1].points: expected a finite number,"
                             " got inf (no score can be computed with it)")


def test_a_simple_evals_results_file_with_infinite_points_is_refused(store, tmp_path):
    doc = {"score": 0.5, "metadata": {"example_level_metadata": [{
        "prompt_id": "p1", "completion_id": "c1",
        "completion": [{"role": "assistant", "content": "Check the label."}],
        "rubric_items": [{"criterion": "Says to check the label.", "points": 1e999,
                          "tags": [], "criteria_met": True, "explanation": "."}]}]}}
    path = tmp_path / "healthbench_m_20260101_allresults.json"
    path.write_text(json.dumps(doc), encoding="utf-8")  # writes Infinity
    before = table_counts(store)
    with pytest.raises(InputError, match=r"metadata.example_level_metadata\[0\].rubric_items\[0\]"
                                         r".points: expected a finite number, got inf"):
        import_file(store, path, "healthbench-results")
    assert table_counts(store) == before


# -- points already in a database ---------------------------------------------------

@pytest.mark.parametrize("stored", [float("inf"), float("-inf"), float("nan"), "lots", 1e308],
                         ids=["inf", "-inf", "nan", "text", "huge"])
def test_healthbench_score_json_never_tracebacks_on_points_already_stored(
        tmp_path, capsys, stored):
    db = graded_store(tmp_path, capsys)
    with sqlite3.connect(db) as conn:  # as an older carelens or another program left it
        # (a database from before questions were sealed: its triggers set aside for the change)
        sealed = [r[0] for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN"
            " ('questions_identity_fixed', 'questions_seal_update')")]
        conn.execute("DROP TRIGGER questions_identity_fixed")
        conn.execute("DROP TRIGGER questions_seal_update")
        conn.execute("UPDATE questions SET points = ? WHERE text = 'Recommends an unsafe dose'"
                     " AND key LIKE 'hb:pa:%'", (stored,))
        if stored == 1e308:  # two huge points: their sum overflows to infinity
            conn.execute("UPDATE questions SET points = ? WHERE text = 'States the dose'"
                         " AND key LIKE 'hb:pa:%'", (stored,))
        for sql in sealed:
            conn.execute(sql)
    code, out, err = run_cli(capsys, "--db", str(db), "healthbench-score", "--json")
    assert code == 0, err
    report = json.loads(out)  # strict JSON: no NaN or Infinity in it
    judge = next(r for r in report["raters"] if r["rater"] == "judge@v1")
    # prompt pa's completions cannot be scored; pb's are, as before
    assert {e["completion_id"]: e["score"] for e in judge["examples"]} == pytest.approx(
        {"pbc1": 0.6, "pbc2": 0.2})
    assert sorted(i["completion_id"] for i in judge["incomplete"]) == ["pac1", "pac2"]
    assert judge["overall"]["n"] == 2
    assert any("not a finite number" in note or "not known" in note for note in report["notes"])
    code, text, err = run_cli(capsys, "--db", str(db), "healthbench-score")
    assert code == 0, err
    assert "judge@v1" in text
