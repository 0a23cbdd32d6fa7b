"""The Agreement screen through Streamlit's AppTest: it opens on the demo with a
non-trivial report, its widgets drive the library, and empty databases explain
themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review.datasets.demo import load_demo
from review.reviewing.criteria import open_labels
from review.team.reviewers import find_reviewer
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter
from tests.helpers import shown

ROOT = Path(__file__).resolve().parent.parent
PAGE = "pages/agreement.py"
REVIEWER = "Dr. Mei Tanaka"


def app_path(tmp_path: Path) -> Path:
    """app.py, or, until app.py lists the Agreement page, a copy beside links to the
    project's pages and assets that adds it (the lead wires the navigation)."""
    app = ROOT / "app.py"
    source = app.read_text(encoding="utf-8")
    if PAGE in source:
        return app
    home = tmp_path / "app_home"
    if (home / "app.py").exists():
        return home / "app.py"
    home.mkdir()
    for name in ("pages", "assets"):
        (home / name).symlink_to(ROOT / name)
    source = source.replace(
        "st.navigation(PAGES",
        'PAGES.setdefault("Reference", []).append(st.Page("pages/agreement.py", '
        'title="Agreement", url_path="agreement"))\nst.navigation(PAGES', 1)
    (home / "app.py").write_text(source, encoding="utf-8")
    return home / "app.py"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("agreement_demo")
    path = root / "demo.db"
    with open_store(path) as store:
        load_demo(store, root / "files")
    return path


def open_page(tmp_path, monkeypatch, db: Path, reviewer: str | None = REVIEWER,
              tab: str | None = None) -> AppTest:
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(app_path(tmp_path)), default_timeout=60)
    if reviewer:
        at.query_params["reviewer"] = reviewer
        with open_store(db) as s:  # a researcher who chose to see every rater's labels
            open_labels(s, find_reviewer(s, reviewer), "agreement", 0)
    at.run()
    at.switch_page(PAGE)
    if tab:
        at.session_state["agr_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def coefficient_table(at: AppTest):
    frames = [d.value for d in at.dataframe if "Coefficient" in d.value.columns]
    assert frames, "no coefficient table on the page"
    return frames[0]


def review_links(at: AppTest) -> list[str]:
    """Addresses of the item links on the page (Markdown links to the Review screen)."""
    return [line.split("](", 1)[1].rstrip(")") for m in at.markdown
            for line in m.value.splitlines() if "](./" in line and "item=" in line]


def test_first_start_on_the_demo_shows_a_real_report(tmp_path, monkeypatch, demo_db):
    at = open_page(tmp_path, monkeypatch, demo_db)
    assert at.selectbox(key="agr_question").value == "carebench.response_action"
    assert shown(at.subheader[0].value) == "Clinicians' majority vs demo:mapper@v1"
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
    assert links and all(link.startswith("./?kind=response&item=") and "%3A%3A" in link
                         and link.endswith("reviewer=Dr.%20Mei%20Tanaka") for link in links)


def test_choosing_rater_b_and_a_cell_lists_its_items(tmp_path, monkeypatch, demo_db):
    at = open_page(tmp_path, monkeypatch, demo_db)
    at.selectbox(key="agr_b:carebench.response_action").set_value("demo:mapper@v2").run()
    assert not at.exception
    assert shown(at.subheader[0].value) == "Clinicians' majority vs demo:mapper@v2"
    cell = at.selectbox(key=next(k for k in at.session_state if str(k).startswith("agr_cell:")
                                 and "v2" in str(k)))
    cell.set_value((3, 2)).run()  # clinicians said urgent care, the mapper see a clinician
    assert not at.exception
    said = [m.value for m in at.markdown if "items** where the raters disagree" in m.value]
    assert said and "*Urgent care*" in said[0] and "*See a clinician*" in said[0]
    count = int(said[0].split("**")[1].split()[0])
    assert len(review_links(at)) == count


def test_group_alone_and_blind_filter(tmp_path, monkeypatch, demo_db):
    at = open_page(tmp_path, monkeypatch, demo_db)
    at.selectbox(key="agr_a:carebench.response_action").set_value("group:clinicians")
    at.selectbox(key="agr_b:carebench.response_action").set_value(None).run()
    assert not at.exception
    table = coefficient_table(at)
    assert "Fleiss' kappa" in set(table["Coefficient"])
    assert "Cohen's kappa" not in set(table["Coefficient"])
    at.selectbox(key="agr_phase").set_value("blind").run()
    assert not at.exception
    assert any("blind answers only" in c.value for c in at.caption)


@pytest.mark.parametrize("tab, expected", [
    ("Clinicians", "Each pair of clinicians"),
    ("Machine raters", "Each machine rater against each clinician"),
    ("Triage & leaderboard", "Would the mapper have changed the leaderboard?"),
])
def test_other_sections_render_on_the_demo(tmp_path, monkeypatch, demo_db, tab, expected):
    at = open_page(tmp_path, monkeypatch, demo_db, tab=tab)
    assert any(expected in s.value for s in at.subheader)


def test_anchoring_and_meta_eval_sections(tmp_path, monkeypatch, demo_db):
    at = open_page(tmp_path, monkeypatch, demo_db, tab="Anchoring")
    assert any(m.label == "Blind answers revised after the reveal" for m in at.metric)
    at = open_page(tmp_path, monkeypatch, demo_db, tab="HealthBench meta-eval")
    metrics = {shown(m.label): m.value for m in at.metric}
    # The demo's grader on its graded conversations, not the agent runs' judge (whose
    # must-ask criteria the demo clinicians answer): sets are split by kind of item.
    assert "healthbench-grader vs physicians" in metrics
    assert "Physicians vs each other" in metrics
    assert metrics["Criterion rows"] == "34"
    # With the agent runs' criteria chosen above, the meta-evaluation still takes the
    # conversations': the runs' judge against the demo clinicians is not HealthBench's metric.
    at.selectbox(key="agr_question").set_value("criteria:rubric@trajectory").run()
    assert not at.exception
    assert "healthbench-grader vs physicians" in {shown(m.label) for m in at.metric}


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
    at = open_page(tmp_path, monkeypatch, db, reviewer="phys-1")
    assert at.selectbox(key="agr_question").value == "criteria:rubric"
    rows = set(coefficient_table(at)["Coefficient"])
    assert {"Gwet's AC1", "PABAK (prevalence- and bias-adjusted kappa)"} <= rows
    links = review_links(at)  # graded conversations open in their own screen
    assert links and all(link.startswith("./graded?item=hb-") for link in links)
    at = open_page(tmp_path, monkeypatch, db, reviewer="phys-1", tab="HealthBench meta-eval")
    assert any(shown(m.label) == "judge@v1 vs physicians" for m in at.metric)


def test_an_empty_database_explains_itself(tmp_path, monkeypatch):
    at = open_page(tmp_path, monkeypatch, tmp_path / "empty.db", reviewer=None)
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
    at = open_page(tmp_path, monkeypatch, db, reviewer="Ann")
    assert at.selectbox(key="agr_b:carebench.escalation_needed").value == hostile
    texts = [e.value for kind in ("markdown", "caption", "subheader", "success", "warning",
                                  "info") for e in getattr(at, kind)]
    texts += [m.label for m in at.metric] + [x.label for x in at.expander]
    assert any(hostile in shown(text) for text in texts)  # the name as written ...
    assert not any("](http" in text for text in texts)  # ... with nothing left to link or load
