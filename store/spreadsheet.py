"""CSV cells a spreadsheet shows as text and never runs as a formula.

Excel, LibreOffice and Google Sheets read a cell that begins with `=`, `+`,
`-` or `@` (or a tab or carriage return before one) as a formula, so a
patient's, model's or reviewer's words in an exported CSV could run one
(`=HYPERLINK(...)`, DDE). Every CSV the app writes passes its cells through
`safe_cell`, which puts an apostrophe before such text: spreadsheets show
the text as written and take the apostrophe as "this is text". Only text is
quoted: a number (a confidence, a severity, a seconds count, a negative
coefficient) stays a number, so numeric columns sort and sum; text that
merely looks like a number ("-2") is quoted like any other text.

`unquote_cell` undoes it for an importer reading such a file back (the
labels-long importer does), so an export goes back in with the exact text.
Text that already begins with apostrophes before one of those characters
gets one more, so that reading back never takes away an apostrophe the text
had.

Kept here, below `review/` and `labels/`, because both write CSV.
"""

from __future__ import annotations

from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula."""


def _quoted(text: str) -> bool:
    """Whether `text`, after any leading apostrophes, starts a formula."""
    return text.lstrip("'")[:1] in FORMULA_START


def safe_cell(value: Any) -> Any:
    """The value for a CSV cell: text a spreadsheet would run as a formula with
    a leading apostrophe; anything else (numbers, None, other text) as it is."""
    if isinstance(value, str) and (value[:1] in FORMULA_START
                                   or (value[:1] == "'" and _quoted(value))):
        return "'" + value
    return value


def unquote_cell(text: Any) -> Any:
    """The text `safe_cell` was given: its added apostrophe taken off."""
    if isinstance(text, str) and text[:1] == "'" and _quoted(text):
        return text[1:]
    return text
