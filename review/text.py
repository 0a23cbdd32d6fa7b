"""Untrusted text (patient, model, agent) shown as written, able to do nothing.

The app shows such text verbatim: what the patient typed and what the model
or agent wrote, character for character. It is never rendered as HTML, and
never as Markdown either: a regex that tries to keep Markdown's formatting
while taking out its links and images has always left a way through (a code
span that Markdown closes elsewhere, a bare address it links by itself, an
image inside a link's text). `safe_markdown` therefore escapes every character
Markdown or Streamlit could read as syntax, so that a Markdown renderer shows
the text exactly as written and finds nothing in it to format, link, load or
run: no emphasis, heading, list, table, code, link, image, HTML, LaTeX,
colour, badge, icon or emoji. Line breaks and indentation are kept.

Fenced code blocks (``` or ~~~) are shown by the screens as code, in a code
element that parses nothing (`text_blocks` finds them); where the fence
detection and Markdown would differ, the only effect is whether a block is
shown in a monospace box: either way it is shown as written.
"""

from __future__ import annotations

import re
import string

LONG_TEXT = 4000
"""Characters shown before the rest goes behind an expander."""

WORD_JOINER = "\u2060"
"""Invisible, zero-width. Put inside `https://`, `www.` and before `@`, where
Markdown's autolinking (GitHub's, which Streamlit follows) would otherwise make
a bare web or e-mail address a link, escapes or not."""

_ESCAPED = {c: "\\" + c for c in string.punctuation}
_ESCAPED.update({
    # Streamlit reads `:name:` and `:colour[...]` before Markdown does, and a
    # backslash does not stop it: a colon is written as a character reference.
    ":": "&#58;",
    "@": WORD_JOINER + "\\@",
})
_TABLE = str.maketrans(_ESCAPED)
_SCHEME = re.compile(r"(?i)(https?|ftp|mailto|file|data|javascript)(?=:)")
_WWW = re.compile(r"(?i)(www)(?=\.)")
_LEADING = re.compile(r"^[ \t]+")


def _line(line: str) -> str:
    line = _SCHEME.sub(lambda m: m.group(1) + WORD_JOINER, line)
    line = _WWW.sub(lambda m: m.group(1) + WORD_JOINER, line)
    lead = _LEADING.match(line)
    indent = ""
    if lead:  # kept, as no-break spaces: four spaces would make Markdown read code
        indent = "&#160;" * len(lead.group(0).expandtabs(4))
        line = line[lead.end():]
    return indent + line.translate(_TABLE)


def safe_markdown(text: str | None) -> str:
    """Markdown that shows `text` exactly as written and can format, link,
    load or run nothing (see the module's note). Lines stay lines."""
    if not text:
        return ""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # Two trailing spaces: a hard line break (Markdown would join the lines).
    return "  \n".join(_line(line) for line in lines)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,30}")


def text_blocks(text: str) -> list[tuple[str, str | None, str]]:
    """The text cut into prose and fenced code blocks, in order: ("prose",
    None, text) and ("code", language or None, code). An unclosed fence runs
    to the end. Both kinds are shown as written; code in a monospace box."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[tuple[str, str | None, str]] = []
    prose: list[str] = []
    code: list[str] = []
    fence: str | None = None
    language: str | None = None
    for line in lines:
        if fence is None:
            m = _FENCE.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                if prose:
                    blocks.append(("prose", None, "\n".join(prose)))
                    prose = []
                fence = m.group(1)
                info = _LANGUAGE.match(m.group(2).strip())
                language = info.group(0).lower() if info else None
            else:
                prose.append(line)
        else:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]) \
                    and len(line) - len(line.lstrip(" ")) <= 3:
                blocks.append(("code", language, "\n".join(code)))
                code, fence = [], None
            else:
                code.append(line)
    if fence is not None:
        blocks.append(("code", language, "\n".join(code)))
    elif prose:
        blocks.append(("prose", None, "\n".join(prose)))
    return [b for b in blocks if b[0] == "code" or b[2].strip()]


def split_long(text: str, limit: int = LONG_TEXT) -> tuple[str, str | None]:
    """The first part of a long text, and the rest (None when it all fits).
    Cuts at a line break near the limit so the page stays responsive."""
    if len(text) <= limit:
        return text, None
    cut = text.rfind("\n", 0, limit)
    if cut < limit // 2:
        cut = limit
    return text[:cut], text[cut:]


_BACKTICK_RUN = re.compile(r"`+")


def inline_code(text: object) -> str:
    """Data (an id, a name) as Markdown inline code on one line, shown as
    written: whitespace runs become one space (a line break in a code span
    could end it: a blank line ends the paragraph), and the span's backtick
    fence is longer than any run of backticks in the text, so nothing in it
    can close the span. Markdown reads nothing inside a code span."""
    body = " ".join(str(text).split())
    if not body:
        return ""
    fence = "`" * (1 + max(map(len, _BACKTICK_RUN.findall(body)), default=0))
    pad = " " if body.startswith("`") or body.endswith("`") else ""  # CommonMark strips one each side
    return f"{fence}{pad}{body}{pad}{fence}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count with its noun, singular for one: "1 item", "2 items", "0 items";
    `many` where adding an s is wrong ("1 criterion", "3 criteria"). The one
    place a count is said, on every screen and in the CLI (also exported by
    `review.reviewing.names`)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"
