"""What an answer may be: the one normaliser every import and commit calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from codebook import MET, NOT_MET, Codebook, codebooks

_TRUE = {"met", "true", "yes", "y", "1", "t"}
_FALSE = {"not_met", "not met", "false", "no", "n", "0", "f", "unmet"}


def normalise_value(book_key: str, question_kind: str, value: object,
                    books: Mapping[str, Codebook] | None = None) -> str:
    """The stored form of an answer, or ValueError saying what is allowed.

    Label sets take their codebook's codes (see `Codebook.normalise`); rubric
    criteria take met / not met (true/false and yes/no are read as such).
    `books`: the codebooks in force (`codebook.codebooks(db)`: the database's own
    with the shipped ones); without it, only the shipped codebooks are known."""
    if question_kind == "criterion":
        text = str(value).strip().lower() if value is not None else ""
        if isinstance(value, bool):
            return MET if value else NOT_MET
        if text in _TRUE:
            return MET
        if text in _FALSE:
            return NOT_MET
        raise ValueError(f"unknown verdict {value!r}; allowed: met, not_met (or true/false)")
    books = books if books is not None else codebooks()
    if book_key not in books:
        raise ValueError(f"question uses unknown codebook {book_key!r} (add it first: "
                         "carelens codebook add FILE.toml)")
    return books[book_key].normalise("" if value is None else value)


def answer_validator(db: Any) -> Callable[[str, str, object], str]:
    """`normalise_value` against the codebooks in force in `db` (a store, or a
    connection inside the transaction that writes the answers), read once."""
    books: dict[str, Codebook] = {}

    def validate(book_key: str, question_kind: str, value: object) -> str:
        if not books:
            books.update(codebooks(db))
        return normalise_value(book_key, question_kind, value, books)

    return validate
