"""Helpers for the LLM rater tests (imported by tests/test_llm_*.py).

- `fake_server()`: a running `FakeLLMServer` (see tests/fake_llm_server.py;
  the `fake` fixture in tests/conftest.py). No test reaches a real provider:
  tests/conftest.py removes every key and points both SDKs at a closed port.
- `write_carebench(store, ...)`: invented CARE-Bench prefixes (with gold
  labels) and responses, written through the real writer.
- `plan(db_path, spec, **kw)`: a mapper-v1 plan of the database at `db_path`;
  `q(db_path, sql, args)`: the rows of a query, as tuples.
"""

from __future__ import annotations

from collections.abc import Iterator

from store import Store
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests.fake_llm_server import FakeLLMServer
from tests.helpers import CODES

UNREACHABLE = "http://127.0.0.1:9/"
KEYS = {"openai": "sk-test-openai-0123456789abcdef", "anthropic": "sk-ant-test-fedcba9876543210"}


def fake_server(latency: float = 0.0) -> Iterator[FakeLLMServer]:
    server = FakeLLMServer(latency=latency).start()
    try:
        yield server
    finally:
        server.stop()


def turn_text(case: int, rnd: int) -> str:
    return f"Invented patient message, case {case}, round {rnd}: a cough for {rnd + 1} days."


def write_carebench(store: Store, n_cases: int, rounds: int = 3, models: tuple[str, ...] = ("m1",),
                    dataset: str = "carebench-test", gold: bool = True) -> list[str]:
    """Cases of `rounds` prefixes each (turns up to the round, gold label by
    `carebench-gold`), one response per model per prefix. Returns the
    response uids in order."""
    uids: list[str] = []
    records: list = [RaterRecord("carebench-gold", "reference")]
    for case in range(n_cases):
        for rnd in range(1, rounds + 1):
            prefix = f"inv_case_{case:05d}_r{rnd:02d}"
            records.append(ItemRecord(
                uid=prefix, kind="prefix", dataset=dataset, case_id=f"inv_case_{case:05d}",
                round_id=rnd, split="validation",
                payload={"turns": [turn_text(case, r) for r in range(1, rnd + 1)]}))
            if gold:
                records.append(AnnotationRecord(prefix, "carebench.escalation_needed",
                                                "carebench-gold", CODES[(case + rnd) % 4]))
            for model in models:
                uid = f"{prefix}::{model}"
                records.append(ItemRecord(
                    uid=uid, kind="response", dataset=dataset, parent_uid=prefix,
                    case_id=f"inv_case_{case:05d}", round_id=rnd, split="validation", model=model,
                    payload={"response": f"Invented reply by {model} to case {case} round {rnd}:"
                                         " rest and fluids.", "error": None}))
                uids.append(uid)
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)
    return uids


def plan(db_path, spec: str = "openai:gpt-4.1-mini", **kw):
    """A mapper-v1 run planned on the database at `db_path`."""
    from labels.llm import plan_map_run
    from review.workspace import open_store

    with open_store(db_path) as store:
        return plan_map_run(store, spec, "mapper-v1", **kw)


def q(db_path, sql: str, args=()) -> list[tuple]:
    """The rows of a query on the database at `db_path`, as tuples."""
    from review.workspace import open_store

    with open_store(db_path) as store:
        return [tuple(r) for r in store.query(sql, args)]
