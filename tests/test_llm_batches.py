"""LLM batches: each request is paid once and every paid reply is on record.

At their edges: a submission whose reply is lost, a batch the provider can no
longer give back, a run that finishes while another claims, a batch forgotten
while it is being submitted, short URL passwords, an OpenAI batch cancelled
part way, hostile nesting, batches interrupted at awkward moments, two runs or
collectors at once, twins of a reply cut off, and secrets echoed back by a
server."""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import labels.llm.batches as batches
import labels.llm.providers as providers
import labels.llm.runner as runner
from labels.llm import (
    RunAborted,
    abandon_batch,
    collect_batch,
    plan_map_run,
    run_map,
    uncollected_batches,
)
from labels.llm.mapper import MAPPER
from labels.llm.record import claim_batch, forget_batch, release_batch
from labels.llm.tasks import ReplyUnreadable, read_json_object
from review.workspace import open_store
from store.records import ItemRecord
from store.writer import RecordWriter
from tests import conftest_llm as llm
from tests.conftest_llm import plan, q
from tests.fake_llm_server import Cut, DeepInput, MalformedBody, Reply, Status, Unparseable
from tests.helpers import CODES

SPECS = {"openai": "openai:gpt-4.1-mini", "anthropic": "anthropic:claude-haiku-4-5"}


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 2)  # 6 responses
    return path


def machine_answers(db_path, status=None):
    sql = ("SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
           " WHERE r.kind = 'machine'")
    return q(db_path, sql + (" AND a.status = ?" if status else ""), (status,) if status else ())[0][0]


def url(fake, provider="openai"):
    return fake.openai_base_url if provider == "openai" else fake.base_url


def direct(db_path, fake, the_plan=None, **kw):
    return run_map(db_path, the_plan or plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url, **kw)


def by_batch(db_path, fake, the_plan=None, provider="openai", **kw):
    kw.setdefault("poll_interval", 0.01)
    return run_map(db_path, the_plan or plan(db_path, SPECS[provider]), use_batch=True, keys=llm.KEYS,
                   base_url=url(fake, provider), **kw)


def creates(fake):
    return [r for r in fake.requests if r.method == "POST"
            and r.path in ("/v1/batches", "/v1/messages/batches")]


def listed(db_path):
    with open_store(db_path) as store:
        return uncollected_batches(store)


def leave_a_batch(db_path, fake, limit=3):
    """Run 1 gives up waiting: its batch (of `limit` items) is left uncollected."""
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        by_batch(db_path, fake, max_wait=0.02, the_plan=plan(db_path, limit=limit))
    fake.batch_polls = 0


# -- 1. a submission whose reply was lost ----------------------------------------------


def test_a_batch_whose_reply_was_lost_is_kept_not_paid_for_again(db_path, fake):
    fake.batch_create_delay = 1.5  # created, but the reply comes after the client gave up
    with pytest.raises(RunAborted) as info:
        by_batch(db_path, fake, timeout=0.5, max_retries=0)
    assert "--batch-id" in str(info.value) and "--forget" in str(info.value)
    (batch_id,) = fake._batches
    (left,) = listed(db_path)
    assert left.state == "id unknown" and left.batch_id is None
    fake.batch_create_delay = 0.0
    summary = direct(db_path, fake)  # the six are held by that batch: not asked again
    assert fake.model_calls() == [] and summary.errors == 6
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(fake._batches) == 1 and machine_answers(db_path) == 6


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_request_that_creates_a_batch_is_not_retried(db_path, fake, provider):
    fake.batch_create_delay = 1.0
    with pytest.raises(RunAborted):
        by_batch(db_path, fake, provider=provider, timeout=0.3, max_retries=3)
    assert len(creates(fake)) == 1 and len(fake._batches) == 1


