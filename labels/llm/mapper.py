"""The CARE-Bench mapper: which of the four escalation actions a response recommends.

Blinding (one rule, one place: `blinded_mapper_input`). The mapper receives
only the patient's turns up to the response's round, the response text and
the codebook (definitions, rules, and for mapper-v2 the invented examples).
It never receives the gold label, later rounds, other or reference responses,
reviewers' answers, or item metadata (split, source dataset, case or model
names): `find_mapper_work` reads nothing else from the store, and a test
inspects the request that reaches the server.

The answer is an annotation on `carebench.response_action` by the machine
rater `provider:model@mapper-vN`, phase "blind", source "llm".
"""

from __future__ import annotations

import json
from typing import Any

from codebook import CAREBENCH, Codebook, codebook
from labels.llm.render import patient_turns
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

RESPONSE_QUESTION = "carebench.response_action"
MAP_FILTERS = ("dataset", "model", "run", "split", "items")


def mapper_schema(book: Codebook) -> dict[str, Any]:
    return object_schema({
        "rationale": {"type": "string", "description": "Why this label, in one to three sentences."},
        "label": {"type": "string", "enum": book.codes,
                  "description": "The one label code the reply's action matches."},
    })


def render_codebook(book: Codebook, examples: bool = False) -> str:
    blocks = []
    for label in book.labels:
        lines = [f"{label.code} ({label.short})", f"  Definition: {label.definition}"]
        if label.rules:
            lines.append("  Decision rules:")
            lines += [f"  - {rule}" for rule in label.rules]
        if examples and label.example:
            lines.append(f"  Example (invented): {label.example}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def blinded_mapper_input(prefix_payload: dict[str, Any] | None, round_id: int | None,
                         response_payload: dict[str, Any]) -> tuple[list[str], str]:
    """The only things the mapper may see of an item: the patient's turns up
    to the response's round, and the response text."""
    return patient_turns(prefix_payload, round_id), str(response_payload.get("response") or "")


def mapper_values(turns: list[str], response: str, book: Codebook) -> dict[str, str]:
    """Template values for one response (see prompts.PLACEHOLDERS['map'])."""
    rendered_turns = "\n\n".join(f"Round {i}: {turn}" for i, turn in enumerate(turns, 1))
    return {
        "codebook": render_codebook(book),
        "codebook_examples": render_codebook(book, examples=True),
        "codebook_description": book.description,
        "labels": ", ".join(book.codes),
        "patient_turns": rendered_turns or "(no patient text)",
        "response": response,
    }


def read_mapper_reply(obj: dict[str, Any], book: Codebook | None = None) -> Answer:
    """Strict: exactly {rationale, label}, the label one of the codebook's codes verbatim."""
    book = book or codebook(CAREBENCH)
    schema = mapper_schema(book)
    exact_keys(obj, schema)
    label = obj["label"]
    if not isinstance(label, str) or label.strip() not in book.codes:
        raise ReplyUnreadable(f"label {label!r} is not one of {', '.join(book.codes)}")
    return Answer("answered", label.strip(), text_field(obj, "rationale") or None)


def find_mapper_work(store: Store, rater_id: int | None, filters: dict[str, Any],
                     limit: int | None, include_answered: bool) -> Found:
    """Responses still to be mapped by the rater, oldest first."""
    book = codebook(CAREBENCH)
    question_id = store.scalar("SELECT id FROM questions WHERE key = ?", (RESPONSE_QUESTION,))
    if question_id is None:
        raise LookupError(f"no question {RESPONSE_QUESTION!r}: open the database with open_store")
    sql = ["SELECT r.id, r.uid, r.payload, r.failed, r.round_id, p.payload AS prefix_payload,"
           " p.round_id AS prefix_round FROM items r LEFT JOIN items p ON p.id = r.parent_id"
           " JOIN datasets d ON d.id = r.dataset_id WHERE r.kind = 'response'"]
    params: list[Any] = []
    if filters.get("dataset"):
        sql.append("AND d.name = ?")
        params.append(filters["dataset"])
    if filters.get("split"):
        sql.append("AND r.split = ?")
        params.append(filters["split"])
    runs = runs_named(store.conn, filters.get("model"), filters.get("run"))
    if runs is not None:  # the responses of the runs named: a model's every run, or one
        sql.append(f"AND r.run_id IN ({', '.join(str(int(x.id)) for x in runs) or 'NULL'})")
    if filters.get("items"):
        uids = list(filters["items"])
        sql.append(f"AND r.uid IN ({','.join('?' * len(uids))})")
        params += uids
    if rater_id is not None and not include_answered:
        sql.append("AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = r.id"
                   " AND a.question_id = ? AND a.rater_id = ? AND a.target = '')")
        params += [question_id, rater_id]
    sql.append("ORDER BY r.id")
    found = Found([])
    for row in store.conn.execute(" ".join(sql), params):
        if limit is not None and len(found.work) >= limit:
            break
        response_payload = json.loads(row["payload"])
        prefix_payload = json.loads(row["prefix_payload"]) if row["prefix_payload"] else None
        turns, response = blinded_mapper_input(prefix_payload, row["round_id"] or row["prefix_round"],
                                               response_payload)
        reason = ("generation failed" if row["failed"] else
                  "empty response" if not response.strip() else
                  "no patient turns" if not turns else None)
        if reason:
            found.unusable[reason] = found.unusable.get(reason, 0) + 1
            continue
        found.work.append(Work(row["id"], row["uid"], question_id, RESPONSE_QUESTION,
                               mapper_values(turns, response, book), book.version))
    return found


def _read(obj: dict[str, Any]) -> Answer:
    return read_mapper_reply(obj)


MAPPER = Task(
    name="map",
    role="mapper",
    tool_name="record_response_action",
    tool_description="Record the one codebook label that names the action the reply recommends.",
    schema=mapper_schema(codebook(CAREBENCH)),
    read=_read,
    find_work=find_mapper_work,
    filters=MAP_FILTERS,
    max_output_tokens=2048,
    typical_output_tokens=120,
)
