"""Prediction-powered estimates: parity with ppi-python, the sampling rules, the commands."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cli
from labels.phases import describe_phase
from labels.ppi import (
    classical_mean,
    design_classical_mean,
    design_ppi_mean,
    machine_mean,
    ppi_mean,
)
from labels.ppi_report import format_ppi_text, ppi_dict, ppi_report
from review.reviewing.commit import commit_answer
from review.reviewing.items import load_item
from review.team.reviewers import ensure_reviewer
from review.team.rounds import RoundSpec, create_round, reserve_next_item
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests.helpers import CODES, write_prefixes

ROOT = Path(__file__).resolve().parents[1]
RESPONSE_Q = "carebench.response_action"
MAPPER = "test:mapper@v1"
MAPPER_2 = "test:mapper@v2"
CLINICIAN = "Dr. Test Reader"

PPI_PYTHON = """
import json, sys
import numpy as np
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate
out = []
for case in json.load(sys.stdin):
    y, yhat, yhat_u = (np.array(case[k], dtype=float) for k in ("Y", "Yhat", "Yhat_unlabeled"))
    low, high = ppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
    c_low, c_high = classical_mean_ci(y, alpha=0.05)
    out.append({"ppi": float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u))),
                "ppi_low": float(np.squeeze(low)), "ppi_high": float(np.squeeze(high)),
                "classical": float(y.mean()), "classical_low": float(np.squeeze(c_low)),
                "classical_high": float(np.squeeze(c_high))})
json.dump(out, sys.stdout)
"""


def ppi_python(cases: list[dict]) -> list[dict]:
    """ppi-python 0.2.3's figures for each case, computed in a child process: importing
    ppi_py silences every warning of the process that imports it."""
    done = subprocess.run([sys.executable, "-c", PPI_PYTHON], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def random_case(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(2, 150)), int(rng.integers(1, 900))
    p, flip = rng.uniform(0.05, 0.95), rng.uniform(0, 0.5)
    y = (rng.random(n) < p).astype(float)
    yhat = np.where(rng.random(n) < flip, 1 - y, y)
    return {"Y": y.tolist(), "Yhat": yhat.tolist(),
            "Yhat_unlabeled": (rng.random(big_n) < p).astype(float).tolist()}


def test_the_estimators_equal_ppi_python_on_random_studies():
    cases = [random_case(seed) for seed in range(60)]
    # a real-valued metric too (a criteria set's met rate), and the worked example's sizes
    rng = np.random.default_rng(99)
    y = rng.uniform(0, 1, 40)
    cases.append({"Y": y.tolist(), "Yhat": np.clip(y + rng.normal(0, 0.2, 40), 0, 1).tolist(),
                  "Yhat_unlabeled": rng.uniform(0, 1, 300).tolist()})
    for case, ref in zip(cases, ppi_python(cases), strict=True):
        ours = ppi_mean(case["Y"], case["Yhat"], case["Yhat_unlabeled"])
        alone = classical_mean(case["Y"])
        assert ours.value == pytest.approx(ref["ppi"], abs=1e-6)
        assert ours.ci_low == pytest.approx(ref["ppi_low"], abs=1e-6)
        assert ours.ci_high == pytest.approx(ref["ppi_high"], abs=1e-6)
        assert alone.value == pytest.approx(ref["classical"], abs=1e-6)
        assert alone.ci_low == pytest.approx(ref["classical_low"], abs=1e-6)
        assert alone.ci_high == pytest.approx(ref["classical_high"], abs=1e-6)


def bits(text: str) -> list[float]:
    return [float(c) for c in text]


def test_the_worked_example_gives_ppi_pythons_figures():
    """The research note's worked example (n 50, N 500), ppi_py 0.2.3's outputs to 10
    decimals: held here so the figures stay pinned without the package."""
    y = bits("11111111111110101001100011110111111001101110101011")
    yhat = bits("11111111111111010001100011110001111001101110011001")
    yhat_u = bits(
        "1011000110111110001111101011001101101001011110000000110101111001100001000101011101001"
        "1000111001110111101110111011011110000111110101011111011111100101001011011101100000110"
        "0101100110100000001111000101001100111000011010011011000101111011011111110111101010011"
        "0100100100000111001011011010101101011111100101010101111110110001111001111101011100111"
        "1111101110010000011011000111011000101111000101100000110010100011011101101000010110011"
        "101100010100001101000101111100011100111101011110001111101110111001100010100")
    assert (len(y), len(yhat_u), sum(y), sum(yhat), sum(yhat_u)) == (50, 500, 36, 33, 278)
    e = ppi_mean(y, yhat, yhat_u)
    assert e.lam == pytest.approx(0.4608914421, abs=1e-9)
    assert e.value == pytest.approx(0.6720672900, abs=1e-9)
    assert (e.ci_low, e.ci_high) == pytest.approx((0.5685512550, 0.7755833250), abs=1e-9)
    plain = ppi_mean(y, yhat, yhat_u, lam=1)
    assert plain.value == pytest.approx(0.6160000000, abs=1e-9)
    assert (plain.ci_low, plain.ci_high) == pytest.approx((0.4917047768, 0.7402952232), abs=1e-9)
    c = classical_mean(y)
    assert (c.value, c.ci_low, c.ci_high) == pytest.approx((0.72, 0.5955461452, 0.8444538548),
                                                           abs=1e-9)
    assert ppi_mean(y, yhat, yhat_u, lam=0).ci_low == pytest.approx(c.ci_low, abs=1e-12)


def test_equal_probabilities_give_the_clinicians_own_estimate_a_little_wider():
    """The design estimator's interval with equal weights: the clinicians' mean, with the
    with-replacement factor n/(n-1) and Student's t on n - 1 degrees of freedom."""
    from scipy.stats import t

    rng = np.random.default_rng(3)
    y = (rng.random(80) < 0.4).astype(float)
    weighted = design_classical_mean(y, np.full(80, 0.25), n_unlabeled=240)
    plain = classical_mean(y)
    assert weighted.value == pytest.approx(plain.value, abs=1e-12)
    ratio = (weighted.half_width / plain.half_width) / np.sqrt(80 / 79)
    assert ratio == pytest.approx(t.ppf(0.975, 79) / 1.959963984540054, abs=1e-9)


