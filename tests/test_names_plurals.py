"""A count of one is singular on every screen and in the CLI (issue 19, F6
point 4): "1 row, 1 new item", never "1 rows, 1 new items"; one helper,
`review.reviewing.names.plural`, says them all."""

from __future__ import annotations

import json
import re

from review.datasets.sources import import_file
from review.team.activity import audit_entries, audit_lines
from review.workspace import open_store
from tests.review_fixtures import PROMPT

ONE_MANY = re.compile(r"\b1 (rows|items|new items|answers|annotations|reviewers|places|files)\b")


def test_importing_one_row_says_one_row_and_one_item(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(PROMPT) + "\n")
    s = open_store(tmp_path / "one.db")
    result = import_file(s, path, "healthbench")
    said = result.summary()
    assert "1 row, 1 new item, " in said, said
    assert not ONE_MANY.search(said), said
    lines = audit_lines(s, audit_entries(s, action="import"))
    assert lines and all(not ONE_MANY.search(line.change) for line in lines), [
        line.change for line in lines]
    assert any(line.change.startswith("1 row, 1 item, ") for line in lines), [
        line.change for line in lines]
    s.close()
