"""What each Browse facet reads from the store, defined once, as SQL.

Each function returns (sql, params) for rows of one kind of fact, over every
item or - given a JSON list of item ids - over those items only. The facet
index (review.browse.index) loads them whole; result pages and exports load
them for the items shown. Only answers in force count: the newest per item,
question, rater and target (as the current_annotations view).

- labels: what a rater answered to an item's label question (`who` = rater
  name); for an item with a parent (a response's prefix), the reference
  (gold) label of the parent counts too, as `parent:<rater>`;
- failed criteria: a rubric criterion or verifier gate a machine or reference
  rater failed the item on - 'not met', or for a MUST-NOT criterion (negative
  points) 'met' - named by gate (KlinikeBench gates) or group;
- step marks: errors reviewers marked on single steps, with severity;
- tags in force, flags in force, and who reviewed the item.
"""

from __future__ import annotations

from typing import Any

from codebook import NO_ERROR, STEP_ERROR_QUESTION
from review.browse.query import PARENT

CURRENT = ("c.id = (SELECT MAX(b.id) FROM annotations b WHERE b.item_id = c.item_id"
           " AND b.question_id = c.question_id AND b.rater_id = c.rater_id AND b.target = c.target)")
"""The answer in force, for annotations aliased c."""

_ONLY = " AND {col} IN (SELECT value FROM json_each(?))"


def _only(col: str, ids: str | None) -> tuple[str, list[Any]]:
    return (_ONLY.format(col=col), [ids]) if ids is not None else ("", [])


def label_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id, who, value, codebook)."""
    own, p1 = _only("c.item_id", ids)
    kid, p2 = _only("i2.id", ids)
    labelset = ("c.target = '' AND c.status = 'answered' AND qq.kind = 'labelset'"
                f" AND qq.item_id IS NULL AND {CURRENT}")
    sql = (
        "SELECT c.item_id, r.name, c.value, qq.codebook FROM annotations c"
        " JOIN raters r ON r.id = c.rater_id JOIN questions qq ON qq.id = c.question_id"
        f" WHERE {labelset}{own}"
        " UNION ALL "
        f"SELECT i2.id, '{PARENT}' || r.name, c.value, qq.codebook FROM items i2"
        " JOIN annotations c ON c.item_id = i2.parent_id"
        " JOIN raters r ON r.id = c.rater_id AND r.kind = 'reference'"
        f" JOIN questions qq ON qq.id = c.question_id WHERE {labelset}{kid}"
    )
    return sql, [*p1, *p2]


GATE_NAME = ("CASE WHEN json_extract(qq.meta, '$.group') = 'gate' THEN json_extract(qq.meta, '$.gate')"
             " WHEN json_extract(qq.meta, '$.group') = 'must_ask' THEN 'must_ask_topic'"
             " ELSE coalesce(json_extract(qq.meta, '$.group'), 'criterion') END")


def failed_criteria_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id, gate), one per failed criterion."""
    only, params = _only("c.item_id", ids)
    return (
        f"SELECT c.item_id, {GATE_NAME} FROM annotations c"
        " JOIN questions qq ON qq.id = c.question_id JOIN raters r ON r.id = c.rater_id"
        " WHERE qq.kind = 'criterion' AND r.kind IN ('machine', 'reference') AND c.target = ''"
        " AND c.status = 'answered'"
        " AND c.value = CASE WHEN coalesce(qq.points, 0) < 0 THEN 'met' ELSE 'not_met' END"
        f" AND {CURRENT}{only}", params)


def step_mark_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id, target, error, severity, rater, rationale), in step order."""
    only, params = _only("c.item_id", ids)
    return (
        "SELECT c.item_id, c.target, c.value, CAST(json_extract(c.extra, '$.severity') AS INTEGER),"
        " r.name, c.rationale FROM annotations c JOIN raters r ON r.id = c.rater_id"
        f" WHERE c.question_id = (SELECT id FROM questions WHERE key = '{STEP_ERROR_QUESTION}')"
        f" AND c.target LIKE 'step:%' AND c.status = 'answered' AND c.value != '{NO_ERROR}'"
        f" AND {CURRENT}{only} ORDER BY c.item_id, CAST(substr(c.target, 6) AS INTEGER)", params)


def tag_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id, target, tag, tagged by, note) of the tags in force."""
    only, params = _only("t.item_id", ids)
    return ("SELECT t.item_id, t.target, g.name, r.name, t.note FROM current_item_tags t"
            " JOIN tags g ON g.id = t.tag_id JOIN raters r ON r.id = t.rater_id"
            f" WHERE 1{only} ORDER BY t.target, g.name", params)


def flagged_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id) of items with a flag raised (by anyone) and not cleared."""
    only, params = _only("f.item_id", ids)
    return ("SELECT DISTINCT f.item_id FROM flags f WHERE f.raised = 1 AND f.id = (SELECT MAX(g.id)"
            f" FROM flags g WHERE g.item_id = f.item_id AND g.rater_id = f.rater_id){only}", params)


def reviewed_facts(ids: str | None = None) -> tuple[str, list[Any]]:
    """Rows (item_id, reviewer): a clinician answered it (or could not assess it)."""
    only, params = _only("a.item_id", ids)
    return ("SELECT DISTINCT a.item_id, r.name FROM annotations a JOIN raters r ON r.id = a.rater_id"
            f" WHERE r.kind = 'human' AND a.status != 'skipped'{only}", params)
