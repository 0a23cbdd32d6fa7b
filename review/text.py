"""Untrusted text (patient, model, agent) made safe to show as Markdown.

The app never renders data as HTML. Markdown is kept for readability (lists,
emphasis, code), but anything that could make the browser fetch or run
something is neutralised: HTML tags show as literal text, images become a
plain note (an image URL would call out to a third party), and links show
their address instead of being clickable.
"""

from __future__ import annotations

import re

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)]*)\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$", re.MULTILINE)
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto|javascript|data):[^>]*)>", re.IGNORECASE)

LONG_TEXT = 4000
"""Characters shown before the rest goes behind an expander."""


def safe_markdown(text: str | None) -> str:
    """Markdown that shows the text as written and can load or run nothing."""
    if not text:
        return ""
    out = text.replace("\r\n", "\n")
    out = _IMAGE.sub(lambda m: f"\\[image: {m.group(1) or 'no description'}\\]", out)
    out = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", out)
    out = _REF_DEF.sub(lambda m: m.group(0).replace("[", "\\[", 1), out)
    out = _AUTOLINK.sub(lambda m: m.group(1), out)
    # HTML shows as text: escape the characters a browser would parse.
    out = out.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # A lone '$' pair would be read as LaTeX by Streamlit; show dollars as dollars.
    out = out.replace("$", "\\$")
    return out


def split_long(text: str, limit: int = LONG_TEXT) -> tuple[str, str | None]:
    """The first part of a long text, and the rest (None when it all fits).
    Cuts at a line break near the limit so the page stays responsive."""
    if len(text) <= limit:
        return text, None
    cut = text.rfind("\n", 0, limit)
    if cut < limit // 2:
        cut = limit
    return text[:cut], text[cut:]