def test_the_weighted_design_estimate_is_unbiased_where_the_machine_errs_unevenly():
    """Items where the machine is likely wrong are drawn 4-5 times as often; weighting by
    1/probability takes that back out: over 400 draws the mean estimate sits on the
    truth, while the unweighted mean of the labels does not."""
    rng = np.random.default_rng(11)
    big_n = 2000
    risky = rng.random(big_n) < 0.3
    y = (rng.random(big_n) < 0.6).astype(float)
    wrong = rng.random(big_n) < np.where(risky, 0.4, 0.05)
    f = np.where(wrong, 1 - y, y)
    pi = np.where(risky, 0.2, 0.045)
    estimates, naive = [], []
    for _ in range(400):
        drawn = rng.random(big_n) < pi
        e = design_ppi_mean(y[drawn], f[drawn], pi[drawn], f[~drawn])
        estimates.append(e.value)
        naive.append(y[drawn].mean())
    spread = np.std(estimates) / np.sqrt(len(estimates))
    assert abs(np.mean(estimates) - y.mean()) < 4 * spread
    assert abs(np.mean(naive) - y.mean()) > 4 * spread  # the weights are what makes it right


def test_too_few_labels_and_agreeing_labels_say_so():
    assert ppi_mean([1], [1], [0, 1]).undefined_reason.startswith("only one item")
    assert ppi_mean([], [], [0, 1]).undefined_reason == "no item has a clinician's label"
    same = ppi_mean([1, 1, 1], [1, 1, 1], [1, 1, 1, 1])
    assert same.ci_low == same.ci_high == 1 and "zero width" in same.note
    assert "approximate" in classical_mean([0, 1, 1]).note
    alone = ppi_mean([0, 1, 1, 0], [0, 1, 0, 0], [])
    assert alone.value == 0.5 and "every item has a clinician's label" in alone.note
    assert machine_mean([]).undefined_reason == "the machine labelled no item"


