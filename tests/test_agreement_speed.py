"""What makes the Agreement screen fast at 20,000 items, each held by a test: the same
figures, less work (the figures themselves are held by test_agreement*.py)."""

from __future__ import annotations

import gc
import math
import threading

import numpy as np
import pytest

from labels import agreement as ag
from labels import compare as cmp
from labels.compare.collector import collector_paused


def test_ratings_are_encoded_by_one_look_up_each(monkeypatch):
    """Categories and None take the fast path; NaN, pandas.NA and unknown values the
    rating-by-rating one, with the same result and the same message as before."""
    pd = pytest.importorskip("pandas")
    calls = []
    real = ag._is_missing
    monkeypatch.setattr(ag, "_is_missing", lambda x: calls.append(x) or real(x))
    rows = [["a", "b"], [None, "c"], ["c", "c"]] * 1000
    codes = ag._encode(rows, ["a", "b", "c"])
    assert calls == []
    assert codes.shape == (3000, 2) and codes[:3].tolist() == [[0, 1], [-1, 2], [2, 2]]
    mixed = ag._encode([["a", math.nan], [pd.NA, "b"], [np.float64("nan"), None]],
                       ["a", "b"])
    assert mixed.tolist() == [[0, -1], [-1, 1], [-1, -1]]
    with pytest.raises(ValueError, match=r"unit 1, rater 0: 'x' is not one of the categories"):
        ag._encode([["a", "b"], ["x", "a"]], ["a", "b"])
    with pytest.raises(ValueError, match="unit 1 has 1 ratings; the table has 2 raters"):
        ag._encode([["a", "b"], ["a"]], ["a", "b"])
    with pytest.raises(ValueError, match=r"\['a'\] is not one of the categories"):
        ag._encode([[["a"], "b"]], ["a", "b"])


def test_the_collector_is_paused_inside_a_comparison_and_resumed_after(demo, monkeypatch):
    seen = []

    assert gc.isenabled()
    with collector_paused():
        seen.append(gc.isenabled())
        with collector_paused():  # nested, as a screen's call around the library's
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    assert seen == [False, False, False] and gc.isenabled()

    # Two threads: resumed only when the last one leaves.
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with collector_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.isenabled()

    # And a report is computed with it paused, the collector running again after.
    from labels.compare import pairs

    states = []
    real = pairs.agreement_table

    def spy(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(pairs, "agreement_table", spy)
    report = cmp.agreement_report(demo, "carebench.response_action", cmp.MAJORITY,
                                  "demo:mapper@v1", n_boot=50)
    assert states and not any(states) and gc.isenabled() and report.n_units > 0
    with pytest.raises(ValueError):  # resumed after an error too
        cmp.agreement_report(demo, "carebench.response_action", "nobody at all", "x")
    assert gc.isenabled()


def test_item_meta_is_read_once_per_distinct_text(demo, monkeypatch):
    """Responses share their prefix's meta and most items have none: the facets are read
    once per distinct (item, parent, question) meta text, not once per item."""
    from labels.compare import answers

    calls = []
    real = answers._facets
    monkeypatch.setattr(answers, "_facets", lambda *a: calls.append(a) or real(*a))
    answers._READ.clear()
    read = answers.load_answers(demo, "carebench.response_action")
    distinct = demo.scalar(
        "SELECT COUNT(*) FROM (SELECT DISTINCT i.meta, p.meta, q.meta FROM annotations a"
        " JOIN items i ON i.id = a.item_id LEFT JOIN items p ON p.id = i.parent_id"
        " JOIN questions q ON q.id = a.question_id WHERE q.key = 'carebench.response_action')")
    items = len({u.item_uid for u in read.units})
    assert 0 < len(calls) <= distinct < items
    assert {u.category for u in read.units} - {None}  # the prefix's specialty still read


def _ranked_default(store):
    """default_comparison as it was: every set read and ranked."""
    ranked = []
    for qs in cmp.question_sets(store):
        choices = cmp.rater_choices(cmp.load_answers(store, qs))
        pair = cmp.default_raters(choices)
        if pair is None:
            continue
        kinds = {c.kind for c in choices}
        score = (0 if "machine" in kinds else 1 if "reference" in kinds else 2)
        ranked.append((score, len(ranked), (qs.key, *pair)))
    return min(ranked)[2] if ranked else None


def test_the_first_comparison_reads_only_the_sets_it_needs(demo, monkeypatch):
    import labels.compare as package
    from labels.compare import answers

    answers._READ.clear()
    want = _ranked_default(demo)
    answers._READ.clear()
    read = []
    real = package.load_answers
    monkeypatch.setattr(package, "load_answers",
                        lambda store, qs, *a: read.append(getattr(qs, "key", qs))
                        or real(store, qs, *a))
    assert cmp.default_comparison(demo) == want == (
        "carebench.response_action", cmp.MAJORITY, "demo:mapper@v1")
    assert read == ["carebench.response_action"]  # not the prefixes' set before it


def test_without_machine_answers_the_first_comparison_is_ranked_as_before(tmp_path):
    from review.workspace import open_store
    from store.records import AnnotationRecord, ItemRecord, RaterRecord
    from store.writer import RecordWriter

    q = "carebench.escalation_needed"
    records = [RaterRecord("gold", "reference"), RaterRecord("Dr. A", "human", role="reviewer"),
               RaterRecord("Dr. B", "human", role="reviewer")]
    for n in range(6):
        uid = f"p{n}"
        records += [ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["."]}),
                    AnnotationRecord(uid, q, "gold", "routine_or_self_care"),
                    AnnotationRecord(uid, q, "Dr. A", "routine_or_self_care"),
                    AnnotationRecord(uid, q, "Dr. B", "see_clinician_soon")]
    with open_store(tmp_path / "t.db") as s:
        with s.transaction() as conn:
            RecordWriter(conn, source="test").write(records)
        assert cmp.default_comparison(s) == _ranked_default(s) == (q, "gold", cmp.MAJORITY)


