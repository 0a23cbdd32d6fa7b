"""Comparisons over the store: known answers on small hand-built databases, the demo,
undefined cases, anchoring, the leaderboard, and the exports."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from codebook import CAREBENCH, codebook
from labels.compare import (
    Filters,
    agreement_bundle,
    agreement_report,
    anchoring,
    compare,
    data_version,
    default_comparison,
    facet_choices,
    format_report_text,
    format_triage_text,
    group_agreement,
    mapper_vs_clinicians,
    meta_eval,
    pairwise_matrix,
    question_sets,
    ratings_for,
    triage_comparison,
)
from labels.compare.raters import ADJUDICATED_RATER
from labels.healthbench_meta import MetaRow, grader_vs_physicians, human_ceiling
from labels.report import report_csv, report_dict, report_html, report_json
from review.datasets.demo import load_demo
from review.team.adjudication import ADJUDICATED
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter

A, B, C, D = codebook(CAREBENCH).codes
PREFIX_Q, RESPONSE_Q = "carebench.escalation_needed", "carebench.response_action"
VERDICT_Q = "clinicare.verdict"
HOSTILE = "<img src=x onerror=alert(1)>"


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def human(name, role="reviewer"):
    return RaterRecord(name, "human", role=role)


def machine(name):
    return RaterRecord(name, "machine", role="mapper")


def prefix(uid, **kw):
    return ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]}, **kw)


def answer(uid, question, rater, value, status="answered", phase="imported", rationale=None):
    return AnnotationRecord(uid, question, rater, value, status=status, phase=phase,
                            rationale=rationale)


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    s = open_store(root / "demo.db")
    load_demo(s, root / "files")
    yield s
    s.close()


def no_nan(value) -> None:
    """Walk a JSON-ready structure: undefined numbers are None, never NaN."""
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for v in value.values():
            no_nan(v)
    elif isinstance(value, list):
        for v in value:
            no_nan(v)


# -- the Wikipedia Cohen's kappa example, through the store ---------------------------


@pytest.fixture
def wikipedia(store):
    """Two readers of 50 trajectories' verdicts: yes/yes 20, yes/no 5, no/yes 10, no/no 15
    (Wikipedia, "Cohen's kappa": kappa = 0.4). The second reader's name is hostile HTML."""
    cells = [("YES", "YES")] * 20 + [("YES", "NO")] * 5 + [("NO", "YES")] * 10 + [("NO", "NO")] * 15
    records = [human("Reader A"), human(HOSTILE)]
    for i, (x, y) in enumerate(cells):
        uid = f"traj-{i:02d}"
        records.append(ItemRecord(uid=uid, kind="trajectory", dataset="t", payload={},
                                  split="dev" if i % 2 else "test"))
        records += [answer(uid, VERDICT_Q, "Reader A", x), answer(uid, VERDICT_Q, HOSTILE, y)]
    write(store, records)
    return cells


def test_two_raters_with_known_labels_give_the_known_kappa(store, wikipedia):
    report = compare(store, "Reader A", HOSTILE, VERDICT_Q)
    assert report.question_set.level == "nominal"
    kappa = report.coefficient("cohen_kappa")
    assert kappa.value == pytest.approx(0.4, abs=1e-12) and kappa.n == 50
    assert kappa.ci_low < 0.4 < kappa.ci_high
    assert report.coefficient("percent_agreement").value == pytest.approx(0.7)
    yes, no = report.question_set.categories.index("YES"), report.question_set.categories.index("NO")
    cm = report.confusion
    assert (cm.counts[yes][yes], cm.counts[yes][no], cm.counts[no][yes], cm.counts[no][no]) == (
        20, 5, 10, 15)
    assert [u.item_uid for u in cm.units[yes][no]] == [f"traj-{i:02d}" for i in range(20, 25)]
    assert len(report.disagreements) == 15
    assert {(d.a, d.b) for d in report.disagreements} == {("YES", "NO"), ("NO", "YES")}
    f1 = {s.category: s.f1 for s in report.class_scores}
    assert f1["YES"] == pytest.approx(40 / 55) and f1["NO"] == pytest.approx(30 / 45)