# -- a study in the store ------------------------------------------------------------------

ACCURACY = {"model-a": 0.75, "model-b": 0.55}
"""How often each model's reply names the gold action."""


def write_study(store, *, n_prefixes: int = 150, labelled: float = 0.3, seed: int = 5,
                second_mapper: bool = False) -> dict:
    """Prefixes with gold labels, two models' replies, a mapper's reading of every reply
    (wrong 20% of the time, more often on model-b) and, for a uniform random share of
    the replies, a clinician's blind reading (the truth). Returns per model the
    accuracy readings as PPI takes them: Y, Yhat (labelled) and Yhat_unlabeled."""
    rng = random.Random(seed)
    prefixes = write_prefixes(store, n_prefixes)
    gold = {uid: CODES[i % 4] for i, uid in enumerate(prefixes)}
    expected = {m: {"Y": [], "Yhat": [], "Yhat_unlabeled": []} for m in ACCURACY}
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord(MAPPER, "machine", role="mapper"))
        if second_mapper:
            w.rater(RaterRecord(MAPPER_2, "machine", role="mapper"))
        w.rater(RaterRecord(CLINICIAN, "human", role="reviewer"))
        replies = []
        for model in ACCURACY:
            for uid in prefixes:
                w.item(ItemRecord(f"{uid}::{model}", "response", "test", {"response": "Invented."},
                                  parent_uid=uid, model=model, split="validation"))
                replies.append((f"{uid}::{model}", uid, model))
        w.flush()
        chosen = set(rng.sample(range(len(replies)), round(labelled * len(replies))))
        for index, (reply, prefix, model) in enumerate(replies):
            truth = gold[prefix] if rng.random() < ACCURACY[model] else rng.choice(CODES)
            miss = 0.3 if model == "model-b" else 0.1
            said = truth if rng.random() > miss else rng.choice(CODES)
            w.annotation(AnnotationRecord(reply, RESPONSE_Q, MAPPER, said))
            if second_mapper:
                other = said if rng.random() > 0.15 else rng.choice(CODES)
                w.annotation(AnnotationRecord(reply, RESPONSE_Q, MAPPER_2, other))
            right = float(said == gold[prefix])
            if index in chosen:
                w.annotation(AnnotationRecord(reply, RESPONSE_Q, CLINICIAN, truth, phase="blind"))
                expected[model]["Y"].append(float(truth == gold[prefix]))
                expected[model]["Yhat"].append(right)
            else:
                expected[model]["Yhat_unlabeled"].append(right)
        w.flush()
    return expected


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_carelens_ppi_json_equals_ppi_python_on_a_uniformly_labelled_study(store, capsys):
    expected = write_study(store)
    code, out, err = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                             "--human", CLINICIAN, "--machine", MAPPER, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) >= {"estimates", "provenance"}
    models = [e["model"] for e in report["estimates"]]
    assert models == ["model-a", "model-b"]
    cases = [expected[m] for m in models]
    for e, case, ref in zip(report["estimates"], cases, ppi_python(cases), strict=True):
        assert {"model", "metric", "ppi", "classical", "machine_only", "n_labeled",
                "n_unlabeled", "sampling"} <= set(e)
        assert e["metric"] == "accuracy"
        assert e["n_labeled"] == len(case["Y"]) and e["n_unlabeled"] == len(case["Yhat_unlabeled"])
        assert e["ppi"]["value"] == pytest.approx(ref["ppi"], abs=1e-6)
        assert e["ppi"]["ci_low"] == pytest.approx(ref["ppi_low"], abs=1e-6)
        assert e["ppi"]["ci_high"] == pytest.approx(ref["ppi_high"], abs=1e-6)
        assert e["classical"]["value"] == pytest.approx(ref["classical"], abs=1e-6)
        assert e["classical"]["ci_low"] == pytest.approx(ref["classical_low"], abs=1e-6)
        assert e["classical"]["ci_high"] == pytest.approx(ref["classical_high"], abs=1e-6)
        every = case["Yhat"] + case["Yhat_unlabeled"]
        assert e["machine_only"]["value"] == pytest.approx(np.mean(every), abs=1e-12)
        # free review: no recorded design, so the assumption is named
        assert e["sampling"] == "assumed uniform"
    assert any("uniform random sample" in w for w in report["warnings"])
    provenance = report["provenance"]
    assert provenance["human"] == CLINICIAN and provenance["machine"] == MAPPER
    assert "before any machine label was seen" in provenance["answers"]
    assert provenance["reference"] == "carebench-gold"
    assert provenance["database"].startswith("sha256:") and provenance["phase"] == "blind"


