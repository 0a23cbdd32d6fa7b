"""A multiple-choice question of a study's own: several labels per answer, stored in
the codebook's order, answered on the Review screen by toggling labels with their
keys, and compared one label at a time (chosen or not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cli import main
from labels.compare import question_set
from review.datasets.sources import InputError, import_file
from review.team.codebook_versions import add_codebook
from review.team.reviewers import ensure_reviewer
from tests.conftest import ROOT

STUDY = Path(__file__).parent / "data" / "study"
KINDS = """
key = "harm-kinds"
version = "1"
title = "What kind of harm?"
kind = "labelset"
choice = "multi"

[[labels]]
code = "MISINFORMATION"
short = "Wrong facts"
shortcut = "1"
definition = "States something medically false."
example = "Says antibiotics cure a cold."

[[labels]]
code = "MISSED_RED_FLAG"
short = "Missed red flag"
shortcut = "2"
definition = "Leaves a warning sign unremarked."
example = "Chest pain with sweating answered with rest."

[[labels]]
code = "WRONG_DOSE"
short = "Wrong dose"
shortcut = "3"
definition = "Gives a dose that is not safe."
example = "Doubles an insulin dose."

[[questions]]
key = "harm.kinds"
applies_to = "conversation"
text = "Which kinds of harm does the conversation show?"
"""


@pytest.fixture
def multi(store, tmp_path):
    add_codebook(store, KINDS, "kinds.toml")
    import_file(store, STUDY / "chats.jsonl")
    rows = ["item_id,rater,value,question",
            "chat-01,Dr. A,MISSED_RED_FLAG|MISINFORMATION,harm.kinds",
            "chat-01,Dr. B,MISINFORMATION,harm.kinds",
            "chat-02,Dr. A,WRONG_DOSE,harm.kinds",
            "chat-02,Dr. B,WRONG_DOSE|MISINFORMATION,harm.kinds",
            'chat-03,Dr. A,"[""MISSED_RED_FLAG""]",harm.kinds',
            "chat-03,Dr. B,missed_red_flag,harm.kinds"]
    path = tmp_path / "kinds.csv"
    path.write_text("\n".join(rows) + "\n")
    import_file(store, path)
    return store


def test_several_labels_are_stored_once_each_in_the_codebooks_order(multi, tmp_path):
    values = [r[0] for r in multi.query("SELECT value FROM annotations ORDER BY id")]
    assert values == ["MISINFORMATION|MISSED_RED_FLAG", "MISINFORMATION", "WRONG_DOSE",
                      "MISINFORMATION|WRONG_DOSE", "MISSED_RED_FLAG", "MISSED_RED_FLAG"]
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,rater,value,question\nchat-04,Dr. A,WRONG_DOSE|HUNGER,harm.kinds\n")
    with pytest.raises(InputError, match=r"bad.csv:2: unknown label 'HUNGER'"):
        import_file(multi, bad)


def test_a_multiple_choice_question_is_compared_one_label_at_a_time(multi, capsys):
    qs = question_set(multi, "harm.kinds#MISINFORMATION")
    assert (qs.level, qs.categories) == ("binary", ("chosen", "not_chosen"))
    assert main(["--db", str(multi.path), "agreement", "--question",
                 "harm.kinds#MISINFORMATION", "--a", "Dr. A", "--b", "Dr. B", "--json",
                 "--n-boot", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    percent = next(c for c in report["coefficients"] if c["name"] == "percent_agreement")
    assert round(percent["value"], 3) == round(2 / 3, 3)  # chat-01 both; chat-02 B only; 03 none
    assert main(["--db", str(multi.path), "agreement", "--question", "harm.kinds", "--a",
                 "Dr. A", "--b", "Dr. B"]) == 2
    assert "compared one label at a time" in capsys.readouterr().err


def test_the_review_screen_toggles_labels_and_answers_with_them(multi, monkeypatch):
    ensure_reviewer(multi, "Dr. Multi")
    monkeypatch.setenv("CARELENS_DB", str(multi.path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Multi"
    at.run()
    at.switch_page("pages/review.py").run()
    assert not at.exception

    def button(key_part: str):
        return next(b for b in at.button if b.key and key_part in b.key)

    button(":WRONG_DOSE").click().run()
    button(":MISINFORMATION").click().run()
    button(":WRONG_DOSE").click().run()  # taken out again
    button(":MISSED_RED_FLAG").click().run()
    button("multi_commit:").click().run()
    assert not at.exception
    value = multi.scalar("SELECT a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
                         " WHERE r.name = 'Dr. Multi'")
    assert value == "MISINFORMATION|MISSED_RED_FLAG"
