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


_BARE_ADDRESS = re.compile(
    r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE)
"""What Markdown (GitHub's autolink literals, which Streamlit follows) would
make a clickable link by itself: a bare web address or e-mail address."""
_TRAILING = ".,;:!?)'\""
_DIRECTIVE_COLON = re.compile(r":(?=[\w+\-]+[\[:]|material/)")
"""A colon that could open one of Streamlit's own Markdown codes: colours and
badges (`:red[...]`, `:blue-badge[...]`), icons (`:material/home:`), emoji
(`:smile:`). Written as a character reference it shows as a colon and opens none."""


def _code_span(text: str) -> str:
    """`text` as an inline code span, shown exactly as written."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _neutralise(text: str) -> str:
    """Text outside code: links, images, HTML and Streamlit's own codes made
    inert. An address (a link's, or a bare one) is shown as code: readable
    and copyable, and not a link."""
    out = _IMAGE.sub(lambda m: f"\\[image: {m.group(1) or 'no description'}\\]", text)
    out = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", out)
    out = _REF_DEF.sub(lambda m: m.group(0).replace("[", "\\[", 1), out)
    out = _AUTOLINK.sub(lambda m: m.group(1), out)
    parts, last = [], 0
    for m in _BARE_ADDRESS.finditer(out):
        address = m.group(0).rstrip(_TRAILING)
        parts += [_prose(out[last:m.start()]), _code_span(address)]
        last = m.start() + len(address)
    parts.append(_prose(out[last:]))
    return "".join(parts)


def _prose(text: str) -> str:
    # HTML shows as text: escape the characters a browser would parse.
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _DIRECTIVE_COLON.sub("&#58;", out)
    # A lone '$' pair would be read as LaTeX by Streamlit; show dollars as dollars.
    return out.replace("$", "\\$")


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
_INFO = re.compile(r"[^\w+#.-]")


def _inline(text: str) -> str:
    """Neutralise a run of text outside fenced blocks, leaving `code spans`
    as written: Markdown shows their content literally (an escaped `<` would
    show as `&lt;`), and nothing in them is parsed as HTML or a link."""
    out, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [_neutralise(text[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(_neutralise(text[last:]))
    return "".join(out)


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])(?:\s|$)")


def _code_indented(line: str) -> bool:
    """Indented by four columns or more: a code line, where Markdown takes it so."""
    return line.startswith(("    ", "\t", " \t", "  \t", "   \t"))


def safe_markdown(text: str | None) -> str:
    """Markdown that shows the text as written and can load or run nothing.
    Code (fenced and indented blocks, and `spans`) is left as written, since
    Markdown shows it literally; a fence's info string keeps only a language
    name.

    An indented line is code only where Markdown is sure to take it so: after
    a blank line (or first), outside any list (whose items nest by indenting).
    Anywhere else it is neutralised like prose: a misreading can only show an
    entity, never leave a link or an image live."""
    if not text:
        return ""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    indented = False  # inside an indented code block
    in_list = False
    blank_before = True
    for line in lines:
        blank = not line.strip()
        if fence is None and indented:
            if blank or _code_indented(line):
                out.append(line)
                blank_before = blank
                continue
            indented = False
        if fence is None:
            m = _FENCE.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                out.append(_inline("\n".join(prose))) if prose else None
                prose = []
                fence = m.group(1)
                out.append(line[: m.start(2)] + _INFO.sub("", m.group(2).strip())[:30])
            elif not blank and blank_before and not in_list and _code_indented(line):
                out.append(_inline("\n".join(prose))) if prose else None
                prose = []
                indented = True
                out.append(line)
            else:
                if _LIST_ITEM.match(line):
                    in_list = True
                elif in_list and not blank and blank_before and not line[:1].isspace():
                    in_list = False  # a paragraph at the margin after a blank line ends the list
                prose.append(line)
        else:
            out.append(line)
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]) \
                    and len(line) - len(line.lstrip(" ")) <= 3:
                fence = None
        blank_before = blank
    if prose:
        out.append(_inline("\n".join(prose)))
    return "\n".join(out)


def split_long(text: str, limit: int = LONG_TEXT) -> tuple[str, str | None]:
    """The first part of a long text, and the rest (None when it all fits).
    Cuts at a line break near the limit so the page stays responsive."""
    if len(text) <= limit:
        return text, None
    cut = text.rfind("\n", 0, limit)
    if cut < limit // 2:
        cut = limit
    return text[:cut], text[cut:]