def test_ratings_for_gives_units_by_raters_with_unit_ids(store, wikipedia):
    table = ratings_for(store, VERDICT_Q, ["Reader A", HOSTILE])
    assert table.columns == ["Reader A", HOSTILE] and len(table.values) == 50
    assert (table.units[0].item_uid, table.units[0].question_key) == ("traj-00", VERDICT_Q)
    assert table.values[0] == ["YES", "YES"] and table.values[24] == ["YES", "NO"]
    test_split = ratings_for(store, VERDICT_Q, ["Reader A", HOSTILE], Filters(split="test"))
    assert len(test_split.units) == 25 and {u.split for u in test_split.units} == {"test"}


def test_undefined_coefficients_carry_a_reason_and_export_as_null(store):
    records = [human("One"), human("Two")]
    for i in range(6):
        records += [prefix(f"p{i}"), answer(f"p{i}", PREFIX_Q, "One", B),
                    answer(f"p{i}", PREFIX_Q, "Two", B)]
    write(store, records)
    report = compare(store, "One", "Two", PREFIX_Q)
    kappa = report.coefficient("cohen_kappa_quadratic")
    assert kappa.value is None and "only one category" in kappa.undefined_reason
    assert report.coefficient("percent_agreement").value == 1.0
    data = json.loads(report_json(report))
    entry = next(c for c in data["coefficients"] if c["name"] == "cohen_kappa_quadratic")
    assert entry["value"] is None and "only one category" in entry["note"]
    no_nan(data)
    assert "undefined: only one category ('0B_NO_ESCALATION_SELF_CARE_MONITOR')" in \
        format_report_text(report)
    assert report.ceiling == []  # the two raters are all the clinicians there are
    with pytest.raises(ValueError, match="gave no answer .* under these filters"):
        compare(store, "One", "Two", PREFIX_Q, Filters(split="nowhere"))


def test_unknown_raters_sets_and_lonely_raters_are_explained(store, wikipedia):
    with pytest.raises(ValueError, match="raters here: .*Reader A"):
        agreement_report(store, VERDICT_Q, "Reader A", "Nobody")
    with pytest.raises(ValueError, match="unknown question set"):
        agreement_report(store, "no.such.question", "Reader A", HOSTILE)
    with pytest.raises(ValueError, match="choose rater B"):
        agreement_report(store, VERDICT_Q, "Reader A")
    with pytest.raises(ValueError, match="unknown filter"):
        agreement_report(store, VERDICT_Q, "Reader A", HOSTILE, {"colour": "red"})


# -- groups: majority, adjudicated, all clinicians ------------------------------------


@pytest.fixture
def three_clinicians(store):
    """Five prefixes, gold and three clinicians; p3 and p4 have a tied vote."""
    votes = {  # prefix: (gold, Ann, Ben, Cat)
        "p0": (A, A, A, B), "p1": (B, B, B, B), "p2": (C, C, D, C),
        "p3": (D, D, C, None), "p4": (A, B, None, A),
    }
    records = [human("Ann"), human("Ben"), human("Cat"), RaterRecord("gold", "reference")]
    for uid, (gold, *labels) in votes.items():
        records += [prefix(uid, round_id=1 if uid < "p3" else 2, split="dev",
                           meta={"specialty_or_domain": "cardiology" if uid < "p2" else "neuro"}),
                    answer(uid, PREFIX_Q, "gold", gold)]
        records += [answer(uid, PREFIX_Q, who, lab)
                    for who, lab in zip(("Ann", "Ben", "Cat"), labels, strict=True) if lab]
    write(store, records)
    return votes


def test_majority_of_clinicians_and_its_ties(store, three_clinicians):
    table = ratings_for(store, PREFIX_Q, ["gold", "group:majority"])
    majority = {u.item_uid: row[1] for u, row in zip(table.units, table.values, strict=True)}
    assert majority == {"p0": A, "p1": B, "p2": C, "p3": None, "p4": None}
    assert any("2 units with a tied clinician vote" in n for n in table.notes)
    report = compare(store, "gold", "group:majority", PREFIX_Q)
    assert report.n_units == 3 and report.coefficient("percent_agreement").value == 1.0


