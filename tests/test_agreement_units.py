"""Which units each agreement number stands on: the human ceiling beside a majority
(tied votes count), a clinician against the majority of the *other* clinicians, the
HealthBench physicians' ceiling on the grader's rows, one response set for every
leaderboard labelling, and a Browse link that lists exactly its confusion cell."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from codebook import CAREBENCH, codebook
from labels.compare import compare, meta_eval, triage_comparison
from labels.healthbench_meta import MetaRow, by_group
from review.browse import BrowseQuery, view_item_ids
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter
from tests.test_agreement_page import open_page

A, B, C, D = codebook(CAREBENCH).codes
PREFIX_Q, RESPONSE_Q = "carebench.escalation_needed", "carebench.response_action"
ADJUDICATED = "adjudicated"


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def human(name):
    return RaterRecord(name, "human", role="reviewer")


def prefix(uid, **kw):
    return ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]}, **kw)


def answer(uid, rater, value, question=PREFIX_Q, phase="imported"):
    return AnnotationRecord(uid, question, rater, value, phase=phase)


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "units.db")
    yield s
    s.close()


def two_clinicians(store, machine: bool = True) -> None:
    """40 prefixes in rounds 1 and 2; Dr One and Dr Two agree on the first 24 (60%),
    so 16 units have a tied vote; the machine always says what Dr One said."""
    records = [human("Dr One"), human("Dr Two")]
    if machine:
        records.append(RaterRecord("m@v1", "machine", role="mapper"))
    codes = [A, B, C, D]
    for i in range(40):
        uid, one = f"p{i:02d}", codes[i % 4]
        two = one if i < 24 else codes[(i + 1) % 4]
        records += [prefix(uid, round_id=1 if i % 2 else 2), answer(uid, "Dr One", one),
                    answer(uid, "Dr Two", two)]
        if machine:
            records.append(answer(uid, "m@v1", one))
    write(store, records)


# -- 1. the ceiling beside the clinicians' majority counts the tied units --------------


def test_ceiling_beside_the_majority_counts_units_where_the_clinicians_tied(store):
    two_clinicians(store)
    report = compare(store, "group:majority", "m@v1", PREFIX_Q, by=("round",),
                     forest_key="percent_agreement", n_boot=20)
    assert report.n_units == 24  # the majority exists where the two agree
    ceiling = report.ceiling_for("percent_agreement")
    # On the 40 units the machine answered, the clinicians agree on 24: 60%, not 100%.
    assert ceiling.value == pytest.approx(0.6) and ceiling.n == 40
    assert report.ceiling_units == 40 and report.ceiling_raters == ["Dr One", "Dr Two"]
    assert any("40 units m@v1 answered that two or more clinicians rated, tied votes included"
               in n for n in report.notes)
    # Per group too: each round's ceiling stands on all of its 20 units, ties included.
    rows = report.breakdowns[0].rows
    assert [(r.label, r.n_units, r.ceiling_units) for r in rows] == [
        ("turn 1", 12, 20), ("turn 2", 12, 20)]
    assert all(r.ceiling.value == pytest.approx(0.6) for r in rows)


def test_ceiling_units_are_the_ones_the_named_rater_answered_and_two_clinicians_rated(store):
    two_clinicians(store)
    write(store, [human("Dr Three"), prefix("extra"), answer("extra", "Dr One", A),
                  answer("extra", "Dr Two", B), answer("extra", "Dr Three", B),  # no machine
                  prefix("alone"), answer("alone", "Dr One", A), answer("alone", "m@v1", A)])
    report = compare(store, "m@v1", "group:majority", PREFIX_Q, n_boot=20)
    # 'extra' is not a unit the machine answered; 'alone' has one clinician's answer only.
    assert report.ceiling_units == 40
    assert report.ceiling_for("percent_agreement").n == 40


# -- 2. a clinician against the majority of the other clinicians -------------------------


def test_a_clinician_is_compared_with_the_other_clinicians_majority(store):
    two_clinicians(store, machine=False)
    report = compare(store, "Dr One", "group:majority", PREFIX_Q, n_boot=20)
    pair = compare(store, "Dr One", "Dr Two", PREFIX_Q, n_boot=20)
    value = report.coefficient("percent_agreement").value
    assert value == pytest.approx(0.6) == pair.coefficient("percent_agreement").value
    assert report.b_label == "Clinicians' majority without Dr One"
    assert any(n.startswith("leave-one-out") and "(Dr Two), not Dr One" in n for n in report.notes)
    # A majority of one other clinician: the comparison *is* the clinicians' own agreement.
    assert report.ceiling == [] and pair.ceiling == []


def test_leave_one_out_with_three_clinicians_and_the_adjudicated_fallback(store):
    votes = {  # prefix: (Ann, Ben, Cat)
        "p0": (A, A, A), "p1": (A, B, B), "p2": (C, C, D), "p3": (D, C, C), "p4": (B, B, None),
    }
    records = [human("Ann"), human("Ben"), human("Cat")]
    for uid, labels in votes.items():
        records.append(prefix(uid))
        records += [answer(uid, who, lab) for who, lab in zip(("Ann", "Ben", "Cat"), labels,
                                                              strict=True) if lab]
    write(store, records)
    report = compare(store, "Ann", "group:majority", PREFIX_Q, n_boot=20)
    # Ben and Cat's majority: p0 A, p1 B, p2 tied, p3 C, p4 B (Ben alone). Ann agrees on p0, p4.
    cells = {u.item_uid: (d.a, d.b) for d in report.disagreements for u in [d.unit]}
    assert cells == {"p1": (A, B), "p3": (D, C)}
    assert report.n_units == 4 and report.coefficient("percent_agreement").value == 0.5
    assert report.ceiling_raters == ["Ann", "Ben", "Cat"] and report.ceiling_units == 5
    # The adjudicated answers' fallback is the others' majority too; a settled answer stands.
    write(store, [RaterRecord(ADJUDICATED, "reference", role="adjudicated"),
                  answer("p2", ADJUDICATED, C)])
    adjudicated = compare(store, "Ann", "group:adjudicated", PREFIX_Q, n_boot=20)
    assert adjudicated.n_units == 5
    assert {d.unit.item_uid for d in adjudicated.disagreements} == {"p1", "p3"}
    assert adjudicated.b_label == "Adjudicated without Ann"


def test_the_only_clinician_against_the_majority_is_explained(store):
    write(store, [human("Dr One"), prefix("p0"), answer("p0", "Dr One", A)])
    with pytest.raises(ValueError, match="only clinician"):
        compare(store, "Dr One", "group:majority", PREFIX_Q, n_boot=20)


# -- 3. HealthBench meta-eval: the physicians' ceiling on the grader's rows ---------------


def graded_rows(store) -> None:
    """40 criterion rows in two categories; physicians agree on rows 0..19 and split on
    20..39; the grader judged only rows 0..19."""
    records = [RaterRecord("judge@v1", "machine", role="judge"), human("phys-1"), human("phys-2")]
    for i in range(40):
        uid, key = f"hb-{i}", f"hb:{i}"
        p1 = "met" if i % 2 else "not_met"
        p2 = ("not_met" if p1 == "met" else "met") if i >= 20 else p1
        records += [ItemRecord(uid=uid, kind="graded_conversation", dataset="hb", payload={},
                               meta={"category": "emergency" if i % 4 < 2 else "context"}),
                    QuestionRecord(key=key, codebook="rubric", kind="criterion", text=f"c{i}",
                                   item_uid=uid, points=1),
                    answer(uid, "phys-1", p1, key), answer(uid, "phys-2", p2, key)]
        if i < 20:
            records.append(answer(uid, "judge@v1", p1, key))
    write(store, records)


def test_meta_eval_ceiling_stands_on_the_rows_the_grader_scored(store):
    graded_rows(store)
    report = meta_eval(store, n_boot=20)
    grader, ceiling = report.overall.grader, report.overall.physicians
    assert grader.n_rows == ceiling.n_rows == 20
    assert ceiling.macro_f1 == pytest.approx(1.0)  # the physicians agree on those rows
    assert "20 rows without a grader verdict left out" in ceiling.note
    assert all(s.n_rows == 20 for s in report.physicians.values())
    for group in report.by["category"].values():
        assert group.physicians.n_rows == group.grader.n_rows == 10


def test_by_group_ceiling_leaves_out_rows_without_a_verdict():
    rows = [MetaRow(True, (("p1", True), ("p2", True)), "x"),
            MetaRow(None, (("p1", True), ("p2", False)), "x")]
    group = by_group(rows, "category", n_boot=0)["x"]
    assert group.grader.n_rows == group.physicians.n_rows == 1
    assert group.physicians.n_pairs == 2


# -- 5. the leaderboard's common-set comparison scores the same responses everywhere -------


def test_the_common_set_option_scores_the_same_responses_under_every_labelling(store):
    """The older default, now an explicit option (issue 17, point 3: by default each
    labelling scores what it covers; see tests/test_leaderboard.py)."""
    records = [human("Ann"), human("Ben"), RaterRecord("gold", "reference"),
               RaterRecord("map@v1", "machine", role="mapper")]
    prefixes = {"p0": (A, A, A), "p1": (B, B, B), "p2": (C, C, C), "p3": (D, D, C)}  # p3 tied
    for uid, (gold, ann, ben) in prefixes.items():
        records += [prefix(uid), answer(uid, "gold", gold), answer(uid, "Ann", ann),
                    answer(uid, "Ben", ben)]
        for model in ("m1", "m2"):
            r = f"{uid}:{model}"
            records += [ItemRecord(uid=r, kind="response", dataset="t", payload={},
                                   parent_uid=uid, model=model),
                        answer(r, "Ann", gold, RESPONSE_Q), answer(r, "Ben", gold, RESPONSE_Q),
                        answer(r, "map@v1", gold if model == "m1" else A, RESPONSE_Q)]
    write(store, records)
    report = triage_comparison(store, common=True)
    assert len(report.labellings) == 4  # (gold, majority) x (clinicians, mapper)
    assert {x.n_responses for x in report.labellings} == {6}  # p3's responses out of all
    assert report.left_out == {"no reference label from the clinicians' majority": 2}
    assert any("2 responses have no reference label from the clinicians' majority (2 with a "
               "tied clinician vote" in n for n in report.notes)
    assert any("every labelling scores the same 6 of 8 responses" in n for n in report.notes)


# -- 4. "Open this cell in Browse" lists the cell's items --------------------------------


def cell_page(tmp_path, monkeypatch, records, **choose):
    db = tmp_path / "cell.db"
    with open_store(db) as s:
        write(s, records)
    at = open_page(db, monkeypatch, reviewer="Dr One")
    for key, value in choose.items():
        at.selectbox(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    return db, at


def browse_links(at) -> list[tuple[str, str]]:
    """(link text, query string) of every Browse link on the page."""
    out = []
    for m in at.markdown:
        for line in m.value.splitlines():
            if "](./browse" in line:
                text, href = line.split("](", 1)
                out.append((text.lstrip("["), urlsplit(href.rstrip(")")).query))
    return out


def cell_size(at) -> int:
    said = [m.value for m in at.markdown if "items** where the raters" in m.value]
    return int(said[0].split("**")[1].split()[0])


def two_readers(blind_changes: bool = False) -> list:
    records = [human("Dr One"), human("Dr Two")]
    for i in range(24):
        uid = f"p{i:02d}"
        records += [prefix(uid, split="test" if i < 12 else "dev", round_id=1 + i % 3 // 2,
                           meta={"specialty_or_domain": "cardiology" if i < 16 else "neuro"}),
                    answer(uid, "Dr One", A, phase="blind"),
                    answer(uid, "Dr Two", B if i % 2 else A, phase="blind")]
        if blind_changes and i % 4 == 1:  # after the reveal Dr Two comes round to A
            records.append(answer(uid, "Dr Two", A, phase="after_reveal"))
    return records


def test_browse_link_of_a_cell_keeps_the_screens_filters(tmp_path, monkeypatch):
    db, at = cell_page(tmp_path, monkeypatch, two_readers(), agr_split="test", agr_round=1,
                       **{f"agr_a:{PREFIX_Q}": "Dr One", f"agr_b:{PREFIX_Q}": "Dr Two"})
    ((text, query),) = browse_links(at)
    assert text == "Open this cell in Browse"
    q = BrowseQuery.from_query_string(query)
    assert q.splits == ("test",) and q.rounds == (1,) and q.a_said == A and q.b_said == B
    with open_store(db) as s:
        listed = view_item_ids(s, q)
    assert cell_size(at) == len(listed) == 4  # odd prefixes of the test split in round 1


def test_browse_link_says_when_browse_cannot_narrow_to_the_cell(tmp_path, monkeypatch):
    _, at = cell_page(tmp_path, monkeypatch, two_readers(blind_changes=True), agr_phase="blind",
                      agr_category="cardiology",
                      **{f"agr_a:{PREFIX_Q}": "Dr One", f"agr_b:{PREFIX_Q}": "Dr Two"})
    ((text, _),) = browse_links(at)
    assert text != "Open this cell in Browse" and "not exactly this cell" in text
    said = [c.value for c in at.caption if "its list is not these items" in c.value]
    assert said and "current answer, not the clinicians' blind answers" in said[0]
    assert "no category filter (this screen shows cardiology only)" in said[0]


def test_no_browse_link_for_a_cell_of_rubric_criteria(tmp_path, monkeypatch):
    records = [human("Dr One"), human("Dr Two")]
    for i in range(6):
        uid, key = f"hb-{i}", f"hb:{i}"
        records += [ItemRecord(uid=uid, kind="graded_conversation", dataset="hb", payload={}),
                    QuestionRecord(key=key, codebook="rubric", kind="criterion", text=f"c{i}",
                                   item_uid=uid, points=1),
                    answer(uid, "Dr One", "met", key),
                    answer(uid, "Dr Two", "met" if i % 2 else "not_met", key)]
    _, at = cell_page(tmp_path, monkeypatch, records)
    assert cell_size(at) == 3
    assert browse_links(at) == []
    assert any("cannot be opened there" in c.value for c in at.caption)
