"""review.text: untrusted text shown exactly as written, able to do nothing.

What the browser makes of it is tested in tests/test_browser_untrusted.py;
here, that nothing in the Markdown is left for a renderer to read as syntax."""

from __future__ import annotations

import random
import re
import string

import pytest

from review.text import WORD_JOINER, safe_markdown, text_blocks


def unescape(md: str) -> str:
    """What a Markdown renderer shows for `safe_markdown`'s output: escapes
    dropped, references decoded, hard breaks as line breaks."""
    md = md.replace("  \n", "\n").replace("&#58;", ":").replace("&#160;", " ")
    return re.sub(r"\\([" + re.escape(string.punctuation) + "])", r"\1", md).replace(WORD_JOINER, "")


def bare_syntax(md: str) -> list[str]:
    """ASCII punctuation left unescaped: what a renderer could read as syntax."""
    md = md.replace("&#58;", "").replace("&#160;", "").replace("  \n", "\n")
    md = re.sub(r"\\[" + re.escape(string.punctuation) + "]", "", md)
    return [c for c in md if c in string.punctuation]


@pytest.mark.parametrize("raw", [
    "x < y & <b>bold</b>", "costs $5 or $6", "[click](http://evil.example)",
    "![x](http://tracker.example/p.png)", "<https://evil.example>", "run `clinic call <tool> '<json>'`",
    "```html\n<script>alert(1)</script>\n```", ":red[alarm] :smile: :material/home: 10:30",
    "see https://evil.example/a?b=1. Or www.evil.example, or bob@evil.example!",
    "# Heading\n- list\n1. ordered\n> quote\n| a | b |\n---\n~~strike~~ **bold** _it_",
    "[r]: //evil.example\n\n[r]", "a\\`b\\\\c", "&amp; &#60; &lt;",
])
def test_text_is_shown_as_written_with_nothing_left_to_read_as_syntax(raw):
    md = safe_markdown(raw)
    assert bare_syntax(md) == []
    assert unescape(md) == raw


def test_lines_and_indentation_are_kept_and_four_spaces_are_not_code():
    md = safe_markdown("one\ntwo\r\nthree\rfour\n\n    indented\n\ttab")
    assert md.split("  \n") == ["one", "two", "three", "four", "", "&#160;" * 4 + "indented",
                                "&#160;" * 4 + "tab"]


def test_addresses_cannot_be_autolinked():
    md = safe_markdown("https://a.example www.b.example c@d.example HTTP://E.EXAMPLE javascript:x")
    for trigger in ("https&#58;", "www\\.", "c\\@", "HTTP&#58;", "javascript&#58;"):
        assert trigger not in md  # a word joiner sits inside each
    assert unescape(md) == "https://a.example www.b.example c@d.example HTTP://E.EXAMPLE javascript:x"


def test_any_text_round_trips_and_leaves_no_syntax():
    rng = random.Random(3)
    alphabet = string.printable + "é—€\u00a0"
    for _ in range(500):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))).replace("\x0b", "") \
            .replace("\x0c", "")
        md = safe_markdown(raw)
        assert bare_syntax(md) == [], raw
        expected = raw.replace("\r\n", "\n").replace("\r", "\n")
        expected = "\n".join(re.sub(r"^[ \t]+", lambda m: " " * len(m.group(0).expandtabs(4)), line)
                             for line in expected.split("\n"))
        assert unescape(md) == expected, raw


def test_fenced_code_blocks_are_cut_out_to_be_shown_as_code():
    text = "Run this:\n```bash {onclick=x}\nrm -rf / <b>\n```\nthen ~~~\n~~~\nunclosed <i>\n"
    assert text_blocks(text) == [
        ("prose", None, "Run this:"), ("code", "bash", "rm -rf / <b>"), ("prose", None, "then ~~~"),
        ("code", None, "unclosed <i>\n")]
    assert text_blocks("``` not a fence ` here\nplain") == [("prose", None, "``` not a fence ` here\nplain")]