def test_adjudicated_falls_back_to_the_majority_and_says_so(store, three_clinicians):
    table = ratings_for(store, PREFIX_Q, ["group:adjudicated"])
    assert any("no adjudicated answer to this question yet" in n for n in table.notes)
    assert [row[0] for row in table.values] == [A, B, C]
    # adjudication settles p3 as an answer of the reference rater 'adjudicated'
    write(store, [RaterRecord(ADJUDICATED, "reference", role="adjudicated"),
                  answer("p3", PREFIX_Q, ADJUDICATED, C)])
    table = ratings_for(store, PREFIX_Q, ["group:adjudicated", "group:clinicians"])
    settled = {u.item_uid: row[0] for u, row in zip(table.units, table.values, strict=True)}
    assert settled["p3"] == C and settled["p0"] == A and settled["p4"] is None
    assert table.columns == ["Adjudicated", "Ann", "Ben", "Cat"]
    assert any("not adjudicated: the clinicians' majority stands in" in n for n in table.notes)
    assert ADJUDICATED == ADJUDICATED_RATER  # the name adjudication writes is the one read here
    assert default_comparison(store) == (PREFIX_Q, "gold", "group:majority")


def test_a_majority_of_one_clinician_is_counted_in_the_notes(store, three_clinicians):
    write(store, [prefix("p5", round_id=1, split="dev"), answer("p5", PREFIX_Q, "gold", A),
                  answer("p5", PREFIX_Q, "Ann", B)])
    table = ratings_for(store, PREFIX_Q, ["gold", "group:majority"])
    assert any("1 of 4 units rests on one clinician's answer" in n for n in table.notes)
    assert any("1 of 4 units rests on one clinician's answer" in n for n in ratings_for(
        store, PREFIX_Q, ["gold", "group:adjudicated"]).notes)  # nothing settled: the majority's


def test_machines_are_compared_with_adjudicated_answers_only_once_there_are_some(store,
                                                                               three_clinicians):
    write(store, [machine("m@v1")] + [answer(f"p{i}", PREFIX_Q, "m@v1", A) for i in range(5)])
    report = mapper_vs_clinicians(store, PREFIX_Q)
    assert "group:adjudicated" not in report.references
    assert any("No adjudicated answer on this question set yet" in n for n in report.notes)
    write(store, [RaterRecord(ADJUDICATED, "reference", role="adjudicated"),
                  answer("p3", PREFIX_Q, ADJUDICATED, C)])
    report = mapper_vs_clinicians(store, PREFIX_Q)
    assert report.row("m@v1", "group:adjudicated").headline.n == 4


def test_group_agreement_is_multi_rater_and_pairwise_matrix_is_symmetric(store,
                                                                         three_clinicians):
    group = group_agreement(store, PREFIX_Q)
    keys = [c.key for c in group.coefficients]
    assert "fleiss_kappa" in keys and "krippendorff_alpha_ordinal" in keys
    assert not any(k.startswith("cohen") for k in keys) and group.confusion is None
    assert group.raters == ["Ann", "Ben", "Cat"] and group.n_units == 5
    matrix = pairwise_matrix(store, PREFIX_Q)
    assert matrix.raters == ["Ann", "Ben", "Cat"] and matrix.key == "cohen_kappa_quadratic"
    for i in range(3):
        assert matrix.cells[i][i] is None
        for j in range(3):
            if i != j:
                assert matrix.cells[i][j] is matrix.cells[j][i]
    assert matrix.cells[0][1].n == 4  # Ann and Ben share p0..p3


def test_breakdown_and_ceiling_use_the_same_units(store, three_clinicians):
    report = compare(store, "gold", "group:majority", PREFIX_Q, by=("round", "category"))
    assert report.ceiling_raters == ["Ann", "Ben", "Cat"]
    rounds = report.breakdowns[0]
    assert [(r.label, r.n_units) for r in rounds.rows] == [("turn 1", 3)]
    categories = report.breakdowns[1]
    assert [(r.group, r.n_units) for r in categories.rows] == [("cardiology", 2), ("neuro", 1)]
    assert all(r.ceiling is not None for r in categories.rows)
    only = compare(store, "gold", "group:majority", PREFIX_Q, Filters(category="neuro"))
    assert only.n_units == 1
    assert facet_choices(store, PREFIX_Q).categories == ["cardiology", "neuro"]


