"""Rubric judges and CliniCARE verdict extraction.

The judge grades one criterion at a time, HealthBench-style, and returns
`{"explanation": str, "criteria_met": bool}`. It works on every question of
kind 'criterion' (HealthBench rubric items, trajectory gates, must-ask topics,
process-rubric criteria alike) asked of an item whose kind has a renderer in
`render.RENDERERS`; the item is rendered as text (a trajectory compactly,
within `render.RECORD_CHAR_LIMIT` characters) and the criterion text is
shown as HealthBench shows it, with its points. `judge_values(record,
criterion)` is the one generic entry point for any record text.

The judge sees the record and the criterion only: never other raters'
verdicts, physicians' labels or the item's metadata. Its answer is an
annotation `met` / `not_met` by `provider:model@judge-vN`.

Verdict extraction (`EXTRACTOR`) asks a model which verdict a CliniCARE
report gives: YES, NO, INDETERMINATE_LACK_OF_DATA or
INDETERMINATE_MEDICAL_AMBIGUITY, as an annotation on `clinicare.verdict`. The
importer already reads a well-formed `## Answer:` line (and records it as
the agent's own answer); `filters={"unparsed_only": True}` asks the model only
about reports whose line it could not read, and comparing the extractor with
the agent's parsed verdicts measures the extractor. A report that commits to
no verdict is recorded as "cannot assess", never guessed.
"""

from __future__ import annotations

import json
from typing import Any

from codebook.families import asked_of_sql
from labels.llm.render import RECORD_CHAR_LIMIT, ItemView, render_record, report_text, shorten
from labels.llm.tasks import (
    Answer,
    Found,
    ReplyUnreadable,
    Task,
    Work,
    exact_keys,
    object_schema,
    text_field,
)
from store import Store
from store.runs import runs_named

VERDICTS = ("YES", "NO", "INDETERMINATE_LACK_OF_DATA", "INDETERMINATE_MEDICAL_AMBIGUITY")
NO_VERDICT = "NO_VERDICT_STATED"
VERDICT_QUESTION = "clinicare.verdict"
JUDGE_FILTERS = ("dataset", "kind", "question", "codebook", "items", "answered_by", "model",
                 "run")
EXTRACT_FILTERS = ("dataset", "kind", "question", "items", "unparsed_only")

JUDGE_SCHEMA = object_schema({
    "explanation": {"type": "string", "description": "Why the criterion is or is not met."},
    "criteria_met": {"type": "boolean", "description": "True when the criterion is met."},
})
EXTRACT_SCHEMA = object_schema({
    "explanation": {"type": "string", "description": "Where the report states its verdict."},
    "verdict": {"type": "string", "enum": [*VERDICTS, NO_VERDICT]},
})


# -- the judge ---------------------------------------------------------------


def criterion_text(text: str, points: float | None) -> str:
    """A criterion as HealthBench shows it to its grader: `[points] text`."""
    if points is None:
        return text
    shown = int(points) if float(points).is_integer() else points
    return f"[{shown}] {text}"


def judge_values(record: str, criterion: str, limit: int = RECORD_CHAR_LIMIT) -> dict[str, str]:
    """Template values for judging any record text (a conversation, a compact
    trajectory, a report) against one criterion; the record is cut to `limit`."""
    return {"record": shorten(record, limit), "criterion": criterion, "record_limit": f"{limit:,}"}


def read_judge_reply(obj: dict[str, Any]) -> Answer:
    """Strict: exactly {explanation, criteria_met}, criteria_met a JSON boolean."""
    exact_keys(obj, JUDGE_SCHEMA)
    met = obj["criteria_met"]
    if not isinstance(met, bool):
        raise ReplyUnreadable(f"criteria_met must be true or false, got {met!r}")
    return Answer("answered", "met" if met else "not_met", text_field(obj, "explanation") or None)


def _codebook_versions(store: Store) -> dict[str, str]:
    rows = store.query("SELECT codebook, version FROM codebook_versions ORDER BY id")
    return {row["codebook"]: row["version"] for row in rows}


def _criterion_pairs_sql(store: Store, filters: dict[str, Any], rater_id: int | None,
                         include_answered: bool) -> tuple[str, list[Any]]:
    sql = ["SELECT q.id AS question_id, q.key, q.text, q.points, q.codebook, i.id, i.uid, i.kind,"
           " i.payload, i.round_id, p.payload AS parent_payload"
           " FROM questions q JOIN items i ON (i.id = q.item_id OR i.parent_id = q.item_id"
           " OR (q.item_id IS NULL AND i.kind = q.applies_to))"
           " LEFT JOIN items p ON p.id = i.parent_id JOIN datasets d ON d.id = i.dataset_id"
           " WHERE q.kind = 'criterion'"]
    params: list[Any] = []
    if filters.get("dataset"):
        sql.append("AND d.name = ?")
        params.append(filters["dataset"])
    if filters.get("kind"):
        sql.append("AND i.kind = ?")
        params.append(filters["kind"])
    if filters.get("question"):
        sql.append("AND q.key GLOB ?")
        params.append(filters["question"])
    if filters.get("codebook"):
        sql.append("AND q.codebook = ?")
        params.append(filters["codebook"])
    if filters.get("items"):
        uids = list(filters["items"])
        sql.append(f"AND i.uid IN ({','.join('?' * len(uids))})")
        params += uids
    if filters.get("answered_by"):
        sql.append("AND EXISTS (SELECT 1 FROM annotations b JOIN raters r ON r.id = b.rater_id"
                   " WHERE b.item_id = i.id AND b.question_id = q.id AND r.name GLOB ?)")
        params.append(filters["answered_by"])
    runs = runs_named(store.conn, filters.get("model"), filters.get("run"))
    if runs is not None:  # the items of the runs named (store.runs): a model's every run, or one
        sql.append(f"AND i.run_id IN ({', '.join(str(int(x.id)) for x in runs) or 'NULL'})")
    if rater_id is not None and not include_answered:
        sql.append("AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = i.id"
                   " AND a.question_id = q.id AND a.rater_id = ? AND a.target = '')")
        params.append(rater_id)
    sql.append("ORDER BY i.id, q.id")
    return " ".join(sql), params