def test_only_a_submission_that_cannot_have_made_a_batch_is_forgotten(db_path, fake):
    fake.batch_errors["submit"] = Status(503, "overloaded")  # may have been created
    with pytest.raises(RunAborted):
        by_batch(db_path, fake, provider="anthropic", max_retries=0)
    assert [b.state for b in listed(db_path)] == ["id unknown"]
    fake.batch_errors["submit"] = Status(400, "bad request")  # refused: nothing exists
    with pytest.raises(RunAborted):
        by_batch(db_path, fake, the_plan=plan(db_path, limit=2))
    fake.batch_errors["submit"] = Status(503, "overloaded")  # the upload failed: no batch
    with pytest.raises(RunAborted):
        by_batch(db_path, fake, the_plan=plan(db_path, limit=2), max_retries=0)
    assert [b.run_id for b in listed(db_path)] == [1]
    closed = "http://127.0.0.1:9"  # nothing listens: no request ever left
    with pytest.raises(RunAborted, match="submitting the batch"):
        run_map(db_path, plan(db_path, SPECS["anthropic"], limit=2),
                use_batch=True, keys=llm.KEYS, base_url=closed, max_retries=1)
    assert [b.run_id for b in listed(db_path)] == [1]


# -- 2. a batch the provider can no longer give back ------------------------------------------


def test_a_later_run_goes_on_when_a_batch_cannot_be_collected(db_path, fake):
    leave_a_batch(db_path, fake)  # 3 of the 6
    fake.batch_errors["results"] = Status(404, "file not found (expired)")
    summary = direct(db_path, fake)
    assert summary.answered == 3 and summary.errors == 3 and len(fake.model_calls()) == 3
    assert any("held by batch" in m and "carelens collect --run 1" in m
               for m in summary.messages), summary.messages
    assert [b.run_id for b in listed(db_path)] == [1]  # not closed by a run: only by collect


def test_a_batch_whose_status_is_refused_is_not_taken_for_running(db_path, fake):
    leave_a_batch(db_path, fake)
    fake.batch_errors["status"] = Status(404, "no such batch")
    summary = direct(db_path, fake)
    assert summary.answered == 3 and summary.errors == 3
    assert not any("not ended yet" in m for m in summary.messages), summary.messages
    assert any("could not be collected" in m and "HTTP 404" in m for m in summary.messages)


@pytest.mark.parametrize("stage", ["results", "status"])
def test_collect_closes_a_batch_the_provider_no_longer_has(db_path, fake, stage):
    leave_a_batch(db_path, fake)
    fake.batch_errors[stage] = Status(503, "try later")  # may pass: kept
    with pytest.raises(RunAborted, match="collect it later"):
        collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url,
                      max_retries=0)
    assert [b.run_id for b in listed(db_path)] == [1]
    fake.batch_errors[stage] = Status(404, "not found")
    with pytest.raises(RunAborted, match="is gone") as info:
        collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert "asked again" in str(info.value)
    assert listed(db_path) == []
    fake.batch_errors.clear()
    summary = direct(db_path, fake)
    assert summary.answered == 6 and len(fake.model_calls()) == 6


def test_forget_drops_a_submitted_batch_only_once_the_provider_has_lost_it(db_path, fake):
    leave_a_batch(db_path, fake)
    kw = {"keys": llm.KEYS, "base_url": fake.openai_base_url, "max_retries": 0}
    with pytest.raises(LookupError, match="still has"):
        abandon_batch(db_path, 1, **kw)
    fake.batch_errors["status"] = Status(503, "try later")
    with pytest.raises(LookupError, match="cannot say now"):
        abandon_batch(db_path, 1, **kw)
    del fake.batch_errors["status"]
    fake.batch_errors["results"] = Status(404, "file expired")
    abandon_batch(db_path, 1, **kw)
    assert listed(db_path) == []
    fake.batch_errors.clear()
    assert direct(db_path, fake).answered == 6


# -- 3. a run that finishes between another run's look and its claim ---------------------------


def test_a_run_that_finished_before_this_one_claims_is_not_paid_again(db_path, fake, monkeypatch):
    later = plan(db_path)  # planned, and checked, while nothing is answered
    real = runner.claim_units
    state = {"first": True}

    def another_run_first(*args, **kw):
        if state["first"]:
            state["first"] = False
            direct(db_path, fake)  # the same plan, start to finish
        return real(*args, **kw)

    monkeypatch.setattr(runner, "claim_units", another_run_first)
    summary = direct(db_path, fake, later)
    assert len(fake.model_calls()) == 6 and machine_answers(db_path) == 6
    assert summary.skipped == 6 and summary.answered == 0


