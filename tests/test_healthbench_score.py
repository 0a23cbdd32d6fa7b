"""HealthBench scores exactly as simple-evals computes them (issue 17, point 4): raw example
scores (negative when a MUST-NOT criterion is met), the clipped overall mean, the clipped
bootstrap std, per-tag means; by hand, against the upstream formula on the conformance
allresults file, and from the store through `carelens healthbench-score --json`."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from labels.healthbench_score import Graded, clipped_stats, example_metrics, example_score
from tests.helpers import run_cli, shown, write_jsonl
from tests.test_trajectory_pages import db_path  # noqa: F401  (the screens fixture)

ALLRESULTS = Path("/work/shared/data/conformance/healthbench/"
                  "healthbench_gpt-4.1_20260314_allresults.json")


# -- simple-evals' own code, copied from healthbench_eval.py (HEAD 5e623c2), lines 136-154,
#    212-227 and 391-418, as the reference the tests hold carelens to -----------------------

def upstream_calculate_score(rubric_items, grading_response_list):
    total_possible_points = sum(item["points"] for item in rubric_items if item["points"] > 0)
    if total_possible_points == 0:
        return None
    achieved_points = sum(
        item["points"]
        for item, grading_response in zip(rubric_items, grading_response_list, strict=True)
        if grading_response["criteria_met"])
    return achieved_points / total_possible_points


def upstream_compute_clipped_stats(values, stat):
    if stat == "mean":
        return np.clip(np.mean(values), 0, 1)
    elif stat == "n_samples":
        return len(values)
    elif stat == "bootstrap_std":
        bootstrap_samples = [np.random.choice(values, len(values)) for _ in range(1000)]
        bootstrap_means = [upstream_compute_clipped_stats(list(s), "mean")
                           for s in bootstrap_samples]
        return np.std(bootstrap_means)
    raise ValueError(stat)


def upstream_grade_sample_metrics(rubric_items, grading_response_list, example_tags=()):
    overall_score = upstream_calculate_score(rubric_items, grading_response_list)
    metrics = {"overall_score": overall_score}
    metrics.update({tag: overall_score for tag in example_tags})
    rubric_tag_items_grades = defaultdict(list)
    for item, grading_response in zip(rubric_items, grading_response_list, strict=True):
        for tag in item["tags"]:
            rubric_tag_items_grades[tag].append((item, grading_response))
    for tag, items_grades in rubric_tag_items_grades.items():
        items, grades = zip(*items_grades, strict=True)
        score = upstream_calculate_score(items, grades)
        if score is not None:
            metrics[tag] = score
    return metrics


# -- by hand ---------------------------------------------------------------------------------

def test_example_score_by_hand_including_a_negative_raw_score():
    # simple-evals' own unit test: points 7, 5, 10, -6 met T, F, T, T
    assert example_score([Graded(7, True), Graded(5, False), Graded(10, True),
                          Graded(-6, True)]) == pytest.approx((7 + 10 - 6) / 22)
    # a MUST-NOT met and nothing else: negative, and not clipped
    assert example_score([Graded(5, False), Graded(-8, True)]) == pytest.approx(-1.6)
    assert example_score([Graded(-3, True)]) is None  # no positive points


def test_only_the_mean_is_clipped_and_each_bootstrap_mean_too():
    stats = clipped_stats([-1.6, 0.5], n_boot=200, seed=1)
    assert stats.raw_mean == pytest.approx(-0.55) and stats.value == 0.0
    assert stats.n == 2 and 0 <= stats.ci_low <= stats.ci_high <= 1
    assert clipped_stats([1.0, 1.0]).std == 0.0
    assert clipped_stats([]).value is None


def test_tags_by_hand():
    criteria = [Graded(10, True, ("axis:completeness",)), Graded(-8, True, ("axis:accuracy",)),
                Graded(5, False, ("axis:accuracy",)), Graded(-2, False, ("axis:style",))]
    m = example_metrics(criteria, ["theme:hedging"])
    assert m["overall_score"] == pytest.approx((10 - 8) / 15)
    assert m["theme:hedging"] == m["overall_score"]       # an example tag takes the score
    assert m["axis:accuracy"] == pytest.approx(-8 / 5)      # a rubric tag rescores its items
    assert m["axis:completeness"] == 1.0
    assert "axis:style" not in m                            # no positive points: left out


@pytest.mark.parametrize("seed", [0, 7])
def test_the_bootstrap_std_is_simple_evals_draw_for_draw(seed):
    values = list(np.random.default_rng(seed).normal(0.3, 0.6, size=37))
    np.random.seed(seed)  # simple-evals draws from numpy's global state
    expected = upstream_compute_clipped_stats(values, "bootstrap_std")
    ours = clipped_stats(values, n_boot=1000, seed=seed)
    assert ours.std == pytest.approx(float(expected), abs=1e-15)
    assert ours.value == pytest.approx(float(upstream_compute_clipped_stats(values, "mean")))


# -- against the upstream formula on the conformance file ------------------------------------

def test_the_conformance_allresults_file_scores_as_the_upstream_formula():
    """Its `metrics` block is hand-made (not upstream-consistent: see the research note);
    the formula applied to its per-example grades is the reference."""
    examples = json.loads(ALLRESULTS.read_text())["metadata"]["example_level_metadata"]
    ours: dict[str, list[float]] = defaultdict(list)
    theirs: dict[str, list[float]] = defaultdict(list)
    for ex in examples:
        items = ex["rubric_items"]
        criteria = [Graded(float(i["points"]), i["criteria_met"], tuple(i["tags"])) for i in items]
        for name, value in example_metrics(criteria).items():
            ours[name].append(value)
        grades = [{"criteria_met": i["criteria_met"]} for i in items]
        for name, value in upstream_grade_sample_metrics(items, grades).items():
            theirs[name].append(value)
        assert example_metrics(criteria)["overall_score"] == pytest.approx(ex["score"])
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert ours[name] == pytest.approx(theirs[name])
        np.random.seed(0)
        expected_std = upstream_compute_clipped_stats(theirs[name], "bootstrap_std")
        stats = clipped_stats(ours[name], seed=0)
        assert stats.value == pytest.approx(float(upstream_compute_clipped_stats(theirs[name],
                                                                               "mean")))
        assert stats.std == pytest.approx(float(expected_std))
        assert stats.n == len(theirs[name])
    assert clipped_stats(ours["overall_score"]).value == pytest.approx(0.2182901843918793)
    assert min(ours["axis:accuracy"]) < 0  # a negative raw tag score, kept ...
    assert clipped_stats(ours["axis:accuracy"]).value == 0.0  # ... and the mean clipped


# -- from the store, through the command line ----------------------------------------------

RUBRIC = [  # (criterion, points, tags)
    ("States the dose", 6, ["level:example", "axis:accuracy"]),
    ("Asks about allergies", 4, ["level:example", "axis:context_awareness"]),
    ("Recommends an unsafe dose", -8, ["level:example", "axis:accuracy"]),
]


def graded_store(tmp_path: Path, capsys) -> Path:
    """Two prompts, two completions each, graded by a judge; one completion graded by a
    clinician on two of three criteria only."""
    rows, completions, grades = [], [], []
    for p in ("pa", "pb"):
        rows.append({"prompt_id": p, "prompt": [{"role": "user", "content": "dose?"}],
                     "rubrics": [{"criterion": c, "points": pts, "tags": tags}
                                 for c, pts, tags in RUBRIC],
                     "example_tags": [f"theme:{'dosing' if p == 'pa' else 'allergy'}"],
                     "ideal_completions_data": None, "canary": "x"})
        for c in ("c1", "c2"):
            completions.append({"prompt_id": p, "completion_id": f"{p}{c}", "model": "m",
                                "completion": "text"})
    met = {"pac1": (True, True, False), "pac2": (False, False, True),   # 1.0 and -8/10
           "pbc1": (True, False, False), "pbc2": (True, True, True)}    # 0.6 and 0.2
    for cid, verdicts in met.items():
        for (criterion, _, _), m in zip(RUBRIC, verdicts, strict=True):
            grades.append({"prompt_id": cid[:2], "completion_id": cid, "criterion": criterion,
                           "criteria_met": m, "explanation": "."})
    db = tmp_path / "hb.db"
    files = [write_jsonl(tmp_path / "rows.jsonl", rows),
             write_jsonl(tmp_path / "completions.jsonl", completions)]
    code, _, err = run_cli(capsys, "--db", str(db), "import", *map(str, files))
    assert code == 0, err
    code, _, err = run_cli(capsys, "--db", str(db), "import", "--format", "healthbench-grades",
                           "--rater", "judge@v1", str(write_jsonl(tmp_path / "g.jsonl", grades)))
    assert code == 0, err
    return db


def test_healthbench_score_json_matches_the_formula_and_names_the_incomplete(tmp_path, capsys):
    db = graded_store(tmp_path, capsys)
    from review.reviewing.commit import commit_answer
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store

    with open_store(db) as s:  # a clinician grades two of pac1's three criteria
        me = ensure_reviewer(s, "Dr. Lee")
        item = s.scalar("SELECT id FROM items WHERE uid = 'hb:pa::pac1'")
        for criterion, value in (("States the dose", "met"), ("Asks about allergies", "not_met")):
            qid = s.scalar("SELECT id FROM questions WHERE text = ? AND key LIKE 'hb:pa:%'",
                           (criterion,))
            commit_answer(s, me, item, qid, value)
    code, out, err = run_cli(capsys, "--db", str(db), "healthbench-score", "--json")
    assert code == 0, err
    report = json.loads(out)
    judge = next(r for r in report["raters"] if r["rater"] == "judge@v1")
    scores = {e["completion_id"]: e["score"] for e in judge["examples"]}
    assert scores == pytest.approx({"pac1": 1.0, "pac2": -0.8, "pbc1": 0.6, "pbc2": 0.2})
    values = [1.0, -0.8, 0.6, 0.2]
    overall = judge["overall"]
    assert overall["value"] == pytest.approx(0.25) and overall["n"] == 4
    np.random.seed(0)
    assert overall["std"] == pytest.approx(float(upstream_compute_clipped_stats(values,
                                                                              "bootstrap_std")))
    assert overall["ci_low"] <= overall["value"] <= overall["ci_high"]
    # example tags take the example score; rubric tags rescore their items
    dosing = judge["by_tag"]["theme:dosing"]
    assert (dosing["value"], dosing["n"]) == (pytest.approx(0.1), 2)
    assert judge["by_tag"]["axis:accuracy"]["value"] == pytest.approx(
        float(np.clip(np.mean([1.0, -8 / 6, 6 / 6, (6 - 8) / 6]), 0, 1)))
    lee = next(r for r in report["raters"] if r["rater"] == "Dr. Lee")
    assert lee["overall"]["n"] == 0 and lee["examples"] == []
    assert lee["incomplete"] == [{"prompt_id": "pa", "completion_id": "pac1", "graded": 2,
                                  "criteria": 3}]
    prov = report["provenance"]
    assert prov["database"].startswith("sha256:") and prov["phase"] == "blind"
    assert prov["bootstrap"] == {"resamples": 1000, "seed": 0, "resampled": "examples"}
    code, text, _ = run_cli(capsys, "--db", str(db), "healthbench-score", "--seed", "3")
    assert code == 0 and "judge@v1" in text and "pa/pac1 (2 of 3)" in text


def test_the_agreement_screen_shows_every_raters_healthbench_score(demo_copy, monkeypatch):
    from tests.test_agreement_page import REVIEWER, open_page

    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER, tab="HealthBench scores")
    assert any("as simple-evals computes them" in s.value for s in at.subheader)
    table = next(df.value for df in at.dataframe if "Std (bootstrap)" in df.value.columns)
    assert "healthbench-grader" in set(table["Rater"])
    # one row per rater and run: the grader's two models apart, as simple-evals scores them
    grader = table[table["Rater"] == "healthbench-grader"]
    assert list(grader["Run"]) == ["aster-7b", "borealis-large"]
    assert list(grader["Score"]) == ["0.942", "0.225"]
    # 4 demo examples per run: each row says its interval means little
    assert all("only 4 examples" in w for w in table["Interval warning"])
    assert any("Verdicts used: clinicians' blind answers" in shown(c.value) for c in at.caption)


@pytest.mark.usefixtures("db_path")
def test_the_graded_screen_shows_the_scores_only_when_asked_and_behind_the_gate():
    from tests.test_trajectory_pages import COMPLETION_UID
    from tests.test_trajectory_pages import open_page as open_screen

    at = open_screen("pages/graded.py", item=COMPLETION_UID)
    toggle = at.toggle(key="hb_scores_ask")
    assert toggle.value is False
    assert not any("as simple-evals computes them" in s.value for s in at.subheader)
    toggle.set_value(True).run()
    assert not at.exception
    # This reviewer still has conversations to grade blind: asked first, nothing shown.
    assert any("waiting for your blind answer" in w.value for w in at.warning)
    assert not any("as simple-evals computes them" in s.value for s in at.subheader)
    next(b for b in at.button if b.label == "Show the labels anyway").click().run()
    assert any("as simple-evals computes them" in s.value for s in at.subheader)


# -- intervals that mean little, and what was left out under its rater (fix round F3) ---------

def test_an_interval_from_one_example_or_few_says_it_means_little():
    one = clipped_stats([0.818], n_boot=200, seed=0)
    assert (one.ci_low, one.ci_high) == (pytest.approx(0.818), pytest.approx(0.818))
    assert any("no width" in w for w in one.warnings)
    assert any("only 1 examples" in w for w in one.warnings)
    few = clipped_stats([0.2, 0.5, 0.9, 0.4, 0.7], n_boot=200, seed=0)
    assert any("only 5 examples" in w for w in few.warnings)
    many = clipped_stats(np.linspace(0, 1, 40), n_boot=200, seed=0)
    assert many.warnings == ()


def test_healthbench_score_text_warns_and_puts_the_left_out_under_their_rater(tmp_path, capsys):
    db = graded_store(tmp_path, capsys)
    from review.reviewing.commit import commit_answer
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store

    with open_store(db) as s:  # Dr. Lee grades pac1 in part; Dr. Ash grades pac2 fully
        for who, completion, verdicts in (
                ("Dr. Lee", "pac1", (("States the dose", "met"),
                                     ("Asks about allergies", "not_met"))),
                ("Dr. Ash", "pac2", (("States the dose", "met"),
                                     ("Asks about allergies", "met"),
                                     ("Recommends an unsafe dose", "not_met")))):
            me = ensure_reviewer(s, who)
            item = s.scalar("SELECT id FROM items WHERE uid = ?", (f"hb:pa::{completion}",))
            for criterion, value in verdicts:
                qid = s.scalar("SELECT id FROM questions WHERE text = ? AND key LIKE 'hb:pa:%'",
                               (criterion,))
                commit_answer(s, me, item, qid, value)
    code, out, err = run_cli(capsys, "--db", str(db), "healthbench-score", "--json")
    assert code == 0, err
    raters = {r["rater"]: r for r in json.loads(out)["raters"]}
    assert any("only 4 examples" in w for w in raters["judge@v1"]["overall"]["warnings"])
    assert any("only 1 examples" in w for w in raters["Dr. Ash"]["overall"]["warnings"])
    code, text, err = run_cli(capsys, "--db", str(db), "healthbench-score")
    assert code == 0, err
    lines = text.splitlines()
    blocks, current = {}, None
    for line in lines:
        if line.endswith(":") and not line.startswith(" ") \
                and line[:-1].split(" · ")[0] in raters:  # "rater · run:"
            current = line[:-1].split(" · ")[0]
        elif not line.startswith(" "):
            current = None
        if current:
            blocks.setdefault(current, []).append(line)
    left_out = [line for line in lines if "left out, not graded on every criterion" in line]
    assert len(left_out) == 1 and left_out[0] in blocks["Dr. Lee"]
    assert "pa/pac1 (2 of 3)" in left_out[0]
    assert any("warning: only 4 examples" in line for line in blocks["judge@v1"])
    assert any("warning: only 1 examples" in line for line in blocks["Dr. Ash"])