def test_blind_answers_by_default_current_by_choice_and_cannot_assess_is_opt_in(store):
    """Behaviour changed on purpose (issue 17, point 1): without a phase a comparison
    takes the answers given before any label was seen; the latest only by choice."""
    write(store, [human("Ann"), human("Ben"), prefix("p0"), prefix("p1"), prefix("p2"),
                  answer("p0", PREFIX_Q, "Ann", A, phase="blind"),
                  answer("p0", PREFIX_Q, "Ann", C, phase="after_reveal"),
                  answer("p0", PREFIX_Q, "Ben", A, phase="blind"),
                  answer("p1", PREFIX_Q, "Ann", None, status="cannot_assess", phase="blind"),
                  answer("p1", PREFIX_Q, "Ben", B, phase="blind"),
                  answer("p2", PREFIX_Q, "Ann", D),  # imported, the file gave no phase
                  answer("p2", PREFIX_Q, "Ben", D, phase="suggested")])
    current = ratings_for(store, PREFIX_Q, ["Ann", "Ben"], Filters(phase="current"))
    assert current.values == [[C, A], [None, B], [D, D]]
    by_default = ratings_for(store, PREFIX_Q, ["Ann", "Ben"])
    assert by_default.values == [[A, A], [None, B], [D, None]]
    blind = ratings_for(store, PREFIX_Q, ["Ann", "Ben"], Filters(phase="blind"))
    assert blind.values == by_default.values
    assert Filters().phase == Filters(phase=None).phase == "blind"
    assert "blind answers" in Filters().describe()
    assert "current answers" in Filters(phase="current").describe()
    counted = ratings_for(store, PREFIX_Q, ["Ann", "Ben"], Filters(include_cannot_assess=True))
    assert counted.values[1] == ["cannot_assess", B]
    assert counted.question_set.level == "nominal" and "cannot_assess" in counted.categories
    with pytest.raises(ValueError, match="phase must be one of"):
        Filters(phase="later")


# -- anchoring ------------------------------------------------------------------------


def test_anchoring_counts_and_directions(store):
    records = [human("Ann"), human("Ben"), machine("m@v1"), machine("m@v2")]
    cases = {  # response: (machine v1 label, Ann blind, Ann after reveal or None)
        "r0": (C, A, C),     # adopted the machine label
        "r1": (D, A, B),     # toward: closer, not there
        "r2": (B, B, A),     # away: left the machine label
        "r3": (B, C, D),     # away: further from it
        "r4": (A, B, B),     # revisited, unchanged
        "r5": (A, D, None),  # blind only, never revisited
    }
    for uid, (label, blind, after) in cases.items():
        records += [ItemRecord(uid=uid, kind="response", dataset="t", payload={}, model="x"),
                    answer(uid, RESPONSE_Q, "m@v1", label), answer(uid, RESPONSE_Q, "m@v2", A),
                    answer(uid, RESPONSE_Q, "Ann", blind, phase="blind")]
        if after:  # a rationale, so the writer keeps an unchanged answer as a new row
            records.append(answer(uid, RESPONSE_Q, "Ann", after, phase="after_reveal",
                                  rationale="looked again"))
    records += [answer("r0", RESPONSE_Q, "Ben", A, phase="blind"),
                answer("r0", RESPONSE_Q, "Ben", C, phase="after_reveal")]
    write(store, records)
    report = anchoring(store, RESPONSE_Q, machine="m@v1")
    ann, ben, overall = report.rows
    assert (ann.rater, ann.blind_answers, ann.revisions) == ("Ann", 6, 5)
    assert ann.counts == {"unchanged": 1, "adopted": 1, "toward": 1, "away": 2, "other": 0}
    assert ann.changed.value == pytest.approx(4 / 5)
    assert ann.toward.count == 2 and ann.toward.n == 4 and ann.away.count == 2
    assert ann.agree_before.count == 1 and ann.agree_after.count == 1
    assert ben.counts["adopted"] == 1 and ben.revisited.value == 1.0
    assert overall.rater == "All clinicians" and overall.revisions == 6
    assert overall.revisited.n == 7 and overall.counts["adopted"] == 2
    assert set(report.machines) == {"m@v1", "m@v2"}
    other = anchoring(store, RESPONSE_Q, machine="m@v2")
    assert other.rows[-1].counts["adopted"] == 1  # r2 moved onto A, m@v2's label