# -- 4. a batch forgotten while it is being submitted ------------------------------------------


def _age_heartbeat(db_path, run_id, seconds):
    at = (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="microseconds")
    with open_store(db_path) as store, store.transaction() as conn:
        conn.execute("UPDATE llm_runs SET params = json_set(params, '$.heartbeat.at', ?)"
                     " WHERE id = ?", (at, run_id))


def _heartbeat_age(db_path, run_id=1):
    (at,) = q(db_path, "SELECT json_extract(params, '$.heartbeat.at') FROM llm_runs WHERE id = ?",
              (run_id,))[0]
    return (datetime.now(UTC) - datetime.fromisoformat(at)).total_seconds()


def test_a_batch_being_submitted_is_not_offered_to_forget(db_path, fake, monkeypatch):
    real = providers.OpenAIProvider._submit_batch
    seen = {}

    def long_upload(self, requests):
        batch_id = real(self, requests)
        _age_heartbeat(db_path, 1, 300)  # as if the run's own beat had not come for minutes
        (seen["left"],) = listed(db_path)
        with pytest.raises(LookupError, match="submitting its batch now"):
            abandon_batch(db_path, 1)
        return batch_id

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", long_upload)
    summary = by_batch(db_path, fake)
    assert seen["left"].state == "submitting" and seen["left"].live
    assert summary.answered == 6 and machine_answers(db_path) == 6


def test_the_heartbeat_is_kept_while_a_batch_is_submitted(db_path, fake, monkeypatch):
    monkeypatch.setattr(batches, "SUBMIT_BEAT", 0.05, raising=False)
    real = providers.OpenAIProvider._submit_batch
    ages = []

    def slow_upload(self, requests):
        _age_heartbeat(db_path, 1, 300)
        time.sleep(0.5)
        ages.append(_heartbeat_age(db_path))
        return real(self, requests)

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", slow_upload)
    by_batch(db_path, fake)
    assert ages and ages[0] < 5
    assert q(db_path, "SELECT json_extract(params, '$.batch.submitter') FROM llm_runs") == [(None,)]


def test_a_batch_forgotten_as_its_id_is_noted_is_named_and_can_be_collected(db_path, fake,
                                                                            monkeypatch):
    real = providers.OpenAIProvider._submit_batch

    def forgotten_meanwhile(self, requests):
        batch_id = real(self, requests)
        with open_store(db_path) as store:
            forget_batch(store, 1, "never submitted (abandoned)")
        return batch_id

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", forgotten_meanwhile)
    with pytest.raises(RunAborted) as info:
        by_batch(db_path, fake)
    (batch_id,) = fake._batches
    assert f"--batch-id {batch_id}" in str(info.value) and "forgotten" in str(info.value)
    assert q(db_path, "SELECT json_extract(params, '$.batch.id') FROM llm_runs") == [(None,)]
    monkeypatch.undo()
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(fake._batches) == 1 and listed(db_path) == []


# -- 5. a short password in a base URL ----------------------------------------------------------


def _compatible(db_path, fake, password, obj):
    host = fake.openai_base_url.replace("http://", "")
    fake.script(Reply(obj=obj))
    return run_map(db_path, plan(db_path, f"compatible:http://admin:{password}@{host}#llama3", limit=1),
                   keys={"compatible": "sk-compat-key-0123456789"}, reply_attempts=1)


def test_a_short_url_password_leaves_the_models_words_alone(db_path, fake):
    rationale = "Advise to administer fluids; the admin note says rest."
    summary = _compatible(db_path, fake, "admin", {"rationale": rationale, "label": CODES[1]})
    assert summary.answered == 1
    assert q(db_path, "SELECT rationale FROM annotations")[-1] == (rationale,)


