"""The blinded mapper through the real SDKs against the loopback fake server:
what reaches the server, structured output, strict reading, the cache, keys."""

from __future__ import annotations

import json
import logging

import pytest

from labels.llm import MissingKeyError, plan_map_run, run_map
from review.workspace import open_store
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter
from tests import conftest_llm as llm
from tests.fake_llm_server import MalformedBody, Reply, Status, Unparseable
from tests.helpers import CODES

PROVIDERS = {  # model spec, how the test reaches the fake server
    "openai": ("openai:gpt-4.1-mini", lambda s: s.openai_base_url),
    "anthropic": ("anthropic:claude-haiku-4-5", lambda s: s.base_url),
}




@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 3)
    return path


def run(db_path, fake, provider="openai", version="mapper-v1", **kw):
    spec, url = PROVIDERS[provider]
    limit, filters = kw.pop("limit", None), kw.pop("filters", None)
    with open_store(db_path) as store:
        plan = plan_map_run(store, spec, version, limit=limit, filters=filters,
                            include_answered=kw.pop("include_answered", False))
    kw.setdefault("keys", llm.KEYS)
    return plan, run_map(str(db_path), plan, base_url=url(fake), **kw)


def machine_answers(db_path, rater=None):
    with open_store(db_path) as store:
        return [dict(r) for r in store.query(
            "SELECT i.uid, a.status, a.value, a.rationale, a.phase, a.source, a.extra, r.name"
            " FROM annotations a JOIN raters r ON r.id = a.rater_id JOIN items i ON i.id = a.item_id"
            " WHERE r.kind = 'machine' AND (? IS NULL OR r.name = ?) ORDER BY a.id", (rater, rater))]


def calls(db_path):
    with open_store(db_path) as store:
        return [dict(r) for r in store.query("SELECT * FROM llm_calls ORDER BY id")]


# -- blinding -------------------------------------------------------------------------

SENTINELS = ("GOLD-RATIONALE-SENTINEL", "REVIEWER-SENTINEL", "SPLIT-SENTINEL",
             "SOURCE-DATASET-SENTINEL", "OTHER-MODEL-REPLY-SENTINEL", "REFERENCE-REPLY-SENTINEL",
             "MODEL-NAME-SENTINEL", "DATASET-SENTINEL", "sentinel_case_0001")


def write_case_with_everything_the_mapper_must_not_see(store) -> str:
    """One case of three rounds with a gold label, a reviewer's answer, item
    metadata, another model's reply and a reference reply. Returns the uid of
    the round-1 response to map."""
    records = [RaterRecord("carebench-gold", "reference"),
               RaterRecord("dr-reviewer", "human", role="reviewer")]
    for rnd in (1, 2, 3):
        prefix = f"sentinel_case_0001_r{rnd:02d}"
        records.append(ItemRecord(
            uid=prefix, kind="prefix", dataset="DATASET-SENTINEL", case_id="sentinel_case_0001",
            round_id=rnd, split="SPLIT-SENTINEL",
            payload={"turns": [llm.turn_text(1, r) for r in range(1, rnd + 1)]},
            meta={"source_dataset": "SOURCE-DATASET-SENTINEL",
                  "reference_response": "REFERENCE-REPLY-SENTINEL"}))
        records.append(AnnotationRecord(prefix, "carebench.escalation_needed", "carebench-gold",
                                        CODES[3], rationale="GOLD-RATIONALE-SENTINEL"))
        for model, text in (("MODEL-NAME-SENTINEL", f"Rest at home, round {rnd}."),
                            ("other", "OTHER-MODEL-REPLY-SENTINEL")):
            records.append(ItemRecord(
                uid=f"{prefix}::{model}", kind="response", dataset="DATASET-SENTINEL",
                parent_uid=prefix, round_id=rnd, split="SPLIT-SENTINEL", model=model,
                payload={"response": text, "error": None},
                meta={"provider": "SOURCE-DATASET-SENTINEL"}))
    target = "sentinel_case_0001_r01::MODEL-NAME-SENTINEL"
    records.append(AnnotationRecord(target, "carebench.response_action", "dr-reviewer", CODES[2],
                                    rationale="REVIEWER-SENTINEL", phase="blind"))
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)
    return target


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("version", ["mapper-v1", "mapper-v2"])
def test_the_mapper_sees_only_the_patient_so_far_the_reply_and_the_codebook(
        tmp_path, fake, provider, version):
    db_path = tmp_path / "blind.db"
    with open_store(db_path) as store:
        target = write_case_with_everything_the_mapper_must_not_see(store)
    run(db_path, fake, provider, version, filters={"items": [target]})
    (received,) = fake.model_calls()
    wire = json.dumps(received.body, ensure_ascii=False)
    assert llm.turn_text(1, 1) in wire and "Rest at home, round 1." in wire
    for later in (llm.turn_text(1, 2), llm.turn_text(1, 3), "round 2", "round 3"):
        assert later not in wire, f"a later round reached the mapper: {later!r}"
    for sentinel in SENTINELS:
        assert sentinel not in wire, f"{sentinel} reached the mapper"
    # The patient's words and the reply (the user message) carry no label code
    # at all: the codes appear only in the codebook and the output schema.
    user = [m["content"] for m in received.body["messages"] if m["role"] == "user"][0]
    assert not any(code in user for code in CODES)