def test_answers_changed_after_the_reveal_are_left_out_unless_asked_for(store):
    write_study(store, n_prefixes=40)
    unread = store.scalar(  # a reply of model-a the clinician has not read blind
        "SELECT i.uid FROM items i WHERE i.model = 'model-a' AND NOT EXISTS (SELECT 1 FROM"
        " annotations a JOIN raters r ON r.id = a.rater_id WHERE a.item_id = i.id AND"
        " r.name = ?) ORDER BY i.id LIMIT 1", (CLINICIAN,))
    before = ppi_report(store, "accuracy", CLINICIAN, MAPPER)
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord(CLINICIAN, "human", role="reviewer"))
        w.annotation(AnnotationRecord(unread, RESPONSE_Q, CLINICIAN, CODES[3],
                                      phase="after_reveal"))
        w.flush()
    blind = ppi_report(store, "accuracy", CLINICIAN, MAPPER)
    latest = ppi_report(store, "accuracy", CLINICIAN, MAPPER, phase="current")
    n_before, n_blind, n_latest = (r.estimates[0].n_labeled for r in (before, blind, latest))
    assert n_blind == n_before and n_latest == n_before + 1
    assert blind.estimates[0].ppi.value == before.estimates[0].ppi.value
    assert any("after a machine label was shown" in w for w in latest.warnings)
    assert not any("after a machine label was shown" in w for w in blind.warnings)


def test_the_phase_named_in_the_output_is_the_phase_used(store):
    write_study(store, n_prefixes=20)
    latest = ppi_report(store, "accuracy", CLINICIAN, MAPPER, phase="current")
    text, data = format_ppi_text(latest), ppi_dict(latest)
    assert describe_phase("current") in text and "blind" not in text
    assert "blind" not in json.dumps(data) and data["provenance"]["phase"] == "current"
    blind = format_ppi_text(ppi_report(store, "accuracy", CLINICIAN, MAPPER))
    assert describe_phase("blind") in blind


def test_a_weighted_rounds_labels_are_weighted_and_free_labels_are_not_mixed_in(store):
    write_study(store, n_prefixes=120, labelled=0.1, second_mapper=True)
    admin = ensure_reviewer(store, "Jordan Lee", role="admin")
    rid = create_round(store, RoundSpec("weighted", RESPONSE_Q, reviewers_per_item=1, limit=60,
                                        design="weighted", weight_by="machine_disagreement",
                                        seed=3), admin)
    reviewer = ensure_reviewer(store, "Dr. Round Reviewer")
    answered = 0
    while (item := reserve_next_item(store, rid, reviewer)) is not None:
        commit_answer(store, reviewer, item, load_item(store, item).question_id, CODES[0],
                      round_id=rid)
        answered += 1
    assert answered == 60
    report = ppi_report(store, "accuracy", "Dr. Round Reviewer", MAPPER)
    assert {e.sampling.label for e in report.estimates} == {"weighted design"}
    assert sum(e.n_labeled for e in report.estimates) == 60
    assert not report.warnings
    # The free reader's labels have no design: assumed uniform, and said so.
    free = ppi_report(store, "accuracy", CLINICIAN, MAPPER)
    assert {e.sampling.label for e in free.estimates} == {"assumed uniform"}
    # The majority mixes both: only the round's labels are used, and the rest counted.
    mixed = ppi_dict(ppi_report(store, "accuracy", "group:majority", MAPPER))
    for e in mixed["estimates"]:
        assert e["sampling"] == "weighted design"
        assert any("outside the designed rounds are not used" in n for n in e["notes"])
    asked = ppi_dict(ppi_report(store, "accuracy", "group:majority", MAPPER,
                                sampling="assume-uniform"))
    assert {e["sampling"] for e in asked["estimates"]} == {"assumed uniform"}
    assert (sum(e["n_labeled"] for e in asked["estimates"])
            > sum(e["n_labeled"] for e in mixed["estimates"]))