def test_a_redacted_secret_never_makes_a_valid_answer_unreadable(db_path, fake):
    # a long password is still redacted from what is stored, but after the reply is read
    password = "ESCALATION"  # part of the label code CODES[1]
    summary = _compatible(db_path, fake, password, {"rationale": f"pw {password} seen",
                                               "label": CODES[1]})
    assert summary.answered == 1 and machine_answers(db_path) == 1, summary.messages
    assert q(db_path, "SELECT value, rationale FROM annotations")[-1] == (CODES[1],
                                                                     "pw [redacted] seen")
    assert password not in str(q(db_path, "SELECT response, raw_text, parsed FROM llm_calls"))


# -- an OpenAI batch cancelled part way ------------------------------------------------------


def test_a_cancelled_openai_batch_keeps_what_it_completed(db_path, fake):
    fake.batch_cancel_after = 4  # billed for four
    summary = by_batch(db_path, fake)
    assert summary.answered == 4 and summary.errors == 2
    assert q(db_path, "SELECT json_extract(params, '$.batch.status') FROM llm_runs") == [("cancelled",)]
    fake.batch_cancel_after = None
    summary = by_batch(db_path, fake)
    assert summary.planned == summary.answered == 2 and machine_answers(db_path) == 6


DEEP = "[" * 5000 + "]" * 5000
"""JSON that json.loads refuses with RecursionError, not ValueError."""
KEY = llm.KEYS["openai"]


def submitted(fake):
    return [r for r in fake.requests if r.method == "POST"
            and r.path in ("/v1/batches", "/v1/messages/batches")]


def batch_lines(fake):
    """Requests the fake received inside OpenAI batch input files (each is paid)."""
    return sum(len([ln for ln in v.decode().splitlines() if ln.strip()])
               for k, v in fake._files.items() if not k.startswith("file-out"))


def openai_batch(db_path, fake, **kw):
    return run_map(db_path, kw.pop("the_plan", None) or plan(db_path), use_batch=True, poll_interval=0.01,
                   keys=llm.KEYS, base_url=fake.openai_base_url, **kw)


def stop_waiting(db_path, fake, the_plan=None):
    """A batch run that gives up waiting: run 1's batch left uncollected."""
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        openai_batch(db_path, fake, max_wait=0.02, the_plan=the_plan)
    fake.batch_polls = 0


# -- 1. JSON nested too deeply ---------------------------------------------------------


def test_json_nested_too_deeply_is_an_unreadable_reply():
    with pytest.raises(ReplyUnreadable):
        read_json_object(DEEP)


def test_a_deeply_nested_batch_line_fails_its_item_not_the_paid_batch(db_path, fake):
    fake.script(Reply(text=DEEP))  # one line of six; asked again directly, it is answered
    summary = openai_batch(db_path, fake, reply_attempts=2)
    assert summary.answered == 6 and len(fake.model_calls()) == 1
    assert q(db_path, "SELECT status, count(*) FROM llm_calls GROUP BY status") == [
        ("ok", 6), ("parse_failed", 1)]  # the deep line is on record, as unreadable
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []


def test_a_deeply_nested_batch_line_can_be_collected(db_path, fake):
    stop_waiting(db_path, fake)
    fake.script(Reply(text=DEEP))
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, reply_attempts=2)
    assert summary.answered == 6  # five from the batch, the sixth asked again directly
    assert len(fake.model_calls()) == 1


def test_a_deeply_nested_anthropic_batch_line_fails_only_its_own_request(db_path, fake):
    fake.script(DeepInput())
    summary = run_map(db_path, plan(db_path, "anthropic:claude-haiku-4-5"), use_batch=True,
                      poll_interval=0.01, keys=llm.KEYS, base_url=fake.base_url)
    assert summary.answered == 5 and summary.errors == 1
    assert any("nested too deeply" in m for m in summary.messages), summary.messages
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []
    assert q(db_path, "SELECT count(*) FROM llm_calls WHERE status = 'error'")[0][0] == 1


