"""The Agreement screen through Streamlit's AppTest: it opens on the demo with a
non-trivial report, its widgets drive the library, and empty databases explain
themselves.

The Agreement screen and its command line, finding by finding: the statistic follows
the level the report was computed at, triage leaves 'cannot assess' out, drill-down
links open exactly the unit for the same reviewer, the words beside the numbers say
what the numbers mean, and the command line takes the screen's filters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from labels import compare as cmp
from pages._shared import VISITOR_SAW
from review.reviewing.blinding import labels_mark, open_labels
from review.team.reviewers import find_reviewer
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter
from tests.conftest import ROOT
from tests.helpers import CODES, run_cli, shown

REVIEWER = "Dr. Mei Tanaka"


def coefficient_table(at: AppTest):
    frames = [d.value for d in at.dataframe if "Coefficient" in d.value.columns]
    assert frames, "no coefficient table on the page"
    return frames[0]


def review_links(at: AppTest) -> list[str]:
    """Addresses of the item links on the page (Markdown links to the Review screen)."""
    import re

    return [found.group(1) for m in at.markdown for line in m.value.splitlines()
            if (found := re.search(r"\]\((\./[^)]*item=[^)]*)\)", line))]


def test_first_start_on_the_demo_shows_a_real_report(tmp_path, monkeypatch, demo_copy):
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER)
    assert at.selectbox(key="agr_question").value == "carebench.response_action"
    # Raters by role, the name they are stored under beside (what `carelens agreement` takes).
    assert shown(at.subheader[0].value) == (
        "Clinicians' majority vs the mapper, prompt v1 (demo:mapper@v1)")
    table = coefficient_table(at)
    rows = dict(zip(table["Coefficient"], table["Value"], strict=True))
    assert {"Cohen's kappa (quadratic)", "Krippendorff's alpha (ordinal)",
            "Gwet's AC2 (quadratic)", "Macro-F1 (rater A as reference)"} <= set(rows)
    assert all(v != "—" for v in rows.values())
    assert all(" to " in ci for ci in table["95% CI (bootstrap)"])
    assert "Clinicians among themselves" in table.columns
    # The headline and the clinicians' ceiling beside it are the same statistic.
    assert [shown(m.label) for m in at.metric][:3] == ["Krippendorff's alpha (ordinal)", "Percent agreement",
                                                "Clinicians among themselves"]
    assert any(shown(c.value).startswith("Krippendorff's alpha (ordinal) · 95% CI") for c in at.caption)
    assert any(shown(c.value).startswith("95% CI ") and "% to " in shown(c.value) for c in at.caption)
    # the largest disagreeing cell is chosen, and its items link to the Review screen
    cell = at.selectbox(key=next(k for k in at.session_state if str(k).startswith("agr_cell:")))
    assert cell.value is not None and cell.value[0] != cell.value[1]
    links = review_links(at)
    assert links and all(link.startswith("./disagreement?item=") and "%3A%3A" in link
                         and "&question=carebench.response_action&" in link
                         and link.endswith("reviewer=Dr.%20Mei%20Tanaka") for link in links)


def test_choosing_rater_b_and_a_cell_lists_its_items(tmp_path, monkeypatch, demo_copy):
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER)
    at.selectbox(key="agr_b:carebench.response_action").set_value("demo:mapper@v2").run()
    assert not at.exception
    assert shown(at.subheader[0].value) == (
        "Clinicians' majority vs the mapper, prompt v2 (demo:mapper@v2)")
    cell = at.selectbox(key=next(k for k in at.session_state if str(k).startswith("agr_cell:")
                                 and "v2" in str(k)))
    cell.set_value((3, 2)).run()  # clinicians said urgent care, the mapper see a clinician
    assert not at.exception
    said = [m.value for m in at.markdown if "items** where the raters disagree" in m.value]
    assert said and "*Urgent care*" in said[0] and "*See a clinician*" in said[0]
    count = int(said[0].split("**")[1].split()[0])
    assert len(review_links(at)) == count


def test_group_alone_and_blind_filter(tmp_path, monkeypatch, demo_copy):
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER)
    at.selectbox(key="agr_a:carebench.response_action").set_value("group:clinicians")
    at.selectbox(key="agr_b:carebench.response_action").set_value(None).run()
    assert not at.exception
    table = coefficient_table(at)
    assert "Fleiss' kappa" in set(table["Coefficient"])
    assert "Cohen's kappa" not in set(table["Coefficient"])
    # Blind answers by default, said on the screen; the latest only by choice, and said.
    assert at.selectbox(key="agr_phase").value == "blind"
    assert any("Answers used:** clinicians' blind answers" in c.value for c in at.caption)
    # Said once: the filters line does not repeat it.
    assert sum("clinicians' blind answers" in c.value for c in at.caption) == 1
    at.selectbox(key="agr_phase").set_value("current").run()
    assert not at.exception
    assert any("Answers used:** clinicians' current answers" in c.value for c in at.caption)


@pytest.mark.parametrize("tab, expected", [
    ("Clinicians", "Each pair of clinicians"),
    ("Machine raters", "Each machine rater against each clinician"),
    ("Triage & leaderboard", "Would the mapper have changed the leaderboard?"),
])
def test_other_sections_render_on_the_demo(tmp_path, monkeypatch, demo_copy, tab, expected):
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER, tab=tab)
    assert any(expected in s.value for s in at.subheader)


def test_anchoring_and_meta_eval_sections(tmp_path, monkeypatch, demo_copy):
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER, tab="Anchoring")
    assert any(m.label == "Blind answers revised after the reveal" for m in at.metric)
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER, tab="HealthBench meta-eval")
    metrics = {shown(m.label): m.value for m in at.metric}
    # The demo's grader on its graded conversations, not the agent runs' judge (whose
    # must-ask criteria the demo clinicians answer): sets are split by kind of item.
    assert "The grader (healthbench-grader) vs physicians" in metrics
    assert "Physicians vs each other" in metrics
    assert metrics["Criterion rows"] == "34"
    # With the agent runs' criteria chosen above, the meta-evaluation still takes the
    # conversations': the runs' judge against the demo clinicians is not HealthBench's metric.
    at.selectbox(key="agr_question").set_value("criteria:rubric@trajectory").run()
    assert not at.exception
    assert "The grader (healthbench-grader) vs physicians" in {shown(m.label) for m in at.metric}


def test_rubric_criteria_with_physicians(tmp_path, monkeypatch):
    db = tmp_path / "rubric.db"
    with open_store(db) as store, store.transaction() as conn:
        records = [RaterRecord("judge@v1", "machine", role="judge"),
                   RaterRecord("phys-1", "human"), RaterRecord("phys-2", "human")]
        for i in range(30):
            uid, key, met = f"hb-{i}", f"hb:{i}", i % 3 == 0
            records += [
                ItemRecord(uid=uid, kind="graded_conversation", dataset="hb", payload={},
                           meta={"category": "emergency" if i % 2 else "context"}),
                QuestionRecord(key=key, codebook="rubric", kind="criterion",
                               text=f"criterion {i % 4}", item_uid=uid, points=1,
                               meta={"tags": ["axis:accuracy"]}),
                AnnotationRecord(uid, key, "judge@v1", "met" if met or i % 5 == 0 else "not_met"),
                AnnotationRecord(uid, key, "phys-1", "met" if met else "not_met"),
                AnnotationRecord(uid, key, "phys-2", "met" if met or i % 7 == 0 else "not_met"),
            ]
        RecordWriter(conn, source="test").write(records)
    at = open_page(db, monkeypatch, reviewer="phys-1")
    assert at.selectbox(key="agr_question").value == "criteria:rubric"
    rows = set(coefficient_table(at)["Coefficient"])
    assert {"Gwet's AC1", "PABAK (prevalence- and bias-adjusted kappa)"} <= rows
    links = review_links(at)  # each opens the read-only view of its criterion's labels
    assert links and all(link.startswith("./disagreement?item=hb-") and "&question=hb%3A" in link
                         for link in links)
    at = open_page(db, monkeypatch, reviewer="phys-1", tab="HealthBench meta-eval")
    assert any(shown(m.label) == "The judge (judge@v1) vs physicians" for m in at.metric)


def test_an_empty_database_explains_itself(tmp_path, monkeypatch):
    at = open_page(tmp_path / "empty.db", monkeypatch, reviewer=None)
    assert any("No answers yet" in i.value for i in at.info)


def test_rater_names_are_shown_as_text_not_markdown(tmp_path, monkeypatch):
    """A rater name that is a Markdown image would make the browser fetch it."""
    hostile = "![pic](http://example.invalid/x.png)"
    db = tmp_path / "hostile.db"
    with open_store(db) as store, store.transaction() as conn:
        records = [RaterRecord("Ann", "human"), RaterRecord("Ben", "human"),
                   RaterRecord(hostile, "machine", role="mapper")]
        for i in range(12):
            uid = f"p{i}"
            label = ("0A_NO_ESCALATION_INFO_NEEDED", "1B_ESCALATION_URGENT_CARE")[i % 2]
            records += [ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]}),
                        AnnotationRecord(uid, "carebench.escalation_needed", "Ann", label),
                        AnnotationRecord(uid, "carebench.escalation_needed", "Ben", label),
                        AnnotationRecord(uid, "carebench.escalation_needed", hostile,
                                         "1A_ESCALATION_NONURGENT_CARE" if i % 3 else label)]
        RecordWriter(conn, source="test").write(records)
    at = open_page(db, monkeypatch, reviewer="Ann")
    assert at.selectbox(key="agr_b:carebench.escalation_needed").value == hostile
    texts = [e.value for kind in ("markdown", "caption", "subheader", "success", "warning",
                                  "info") for e in getattr(at, kind)]
    texts += [m.label for m in at.metric] + [x.label for x in at.expander]
    assert any(hostile in shown(text) for text in texts)  # the name as written ...
    assert not any("](http" in text for text in texts)  # ... with nothing left to link or load


Q = "carebench.escalation_needed"


def write(db: Path, records: list) -> Path:
    with open_store(db) as store, store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)
    return db


def two_doctors(db: Path, a: list, b: list) -> Path:
    """Dr. A and Dr. B on prefixes p00.. (codebook indexes; None: no answer, 'ca':
    cannot assess)."""
    recs = [RaterRecord("Dr. A", "human"), RaterRecord("Dr. B", "human")]
    for i, pair in enumerate(zip(a, b, strict=True)):
        uid = f"p{i:02d}"
        recs.append(ItemRecord(uid=uid, kind="prefix", dataset="t", case_id=f"c{i:02d}",
                               round_id=1, split="validation", payload={"turns": ["x"]}))
        for rater, x in zip(("Dr. A", "Dr. B"), pair, strict=True):
            if x == "ca":
                recs.append(AnnotationRecord(uid, Q, rater, None, status="cannot_assess"))
            elif x is not None:
                recs.append(AnnotationRecord(uid, Q, rater, CODES[x]))
    return write(db, recs)


def open_page(db: Path, monkeypatch, reviewer: str | None = None, tab: str | None = None,
              **state) -> AppTest:
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    if reviewer:
        at.query_params["reviewer"] = reviewer
        with open_store(db) as s:  # a researcher who chose to see every rater's labels
            open_labels(s, find_reviewer(s, reviewer), "agreement", 0)
    else:  # a visitor with no name who chose to see them at the gate (pages._shared)
        with open_store(db) as s:
            at.session_state[VISITOR_SAW] = {"screen": "agreement",
                                             "covered": list(labels_mark(s)), "recorded": []}
    at.run()
    at.switch_page("pages/agreement.py")
    if tab:
        at.session_state["agr_tab"] = tab
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def pair_state(question: str, a: str, b: str, **more) -> dict:
    return {"agr_question": question, f"agr_a:{question}": a, f"agr_b:{question}": b, **more}


def coefficients(at: AppTest) -> dict[str, str]:
    table = next(d.value for d in at.dataframe if "Coefficient" in d.value.columns)
    return dict(zip(table["Coefficient"], table["Value"], strict=True))


def item_lines(at: AppTest) -> list[str]:
    return [line for m in at.markdown for line in m.value.splitlines()
            if line.startswith("- [") and "item=" in line]


# -- 1. 'cannot assess' counted: an ordinal set is compared as nominal, everywhere ----------

A = [0, 3, 0, 3, 3, 0, 1, 2]
B = [0, 3, 0, 3, "ca", 1, 1, 2]


def test_counting_cannot_assess_makes_the_compared_set_nominal(tmp_path):
    with open_store(two_doctors(tmp_path / "ca.db", A, B)) as s:
        qs = cmp.question_set(s, Q)
        assert cmp.compared_question_set(qs, cmp.Filters()).level == "ordinal"
        counted = cmp.compared_question_set(qs, cmp.Filters(include_cannot_assess=True))
        report = cmp.agreement_report(s, Q, "Dr. A", "Dr. B", {"include_cannot_assess": True})
    assert counted.level == report.question_set.level == "nominal"


def test_with_cannot_assess_counted_the_page_uses_the_reports_statistics(tmp_path, monkeypatch):
    db = two_doctors(tmp_path / "ca.db", A, B)
    at = open_page(db, monkeypatch, **pair_state(Q, "Dr. A", "Dr. B", agr_cannot=True,
                                                 **{f"agr_by:{Q}": "round"}))
    values = coefficients(at)
    labels = [shown(m.label) for m in at.metric]
    assert labels[0] == "Cohen's kappa" and labels[0] in values  # the nominal headline
    head = next(shown(s.value) for s in at.subheader if s.value.startswith("By patient"))
    name = head.split(": ", 1)[1]
    assert name == "Krippendorff's alpha (nominal)"
    per_round = next(d.value for d in at.dataframe if "Patient's turn" in d.value.columns)
    assert per_round["Value"][0] == values[name]  # one group: the table's own figure
    assert any(shown(c.value).startswith("Nominal labels ('cannot assess' counted")
               for c in at.caption)


# -- 2. triage never takes 'cannot assess' as an escalation label ---------------------------

def test_triage_leaves_cannot_assess_out_whatever_the_filter(demo):
    counted = cmp.triage_comparison(demo, cmp.Filters(include_cannot_assess=True))
    plain = cmp.triage_comparison(demo, cmp.Filters())
    assert counted.labellings and counted.labellings == plain.labellings
    said = [n for n in counted.notes if "'cannot assess'" in n]
    assert said and said[0].startswith("12 'cannot assess' answers (12 on prefixes")
    assert any(n.startswith("12 'cannot assess' answers") for n in plain.notes)


def test_the_full_bundle_counts_cannot_assess_without_failing(demo):
    report, extras = cmp.agreement_bundle(demo, Q, cmp.MAJORITY, "carebench-gold",
                                          {"include_cannot_assess": True}, n_boot=50)
    triage = next(x for x in extras if isinstance(x, cmp.TriageReport))
    assert triage.labellings and report.question_set.level == "nominal"


def test_triage_tab_with_cannot_assess_counted(demo_copy, monkeypatch):
    at = open_page(demo_copy, monkeypatch, tab="Triage & leaderboard", agr_cannot=True)
    assert any("Would the mapper have changed the leaderboard?" in s.value for s in at.subheader)
    assert any("'cannot assess' answers" in shown(c.value) for c in at.caption)


# -- 3, 4, 5. a cell's links open exactly its units, for the same reviewer ------------------

def test_step_error_links_open_the_step(demo_copy, monkeypatch):
    q = "trajectory.step_error"
    at = open_page(demo_copy, monkeypatch, reviewer="Dr. Mei Tanaka",
                   **pair_state(q, "Dr. Amara Okafor", "Dr. Lukas Brenner"))
    lines = item_lines(at)
    assert lines and all("&target=step%3A" in line and " · step " in line for line in lines), lines


def test_criterion_links_say_which_criterion(tmp_path, monkeypatch):
    recs = [RaterRecord("judge@v1", "machine"), RaterRecord("phys-1", "human")]
    for i in range(1, 6):
        recs.append(ItemRecord(uid=f"hb-{i}", kind="graded_conversation", dataset="hb",
                               payload={}))
    for c, text in (("a", "Advises emergency care"), ("b", "Asks about allergies")):
        recs += [QuestionRecord(key=f"hb:1:{c}", codebook="rubric", kind="criterion", text=text,
                                item_uid="hb-1", points=1),
                 AnnotationRecord("hb-1", f"hb:1:{c}", "judge@v1", "met"),
                 AnnotationRecord("hb-1", f"hb:1:{c}", "phys-1", "not_met")]
    for i in range(2, 6):
        recs += [QuestionRecord(key=f"hb:{i}:a", codebook="rubric", kind="criterion",
                                text="Advises emergency care", item_uid=f"hb-{i}", points=1),
                 AnnotationRecord(f"hb-{i}", f"hb:{i}:a", "judge@v1", "met"),
                 AnnotationRecord(f"hb-{i}", f"hb:{i}:a", "phys-1", "met")]
    db = write(tmp_path / "crit.db", recs)
    q = "criteria:rubric"
    at = open_page(db, monkeypatch, reviewer="phys-1", **pair_state(q, "phys-1", "judge@v1"))
    lines = [shown(line) for line in item_lines(at)]
    assert len(lines) == 2 and len(set(lines)) == 2
    assert {line.split(" · criterion: ")[1] for line in lines} == {
        "Advises emergency care", "Asks about allergies"}


def test_the_browse_link_keeps_the_reviewer(tmp_path, monkeypatch):
    db = two_doctors(tmp_path / "b.db", [0] * 6 + [0, 2], [0] * 6 + [1, 3])
    at = open_page(db, monkeypatch, reviewer="Dr. A", **pair_state(Q, "Dr. A", "Dr. B"))
    assert all("reviewer=Dr.%20A" in line for line in item_lines(at))
    browse = next(m.value for m in at.markdown if "in Browse](./browse?" in m.value)
    assert browse.rstrip(")").endswith("&reviewer=Dr.%20A")


# -- 6. no shared unit is not full agreement --------------------------------------------------

def test_raters_with_no_shared_unit_have_nothing_to_compare(tmp_path, monkeypatch):
    db = two_doctors(tmp_path / "d.db", [0] * 5 + [None] * 5, [None] * 5 + [1] * 5)
    at = open_page(db, monkeypatch, **pair_state(Q, "Dr. A", "Dr. B"))
    assert {shown(m.label): m.value for m in at.metric}["Units compared"] == "0"
    assert "The two raters agree on every unit." not in [c.value for c in at.caption]
    assert any("no unit in common" in shown(i.value) and "nothing to compare" in i.value
               for i in at.info)


# -- 7. the meta-evaluation names the phase filter that hid the physicians ------------------

def test_meta_eval_says_the_phase_filter_left_no_physician_label(demo):
    assert cmp.meta_eval(demo, n_boot=20).n_rows == 34
    # Imported physician labels count as blind (their file gives no phase): the default
    # and "blind" keep them; after-reveal answers only leaves none, and says so.
    assert cmp.meta_eval(demo, None, None, cmp.Filters(phase="blind"), n_boot=20).n_rows == 34
    m = cmp.meta_eval(demo, None, None, cmp.Filters(phase="after_reveal"), n_boot=20)
    assert m.explanation.startswith("The phase filter (clinicians' after-reveal answers only "
                                    "(given once the machine label was shown)) leaves "
                                    "no physician label on these criteria")
    assert "No physician" not in m.explanation


# -- 8. the kappa paradox, beside the headline ---------------------------------------------

def test_the_kappa_paradox_is_explained_beside_the_headline(tmp_path, monkeypatch):
    db = two_doctors(tmp_path / "k.db", [0] * 18 + [0, 1], [0] * 18 + [1, 0])
    at = open_page(db, monkeypatch, **pair_state(Q, "Dr. A", "Dr. B"))
    assert float(at.metric[0].value) < 0 and at.metric[1].value == "90%"
    said = [shown(c.value) for c in at.caption if "paradox" in c.value]
    assert said == ["95% of the answers are \"Ask first\": with one answer this common, Cohen's "
                    "kappa (quadratic) expects most agreement to happen by chance, so it stays "
                    "low at 90% agreement (the prevalence, or kappa, paradox). Gwet's AC2 "
                    "(quadratic) reads 0.99: it corrects for chance in a way a dominant answer "
                    "sways far less."]


def test_no_paradox_note_on_balanced_answers_or_real_disagreement(tmp_path):
    balanced = two_doctors(tmp_path / "bal.db", [0, 1, 2, 3] * 5, [0, 1, 2, 3] * 4 + [1, 0, 3, 2])
    with open_store(balanced) as s:
        report = cmp.agreement_report(s, Q, "Dr. A", "Dr. B", n_boot=50)
    assert cmp.prevalence_note(report, report.coefficient("cohen_kappa_quadratic")) is None
    skewed = two_doctors(tmp_path / "low.db", [0] * 14 + [1] * 6, [0] * 20)  # 70% agreement
    with open_store(skewed) as s:
        report = cmp.agreement_report(s, Q, "Dr. A", "Dr. B", n_boot=50)
    assert cmp.prevalence_note(report, report.coefficient("cohen_kappa_quadratic")) is None


# -- 9. the command line takes the screen's filters ------------------------------------------

def test_agreement_command_reproduces_the_screens_filters(capsys, demo):
    code, out, err = run_cli(capsys, "--db", demo.path, "agreement", "--question-set", Q,
                             "--a", "group:majority", "--b", "carebench-gold", "--round", "2",
                             "--category", "general", "--count-cannot-assess", "--json")
    assert code == 0, err
    given = json.loads(out)
    flt = cmp.filters_from({"round": 2, "category": "general", "include_cannot_assess": True})
    report = cmp.agreement_report(demo, Q, "group:majority", "carebench-gold", flt)
    assert given["filters"]["round_id"] == 2 and given["filters"]["include_cannot_assess"]
    assert given["question_set"]["level"] == "nominal"
    assert given["n_items"] == report.n_units
    assert [c["value"] for c in given["coefficients"]] == [c.value for c in report.coefficients]


def test_triage_command_reproduces_the_tabs_filters(capsys, demo):
    code, out, err = run_cli(capsys, "--db", demo.path, "triage-metrics", "--split",
                             "validation", "--round", "1", "--phase", "blind", "--json")
    assert code == 0, err
    given = json.loads(out)
    report = cmp.triage_comparison(demo, cmp.Filters(split="validation", round_id=1,
                                                     phase="blind"))
    assert given["filters"]["split"] == "validation" and given["filters"]["phase"] == "blind"
    assert [x["n_responses"] for x in given["labellings"]] == [
        x.n_responses for x in report.labellings]


@pytest.mark.parametrize("command, options", [
    ("agreement", ("--round", "--category", "--count-cannot-assess", "--phase", "--split")),
    ("triage-metrics", ("--split", "--round", "--phase", "--category", "--dataset")),
])
def test_filter_options_have_help(capsys, command, options):
    code, text, _ = run_cli(capsys, command, "-h")
    assert code == 0
    for option in options:
        assert option in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(option in readme for option in options)


def test_an_unknown_phase_is_refused_with_the_list(capsys, demo_copy):
    code, _, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--phase", "blindly")
    assert code == 2 and "invalid choice: 'blindly'" in err and "'after_reveal'" in err