def test_the_request_does_not_change_with_the_gold_label_or_the_reviewers(tmp_path):
    db_path = tmp_path / "blind.db"
    with open_store(db_path) as store:
        target = write_case_with_everything_the_mapper_must_not_see(store)
        before = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v2",
                              filters={"items": [target]}).requests
        with store.transaction() as conn:
            w = RecordWriter(conn, source="test")
            w.write([RaterRecord("dr-second", "human"),
                     AnnotationRecord("sentinel_case_0001_r01", "carebench.escalation_needed",
                                      "carebench-gold", CODES[0], rationale="changed gold"),
                     AnnotationRecord(target, "carebench.response_action", "dr-second", CODES[0])])
        after = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v2",
                             filters={"items": [target]}).requests
    assert before == after and len(before) == 1


# -- structured output ------------------------------------------------------------------------


def test_openai_gets_a_strict_json_schema_and_the_key(db_path, fake):
    plan, summary = run(db_path, fake, "openai", limit=1)
    (received,) = fake.model_calls()
    fmt = received.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["label"]["enum"] == CODES
    assert received.body["max_completion_tokens"] > 0
    assert received.headers["authorization"] == f"Bearer {llm.KEYS['openai']}"
    assert received.body == plan.requests[0]["request"]
    assert summary.answered == 1


def test_anthropic_is_forced_to_call_one_strict_tool(db_path, fake):
    fake.script(Reply({"rationale": "Advises emergency care now.", "label": CODES[3]}))
    _, summary = run(db_path, fake, "anthropic", limit=1)
    (received,) = fake.model_calls()
    (tool,) = received.body["tools"]
    assert tool["strict"] is True and tool["input_schema"]["properties"]["label"]["enum"] == CODES
    assert received.body["tool_choice"] == {"type": "tool", "name": tool["name"]}
    credentials = received.headers.get("x-api-key") or received.headers.get("authorization")
    assert credentials.removeprefix("Bearer ") == llm.KEYS["anthropic"]
    (answer,) = machine_answers(db_path)
    assert (answer["value"], answer["rationale"]) == (CODES[3], "Advises emergency care now.")
    assert (answer["phase"], answer["source"], answer["status"]) == ("blind", "llm", "answered")
    assert answer["name"] == "anthropic:claude-haiku-4-5@mapper-v1"
    assert summary.answered == 1


def test_a_compatible_server_is_reached_by_its_base_url(db_path, fake):
    with open_store(db_path) as store:
        plan = plan_map_run(store, f"compatible:{fake.openai_base_url}#local-llama", limit=2)
    summary = run_map(str(db_path), plan)  # no key: a local server needs none
    assert summary.answered == 2
    assert all("max_tokens" in r.body and r.body["model"] == "local-llama"
               for r in fake.model_calls())
    assert {a["name"] for a in machine_answers(db_path)} == {"compatible:local-llama@mapper-v1"}


# -- strict reading, retries, failures ------------------------------------------------------------


def test_an_unreadable_reply_is_asked_again_then_recorded_as_a_failure(db_path, fake):
    fake.script(*[Unparseable("Probably urgent care, I think.")] * 3)
    _, summary = run(db_path, fake, limit=1, concurrency=1, reply_attempts=3)
    (answer,) = machine_answers(db_path)
    assert (answer["status"], answer["value"]) == ("cannot_assess", None)
    extra = json.loads(answer["extra"])
    assert extra["failure"] == "unreadable reply"
    assert extra["raw_text"] == "Probably urgent care, I think."
    assert [c["status"] for c in calls(db_path)] == ["parse_failed"] * 3
    assert all(c["raw_text"] == "Probably urgent care, I think." for c in calls(db_path))
    assert (summary.failed, summary.answered) == (1, 0)


def test_a_reply_readable_on_the_second_try_is_answered(db_path, fake):
    fake.script(Unparseable(), Reply({"rationale": "Self-care advice.", "label": CODES[1]}))
    run(db_path, fake, limit=1, concurrency=1)
    assert [c["status"] for c in calls(db_path)] == ["parse_failed", "ok"]
    (answer,) = machine_answers(db_path)
    assert answer["value"] == CODES[1]
    assert json.loads(answer["extra"])["llm_call_id"] == calls(db_path)[1]["id"]


def test_a_malformed_body_is_asked_again(db_path, fake):
    fake.script(MalformedBody())
    _, summary = run(db_path, fake, limit=1, concurrency=1)
    assert [c["status"] for c in calls(db_path)] == ["error", "ok"]
    assert "malformed" in calls(db_path)[0]["error"] and calls(db_path)[0]["raw_text"].startswith('{"id"')
    assert summary.answered == 1