def test_a_deeply_nested_direct_reply_keeps_its_paid_call_on_record(db_path, fake):
    deep = "[" * 3000 + "1" + "]" * 3000
    body = ('{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",'
            '"content":[{"type":"tool_use","id":"toolu_1","name":"' + MAPPER.tool_name
            + '","input":{"deep":' + deep + '}}],"stop_reason":"tool_use","stop_sequence":null,'
            '"usage":{"input_tokens":900,"output_tokens":2000}}')
    fake.script(MalformedBody(body))
    run_map(db_path, plan(db_path, "anthropic:claude-haiku-4-5", limit=1), keys=llm.KEYS,
            base_url=fake.base_url, reply_attempts=1)
    assert len(fake.model_calls()) == 1
    (error,) = q(db_path, "SELECT error FROM llm_calls")[0]
    assert "malformed reply" in error


def test_a_deeply_nested_direct_openai_reply_is_unreadable_not_an_error(db_path, fake):
    fake.script(Reply(text=DEEP), Reply(text=DEEP))
    summary = run_map(db_path, plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
                      reply_attempts=2)
    assert summary.failed == 1 and summary.errors == 0  # cannot assess, not asked every run
    assert machine_answers(db_path, "cannot_assess") == 1 and len(fake.model_calls()) == 2


# -- 2. a batch submitted but not noted ---------------------------------------------------


def test_a_batch_is_noted_before_it_is_submitted(db_path, fake, monkeypatch):
    real = batches.note_batch
    state = {"first": True}

    def note_fails_once(*a, **kw):
        if state["first"]:
            state["first"] = False
            raise sqlite3.OperationalError("database is locked")
        return real(*a, **kw)

    monkeypatch.setattr(batches, "note_batch", note_fails_once)
    with pytest.raises(sqlite3.OperationalError):
        openai_batch(db_path, fake)
    assert submitted(fake) == []  # nothing paid without a note
    openai_batch(db_path, fake)
    assert len(submitted(fake)) == 1 and machine_answers(db_path) == 6


