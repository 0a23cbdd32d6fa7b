"""Each request is paid once and every paid reply is on record: hostile
nesting, batches interrupted at awkward moments, two runs or collectors at
once, twins of a reply cut off, and secrets echoed back by a server."""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time

import pytest

import labels.llm.batches as batches
from labels.llm import (
    RunAborted,
    abandon_batch,
    collect_batch,
    plan_map_run,
    run_map,
    uncollected_batches,
)
from labels.llm.mapper import MAPPER
from labels.llm.record import claim_batch, release_batch
from labels.llm.tasks import ReplyUnreadable, read_json_object
from review.workspace import open_store
from store.records import ItemRecord
from store.writer import RecordWriter
from tests import conftest_llm as llm
from tests.conftest_llm import plan, q
from tests.fake_llm_server import Cut, DeepInput, MalformedBody, Reply, Status, Unparseable

DEEP = "[" * 5000 + "]" * 5000
"""JSON that json.loads refuses with RecursionError, not ValueError."""
KEY = llm.KEYS["openai"]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 2)  # 6 responses
    return str(path)


def machine_answers(db, status=None):
    sql = ("SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
           " WHERE r.kind = 'machine'")
    return q(db, sql + (" AND a.status = ?" if status else ""), (status,) if status else ())[0][0]


def submitted(fake):
    return [r for r in fake.requests if r.method == "POST"
            and r.path in ("/v1/batches", "/v1/messages/batches")]


def batch_lines(fake):
    """Requests the fake received inside OpenAI batch input files (each is paid)."""
    return sum(len([ln for ln in v.decode().splitlines() if ln.strip()])
               for k, v in fake._files.items() if not k.startswith("file-out"))


def openai_batch(db, fake, **kw):
    return run_map(db, kw.pop("the_plan", None) or plan(db), use_batch=True, poll_interval=0.01,
                   keys=llm.KEYS, base_url=fake.openai_base_url, **kw)


def stop_waiting(db, fake, the_plan=None):
    """A batch run that gives up waiting: run 1's batch left uncollected."""
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        openai_batch(db, fake, max_wait=0.02, the_plan=the_plan)
    fake.batch_polls = 0


# -- 1. JSON nested too deeply ---------------------------------------------------------


def test_json_nested_too_deeply_is_an_unreadable_reply():
    with pytest.raises(ReplyUnreadable):
        read_json_object(DEEP)


def test_a_deeply_nested_batch_line_fails_its_item_not_the_paid_batch(db, fake):
    fake.script(Reply(text=DEEP))  # one line of six; asked again directly, it is answered
    summary = openai_batch(db, fake, reply_attempts=2)
    assert summary.answered == 6 and len(fake.model_calls()) == 1
    assert q(db, "SELECT status, count(*) FROM llm_calls GROUP BY status") == [
        ("ok", 6), ("parse_failed", 1)]  # the deep line is on record, as unreadable
    with open_store(db) as store:
        assert uncollected_batches(store) == []


def test_a_deeply_nested_batch_line_can_be_collected(db, fake):
    stop_waiting(db, fake)
    fake.script(Reply(text=DEEP))
    summary = collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, reply_attempts=2)
    assert summary.answered == 6  # five from the batch, the sixth asked again directly
    assert len(fake.model_calls()) == 1


def test_a_deeply_nested_anthropic_batch_line_fails_only_its_own_request(db, fake):
    fake.script(DeepInput())
    summary = run_map(db, plan(db, "anthropic:claude-haiku-4-5"), use_batch=True,
                      poll_interval=0.01, keys=llm.KEYS, base_url=fake.base_url)
    assert summary.answered == 5 and summary.errors == 1
    assert any("nested too deeply" in m for m in summary.messages), summary.messages
    with open_store(db) as store:
        assert uncollected_batches(store) == []
    assert q(db, "SELECT count(*) FROM llm_calls WHERE status = 'error'")[0][0] == 1


def test_a_deeply_nested_direct_reply_keeps_its_paid_call_on_record(db, fake):
    deep = "[" * 3000 + "1" + "]" * 3000
    body = ('{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",'
            '"content":[{"type":"tool_use","id":"toolu_1","name":"' + MAPPER.tool_name
            + '","input":{"deep":' + deep + '}}],"stop_reason":"tool_use","stop_sequence":null,'
            '"usage":{"input_tokens":900,"output_tokens":2000}}')
    fake.script(MalformedBody(body))
    run_map(db, plan(db, "anthropic:claude-haiku-4-5", limit=1), keys=llm.KEYS,
            base_url=fake.base_url, reply_attempts=1)
    assert len(fake.model_calls()) == 1
    (error,) = q(db, "SELECT error FROM llm_calls")[0]
    assert "malformed reply" in error