def find_judge_work(store: Store, rater_id: int | None, filters: dict[str, Any],
                    limit: int | None, include_answered: bool) -> Found:
    """(item, criterion) pairs still to be judged by the rater. A criterion
    bound to an item applies to it and to its children (a HealthBench
    completion shares its prompt's rubric); one bound to no item applies to
    every item of its kind. `answered_by` (a rater-name glob such as
    'healthbench-physician:*') keeps only pairs that rater has answered, to
    judge exactly what the clinicians judged."""
    versions = _codebook_versions(store)
    sql, params = _criterion_pairs_sql(store, filters, rater_id, include_answered)
    found = Found([])
    for row in store.conn.execute(sql, params):
        if limit is not None and len(found.work) >= limit:
            break
        item = ItemView(row["kind"], json.loads(row["payload"]),
                        json.loads(row["parent_payload"]) if row["parent_payload"] else None,
                        row["round_id"])
        record = render_record(item)
        if record is None:
            reason = f"nothing to judge in a {row['kind']} item"
            found.unusable[reason] = found.unusable.get(reason, 0) + 1
            continue
        found.work.append(Work(row["id"], row["uid"], row["question_id"], row["key"],
                               judge_values(record, criterion_text(row["text"], row["points"])),
                               versions.get(row["codebook"])))
    return found


JUDGE = Task(
    name="judge",
    role="judge",
    tool_name="record_criterion_verdict",
    tool_description="Record whether the rubric criterion is met, with a brief explanation.",
    schema=JUDGE_SCHEMA,
    read=read_judge_reply,
    find_work=find_judge_work,
    filters=JUDGE_FILTERS,
    max_output_tokens=2048,
    typical_output_tokens=150,
)


# -- CliniCARE verdicts --------------------------------------------------------

def read_extract_reply(obj: dict[str, Any]) -> Answer:
    """Strict: exactly {explanation, verdict}; NO_VERDICT_STATED is recorded
    as cannot_assess."""
    exact_keys(obj, EXTRACT_SCHEMA)
    verdict = obj["verdict"]
    if not isinstance(verdict, str) or verdict.strip() not in (*VERDICTS, NO_VERDICT):
        raise ReplyUnreadable(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    explanation = text_field(obj, "explanation") or None
    if verdict.strip() == NO_VERDICT:
        return Answer("cannot_assess", None, explanation, {"no_verdict_stated": True})
    return Answer("answered", verdict.strip(), explanation)


def find_extract_work(store: Store, rater_id: int | None, filters: dict[str, Any],
                      limit: int | None, include_answered: bool) -> Found:
    """Items with a report whose verdict the rater has not extracted yet, among the
    runs the question is asked of (`codebook.families`: CliniCARE runs for
    `clinicare.verdict`)."""
    key = filters.get("question") or VERDICT_QUESTION
    question = store.query_one("SELECT id, codebook FROM questions WHERE key = ?", (key,))
    if question is None:
        raise LookupError(f"no question {key!r} in this database: import the CliniCARE "
                          "codebook or tasks first, or name the question with filters['question']")
    version = _codebook_versions(store).get(question["codebook"])
    # Only runs of the question's benchmark (CliniCARE's for `clinicare.verdict`): a
    # KlinikeBench episode or a plain Harbor trial has a last message too, but no verdict.
    asked, asked_params = asked_of_sql(key)
    sql = ["SELECT i.id, i.uid, i.payload FROM items i JOIN datasets d ON d.id = i.dataset_id"
           f" WHERE i.kind = ? AND {asked}"]
    params: list[Any] = [filters.get("kind") or "trajectory", *asked_params]
    if filters.get("dataset"):
        sql.append("AND d.name = ?")
        params.append(filters["dataset"])
    if filters.get("items"):
        uids = list(filters["items"])
        sql.append(f"AND i.uid IN ({','.join('?' * len(uids))})")
        params += uids
    if rater_id is not None and not include_answered:
        sql.append("AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = i.id"
                   " AND a.question_id = ? AND a.rater_id = ? AND a.target = '')")
        params += [question["id"], rater_id]
    sql.append("ORDER BY i.id")
    found = Found([])
    for row in store.conn.execute(" ".join(sql), params):
        if limit is not None and len(found.work) >= limit:
            break
        payload = json.loads(row["payload"])
        answer = payload.get("final_answer")
        if filters.get("unparsed_only") and isinstance(answer, dict) and answer.get("verdict"):
            continue
        report = report_text(payload)
        if not report:
            found.unusable["no report"] = found.unusable.get("no report", 0) + 1
            continue
        values = {"report": shorten(report, RECORD_CHAR_LIMIT),
                  "verdicts": ", ".join([*VERDICTS, NO_VERDICT])}
        found.work.append(Work(row["id"], row["uid"], question["id"], key, values, version))
    return found


EXTRACTOR = Task(
    name="extract",
    role="extractor",
    tool_name="record_report_verdict",
    tool_description="Record the verdict the report gives, with a brief explanation.",
    schema=EXTRACT_SCHEMA,
    read=read_extract_reply,
    find_work=find_extract_work,
    filters=EXTRACT_FILTERS,
    max_output_tokens=2048,
    typical_output_tokens=120,
)