def test_a_batch_whose_id_cannot_be_noted_is_named_and_paid_once(db_path, fake, monkeypatch):
    def locked(*a, **kw):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(batches, "NOTE_ATTEMPTS", 2)
    real = batches.note_batch_id
    monkeypatch.setattr(batches, "note_batch_id", locked)
    with pytest.raises(RunAborted) as info:
        openai_batch(db_path, fake)
    (batch_id,) = fake._batches
    assert batch_id in str(info.value) and "--batch-id" in str(info.value)
    monkeypatch.setattr(batches, "note_batch_id", real)
    with open_store(db_path) as store:
        (left,) = uncollected_batches(store)
    assert left.state == "id unknown" and left.batch_id is None
    summary = run_map(db_path, plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert fake.model_calls() == [] and summary.errors == 6  # left to the batch, not paid again
    assert any("--batch-id" in m for m in summary.messages)
    with pytest.raises(LookupError):
        collect_batch(db_path, 1, keys=llm.KEYS, base_url=fake.openai_base_url)
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(submitted(fake)) == 1


def test_a_batch_noted_but_never_submitted_can_be_abandoned(db_path, fake, monkeypatch):
    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(batches.Provider, "submit_batch", killed)  # killed while submitting
    with pytest.raises(KeyboardInterrupt):
        openai_batch(db_path, fake)
    monkeypatch.undo()
    openai_batch(db_path, fake)
    assert submitted(fake) == []  # a batch of run 1 may hold them: not paid twice
    abandon_batch(db_path, 1)
    openai_batch(db_path, fake)
    assert len(submitted(fake)) == 1 and machine_answers(db_path) == 6


# -- 3. stopped between recording results and closing the batch -----------------------------


def test_results_recorded_before_an_interruption_are_not_recorded_again(db_path, fake, monkeypatch):
    real = batches.close_batch
    state = {"first": True}

    def close_then_interrupt(*a, **kw):
        if state["first"]:
            state["first"] = False
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(batches, "close_batch", close_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        openai_batch(db_path, fake)
    before = q(db_path, "SELECT count(*), sum(cost_usd) FROM llm_calls")[0]
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url)
    assert q(db_path, "SELECT count(*), sum(cost_usd) FROM llm_calls")[0] == before
    assert summary.cost_usd == 0 and summary.skipped == 6
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []


def test_a_collect_stopped_half_way_records_only_the_rest_later(tmp_path, fake, monkeypatch):
    db_path = tmp_path / "big.db"
    with open_store(db_path) as store:
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
        openai_batch(db_path, fake)
    assert q(db_path, "SELECT count(*) FROM llm_calls")[0][0] == 100
    collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert q(db_path, "SELECT count(*), count(DISTINCT item_id) FROM llm_calls")[0] == (150, 150)
    assert machine_answers(db_path) == 150 and batch_lines(fake) == 150


# -- 4. one collector at a time -------------------------------------------------------------


def test_a_batch_is_claimed_by_one_collector_at_a_time(db_path, fake):
    stop_waiting(db_path, fake)
    batch_id = next(iter(fake._batches))
    with open_store(db_path) as store:
        token = claim_batch(store, 1, batch_id, 1)
        assert token and claim_batch(store, 1, batch_id, 2) is None
        assert uncollected_batches(store)[0].state == "collecting"
        release_batch(store, 1, token)
        assert claim_batch(store, 1, batch_id, 2) is not None


def test_collect_while_the_batch_run_is_still_waiting_records_and_pays_once(db_path, fake):
    fake.batch_polls = 3
    fake.script(Unparseable())  # one unreadable batch line: asked again directly, once
    summaries, errors = [], []

    def waiting_run():
        try:
            summaries.append(run_map(db_path, plan(db_path), use_batch=True, poll_interval=0.6,
                                     keys=llm.KEYS, base_url=fake.openai_base_url))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=waiting_run)
    thread.start()
    deadline = time.monotonic() + 20
    while True:
        with open_store(db_path) as store:
            listed = uncollected_batches(store)
        if listed and listed[0].batch_id:  # submitted (before: "submitting", no id yet)
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert listed[0].batch_id and listed[0].state == "waiting" and listed[0].live
    collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    thread.join(30)
    assert errors == []
    assert q(db_path, "SELECT count(*) FROM llm_calls")[0][0] == 7  # six lines, one retry
    assert len(fake.model_calls()) == 1 and machine_answers(db_path) == 6
    assert any("being collected" in m for m in summaries[0].messages), summaries[0].messages


def test_a_batch_left_by_a_stopped_run_is_listed_as_stopped(db_path, fake):
    stop_waiting(db_path, fake)
    with open_store(db_path) as store:
        (left,) = uncollected_batches(store)
    assert left.state == "stopped" and not left.live and "stopped while waiting" in left.text()


# -- 5. two runs of the same plan at once -------------------------------------------------


