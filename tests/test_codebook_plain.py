"""Codebook wording is text: shown as written on the Codebook and Review screens.

An admin's edit of a label (its name, definition, rules, example) used to be
rendered as Markdown: an external image was fetched, links and LaTeX
rendered. Now every piece of it goes through `review.text.safe_markdown`, as
patient and model text does, so nothing in it formats, links or loads."""

from __future__ import annotations

from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from review.team.codebook_versions import edit_label
from review.team.reviewers import ensure_reviewer, find_reviewer
from review.text import safe_markdown
from review.workspace import open_store
from tests.conftest import ROOT

HOSTILE = {
    "short": "Ask **now** ![p](http://evil.example/pixel.png)",
    "definition": "See [the guide](http://evil.example/) or $E=mc^2$ :red[alarm] "
                  "<img src=http://evil.example/x.png>",
    "rules": ["![r](http://evil.example/rule.png) first", "`code` and _emphasis_"],
    "example": "https://evil.example/auto-link",
}
CODE = "0A_NO_ESCALATION_INFO_NEEDED"


def hostile_codebook(path) -> None:
    s = open_store(path)
    admin = find_reviewer(s, "Jordan Lee")
    edit_label(s, admin, "carebench-escalation", CODE, HOSTILE, "a hostile edit")
    s.close()


def rendered(at) -> str:
    """Every Markdown string and widget help the page sent to the browser."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [getattr(b, "help", "") or "" for b in at.button]
    parts += [b.label for b in at.button]
    return "\n".join(parts)


def no_live_markup(text: str) -> None:
    """Rendered as a Markdown viewer with GitHub's autolinks would (Streamlit follows
    it), the text makes no image, link or HTML; Streamlit's own syntax (LaTeX, colour)
    is not there unescaped either."""
    html = MarkdownIt("commonmark", {"linkify": True}).enable("linkify").render(text)
    assert "<img" not in html and "<a " not in html
    assert "$E=mc^2$" not in text and ":red[" not in text


def test_the_codebook_screen_shows_an_edited_label_as_written(demo_copy, monkeypatch):
    hostile_codebook(demo_copy)
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Jordan Lee"
    at.run()
    at.switch_page("pages/codebook.py").run()
    assert not at.exception
    text = rendered(at)
    assert safe_markdown(HOSTILE["definition"]) in text
    assert safe_markdown(HOSTILE["short"]) in text
    no_live_markup(text)


def test_the_review_screen_shows_the_codebook_as_written(demo_copy, monkeypatch):
    hostile_codebook(demo_copy)
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Page Test")
    s.close()
    at.query_params["reviewer"] = "Dr. Page Test"
    at.run()
    assert not at.exception
    text = rendered(at)
    assert safe_markdown(HOSTILE["definition"]) in text  # the button's help and the expander
    no_live_markup(text)
