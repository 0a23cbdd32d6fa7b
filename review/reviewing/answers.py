"""What an answer may be: the one normaliser every import and commit calls."""

from __future__ import annotations

from codebook import MET, NOT_MET, builtin_codebooks

_TRUE = {"met", "true", "yes", "y", "1", "t"}
_FALSE = {"not_met", "not met", "false", "no", "n", "0", "f", "unmet"}


def normalise_value(book_key: str, question_kind: str, value: object) -> str:
    """The stored form of an answer, or ValueError saying what is allowed.

    Label sets take their codebook's codes (see `Codebook.normalise`); rubric
    criteria take met / not met (true/false and yes/no are read as such)."""
    if question_kind == "criterion":
        text = str(value).strip().lower() if value is not None else ""
        if isinstance(value, bool):
            return MET if value else NOT_MET
        if text in _TRUE:
            return MET
        if text in _FALSE:
            return NOT_MET
        raise ValueError(f"unknown verdict {value!r}; allowed: met, not_met (or true/false)")
    books = builtin_codebooks()
    if book_key not in books:
        raise ValueError(f"question uses unknown codebook {book_key!r}")
    return books[book_key].normalise("" if value is None else str(value))
