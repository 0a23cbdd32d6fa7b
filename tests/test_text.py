"""review.text.safe_markdown: untrusted text shown as written, able to load or run nothing."""

from __future__ import annotations

import pytest

from review.text import safe_markdown


@pytest.mark.parametrize("raw, shown", [
    ("x < y & <b>bold</b>", "x &lt; y &amp; &lt;b&gt;bold&lt;/b&gt;"),
    ("costs $5 or $6", "costs \\$5 or \\$6"),
    ("[click](http://evil.example)", "click (`http://evil.example`)"),
    ("![x](http://tracker.example/p.png)", "\\[image: x\\]"),
    ("<https://evil.example>", "`https://evil.example`"),
    # A bare address would be made a link by Markdown itself: it is shown as code.
    ("see https://evil.example/a?b=1. Or www.evil.example, or bob@evil.example!",
     "see `https://evil.example/a?b=1`. Or `www.evil.example`, or `bob@evil.example`!"),
    ("odd http://x.example/`y", "odd ``http://x.example/`y``"),
    # Streamlit's own codes (colours, badges, icons, emoji) open nothing: their colon is a reference.
    (":red[alarm] :blue-badge[b] :material/home: :smile: x:ok: at 10:30 by demo:mapper@v1",
     "&#58;red[alarm] &#58;blue-badge[b] &#58;material/home: &#58;smile: x&#58;ok: at 10:30 by demo:mapper@v1"),
    # Code is shown literally by Markdown: left as written (an entity would show as '&lt;').
    ("run `clinic call <tool> '<json>'` now", "run `clinic call <tool> '<json>'` now"),
    ("``a ` <b> $1``", "``a ` <b> $1``"),
    ("```html\n<script>alert(1)</script>\n```\nthen <i>", "```html\n<script>alert(1)</script>\n```\nthen &lt;i&gt;"),
    ("~~~\n<x>\n~~~~\n<y>", "~~~\n<x>\n~~~~\n&lt;y&gt;"),
    # An unclosed fence runs to the end, as in Markdown.
    ("```\n<b>\n", "```\n<b>\n"),
    # An indented code block (after a blank line, outside a list) too.
    ("Run:\n\n    curl '<host>' && echo $HOME\n\n    x < 1\nthen <i>",
     "Run:\n\n    curl '<host>' && echo $HOME\n\n    x < 1\nthen &lt;i&gt;"),
    ("\tif a < b:", "\tif a < b:"),
])
def test_text_shows_as_written(raw, shown):
    assert safe_markdown(raw) == shown


@pytest.mark.parametrize("raw", [
    "a `b\n\nc` <d>",          # a code span cannot cross a blank line: <d> is prose
    "\\`not <code>\\`",        # escaped backticks open no code span
    "```\"><img src=x onerror=alert(1)>\nbody\n```",  # a fence's info string: a language name only
    # Indented, but not code: a paragraph's next line, a nested list, a list item's paragraph.
    "para\n    <code> ![x](http://t.example/p.png)",
    "- item\n    - <code> ![x](http://t.example/p.png)",
    "1. item\n\n    <code> ![x](http://t.example/p.png)",
    "- a\n\n  more\n\n    <code> ![x](http://t.example/p.png)",
])
def test_what_is_not_code_is_neutralised(raw):
    out = safe_markdown(raw)
    assert "<d>" not in out and "<code>" not in out and "<img" not in out and "![" not in out


def test_fence_info_string_keeps_only_a_language_name():
    assert safe_markdown("```python {onclick=x}\nprint(1)\n```").splitlines()[0] == "```pythononclickx"


def test_a_list_ends_at_a_paragraph_at_the_margin_and_code_may_follow():
    out = safe_markdown("- a\n\nText.\n\n    x < 1")
    assert out.endswith("\n    x < 1")
