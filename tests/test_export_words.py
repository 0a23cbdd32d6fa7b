"""The case-study sheet in words a reader uses, as written (issue 29, point 6):
labels and raters by what they are (the codes and stored names beside, it is a
researcher's sheet), items by what they are, a patient's turn called a turn, and
no Markdown escapes in the raw file where nothing needed one (`&#58;`, `\\-`
mid-line): rendered by a CommonMark renderer, every line reads as written."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from review.browse import BrowseQuery, case_study_markdown, gather_cases, selected_item_ids
from review.browse.export import plain_line
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer

RENDERERS = {"CommonMark": MarkdownIt("commonmark").enable("table"),
             "GitHub-like, addresses linked": MarkdownIt("gfm-like").enable("linkify")}
TRICKY = [
    "Dr. A: says *not* urgent - see https://nhs.uk/a_b or www.nhs.uk, mail a@b.org",
    "- begins like a list item", "# begins like a heading", "1. begins like a numbered list",
    "> begins like a quote", "+ plus", "snake_case_word, _emphasis_, **strong**, `code`",
    "<b>tag</b> & &amp; &#58; 5 < 7 [link](x) ![image](y)", "a | pipe, ~~struck~~, ends with #",
    "back\\slash, \\* star, C:\\path\\file_name", "Urgent care (1B)", "trailing_",
]


def text_of(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize("renderer", list(RENDERERS))
@pytest.mark.parametrize("words", TRICKY)
def test_a_line_of_the_sheet_renders_as_written_and_makes_nothing(renderer, words):
    md = RENDERERS[renderer]
    for where, line in (("a list item", f"- {plain_line(words)}"),
                        ("a heading", f"## {plain_line(words)}"),
                        ("a table cell", f"| a |\n|---|\n| {plain_line(words, table=True)} |")):
        rendered = md.render(line)
        cell = re.search(r"<td>(.*?)</td>", rendered, re.S)
        said = text_of(cell.group(1)) if where == "a table cell" and cell else text_of(rendered)
        assert said == words, (where, line, rendered)
        tags = set(re.findall(r"<(\w+)", rendered))
        assert tags <= {"ul", "li", "h2", "table", "thead", "tbody", "tr", "th", "td"}, (
            where, rendered)


def test_escapes_stand_only_where_markdown_would_read_something():
    assert plain_line("Self-care: fluids, rest - and come back if worse.") == (
        "Self-care: fluids, rest - and come back if worse.")  # was "Self\\-care&#58; ..."
    assert plain_line("- a note that begins with a dash") == "\\- a note that begins with a dash"
    assert plain_line("snake_case") == "snake_case"


def test_the_sheet_names_labels_raters_and_items_in_words_beside_their_codes(demo):
    judge = ensure_reviewer(demo, "Dr. Sam Rivera")
    item = demo.scalar("SELECT id FROM items WHERE uid = 'demo_case_0001_r02'")
    qid = demo.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(demo, judge, item, qid, "1B", rationale="Thunderclap: worst ever - sudden.")
    ids = selected_item_ids(demo, BrowseQuery(text="thunderclap"))
    sheet = case_study_markdown(gather_cases(demo, ids, with_blocks=True))
    assert "&#58;" not in sheet and not re.search(r"\w\\-\w|\s\\-\s", sheet), sheet
    assert "## Case 1: Conversation 1, after the patient's 2nd message" in sheet
    assert "Patient · turn 1" in sheet and "round" not in sheet.split("**Provenance**")[0]
    assert "| The reference label (carebench-gold) | Urgent care (1B) |" in sheet
    assert "| Dr. Sam Rivera | Urgent care (1B) |" in sheet
    assert "- Dr. Sam Rivera: Thunderclap: worst ever - sudden." in sheet
    for renderer in RENDERERS.values():
        shown = text_of(renderer.render(sheet))
        assert "Dr. Sam Rivera: Thunderclap: worst ever - sudden." in shown
        assert "Conversation 1, after the patient's 2nd message" in shown