def test_bad_input_is_one_line_and_exit_2(store, capsys):
    write_study(store, n_prefixes=12)
    for argv, words in (
        (("--human", "Dr. Nobody", "--machine", MAPPER), "gave no answer"),
        (("--human", "group:clinicians", "--machine", MAPPER), "several raters"),
        (("--human", CLINICIAN, "--machine", MAPPER, "--sampling", "design"),
         "recorded sampling design"),
    ):
        code, out, err = run_cli(capsys, "--db", store.path, "ppi", "--metric", "accuracy",
                                 *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_plan_labels_asks_more_for_a_narrower_interval(store, capsys):
    write_study(store, n_prefixes=100, labelled=0.3, second_mapper=True)
    plans = {}
    for target in ("0.15", "0.08"):
        code, out, err = run_cli(capsys, "--db", store.path, "plan-labels", "--target-halfwidth",
                                 target, "--human", CLINICIAN, "--machine", MAPPER,
                                 "--replicates", "40", "--json")
        assert code == 0, err
        plans[target] = json.loads(out)
    wide, narrow = plans["0.15"], plans["0.08"]
    assert [m["model"] for m in wide["models"]] == ["model-a", "model-b"]
    for a, b in zip(wide["models"], narrow["models"], strict=True):
        designs = {d["design"] for d in a["designs"]}
        assert designs == {"uniform", "weighted:machine_disagreement"}
        for da, db in zip(a["designs"], b["designs"], strict=True):
            assert da["labels_needed"] is not None
            assert db["labels_needed"] is None or db["labels_needed"] > da["labels_needed"]
    assert wide["kappa"]["designs"][0]["labels_needed"] is not None
    assert "simulated from the data at hand" in wide["method"]
    assert wide["provenance"]["database"].startswith("sha256:")
    assert wide["provenance"]["machine"] == MAPPER and wide["provenance"]["phase"] == "blind"
    code, out, err = run_cli(capsys, "--db", store.path, "plan-labels", "--target-halfwidth",
                             "0", "--human", CLINICIAN)
    assert code == 2 and "positive" in err


def test_the_plan_learns_from_the_pilot_where_the_machine_errs():
    """A score that flags the items the machine gets wrong makes a weighted round need
    fewer labels than a uniform one; a score that flags nothing does not."""
    from labels.budget import PlanDesign, plan_model, uniform_design
    from labels.ppi_readings import Readings
    from review.team.designs import weighted_probabilities

    rng = np.random.default_rng(8)
    big_n = 300
    flagged = rng.random(big_n) < 0.2
    y = (rng.random(big_n) < 0.6).astype(float)
    f = np.where(rng.random(big_n) < np.where(flagged, 0.45, 0.03), 1 - y, y)
    pilot = rng.choice(big_n, size=60, replace=False)
    readings = Readings("m", list(range(big_n)), [str(i) for i in range(big_n)], list(f),
                        {int(i): float(y[i]) for i in pilot})

    def weighted(scores):
        by_item = dict(enumerate(scores))

        def probabilities(n):
            chance = weighted_probabilities(by_item, n)
            return np.array([chance[i] for i in range(big_n)])

        return PlanDesign("weighted", "weighted", probabilities, scores)

    informative = plan_model(readings, 0.07, [uniform_design(), weighted(flagged * 1.0)],
                             replicates=40)
    uniform, better = (n.labels_needed for n in informative.needs)
    assert better < uniform
    noise = plan_model(readings, 0.07, [uniform_design(), weighted((rng.random(big_n) < 0.2) * 1.0)],
                       replicates=40)
    uniform, blind = (n.labels_needed for n in noise.needs)
    assert blind >= 0.95 * uniform


# -- the screens ----------------------------------------------------------------------------

def open_agreement(db, monkeypatch, **state):
    from streamlit.testing.v1 import AppTest

    from review.reviewing.blinding import open_labels
    from review.team.reviewers import find_reviewer
    from review.workspace import open_store

    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["reviewer"] = "Dr. Mei Tanaka"
    with open_store(db) as s:  # a researcher who chose to see every rater's labels
        open_labels(s, find_reviewer(s, "Dr. Mei Tanaka"), "agreement", 0)
    at.run()
    at.switch_page("pages/agreement.py")
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_agreement_screen_shows_ppi_per_model_and_names_the_assumption(demo_copy,
                                                                          monkeypatch):
    at = open_agreement(demo_copy, monkeypatch, agr_tab="Few clinicians (PPI)")
    table = next(d.value for d in at.dataframe if "PPI (95% CI)" in d.value.columns)
    assert list(table["Model"]) == ["aster-7b · prompted", "aster-7b · unprompted",
                                    "borealis-large", "cobalt-mini"]  # each run apart
    assert set(table["Sampling"]) == {"assumed uniform"}
    assert all(" (" in cell for cell in table["PPI (95% CI)"])
    assert any("uniform random sample" in w.value for w in at.warning)
    assert any("before any machine label was seen" in c.value for c in at.caption)
    # the same figures as the command line's
    from review.workspace import open_store

    with open_store(demo_copy) as s:
        report = ppi_report(s, "accuracy", "group:majority", "demo:mapper@v1")
    first = report.estimates[0].ppi
    assert table["PPI (95% CI)"][0].startswith(f"{first.value:.3f}")


def test_the_leaderboard_has_a_ppi_column(demo_copy, monkeypatch):
    at = open_agreement(demo_copy, monkeypatch, agr_tab="Triage & leaderboard")
    table = next(d.value for d in at.dataframe if "Model" in d.value.columns
                 and any(c.startswith("PPI ") for c in d.value.columns))
    column = next(c for c in table.columns if c.startswith("PPI "))
    assert column == "PPI accuracy" and all("labelled" in cell for cell in table[column])
    assert any(c.value.startswith("PPI: each model's accuracy") for c in at.caption)


def test_a_criteria_sets_met_rate_is_each_items_share_of_criteria_met(demo):
    """met_rate: per graded conversation, the share of its criteria the reader marked
    met; the machine-only estimate is the mean of the grader's shares over the model's
    conversations."""
    report = ppi_report(demo, "met_rate", "group:majority", "healthbench-grader")
    assert report.question == "criteria:rubric@graded_conversation"
    rows = demo.query(
        "SELECT i.model, i.uid, AVG(a.value = 'met') AS share FROM annotations a"
        " JOIN raters r ON r.id = a.rater_id JOIN items i ON i.id = a.item_id"
        " WHERE r.name = 'healthbench-grader' AND a.status = 'answered' GROUP BY i.id")
    by_model: dict[str, list[float]] = {}
    for row in rows:
        by_model.setdefault(row["model"], []).append(row["share"])
    assert {e.model for e in report.estimates} == set(by_model)
    for e in report.estimates:
        assert e.machine_only.value == pytest.approx(np.mean(by_model[e.model]), abs=1e-12)
        assert e.n_labeled + e.n_unlabeled == len(by_model[e.model])
    passed = ppi_report(demo, "pass_rate", "group:majority", "healthbench-grader")
    for e in passed.estimates:
        assert e.machine_only.value in {0.0, 0.25, 0.5, 0.75, 1.0}  # four conversations each