def test_anchoring_without_revisions_explains_itself(store, three_clinicians):
    report = anchoring(store, PREFIX_Q)
    assert report.rows == [] and "no anchoring to measure" in report.explanation


# -- the leaderboard --------------------------------------------------------------------


def test_mapper_standing_in_for_clinicians_reverses_a_known_ranking(store):
    """Clinicians read every response exactly as gold for m1, one in four wrong for m2,
    every one wrong for m3; the mapper reads them the other way round."""
    records = [human("Ann"), machine("mapper@v1"), RaterRecord("gold", "reference")]
    golds = [A, B, C, D] * 2
    wrong = {A: B, B: C, C: D, D: C}
    for i, gold in enumerate(golds):
        p = f"p{i}"
        records += [prefix(p), answer(p, PREFIX_Q, "gold", gold)]
        for model, clinician_right, mapper_right in (("m1", True, False),
                                                     ("m2", i % 4 != 0, i % 4 != 0),
                                                     ("m3", False, True)):
            uid = f"{p}::{model}"
            records += [
                ItemRecord(uid=uid, kind="response", dataset="t", payload={}, parent_uid=p,
                           model=model),
                answer(uid, RESPONSE_Q, "Ann", gold if clinician_right else wrong[gold]),
                answer(uid, RESPONSE_Q, "mapper@v1", gold if mapper_right else wrong[gold]),
            ]
    write(store, records)
    t = triage_comparison(store, references=["gold"])
    by_clinicians, by_mapper = t.labellings
    assert [r.model for r in by_clinicians.ranking] == ["m1", "m2", "m3"]
    assert [r.model for r in by_mapper.ranking] == ["m3", "m2", "m1"]
    assert by_clinicians.metrics["m1"]["accuracy"].value == 1.0
    assert by_clinicians.metrics["m2"]["accuracy"].value == 0.75
    (agreement,) = t.correlations
    assert agreement.same_reference and not agreement.same_order
    assert agreement.correlation.spearman_rho == pytest.approx(-1.0)
    assert [(s.model, s.before, s.after) for s in agreement.shifts] == [
        ("m1", 1, 3), ("m2", 2, 2), ("m3", 3, 1)]
    own = t.mapper_triage["mapper@v1"]
    # Against the clinicians' reading, the mapper differs on m1 (it reads one step up, except
    # C for gold D: 6 over, 2 under) and on m3 (the mirror: 2 over, 6 under).
    assert own["over_triage"].count == 8 and own["under_triage"].count == 8
    assert own["over_triage"].n == 24
    assert "read by mapper@v1" in format_triage_text(t)


def test_triage_without_reference_labels_explains_itself(store):
    write(store, [human("Ann"), prefix("p0"), answer("p0", PREFIX_Q, "Ann", A)])
    t = triage_comparison(store, references=[])
    assert t.labellings == [] and "reference label" in t.explanation


# -- machine versions ----------------------------------------------------------------------


def test_did_v2_get_closer(store):
    records = [human("Ann"), human("Ben"), machine("m@v1"), machine("m@v2")]
    cycle = [A, B, C, D]
    for i in range(60):
        uid, label = f"r{i}", cycle[i % 4]
        records += [ItemRecord(uid=uid, kind="response", dataset="t", payload={}, model="x"),
                    answer(uid, RESPONSE_Q, "Ann", label), answer(uid, RESPONSE_Q, "Ben", label),
                    answer(uid, RESPONSE_Q, "m@v2", label),
                    answer(uid, RESPONSE_Q, "m@v1", label if i % 3 else cycle[(i + 2) % 4])]
    write(store, records)
    report = mapper_vs_clinicians(store, RESPONSE_Q)
    assert report.machines == ["m@v1", "m@v2"]
    assert report.row("m@v2", "group:majority").headline.value == pytest.approx(1.0)
    assert report.row("m@v1", "Ann").headline.value < 0.9
    (diff,) = report.differences
    assert diff.baseline == "m@v1" and diff.candidate == "m@v2" and diff.n == 60
    assert diff.difference > 0 and diff.ci_low > 0 and diff.verdict.startswith("closer")
    assert diff.candidate_value - diff.baseline_value == pytest.approx(diff.difference)