def test_a_pair_s_cross_table_is_made_once(demo, monkeypatch):
    from labels.compare import pairs

    made = []
    real = pairs._confusion_matrix
    monkeypatch.setattr(pairs, "_confusion_matrix", lambda *a: made.append(1) or real(*a))
    report = cmp.agreement_report(demo, "carebench.response_action", cmp.MAJORITY,
                                  "demo:mapper@v1", n_boot=20)
    assert len(made) == 1
    table = cmp.ratings_for(demo, "carebench.response_action", [cmp.MAJORITY, "demo:mapper@v1"])
    assert report.class_scores == ag.class_scores(table.column(0), table.column(1),
                                                  table.categories)
    assert report.class_scores and sum(s.true_positive for s in report.class_scores) > 0


def test_the_majority_without_counting_is_the_counted_one():
    """One answer, or two the same, are taken without a count: the labels and ties (and
    their order) are those of counting every unit's votes."""
    import random
    from collections import Counter

    from labels.compare.answers import Answers, Filters, RaterInfo, Unit
    from labels.compare.questions import QuestionSet
    from labels.compare.raters import majority_labels

    rng = random.Random(3)
    names = ["A", "B", "C", "D"]
    values = {n: {u: rng.choice("xyz") for u in range(400) if rng.random() < 0.55}
              for n in names}
    qs = QuestionSet(key="q", title="q", codebook="test", kind="labelset", level="nominal",
                     categories=("x", "y", "z"), labels=("x", "y", "z"), item_kinds=("prefix",),
                     n_questions=1, where="1")
    answers = Answers(qs, Filters(), [Unit(str(u), "prefix", "q") for u in range(400)],
                      {n: RaterInfo(n, "human", "reviewer") for n in names}, values)
    votes: dict[int, Counter] = {}
    for n in names:
        for u, v in values[n].items():
            votes.setdefault(u, Counter())[v] += 1
    want, want_ties = {}, set()
    for u, c in votes.items():
        top = c.most_common(2)
        if len(top) > 1 and top[0][1] == top[1][1]:
            want_ties.add(u)
        else:
            want[u] = top[0][0]
    got, ties = majority_labels(answers, names)
    assert list(got.items()) == list(want.items()) and ties == want_ties
    assert want_ties and any(len(c) == 1 for c in votes.values())


@pytest.mark.parametrize("n_clinicians", [3, 4, 5])
def test_like_with_like_without_counting_is_the_counted_one(n_clinicians):
    """Each clinician against the others' majority: two others agree or tie without a
    count; the rows, their order and their units are those of counting every time."""
    import random
    from collections import Counter

    from labels.compare import pairs
    from labels.compare.answers import Answers, Filters, RaterInfo, Unit
    from labels.compare.questions import QuestionSet

    rng = random.Random(n_clinicians)
    names = [f"Dr. {c}" for c in "ABCDE"[:n_clinicians]]
    values = {n: {u: rng.choice("xy") for u in range(300) if rng.random() < 0.7} for n in names}
    values["mapper"] = {u: rng.choice("xy") for u in range(300) if rng.random() < 0.9}
    raters = {n: RaterInfo(n, "human", "reviewer") for n in names}
    raters["mapper"] = RaterInfo("mapper", "machine", "mapper")
    qs = QuestionSet(key="q", title="q", codebook="test", kind="labelset", level="nominal",
                     categories=("x", "y"), labels=("x", "y"), item_kinds=("prefix",),
                     n_questions=1, where="1")
    units = [Unit(str(u), "prefix", "q") for u in range(300)]
    answers = Answers(qs, Filters(), units, raters, values)
    want_rows, want_units = [], []
    for index in sorted(values["mapper"]):
        votes = {m: values[m][index] for m in names if index in values[m]}
        for me, mine in votes.items():
            others = Counter(v for m, v in votes.items() if m != me)
            if sum(others.values()) < 2:
                continue
            top = others.most_common(2)
            if len(top) > 1 and top[0][1] == top[1][1]:
                continue
            want_rows.append([mine, top[0][0]])
            want_units.append(units[index])
    rows, got_units, _ = pairs._like_with_like(answers, None, [cmp.MAJORITY, "mapper"])
    assert rows == want_rows and got_units == want_units and len(rows) > 50