def test_a_deeply_nested_direct_openai_reply_is_unreadable_not_an_error(db, fake):
    fake.script(Reply(text=DEEP), Reply(text=DEEP))
    summary = run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
                      reply_attempts=2)
    assert summary.failed == 1 and summary.errors == 0  # cannot assess, not asked every run
    assert machine_answers(db, "cannot_assess") == 1 and len(fake.model_calls()) == 2


# -- 2. a batch submitted but not noted ---------------------------------------------------


def test_a_batch_is_noted_before_it_is_submitted(db, fake, monkeypatch):
    real = batches.note_batch
    state = {"first": True}

    def note_fails_once(*a, **kw):
        if state["first"]:
            state["first"] = False
            raise sqlite3.OperationalError("database is locked")
        return real(*a, **kw)

    monkeypatch.setattr(batches, "note_batch", note_fails_once)
    with pytest.raises(sqlite3.OperationalError):
        openai_batch(db, fake)
    assert submitted(fake) == []  # nothing paid without a note
    openai_batch(db, fake)
    assert len(submitted(fake)) == 1 and machine_answers(db) == 6


def test_a_batch_whose_id_cannot_be_noted_is_named_and_paid_once(db, fake, monkeypatch):
    def locked(*a, **kw):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(batches, "NOTE_ATTEMPTS", 2)
    real = batches.note_batch_id
    monkeypatch.setattr(batches, "note_batch_id", locked)
    with pytest.raises(RunAborted) as info:
        openai_batch(db, fake)
    (batch_id,) = fake._batches
    assert batch_id in str(info.value) and "--batch-id" in str(info.value)
    monkeypatch.setattr(batches, "note_batch_id", real)
    with open_store(db) as store:
        (left,) = uncollected_batches(store)
    assert left.state == "id unknown" and left.batch_id is None
    summary = run_map(db, plan(db), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert fake.model_calls() == [] and summary.errors == 6  # left to the batch, not paid again
    assert any("--batch-id" in m for m in summary.messages)
    with pytest.raises(LookupError):
        collect_batch(db, 1, keys=llm.KEYS, base_url=fake.openai_base_url)
    summary = collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(submitted(fake)) == 1


def test_a_batch_noted_but_never_submitted_can_be_abandoned(db, fake, monkeypatch):
    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(batches.Provider, "submit_batch", killed)  # killed while submitting
    with pytest.raises(KeyboardInterrupt):
        openai_batch(db, fake)
    monkeypatch.undo()
    openai_batch(db, fake)
    assert submitted(fake) == []  # a batch of run 1 may hold them: not paid twice
    abandon_batch(db, 1)
    openai_batch(db, fake)
    assert len(submitted(fake)) == 1 and machine_answers(db) == 6


# -- 3. stopped between recording results and closing the batch -----------------------------


def test_results_recorded_before_an_interruption_are_not_recorded_again(db, fake, monkeypatch):
    real = batches.close_batch
    state = {"first": True}

    def close_then_interrupt(*a, **kw):
        if state["first"]:
            state["first"] = False
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(batches, "close_batch", close_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        openai_batch(db, fake)
    before = q(db, "SELECT count(*), sum(cost_usd) FROM llm_calls")[0]
    summary = collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url)
    assert q(db, "SELECT count(*), sum(cost_usd) FROM llm_calls")[0] == before
    assert summary.cost_usd == 0 and summary.skipped == 6
    with open_store(db) as store:
        assert uncollected_batches(store) == []


def test_a_collect_stopped_half_way_records_only_the_rest_later(tmp_path, fake, monkeypatch):
    db = str(tmp_path / "big.db")
    with open_store(db) as store:
        llm.write_carebench(store, 50)  # 150 responses: two parts of results
    real = batches.record_batch_part
    calls = {"n": 0}

    def second_part_interrupted(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(batches, "record_batch_part", second_part_interrupted)
    with pytest.raises(KeyboardInterrupt):
        openai_batch(db, fake)
    assert q(db, "SELECT count(*) FROM llm_calls")[0][0] == 100
    collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert q(db, "SELECT count(*), count(DISTINCT item_id) FROM llm_calls")[0] == (150, 150)
    assert machine_answers(db) == 150 and batch_lines(fake) == 150


# -- 4. one collector at a time -------------------------------------------------------------


def test_a_batch_is_claimed_by_one_collector_at_a_time(db, fake):
    stop_waiting(db, fake)
    batch_id = next(iter(fake._batches))
    with open_store(db) as store:
        token = claim_batch(store, 1, batch_id, 1)
        assert token and claim_batch(store, 1, batch_id, 2) is None
        assert uncollected_batches(store)[0].state == "collecting"
        release_batch(store, 1, token)
        assert claim_batch(store, 1, batch_id, 2) is not None


def test_collect_while_the_batch_run_is_still_waiting_records_and_pays_once(db, fake):
    fake.batch_polls = 3
    fake.script(Unparseable())  # one unreadable batch line: asked again directly, once
    summaries, errors = [], []

    def waiting_run():
        try:
            summaries.append(run_map(db, plan(db), use_batch=True, poll_interval=0.6,
                                     keys=llm.KEYS, base_url=fake.openai_base_url))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=waiting_run)
    thread.start()
    deadline = time.monotonic() + 20
    while True:
        with open_store(db) as store:
            listed = uncollected_batches(store)
        if listed and listed[0].batch_id:  # submitted (before: "submitting", no id yet)
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert listed[0].batch_id and listed[0].state == "waiting" and listed[0].live
    collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    thread.join(30)
    assert errors == []
    assert q(db, "SELECT count(*) FROM llm_calls")[0][0] == 7  # six lines, one retry
    assert len(fake.model_calls()) == 1 and machine_answers(db) == 6
    assert any("being collected" in m for m in summaries[0].messages), summaries[0].messages


def test_a_batch_left_by_a_stopped_run_is_listed_as_stopped(db, fake):
    stop_waiting(db, fake)
    with open_store(db) as store:
        (left,) = uncollected_batches(store)
    assert left.state == "stopped" and not left.live and "stopped while waiting" in left.text()


# -- 5. two runs of the same plan at once -------------------------------------------------


def test_two_runs_of_the_same_plan_at_once_pay_once(db, fake):
    fake.latency = 0.05
    plans = [plan(db), plan(db)]
    summaries = []
    threads = [threading.Thread(target=lambda p=p: summaries.append(
        run_map(db, p, concurrency=2, keys=llm.KEYS, base_url=fake.openai_base_url)))
        for p in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert machine_answers(db) == 6
    assert len(fake.model_calls()) == 6
    assert any("being asked by run" in m for s in summaries for m in s.messages)


def test_a_finished_run_leaves_nothing_claimed(db, fake):
    """A run that failed its item gives the claim back when it ends: the next run
    asks it (a claim left behind would hold it from every later run)."""
    fake.script(Status(503, "down"))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
            max_retries=0, reply_attempts=1)
    from labels.llm.record import run_is_alive

    ((params,),) = q(db, "SELECT params FROM llm_runs WHERE id = 1")
    params = json.loads(params)
    assert params["claimed"] and not run_is_alive(params)  # it claimed; its claims hold no more
    summary = run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 1


# -- 6. a waiting batch holds its (item, question) pairs whatever the output limit ------------


def test_a_direct_run_with_another_output_limit_leaves_a_waiting_batch_its_items(db, fake):
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        openai_batch(db, fake, max_wait=0.02, the_plan=plan(db, max_output_tokens=4096))
    summary = run_map(db, plan(db), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert fake.model_calls() == [] and summary.errors == 6
    assert any("held by batch" in m and "4096" in m for m in summary.messages), summary.messages
    fake.batch_polls = 0  # now it has ended: the next run collects it, and pays nothing more
    summary = run_map(db, plan(db), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 6 and fake.model_calls() == [] and batch_lines(fake) == 6
    with open_store(db) as store:
        assert uncollected_batches(store) == []


# -- 7. twins of a reply cut off or unreadable ---------------------------------------------


@pytest.fixture
def twins(tmp_path):
    """Two items whose requests are identical (same turns, same reply)."""
    db = str(tmp_path / "twins.db")
    with open_store(db) as store:
        llm.write_carebench(store, 1, rounds=1)
        with store.transaction() as conn:
            RecordWriter(conn, source="test").write([ItemRecord(
                uid="inv_case_00000_r01::m1-copy", kind="response", dataset="carebench-test",
                parent_uid="inv_case_00000_r01", round_id=1, model="m1-copy",
                payload={"response": "Invented reply by m1 to case 0 round 1: rest and fluids.",
                         "error": None})])
    return db


def test_the_twin_of_a_reply_cut_off_is_not_sent_again_in_the_same_run(twins, fake):
    fake.script(Cut(stop_reason="length"), Cut(stop_reason="length"))
    summary = run_map(twins, plan(twins), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert len(fake.model_calls()) == 1 and summary.errors == 2
    assert any("identical request" in m for m in summary.messages)


def test_the_twin_of_a_reply_unreadable_every_time_is_not_sent_again(twins, fake):
    fake.script(*[Unparseable()] * 4)
    run_map(twins, plan(twins), keys=llm.KEYS, base_url=fake.openai_base_url, reply_attempts=2)
    assert len(fake.model_calls()) == 2


# -- 8, 9. secrets -------------------------------------------------------------------


def everything(db):
    out = []
    for table in ("llm_calls", "llm_runs", "annotations", "raters", "audit_log"):
        out += [str(v) for row in q(db, f"SELECT * FROM {table}") for v in row]
    return "\n".join(out)


def test_a_key_echoed_in_a_reply_is_redacted_wherever_it_is_stored(db, fake):
    fake.script(Reply(obj={"rationale": f"debug: Authorization: Bearer {KEY}",
                           "label": llm.CODES[0]}))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    stored = everything(db)
    assert machine_answers(db, "answered") == 1
    assert KEY not in stored and KEY[-8:] not in stored
    assert "[redacted]" in q(db, "SELECT response FROM llm_calls")[0][0]


def test_credentials_in_a_compatible_url_are_not_sent_nor_stored(db, fake):
    password = "s3cret-url-password-xyz"
    host = fake.openai_base_url.replace("http://", "")
    key = "sk-compat-key-0123456789"
    fake.script(Status(400, "rejected", echo_auth=True))
    run_map(db, plan(db, f"compatible:http://alice:{password}@{host}#llama3", limit=1),
            keys={"compatible": key}, reply_attempts=1)
    assert fake.model_calls()[0].headers.get("authorization") == f"Bearer {key}"
    stored = everything(db)
    token = base64.b64encode(f"alice:{password}".encode()).decode()
    assert password not in stored and token not in stored and key not in stored
    assert f"http://{host}" in stored  # the URL is recorded, without them


def test_a_url_password_echoed_back_is_redacted(db, fake):
    password = "s3cret-url-password-xyz"
    host = fake.openai_base_url.replace("http://", "")
    fake.script(Status(400, f"bad password {password}"))
    run_map(db, plan(db, f"compatible:http://alice:{password}@{host}#llama3", limit=1),
            reply_attempts=1)
    assert password not in everything(db)


def test_a_reply_nested_deeper_than_any_answer_needs_is_a_malformed_reply(db, fake):
    deep = "[" * 150 + "1" + "]" * 150  # readable by json, but no answer nests like this
    body = ('{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",'
            '"content":[{"type":"tool_use","id":"toolu_1","name":"' + MAPPER.tool_name
            + '","input":{"deep":' + deep + '}}],"stop_reason":"tool_use","stop_sequence":null,'
            '"usage":{"input_tokens":900,"output_tokens":2000}}')
    fake.script(MalformedBody(body))
    summary = run_map(db, plan(db, "anthropic:claude-haiku-4-5", limit=1), keys=llm.KEYS,
                      base_url=fake.base_url, reply_attempts=1)
    assert summary.errors == 1 and "nested more than" in summary.messages[0]
    assert q(db, "SELECT count(*) FROM llm_calls")[0][0] == 1


def test_the_data_screen_tells_a_batch_a_live_run_waits_for_from_one_to_collect(
        demo_copy, fake, monkeypatch):
    from labels.llm.record import heartbeat, note_waiter
    from tests.test_team_pages import app_as

    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    fake.batch_polls = 100
    with open_store(demo_copy) as store:
        the_plan = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v1", limit=3)
    with pytest.raises(RunAborted):
        run_map(str(demo_copy), the_plan, use_batch=True, max_wait=0.0, keys=llm.KEYS,
                base_url=fake.openai_base_url)
    with open_store(demo_copy) as store:
        (left,) = uncollected_batches(store)
        note_waiter(store, left.run_id, heartbeat(30.0, token="t", run=left.run_id + 1))
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/data.py").run()
    assert not at.exception
    assert any("still under way" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Collect batches"]
    with open_store(demo_copy) as store:
        note_waiter(store, left.run_id, None, "t")  # the waiting run stopped
    at.switch_page("pages/data.py").run()
    assert any("not collected yet" in w.value for w in at.warning)
    assert [b for b in at.button if b.label == "Collect batches"]