# -- HealthBench meta-evaluation from the store ----------------------------------------------


def rubric_rows(store, labels):
    """labels: per row (category, axis, criterion, grader met?, {physician: met?})."""
    records = [RaterRecord("judge@v1", "machine", role="judge")]
    records += [human(p) for p in sorted({p for *_, ph in labels for p in ph})]
    for i, (category, axis, criterion, grader, physicians) in enumerate(labels):
        uid, key = f"hb-{i}", f"hb:{i}:c0"
        records += [
            ItemRecord(uid=uid, kind="graded_conversation", dataset="hb", payload={},
                       meta={"category": category}),
            QuestionRecord(key=key, codebook="rubric", kind="criterion", text=criterion,
                           item_uid=uid, points=1, meta={"tags": [f"axis:{axis}"]}),
            answer(uid, key, "judge@v1", "met" if grader else "not_met"),
        ]
        records += [answer(uid, key, p, "met" if met else "not_met") for p, met in physicians.items()]
    write(store, records)


def test_meta_eval_from_the_store_matches_the_metric_on_the_same_rows(store):
    rows = [
        ("emergency", "accuracy", "Calls 911", True, {"p1": True, "p2": True, "p3": False}),
        ("emergency", "completeness", "Asks age", False, {"p1": False, "p2": True}),
        ("context", "accuracy", "Calls 911", True, {"p1": True, "p3": True}),
        ("context", "accuracy", "No dose", False, {"p2": False, "p3": False}),
        ("context", "completeness", "Asks age", True, {"p1": False, "p2": False, "p3": True}),
    ]
    rubric_rows(store, rows)
    report = meta_eval(store, n_boot=200)
    assert report.grader == "judge@v1" and report.n_rows == 5
    by_hand = [MetaRow(g, tuple(ph.items()), cat, crit) for cat, _, crit, g, ph in rows]
    expected = grader_vs_physicians(by_hand, n_boot=200)
    assert report.overall.grader.macro_f1 == pytest.approx(expected.macro_f1)
    assert report.overall.grader.n_pairs == 12
    assert report.overall.physicians.macro_f1 == pytest.approx(
        human_ceiling(by_hand, n_boot=200).macro_f1)
    assert set(report.by["category"]) == {"emergency", "context"}
    assert set(report.by["axis"]) == {"accuracy", "completeness"}
    assert report.by["criterion"]["Calls 911"].grader.n_rows == 2
    assert set(report.physicians) == {"p1", "p2", "p3"}
    assert question_sets(store)[0].key == "criteria:rubric"
    pair = agreement_report(store, "criteria", "group:majority", "judge@v1", by=["criterion"])
    assert pair.question_set.level == "binary" and pair.coefficient("pabak") is not None
    assert pair.breakdowns[0].key == "gwet_ac1"


def test_meta_eval_explains_when_there_is_no_such_data(store, three_clinicians):
    report = meta_eval(store)
    assert report.overall is None and "No rubric criteria have answers yet" in report.explanation


# -- the demo ------------------------------------------------------------------------------


