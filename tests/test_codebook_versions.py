"""Editing the codebook in the app makes a new version; answers keep theirs."""

from __future__ import annotations

import pytest

from codebook import CodebookError
from review.reviewing.commit import commit_answer
from review.team.codebook_versions import codebook_history, current_codebook, edit_label
from review.team.reviewers import ensure_reviewer

KEY, CODE = "carebench-escalation", "1B_ESCALATION_URGENT_CARE"


def test_an_edit_makes_a_version_and_answers_keep_theirs(demo):
    admin = ensure_reviewer(demo, "Jordan Lee")
    before = commit_answer(demo, admin, 1, 1, "0A")
    # Every answer records the version it was given under, the demo's imported ones too.
    given = demo.scalar("SELECT COUNT(*) FROM annotations a JOIN questions q ON"
                        " q.id = a.question_id WHERE q.codebook = ?", (KEY,))
    version = edit_label(demo, admin, KEY, CODE, {"definition": "Same-day or emergency care."},
                         "plainer wording")
    assert version == "1.2"  # the shipped file is at 1.1
    book = current_codebook(demo, KEY)
    assert book.version == "1.2" and book.label(CODE).definition == "Same-day or emergency care."
    after = commit_answer(demo, admin, 2, 1, "1B")
    versions = dict(demo.query("SELECT id, codebook_version FROM annotations WHERE id IN (?, ?)",
                               (before, after)))
    assert versions == {before: "1.1", after: "1.2"}
    history = codebook_history(demo, KEY)
    assert [(h.version, h.answers) for h in history] == [("1.2", 1), ("1.1", given)]
    assert history[0].note == "plainer wording"
    entry = demo.query_one("SELECT old, new FROM audit_log WHERE action = 'codebook_edit'")
    assert "1.1" in entry["old"] and "Same-day" in entry["new"]


def test_only_admins_edit_and_codes_cannot_change(demo):
    with pytest.raises(CodebookError, match="only an admin"):
        edit_label(demo, ensure_reviewer(demo, "Dr. Amara Okafor"), KEY, CODE, {"short": "x"}, "n")
    admin = ensure_reviewer(demo, "Jordan Lee")
    with pytest.raises(CodebookError, match="only short, definition, rules, example"):
        edit_label(demo, admin, KEY, CODE, {"code": "2X"}, "rename")
    with pytest.raises(CodebookError, match="change note"):
        edit_label(demo, admin, KEY, CODE, {"short": "Now"}, "  ")
    with pytest.raises(CodebookError, match="definition: expected a non-empty"):
        edit_label(demo, admin, KEY, CODE, {"definition": ""}, "blank it")
    assert current_codebook(demo, KEY).version == "1.1"


def test_a_labels_words_edited_read_the_same_on_every_screen(demo):
    """Browse, exports and Progress name a label by `codebook.label_words` (no database
    at hand): after an admin renames a label, they read the version in force, as Review
    and Adjudicate do, not the shipped wording."""
    from codebook import codebooks, label_words

    admin = ensure_reviewer(demo, "Jordan Lee")
    edit_label(demo, admin, KEY, CODE, {"short": "Same-day care"}, "plainer wording")
    codebooks(demo)  # every screen's run reads the codebooks in force first
    assert label_words(CODE) == "Same-day care"
    assert label_words(CODE, researcher=True) == "Same-day care (1B)"