def test_two_runs_of_the_same_plan_at_once_pay_once(db_path, fake):
    fake.latency = 0.05
    plans = [plan(db_path), plan(db_path)]
    summaries = []
    threads = [threading.Thread(target=lambda p=p: summaries.append(
        run_map(db_path, p, concurrency=2, keys=llm.KEYS, base_url=fake.openai_base_url)))
        for p in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert machine_answers(db_path) == 6
    assert len(fake.model_calls()) == 6
    assert any("being asked by run" in m for s in summaries for m in s.messages)


def test_a_finished_run_leaves_nothing_claimed(db_path, fake):
    """A run that failed its item gives the claim back when it ends: the next run
    asks it (a claim left behind would hold it from every later run)."""
    fake.script(Status(503, "down"))
    run_map(db_path, plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
            max_retries=0, reply_attempts=1)
    from labels.llm.record import run_is_alive

    ((params,),) = q(db_path, "SELECT params FROM llm_runs WHERE id = 1")
    params = json.loads(params)
    assert params["claimed"] and not run_is_alive(params)  # it claimed; its claims hold no more
    summary = run_map(db_path, plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 1


# -- 6. a waiting batch holds its (item, question) pairs whatever the output limit ------------


def test_a_direct_run_with_another_output_limit_leaves_a_waiting_batch_its_items(db_path, fake):
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        openai_batch(db_path, fake, max_wait=0.02, the_plan=plan(db_path, max_output_tokens=4096))
    summary = run_map(db_path, plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert fake.model_calls() == [] and summary.errors == 6
    assert any("held by batch" in m and "4096" in m for m in summary.messages), summary.messages
    fake.batch_polls = 0  # now it has ended: the next run collects it, and pays nothing more
    summary = run_map(db_path, plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 6 and fake.model_calls() == [] and batch_lines(fake) == 6
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []


# -- 7. twins of a reply cut off or unreadable ---------------------------------------------


@pytest.fixture
def twins(tmp_path):
    """Two items whose requests are identical (same turns, same reply)."""
    db_path = tmp_path / "twins.db"
    with open_store(db_path) as store:
        llm.write_carebench(store, 1, rounds=1)
        with store.transaction() as conn:
            RecordWriter(conn, source="test").write([ItemRecord(
                uid="inv_case_00000_r01::m1-copy", kind="response", dataset="carebench-test",
                parent_uid="inv_case_00000_r01", round_id=1, model="m1-copy",
                payload={"response": "Invented reply by m1 to case 0 round 1: rest and fluids.",
                         "error": None})])
    return db_path


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


def everything(db_path):
    out = []
    for table in ("llm_calls", "llm_runs", "annotations", "raters", "audit_log"):
        out += [str(v) for row in q(db_path, f"SELECT * FROM {table}") for v in row]
    return "\n".join(out)


def test_a_key_echoed_in_a_reply_is_redacted_wherever_it_is_stored(db_path, fake):
    fake.script(Reply(obj={"rationale": f"debug: Authorization: Bearer {KEY}",
                           "label": CODES[0]}))
    run_map(db_path, plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    stored = everything(db_path)
    assert machine_answers(db_path, "answered") == 1
    assert KEY not in stored and KEY[-8:] not in stored
    assert "[redacted]" in q(db_path, "SELECT response FROM llm_calls")[0][0]


def test_credentials_in_a_compatible_url_are_not_sent_nor_stored(db_path, fake):
    password = "s3cret-url-password-xyz"
    host = fake.openai_base_url.replace("http://", "")
    key = "sk-compat-key-0123456789"
    fake.script(Status(400, "rejected", echo_auth=True))
    run_map(db_path, plan(db_path, f"compatible:http://alice:{password}@{host}#llama3", limit=1),
            keys={"compatible": key}, reply_attempts=1)
    assert fake.model_calls()[0].headers.get("authorization") == f"Bearer {key}"
    stored = everything(db_path)
    token = base64.b64encode(f"alice:{password}".encode()).decode()
    assert password not in stored and token not in stored and key not in stored
    assert f"http://{host}" in stored  # the URL is recorded, without them


def test_a_url_password_echoed_back_is_redacted(db_path, fake):
    password = "s3cret-url-password-xyz"
    host = fake.openai_base_url.replace("http://", "")
    fake.script(Status(400, f"bad password {password}"))
    run_map(db_path, plan(db_path, f"compatible:http://alice:{password}@{host}#llama3", limit=1),
            reply_attempts=1)
    assert password not in everything(db_path)


def test_a_reply_nested_deeper_than_any_answer_needs_is_a_malformed_reply(db_path, fake):
    deep = "[" * 150 + "1" + "]" * 150  # readable by json, but no answer nests like this
    body = ('{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",'
            '"content":[{"type":"tool_use","id":"toolu_1","name":"' + MAPPER.tool_name
            + '","input":{"deep":' + deep + '}}],"stop_reason":"tool_use","stop_sequence":null,'
            '"usage":{"input_tokens":900,"output_tokens":2000}}')
    fake.script(MalformedBody(body))
    summary = run_map(db_path, plan(db_path, "anthropic:claude-haiku-4-5", limit=1), keys=llm.KEYS,
                      base_url=fake.base_url, reply_attempts=1)
    assert summary.errors == 1 and "nested more than" in summary.messages[0]
    assert q(db_path, "SELECT count(*) FROM llm_calls")[0][0] == 1


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