def test_demo_gives_a_non_trivial_first_report(demo):
    assert default_comparison(demo) == (RESPONSE_Q, "group:majority", "demo:mapper@v1")
    report = agreement_report(demo, RESPONSE_Q, "group:majority", "demo:mapper@v1",
                              by=["round", "model"])
    assert report.n_units > 150
    assert all(c.value is not None and c.ci_low <= c.value <= c.ci_high
               for c in report.coefficients)
    assert [r.label for r in report.breakdowns[0].rows] == ["turn 1", "turn 2", "turn 3"]
    # by model is by run: aster-7b's prompted and unprompted runs are two rows
    assert sorted(r.label for r in report.breakdowns[1].rows) == [
        "aster-7b · prompted", "aster-7b · unprompted", "borealis-large", "cobalt-mini"]
    assert report.ceiling and report.confusion.n == report.n_units
    uids = {u.item_uid for row in report.confusion.units for cell in row for u in cell}
    assert all("::" in uid for uid in uids)
    blind = agreement_report(demo, RESPONSE_Q, "group:majority", "demo:mapper@v1",
                             {"phase": "blind"})
    assert blind.coefficients == report.coefficients  # blind is the default
    current = agreement_report(demo, RESPONSE_Q, "group:majority", "demo:mapper@v1",
                               {"phase": "current"})
    assert current.coefficients != report.coefficients
    # every run's responses, aster-7b's prompted run (no revisions after a reveal) included
    assert report.coefficient("cohen_kappa").value == pytest.approx(0.690, abs=5e-4)
    assert current.coefficient("cohen_kappa").value == pytest.approx(0.784, abs=5e-4)
    triage = triage_comparison(demo)
    assert len(triage.labellings) == 6 and triage.correlations
    assert anchoring(demo, RESPONSE_Q).rows[-1].revisions > 0


