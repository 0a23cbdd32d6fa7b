"""The Data screen's exports: made when their button is pressed, not on every run of the
screen (writing every annotation twice took most of the screen's time on a large
database), with the same counts on the buttons."""

from __future__ import annotations

import pytest

from review.datasets import export
from review.reviewing.blinding import open_labels
from review.team.reviewers import find_reviewer
from review.workspace import open_store
from tests.helpers import open_app

WHO = "Dr. Amara Okafor"


def test_opening_the_data_screen_writes_no_export(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    with open_store(demo_copy) as s:  # one who chose to see every rater's labels: the exports
        open_labels(s, find_reviewer(s, WHO), "export", 0)
        labels, ties = export.carebench_labels(s)
    written = []

    def refuse(store, out, *args, **kwargs):
        written.append(out.name)
        raise AssertionError("an export was written while the screen was drawn")

    monkeypatch.setattr(export, "export_annotations", refuse)
    monkeypatch.setattr(export, "export_carebench_labels", refuse)
    at = open_app("pages/data.py", WHO)
    assert written == []
    buttons = [b.proto.label for b in at.get("download_button")]
    assert buttons == ["All annotations (CSV)", "All annotations (JSONL)",
                       f"Clinician labels, CARE-Bench CSV ({len(labels)})"]
    assert len(labels) > 0
    if ties:
        assert any(f"{len(ties)} prefixes have no majority label" in c.value for c in at.caption)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
