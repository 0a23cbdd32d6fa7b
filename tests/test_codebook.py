"""Codebook files: the shipped ones load; broken ones name file and field."""

from __future__ import annotations

import pytest

from codebook import CAREBENCH, CodebookError, builtin_codebooks, codebook, load_codebook_file
from tests.helpers import CODES


def test_carebench_codebook_has_the_four_codes_in_ordinal_order():
    book = codebook(CAREBENCH)
    assert book.codes == CODES
    assert book.ordinal is True
    assert [lb.shortcut for lb in book.labels] == ["1", "2", "3", "4"]
    for label in book.labels:
        assert label.definition and label.rules and label.example
    assert {q.key for q in book.questions} == {"carebench.escalation_needed",
                                               "carebench.response_action"}


def test_every_shipped_codebook_loads():
    assert CAREBENCH in builtin_codebooks()


@pytest.mark.parametrize("value, code", [
    ("1B_ESCALATION_URGENT_CARE", CODES[3]), ("1b_escalation_urgent_care", CODES[3]),
    ("0A", CODES[0]), (" 1a ", CODES[2]),
])
def test_labels_are_normalised(value, code):
    assert codebook(CAREBENCH).normalise(value) == code


def test_unknown_label_names_the_allowed_codes():
    with pytest.raises(CodebookError) as err:
        codebook(CAREBENCH).normalise("URGENT")
    assert "'URGENT'" in str(err.value)
    for code in CODES:
        assert code in str(err.value)


BASE = """
key = "k"
version = "1"
title = "T"
kind = "labelset"
ordinal = true
[[labels]]
code = "A"
short = "a"
definition = "d"
example = "e"
[[labels]]
code = "B"
short = "b"
definition = "d"
example = "e"
"""


@pytest.mark.parametrize("text, message", [
    (BASE.replace('code = "B"', 'code = "A"'), "labels[1].code: duplicate code 'A'"),
    (BASE.replace('short = "b"\n', ""), "labels[1].short: missing required field"),
    (BASE.replace('kind = "labelset"', 'kind = "poll"'), "kind: expected 'labelset' or 'rubric'"),
    (BASE.replace("ordinal = true", 'ordinal = "yes"'), "ordinal: expected true or false"),
    (BASE + '[[questions]]\nkey = "q"\napplies_to = "tweet"\ntext = "t"\n',
     "questions[0].applies_to: expected one of"),
    (BASE.replace('title = "T"', "title = "), "not valid TOML"),
])
def test_broken_codebook_names_file_and_field(tmp_path, text, message):
    path = tmp_path / "broken.toml"
    path.write_text(text)
    with pytest.raises(CodebookError) as err:
        load_codebook_file(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)