def test_demo_runs_and_graded_conversations_give_every_rubric_screen_something(demo):
    """The demo's agent runs and rubric-graded conversations: the judge is caught out
    by the clinicians, the clinicians differ among themselves, and the HealthBench
    grader meets its physicians, each in a question set of its own kind of item."""
    from review.datasets.demo_rubrics import JUDGE_MISTAKES, run_uid
    from review.team.reviewers import ensure_reviewer

    kinds = dict(demo.query("SELECT kind, COUNT(*) FROM items GROUP BY kind"))
    assert kinds["trajectory"] == 8 and kinds["graded_conversation"] == 12  # 4 prompts + 8 answers
    assert demo.scalar("SELECT COUNT(*) FROM items WHERE kind = 'trajectory' AND failed = 1") == 1
    sets = {qs.key: qs for qs in question_sets(demo)}
    assert {"criteria:rubric@trajectory", "criteria:rubric@graded_conversation",
            "trajectory.step_error"} <= set(sets)
    # Where the judge passed a vague question, the clinicians (mostly) did not.
    task, agent, topic = sorted(JUDGE_MISTAKES)[0]
    uid = run_uid(task, agent)
    said = dict(demo.query(
        "SELECT r.name, c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " JOIN questions q ON q.id = c.question_id WHERE q.key = ?", (f"{uid}:ask:{topic + 1}",)))
    assert said["klinikebench-judge:demo/judge-1"] == "met"
    assert list(said.values()).count("not_met") >= 1
    judge = agreement_report(demo, "criteria:rubric@trajectory", "group:majority",
                             "klinikebench-judge:demo/judge-1")
    assert judge.n_units >= 20 and 0 < judge.coefficients[0].value < 1
    marks = dict(demo.query(
        "SELECT c.value, COUNT(*) FROM current_annotations c JOIN questions q ON q.id = c.question_id"
        " WHERE q.key = 'trajectory.step_error' GROUP BY c.value"))
    assert {"wrong_parameters", "missed_essential_question", "no_error"} <= set(marks)
    adjudicator = ensure_reviewer(demo, "Dr. Sam Rivera", "internal medicine", "consultant",
                                  "adjudicator")
    from review.team.adjudication import rubric_queue

    queue = rubric_queue(demo, adjudicator)
    assert queue  # the clinicians differ on some criterion ...
    # ... on agent runs: the HealthBench physicians' disagreements are data, not work to settle
    assert {d.item_kind for d in queue} == {"trajectory"}
    meta = meta_eval(demo, None, "criteria:rubric@graded_conversation", Filters())
    assert meta.grader == "healthbench-grader" and meta.n_rows == 34
    assert meta.overall.grader.macro_f1 is not None and meta.overall.physicians.macro_f1 is not None


def test_data_version_moves_when_an_answer_is_added(store, three_clinicians):
    before = data_version(store)
    write(store, [answer("p4", PREFIX_Q, "Ben", A)])
    assert data_version(store) > before


# -- exports --------------------------------------------------------------------------------

VOCABULARY = {"percent_agreement", "cohen_kappa", "cohen_kappa_linear", "cohen_kappa_quadratic",
              "fleiss_kappa", "krippendorff_alpha_nominal", "krippendorff_alpha_ordinal",
              "krippendorff_alpha_interval", "gwet_ac1", "gwet_ac2", "pabak", "macro_f1"}


def test_json_and_csv_exports(demo):
    report, extras = agreement_bundle(demo, RESPONSE_Q, "group:majority", "demo:mapper@v2",
                                      by=["round"], n_boot=100)
    data = json.loads(report_json(report, extras))
    assert data["n_items"] == report.n_units
    assert {c["name"] for c in data["coefficients"]} <= VOCABULARY
    assert {"gwet_ac2", "macro_f1", "cohen_kappa_quadratic"} <= {c["name"] for c in
                                                                  data["coefficients"]}
    assert set(data["sections"]) == {"clinicians_pairwise", "machine_vs_clinicians",
                                     "anchoring", "triage"}
    cells = data["confusion"]["cells"]
    assert sum(c["count"] for c in cells) == report.n_units
    no_nan(data)
    rows = list(csv.DictReader(io.StringIO(report_csv(report))))
    # a clinician against the others' majority beside the majority (issue 17, point 8)
    assert {r["section"] for r in rows} == {"comparison", "clinicians_ceiling", "by_round",
                                            "by_round_clinicians_ceiling",
                                            "clinician_vs_others_majority"}
    assert report_dict(report)["coefficients"][0]["name"] == "percent_agreement"


def test_html_is_one_offline_file_with_data_text_escaped(store, wikipedia):
    report = compare(store, "Reader A", HOSTILE, VERDICT_Q, by=("split",), n_boot=50)
    page = report_html(report)
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script src" not in page.replace(" ", "") and "<link" not in page
    assert page.count("Plotly.newPlot") == 2  # the confusion matrix and the forest plot
    assert "plotly.js" in page  # inlined, not fetched


def test_csv_cells_that_look_like_formulas_are_quoted(store):
    rubric_rows(store, [("c", "accuracy", '=HYPERLINK("http://x")', True, {"p1": True}),
                        ("c", "accuracy", "+1 plain", False, {"p1": False})])
    report = agreement_report(store, "criteria", "p1", "judge@v1", by=["criterion"], n_boot=20)
    groups = [r["group"] for r in csv.DictReader(io.StringIO(report_csv(report))) if r["group"]]
    assert groups and all(g.startswith("'") for g in groups)


def test_meta_eval_on_rows_from_the_healthbench_meta_importer(store, tmp_path):
    """The importer's shape: one human rater per physician, the criterion bound to the
    prompt item, the answers on the completion item, the category in the question meta."""
    from review.datasets.sources import ImportOptions, import_file

    rows = []
    for i in range(8):
        physicians = ["p-a", "p-b", "p-c"][: 2 + i % 2]
        truth = i % 3 == 0
        rows.append({
            "prompt": [{"role": "user", "content": f"question {i}"}], "completion": "reply",
            "rubric": f"criterion {i % 4}", "binary_labels": [truth] * len(physicians),
            "anonymized_physician_ids": physicians, "category": ("emergency", "context")[i % 2],
            "prompt_id": f"pr{i % 4}", "completion_id": f"c{i}",
            "grader_label": truth if i % 4 else not truth,
        })
    path = tmp_path / "meta.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    import_file(store, path, "healthbench-meta", ImportOptions(rater="judge@v1"))
    report = meta_eval(store, n_boot=100)
    assert report.grader == "judge@v1" and report.n_rows == 8
    assert set(report.physicians) == {f"healthbench-physician:{p}" for p in ("p-a", "p-b", "p-c")}
    assert set(report.by["category"]) == {"emergency", "context"}
    by_hand = [MetaRow((r["grader_label"]), tuple(zip(r["anonymized_physician_ids"],
                                                      r["binary_labels"], strict=True)))
               for r in rows]
    assert report.overall.grader.macro_f1 == pytest.approx(
        grader_vs_physicians(by_hand, n_boot=0).macro_f1)
    assert report.overall.physicians.macro_f1 == 1.0  # the physicians agree on every row