def test_every_call_is_on_record(db_path, fake):
    run(db_path, fake, limit=2)
    rows = calls(db_path)
    assert len(rows) == 2
    for row in rows:
        assert (row["provider"], row["model"], row["prompt_version"]) == \
            ("openai", "gpt-4.1-mini", "mapper-v1")
        assert len(row["prompt_hash"]) == 64 and len(row["request_hash"]) == 64
        assert json.loads(row["request"])["model"] == "gpt-4.1-mini"
        assert json.loads(row["response"])["object"] == "chat.completion"
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0
        assert row["cost_usd"] > 0 and row["latency_ms"] > 0 and row["cached"] == 0


# -- dry run, cache, resume ----------------------------------------------------------------------------


def test_a_dry_run_renders_every_request_and_sends_nothing(db_path, fake):
    with open_store(db_path) as store:
        plan = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v2")
        assert store.scalar("SELECT COUNT(*) FROM llm_runs") == 0
    lines = [json.dumps(request) for request in plan.requests]
    assert len(lines) == 9 == len({json.loads(line)["item"] for line in lines})
    assert json.loads(lines[0])["request"]["messages"][0]["role"] == "system"
    assert fake.requests == []
    assert "9 responses to map" in plan.summary() and plan.est_cost_usd > 0


def test_running_again_costs_nothing(db_path, fake):
    run(db_path, fake)
    sent = len(fake.model_calls())
    answers = machine_answers(db_path)
    plan, summary = run(db_path, fake, include_answered=True, keys={})  # no key needed
    assert plan.n_cached == 9 and plan.est_cost_usd == 0
    assert len(fake.model_calls()) == sent == 9
    assert (summary.cached, summary.answered, summary.cost_usd) == (9, 0, 0)
    cached = [c for c in calls(db_path) if c["cached"]]
    assert len(cached) == 9 and all(c["cost_usd"] == 0 for c in cached)
    assert all("cached_from" in json.loads(c["request"]) for c in cached)
    assert machine_answers(db_path) == answers  # the same answers: nothing duplicated


def test_a_second_plan_leaves_out_what_is_answered(db_path, fake):
    run(db_path, fake, limit=4)
    plan, summary = run(db_path, fake)
    assert len(plan.units) == 5 and summary.answered == 5
    uids = [a["uid"] for a in machine_answers(db_path)]
    assert len(uids) == len(set(uids)) == 9


def test_prompt_versions_are_separate_raters(db_path, fake):
    run(db_path, fake, version="mapper-v1")
    run(db_path, fake, version="mapper-v2")
    names = {a["name"] for a in machine_answers(db_path)}
    assert names == {"openai:gpt-4.1-mini@mapper-v1", "openai:gpt-4.1-mini@mapper-v2"}
    with open_store(db_path) as store:
        raters = store.query("SELECT role, provider, model, prompt_version FROM raters"
                             " WHERE kind = 'machine' ORDER BY name")
    assert [tuple(r) for r in raters] == [("mapper", "openai", "gpt-4.1-mini", "mapper-v1"),
                                          ("mapper", "openai", "gpt-4.1-mini", "mapper-v2")]


def test_a_users_template_makes_its_own_rater(db_path, fake, tmp_path):
    path = tmp_path / "ward-mapper.txt"
    path.write_text("--- system ---\nLabels: $labels\n$codebook\n--- user ---\n"
                    "Patient:\n$patient_turns\nReply:\n$response\n")
    with open_store(db_path) as store:
        plan = plan_map_run(store, "openai:gpt-4.1-mini", str(path), limit=1)
    run_map(str(db_path), plan, base_url=fake.openai_base_url, keys=llm.KEYS)
    (answer,) = machine_answers(db_path)
    assert answer["name"] == f"openai:gpt-4.1-mini@{plan.prompt.version}"
    assert plan.prompt.version.startswith("ward-mapper-")
    assert fake.model_calls()[0].body["messages"][1]["content"].startswith("Patient:")


# -- keys ---------------------------------------------------------------------------------------


def test_a_missing_key_is_named_before_anything_is_written(db_path):
    with open_store(db_path) as store:
        plan = plan_map_run(store, "anthropic:claude-haiku-4-5", limit=1)
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        run_map(str(db_path), plan)
    with open_store(db_path) as store:
        assert store.scalar("SELECT COUNT(*) FROM llm_runs") == 0


def test_keys_are_never_written_to_the_database_or_the_logs(db_path, fake, caplog):
    caplog.set_level(logging.DEBUG)
    fake.script(Status(400, "bad request", echo_auth=True))
    run(db_path, fake, "openai", concurrency=1)
    fake.script(Status(400, "bad request", echo_auth=True))
    run(db_path, fake, "anthropic", concurrency=1)
    errors = [c["error"] for c in calls(db_path) if c["status"] == "error"]
    assert len(errors) == 2 and all("[redacted]" in e for e in errors)
    with open_store(db_path) as store:
        store.checkpoint()
    files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]
    for key in llm.KEYS.values():
        for path in files:
            assert key.encode() not in path.read_bytes(), f"{key} found in {path.name}"
            assert key[-8:].encode() not in path.read_bytes()
        assert key not in caplog.text
