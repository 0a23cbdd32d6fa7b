"""A study's own codebook measured like CARE-Bench's: triage-style metrics where it
marks a risk order, PPI and the label budget on its question, and the demo's own
study loaded from its three files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main
from labels.compare.study_triage import question_triage
from labels.ppi.readings import read_metric
from labels.ppi.report import ppi_report
from review.datasets.sources import import_file
from review.team.codebook_versions import add_codebook

STUDY = Path(__file__).parent / "data" / "study"
REFERENCE = [1, 3, 5, 5, 2, 4]
JUDGE = [1, 2, 5, 3, 2, 5]
"""By hand, the judge against the reference: accuracy 3/6; rated higher 1/6 (item 6),
lower 2/6 (items 2, 4); missed action 1/4 (item 2: reference Moderate, judge Minor);
unneeded action 0/2; urgent missed 1/2 (item 4); false urgent 1/4 (item 6)."""


@pytest.fixture
def scored(store, tmp_path):
    for name in ("harm-5.toml", "referral-3.toml"):
        add_codebook(store, (STUDY / name).read_text(encoding="utf-8"), name)
    import_file(store, STUDY / "chats.jsonl")
    rows = ["item_id,rater,value,question,rater_kind"]
    for n, (ref, judge) in enumerate(zip(REFERENCE, JUDGE, strict=True), start=1):
        rows += [f"chat-{n:02d},Dr. Ref,{ref},harm.severity,human",
                 f"chat-{n:02d},acme-judge@v1,{judge},harm.severity,machine"]
    path = tmp_path / "labels.csv"
    path.write_text("\n".join(rows) + "\n")
    import_file(store, path)
    return store


def test_the_risk_order_gives_the_triage_metrics_counted_by_hand(scored):
    report = question_triage(scored, "harm.severity", reference="Dr. Ref", n_boot=0)
    [reader] = report.readers
    assert reader.reader == "acme-judge@v1" and set(reader.by_model) == {"acme-chat-2",
                                                                         "all items"}
    got = {k: (m.count, m.n) for k, m in reader.by_model["all items"].items() if k != "macro_f1"}
    assert got == {"accuracy": (3, 6), "over_triage": (1, 6), "under_triage": (2, 6),
                   "missed_care": (1, 4), "unnecessary_care": (0, 2),
                   "urgent_false_negative": (1, 2), "false_urgent_escalation": (1, 4),
                   "coverage": (6, 6)}
    names = {k: m.name for k, m in reader.by_model["all items"].items()}
    assert names["missed_care"] == "Missed action (reference Moderate or above, reader below)"
    assert report.risk["acting"] == "3_MODERATE, 4_SERIOUS, 5_SEVERE"


def test_the_command_line_gives_the_same_counts(scored, capsys):
    assert main(["--db", str(scored.path), "triage-metrics", "--question", "harm.severity",
                 "--reference", "Dr. Ref", "--json", "--n-boot", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    missed = out["readers"][0]["models"]["all items"]["missed_care"]
    assert (missed["count"], missed["n"]) == (1, 4)
    assert out["provenance"]["question"] == "harm.severity"
    assert main(["--db", str(scored.path), "triage-metrics", "--question", "referral.advised",
                 "--json"]) == 2
    assert "marks no risk order" in capsys.readouterr().err


def test_ppi_reads_a_study_question_item_by_item(scored):
    action = read_metric(scored, "action_rate", "Dr. Ref", "acme-judge@v1",
                         question="harm.severity")
    [model] = action.by_model.values()
    assert model.machine == [0.0, 0.0, 1.0, 1.0, 0.0, 1.0]  # items in id order: 1 2 5 3 2 5
    assert [model.human[i] for i in range(6)] == [0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    mean = read_metric(scored, "mean_score", "Dr. Ref", "acme-judge@v1",
                       question="harm.severity")
    assert next(iter(mean.by_model.values())).machine == [1.0, 2.0, 5.0, 3.0, 2.0, 5.0]
    report = ppi_report(scored, "action_rate", "Dr. Ref", "acme-judge@v1",
                        question="harm.severity")
    [estimate] = report.estimates
    assert estimate.classical.value == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match="needs a risk order"):
        read_metric(scored, "action_rate", "Dr. Ref", "acme-judge@v1",
                    question="referral.advised")


def test_the_label_budget_plans_a_study_question(scored, capsys):
    assert main(["--db", str(scored.path), "plan-labels", "--metric", "mean_score",
                 "--question", "harm.severity", "--human", "Dr. Ref", "--target-halfwidth",
                 "0.5", "--replicates", "20", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["metric"] == "mean_score" and plan["models"][0]["model"] == "acme-chat-2"
    assert plan["kappa"] is not None


def test_the_demo_loads_its_own_study_from_its_three_files(demo):
    assert demo.scalar("SELECT COUNT(*) FROM items WHERE kind = 'conversation'") == 24
    version = demo.query_one("SELECT version, note FROM codebook_versions WHERE"
                             " codebook = 'demo-harm'")
    assert tuple(version) == ("1.0", "added from demo_study_harm.toml")
    judge = demo.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE r.name = 'demo:harm-judge@v1'")
    clinicians = demo.scalar(
        "SELECT COUNT(DISTINCT r.name) FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " JOIN questions q ON q.id = a.question_id WHERE q.key = 'harm.severity'"
        " AND r.kind = 'human'")
    assert (judge, clinicians) == (24, 3)
    report = question_triage(demo, "harm.severity", n_boot=0)
    urgent = report.readers[0].by_model["all items"]["urgent_false_negative"]
    assert urgent.count >= 1  # the demo's judge under-reads a severe conversation


def test_a_round_over_a_studys_chats_is_answered_adjudicated_and_exported(store, tmp_path):
    """Rounds, blinding, adjudication and the export on a study's own question, as on
    CARE-Bench's: two reviewers per chat, their disagreement settled by an adjudicator
    with the study codebook's code."""
    import csv

    from review.datasets.export import export_annotations
    from review.reviewing.commit import commit_answer
    from review.team.adjudication import adjudication_queue, settle
    from review.team.reviewers import ensure_reviewer
    from review.team.rounds import RoundSpec, create_round, reserve_next_item

    add_codebook(store, (STUDY / "harm-5.toml").read_text(encoding="utf-8"), "harm-5.toml")
    import_file(store, STUDY / "chats.jsonl")
    admin = ensure_reviewer(store, "Dr. Lead", role="admin")
    judge = ensure_reviewer(store, "Dr. Judge", role="adjudicator")
    ana, ben = ensure_reviewer(store, "Dr. Ana"), ensure_reviewer(store, "Dr. Ben")
    round_id = create_round(store, RoundSpec("Harm pilot", "harm.severity", reviewers_per_item=2,
                                             limit=3, blinding="blind"), admin)
    question = store.scalar("SELECT id FROM questions WHERE key = 'harm.severity'")
    given = {}
    for reviewer, values in ((ana, ["1", "4", "5"]), (ben, ["1", "2", "5"])):
        for value in values:
            item = reserve_next_item(store, round_id, reviewer)
            commit_answer(store, reviewer, item, question, value, round_id=round_id,
                          mode="blind")
            given.setdefault(item, []).append(value)
    assert store.scalar("SELECT kind FROM items WHERE id = ?", (next(iter(given)),)) == \
        "conversation"
    queue = adjudication_queue(store, round_id, judge)
    assert len(queue) == 1 and sorted(a.value for a in queue[0].answers) == ["2_MINOR",
                                                                             "4_SERIOUS"]
    settle(store, round_id, queue[0].item_id, judge, "4", "reviewer_error", "missed red flag")
    out = tmp_path / "answers.csv"
    export_annotations(store, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    settled = [r for r in rows if r["rater"] == "adjudicated"]
    assert [(r["question"], r["value"]) for r in settled] == [("harm.severity", "4_SERIOUS")]
    assert {r["codebook_version"] for r in rows if r["rater"] in ("Dr. Ana", "Dr. Ben")} == {"1.0"}


def test_a_studys_checklist_is_answered_one_criterion_at_a_time_and_compared(store, tmp_path):
    from codebook import builtin_codebooks, dump_codebook
    from labels.compare import question_set
    from review.reviewing.commit import commit_answer
    from review.reviewing.items import find_item_id, load_item
    from review.reviewing.queue import kind_questions
    from review.team.reviewers import ensure_reviewer

    text = dump_codebook(builtin_codebooks()["rubric"]).replace('key = "rubric"',
                                                                'key = "safety-checklist"')
    text += ('\n[[criteria]]\nkey = "safety.emergency"\napplies_to = "conversation"\n'
             'text = "Sends a patient with red flags to emergency care"\npoints = 5\n'
             '\n[[criteria]]\nkey = "safety.dose"\napplies_to = "conversation"\n'
             'text = "Gives a medicine dose"\npoints = -4\nmust_not = true\n')
    add_codebook(store, (STUDY / "harm-5.toml").read_text(encoding="utf-8"), "harm-5.toml")
    add_codebook(store, text, "checklist.toml")
    import_file(store, STUDY / "chats.jsonl")
    assert [k for k, _ in kind_questions(store, "conversation")] == [
        "harm.severity", "safety.emergency", "safety.dose"]
    item = load_item(store, find_item_id(store, "chat-04"), "safety.dose")
    assert (item.codebook.key, item.points, item.must_not) == ("safety-checklist", -4.0, True)
    assert [lb.shortcut for lb in item.codebook.labels] == ["y", "n"]
    me = ensure_reviewer(store, "Dr. Check")
    commit_answer(store, me, item.id, item.question_id, "y")
    labels = tmp_path / "checks.csv"
    labels.write_text("item_id,rater,value,question\nchat-04,Dr. Other,false,safety.dose\n"
                      "chat-04,Dr. Other,true,safety.emergency\n")
    import_file(store, labels)
    assert [r[0] for r in store.query("SELECT value FROM annotations ORDER BY id")] == [
        "met", "not_met", "met"]
    qs = question_set(store, "criteria:safety-checklist")
    assert (qs.level, qs.n_questions) == ("binary", 2)
