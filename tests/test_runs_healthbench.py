"""HealthBench runs, as simple-evals writes and scores them (issue 25, failures 3-6).

The files are written field by field from simple-evals' `healthbench_eval.py` (its
`__call__` and `physician_completions_main`): a results file
`healthbench[_consensus]_{model}_{YYYYMMDD_HHMM}_allresults.json` holds `{score, metrics,
htmls, convos, metadata: {example_level_metadata: [...]}}`, each example `{score, usage,
rubric_items: [{criterion, points, tags, criteria_met, explanation}], prompt, completion:
[{content, role}], prompt_id, completion_id}` where `completion_id` is the sha256 of the
prompt id and the text, and an example is scored by `calculate_score` over the rubric
items it was graded on (`row["rubrics"]` of the eval's own input file: a consensus run
grades its prompts' consensus criteria only). The scores are held to simple-evals'
formula copied in tests/test_healthbench_score.py, not to carelens's code.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from tests.conftest import SHARED_DATA
from tests.helpers import run_cli, write_jsonl
from tests.test_healthbench_score import upstream_calculate_score

SAMPLE = SHARED_DATA / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
ROWS = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
GRADER = "openai:gpt-4.1-2025-04-14@simple-evals-healthbench"


def graded_example(row: dict, text: str, met: list[bool], rubrics: list[dict] | None = None
                   ) -> dict:
    """One entry of `example_level_metadata`, as `HealthBenchEval.__call__` builds it."""
    rubrics = row["rubrics"] if rubrics is None else rubrics
    items = [{"criterion": r["criterion"], "points": r["points"], "tags": r["tags"],
              "criteria_met": m, "explanation": f"grader says {m}"}
             for r, m in zip(rubrics, met, strict=True)]
    score = upstream_calculate_score(items, [{"criteria_met": m} for m in met])
    return {"score": score,
            "usage": {"input_tokens": 100, "input_cached_tokens": None, "output_tokens": 50,
                      "output_reasoning_tokens": None, "total_tokens": 150},
            "rubric_items": items, "prompt": row["prompt"],
            "completion": [{"content": text, "role": "assistant"}],
            "prompt_id": row["prompt_id"],
            "completion_id": hashlib.sha256((row["prompt_id"] + text).encode()).hexdigest()}


def results_doc(examples: list[dict]) -> dict:
    """The full-results document `physician_completions_main` (and simple_evals.py) write:
    `score` is the clipped mean of the example scores (`_aggregate_get_clipped_mean`)."""
    scores = [e["score"] for e in examples]
    return {"score": float(np.clip(np.mean(scores), 0, 1)),
            "metrics": {"overall_score": float(np.clip(np.mean(scores), 0, 1)),
                        "overall_score:n_samples": len(scores)},
            "htmls": ["" for _ in examples],
            "convos": [e["prompt"] + e["completion"] for e in examples],
            "metadata": {"example_level_metadata": examples}}


def run_examples(model: str, pattern: int, n: int = 6) -> list[dict]:
    """A model's graded examples on the first n sample rows: met on every `pattern`-th
    criterion (so two models score apart)."""
    out = []
    for row in ROWS[:n]:
        met = [(i % pattern == 0) == (r["points"] > 0) for i, r in enumerate(row["rubrics"])]
        out.append(graded_example(row, f"{model} answers {row['prompt_id']}", met))
    return out


def write_results(path, examples):
    path.write_text(json.dumps(results_doc(examples), indent=2), encoding="utf-8")
    return path


@pytest.fixture
def two_runs(tmp_path):
    db = tmp_path / "hb.db"
    a = write_results(tmp_path / "healthbench_model-a_20260401_0900_allresults.json",
                      run_examples("model-a", 1))
    b = write_results(tmp_path / "healthbench_model-b_20260401_0930_allresults.json",
                      run_examples("model-b", 3))
    return db, a, b


def cli_json(capsys, *argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# -- failure 3: one score per rater and run, not one per grader -------------------------------

def test_one_grader_of_two_models_scores_each_run_as_simple_evals_does(two_runs, capsys):
    db, a, b = two_runs
    for path in (SAMPLE, a, b):
        code, _, err = run_cli(capsys, "--db", str(db), "import", str(path))
        assert code == 0, err
    got = cli_json(capsys, "--db", str(db), "healthbench-score")
    entries = [e for e in got["raters"] if e["rater"] == GRADER]
    assert [(e["model"], e["run"]) for e in entries] == [("model-a", "model-a"),
                                                        ("model-b", "model-b")]
    for entry, path in zip(entries, (a, b), strict=True):
        doc = json.loads(path.read_text())
        assert entry["overall"]["value"] == pytest.approx(doc["score"])
        assert entry["overall"]["n"] == 6 and isinstance(entry["run_id"], int)
        assert sorted(x["score"] for x in entry["examples"]) == pytest.approx(
            sorted(e["score"] for e in doc["metadata"]["example_level_metadata"]))
    assert entries[0]["overall"]["value"] != pytest.approx(entries[1]["overall"]["value"])
    # --model chooses a model's runs; --run one run; --pool asks for them together
    only_b = cli_json(capsys, "--db", str(db), "healthbench-score", "--model", "model-b")
    assert [e["model"] for e in only_b["raters"]] == ["model-b"]
    run_a = cli_json(capsys, "--db", str(db), "healthbench-score", "--run",
                     str(entries[0]["run_id"]))
    assert [e["run"] for e in run_a["raters"]] == ["model-a"]
    pooled = cli_json(capsys, "--db", str(db), "healthbench-score", "--pool")
    (entry,) = pooled["raters"]
    assert entry["run"] == "(runs pooled)" and entry["overall"]["n"] == 12
    assert entry["runs"] == [entries[0]["run_id"], entries[1]["run_id"]]
    code, _, err = run_cli(capsys, "--db", str(db), "healthbench-score", "--model", "model-z")
    assert code == 2 and "no run of model 'model-z'" in err and "\n" not in err.strip()


def test_two_results_files_of_one_model_are_two_runs(tmp_path, capsys):
    db = tmp_path / "hb.db"
    first = write_results(tmp_path / "healthbench_model-a_20260401_0900_allresults.json",
                          run_examples("model-a", 1, 4))
    again = write_results(tmp_path / "healthbench_model-a_20260402_0900_allresults.json",
                          [graded_example(r, f"a second answer to {r['prompt_id']}",
                                          [False] * len(r["rubrics"])) for r in ROWS[:4]])
    for path in (SAMPLE, first, again):
        assert run_cli(capsys, "--db", str(db), "import", str(path))[0] == 0
    got = cli_json(capsys, "--db", str(db), "healthbench-score", "--model", "model-a")
    assert [e["run"] for e in got["raters"]] == [
        "model-a · healthbench_model-a_20260401_0900_allresults.json",
        "model-a · healthbench_model-a_20260402_0900_allresults.json"]
    assert [e["overall"]["value"] for e in got["raters"]] == pytest.approx(
        [json.loads(p.read_text())["score"] for p in (first, again)])


# -- failure 4: each example scored on the criteria it was graded on --------------------------

def test_a_consensus_run_is_scored_on_its_graded_criteria_after_the_full_rows(tmp_path, capsys):
    db = tmp_path / "hb.db"
    examples = []
    for row in ROWS:
        cluster = [r for r in row["rubrics"] if "level:cluster" in r["tags"]]
        if cluster and len(cluster) < len(row["rubrics"]) and any(r["points"] > 0 for r in cluster):
            met = [i % 2 == 0 for i in range(len(cluster))]
            examples.append(graded_example(row, f"consensus answer {row['prompt_id']}", met,
                                           cluster))
    assert len(examples) >= 2  # prompts whose consensus criteria are part of their rubric
    path = write_results(tmp_path / "healthbench_consensus_model-c_20260401_0900_allresults.json",
                         examples)
    for p in (SAMPLE, path):
        assert run_cli(capsys, "--db", str(db), "import", str(p))[0] == 0
    got = cli_json(capsys, "--db", str(db), "healthbench-score")
    (entry,) = got["raters"]
    assert entry["incomplete"] == []
    assert entry["overall"]["n"] == len(examples)
    assert entry["overall"]["value"] == pytest.approx(json.loads(path.read_text())["score"])
    # the rows imported after the results change nothing either
    db2 = tmp_path / "hb2.db"
    for p in (path, SAMPLE):
        assert run_cli(capsys, "--db", str(db2), "import", str(p))[0] == 0
    again = cli_json(capsys, "--db", str(db2), "healthbench-score")["raters"][0]
    assert again["overall"]["value"] == pytest.approx(entry["overall"]["value"])
    assert again["incomplete"] == []


def test_a_clinician_who_graded_part_of_a_rubric_is_still_left_out(tmp_path, capsys):
    db = tmp_path / "hb.db"
    row = ROWS[0]
    path = write_results(tmp_path / "healthbench_model-a_20260401_0900_allresults.json",
                         [graded_example(row, "an answer", [r["points"] > 0 for r in row["rubrics"]])])
    for p in (SAMPLE, path):
        assert run_cli(capsys, "--db", str(db), "import", str(p))[0] == 0
    uid = f"hb:{row['prompt_id']}::{hashlib.sha256((row['prompt_id'] + 'an answer').encode()).hexdigest()}"
    from review.datasets.sources.healthbench import criterion_key

    labels = tmp_path / "labels.csv"
    labels.write_text("item_id,rater,value,question\n" + "".join(
        f"{uid},Dr. Part,met,{criterion_key(row['prompt_id'], r['criterion'])}\n"
        for r in row["rubrics"][:3]), encoding="utf-8")
    assert run_cli(capsys, "--db", str(db), "import", str(labels))[0] == 0
    got = {e["rater"]: e for e in cli_json(capsys, "--db", str(db), "healthbench-score")["raters"]}
    assert got["Dr. Part"]["overall"]["n"] == 0
    assert got["Dr. Part"]["incomplete"][0]["graded"] == 3
    assert got["Dr. Part"]["incomplete"][0]["criteria"] == len(row["rubrics"])
    assert got[GRADER]["overall"]["value"] == 1.0


# -- failure 5: simple-evals' example-level records, one JSON object a line -------------------

def test_example_level_records_are_read_with_the_graders_verdicts(tmp_path, capsys):
    db = tmp_path / "hb.db"
    examples = run_examples("model-e", 2, 5)
    path = write_jsonl(tmp_path / "healthbench_model-e_20260401_0900_examples.jsonl", examples)
    assert run_cli(capsys, "--db", str(db), "import", str(SAMPLE))[0] == 0
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(path))
    assert code == 0, err
    verdicts = sum(len(e["rubric_items"]) for e in examples)
    assert "healthbench-examples" in out and f"{verdicts} new annotations" in out
    got = cli_json(capsys, "--db", str(db), "healthbench-score")
    (entry,) = got["raters"]
    assert (entry["rater"], entry["model"]) == (GRADER, "model-e")
    assert sorted(x["score"] for x in entry["examples"]) == pytest.approx(
        sorted(e["score"] for e in examples))
    # the same records under a name simple-evals would not write: no model, still graded
    plain = write_jsonl(tmp_path / "records.jsonl", run_examples("model-f", 2, 2))
    db2 = tmp_path / "hb2.db"
    code, out, err = run_cli(capsys, "--db", str(db2), "import", str(plain))
    assert code == 0 and "healthbench-examples" in out, err
    (entry,) = cli_json(capsys, "--db", str(db2), "healthbench-score")["raters"]
    assert entry["model"] is None and entry["overall"]["n"] == 2
