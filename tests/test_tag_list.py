"""The list of tags: admins add to it, reviewers too where the study allows it (an
admin's setting), and it is kept like the record: a tag is never renamed or
deleted, one retired is a new row, and where it was applied it stays."""

from __future__ import annotations

import sqlite3

import pytest

from review.browse.tags import add_tag, create_tag, list_tags, may_add_tags, retire_tag, tags_on
from review.team.access import NotAllowed
from review.team.reviewers import ensure_reviewer
from review.team.study import allows, set_setting


@pytest.fixture
def people(store):
    admin = ensure_reviewer(store, "Dr. Admin", role="admin")
    researcher = ensure_reviewer(store, "Dr. Researcher")
    return store, admin, researcher


def test_a_reviewer_adds_a_tag_only_where_the_study_allows_it(people):
    store, admin, researcher = people
    assert not may_add_tags(store, researcher) and may_add_tags(store, admin)
    with pytest.raises(NotAllowed, match="only an admin may add a tag to the list"):
        create_tag(store, "mapper error", researcher)
    with pytest.raises(PermissionError):
        set_setting(store, researcher, "reviewers_add_tags", True)
    set_setting(store, admin, "reviewers_add_tags", True)
    assert allows(store, "reviewers_add_tags")
    create_tag(store, "mapper error", researcher, "The mapper read the reply wrongly.")
    assert "mapper error" in {t.name for t in list_tags(store)}
    set_setting(store, admin, "reviewers_add_tags", False)  # a new row; the first kept
    assert not may_add_tags(store, researcher)
    assert store.scalar("SELECT COUNT(*) FROM study_settings") == 2
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        with store.transaction() as conn:
            conn.execute("DELETE FROM study_settings")


def test_a_retired_tag_is_a_new_row_and_stays_where_it_was_applied(db, people):
    store, admin, researcher = people
    create_tag(store, "mapper error", admin)
    item = store.scalar("SELECT id FROM items LIMIT 1")
    add_tag(store, researcher, item, "mapper error")
    with pytest.raises(NotAllowed):
        retire_tag(store, researcher, "mapper error")
    assert retire_tag(store, admin, "mapper error", "merged into 'machine error'")
    assert not retire_tag(store, admin, "mapper error")  # already so: nothing written
    assert "mapper error" not in {t.name for t in list_tags(store)}
    assert next(t for t in list_tags(store, retired=True) if t.name == "mapper error").retired
    assert [e.tag for e in tags_on(store, item)] == ["mapper error"]  # applied, it stays
    other = store.scalar("SELECT id FROM items WHERE id != ? LIMIT 1", (item,))
    with pytest.raises(ValueError, match="retired"):
        add_tag(store, researcher, other, "mapper error")
    with pytest.raises(ValueError, match="retired: offer it again"):
        create_tag(store, "Mapper Error", admin)
    retire_tag(store, admin, "mapper error", retired=False)
    add_tag(store, researcher, other, "mapper error")
    for sql in ("UPDATE tags SET name = 'x'", "DELETE FROM tags", "DELETE FROM tag_changes"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            with store.transaction() as conn:
                conn.execute(sql)
