"""Runs: the SDKs' bounded retries, fatal errors, progress, interruption and
resume (an exception mid-run and a SIGKILLed process), and the batch APIs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labels.llm import (
    RunAborted,
    collect_batch,
    parse_model_spec,
    provider_for,
    run_map,
)
from labels.llm.mapper import MAPPER
from labels.llm.providers import CallFailed
from labels.llm.tasks import read_json_object
from review.workspace import open_store
from store.records import ItemRecord
from store.writer import RecordWriter
from tests import conftest_llm as llm
from tests.conftest_llm import plan
from tests.fake_llm_server import RateLimited, Reply, ServerError, Status, Unparseable
from tests.helpers import CODES

ROOT = Path(__file__).resolve().parents[1]




@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 10)  # 30 responses
    return path


def mapped(db_path, rater="openai:gpt-4.1-mini@mapper-v1"):
    """(annotations, distinct items, duplicated units, annotations whose call is not 'ok')."""
    with open_store(db_path) as store:
        rows = store.query(
            "SELECT a.item_id, a.question_id, a.target, a.status, a.extra FROM annotations a"
            " JOIN raters r ON r.id = a.rater_id WHERE r.name = ?", (rater,))
        ok_calls = {r[0] for r in store.query("SELECT id FROM llm_calls WHERE status = 'ok'")}
    units = [(r[0], r[1], r[2]) for r in rows]
    orphans = [r for r in rows if r[3] == "answered"
               and json.loads(r[4])["llm_call_id"] not in ok_calls]
    return len(rows), len({r[0] for r in rows}), len(units) - len(set(units)), len(orphans)


# -- the SDKs' retries ----------------------------------------------------------------------------


@pytest.mark.parametrize("name, url", [("openai", "openai_base_url"), ("anthropic", "base_url")])
def test_the_sdk_retries_rate_limits_and_server_errors(fake, name, url):
    spec = parse_model_spec(f"{name}:test-model")
    provider = provider_for(spec, llm.KEYS, getattr(fake, url), max_retries=2)
    request = provider.request_body("test-model", "system", "user", MAPPER)
    fake.script(RateLimited(retry_after_ms=5), ServerError(503))
    reply = provider.send(request, MAPPER)
    assert reply.retries == 2 and len(fake.model_calls()) == 3
    assert MAPPER.read(read_json_object(reply.output)).value in CODES


@pytest.mark.parametrize("name, url", [("openai", "openai_base_url"), ("anthropic", "base_url")])
def test_retries_are_bounded(fake, name, url):
    provider = provider_for(parse_model_spec(f"{name}:test-model"), llm.KEYS, getattr(fake, url),
                            max_retries=1)
    request = provider.request_body("test-model", "system", "user", MAPPER)
    fake.script(*[RateLimited(retry_after_ms=1)] * 5)
    with pytest.raises(CallFailed) as info:
        provider.send(request, MAPPER)
    assert info.value.status == 429 and not info.value.fatal
    assert len(fake.model_calls()) == 2  # the call and one retry, no more


def test_max_retries_must_be_small():
    with pytest.raises(ValueError, match="max_retries"):
        provider_for(parse_model_spec("openai:m"), llm.KEYS, "http://127.0.0.1:9/v1",
                     max_retries=1000)


def test_an_item_whose_call_keeps_failing_is_left_for_the_next_run(db_path, fake):
    fake.script(*[ServerError(500)] * 2)
    summary = run_map(str(db_path), plan(db_path, limit=1), concurrency=1, keys=llm.KEYS,
                      base_url=fake.openai_base_url, max_retries=1)
    assert (summary.errors, summary.answered) == (1, 0)
    assert mapped(db_path)[0] == 0
    with open_store(db_path) as store:
        (row,) = store.query("SELECT status, attempts, error FROM llm_calls")
    assert (row[0], row[1]) == ("error", 2) and "HTTP 500" in row[2]
    summary = run_map(str(db_path), plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 1 and mapped(db_path)[:3] == (1, 1, 0)


def test_a_bad_key_stops_the_run(db_path, fake):
    fake.script(*[Status(401, "invalid x-api-key", echo_auth=True)] * 30)
    with pytest.raises(RunAborted, match="HTTP 401") as info:
        run_map(str(db_path), plan(db_path), concurrency=4, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert llm.KEYS["openai"] not in str(info.value)
    assert info.value.summary is not None and info.value.summary.answered == 0
    assert len(fake.model_calls()) < 30  # stopped early, not one failure per item
    assert mapped(db_path)[0] == 0


# -- progress and interruption --------------------------------------------------------------------


def test_progress_is_reported_from_the_calling_thread(db_path, fake):
    seen = []

    def progress(p):
        seen.append((threading.get_ident(), p.done, p.total, p.stage))

    run_map(str(db_path), plan(db_path), concurrency=8, progress=progress, keys=llm.KEYS,
            base_url=fake.openai_base_url)
    assert {ident for ident, *_ in seen} == {threading.get_ident()}
    assert seen[-1][1:] == (30, 30, "done")
    assert [done for _, done, *_ in seen] == sorted(done for _, done, *_ in seen)


def test_an_interrupted_run_resumes_with_no_item_lost_or_done_twice(db_path, fake):
    fake.latency = 0.05  # long enough for the (10 a second) progress calls to see it

    def interrupt(p):
        if p.done >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_map(str(db_path), plan(db_path), concurrency=4, progress=interrupt, keys=llm.KEYS,
                base_url=fake.openai_base_url)
    done, distinct, dups, orphans = mapped(db_path)
    assert 10 <= done < 30 and done == distinct and dups == orphans == 0
    sent_before = len(fake.model_calls())
    assert sent_before == done  # every call made was recorded with its answer

    rest = plan(db_path)
    assert len(rest.units) == 30 - done
    summary = run_map(str(db_path), rest, concurrency=4, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 30 - done
    assert len(fake.model_calls()) - sent_before == 30 - done
    assert mapped(db_path) == (30, 30, 0, 0)


WORKER = """
import sys
sys.path.insert(0, {root!r})
from labels.llm import plan_map_run, run_map
from review.workspace import open_store
with open_store({db!r}) as store:
    plan = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v1")
run_map({db!r}, plan, concurrency=4, base_url={url!r}, keys={{"openai": "sk-worker"}})
"""


def test_a_killed_run_resumes_with_every_item_recorded_whole(db_path, fake):
    fake.latency = 0.02
    code = WORKER.format(root=str(ROOT), db=str(db_path), url=fake.openai_base_url)
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while mapped(db_path)[0] < 8:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    done, distinct, dups, orphans = mapped(db_path)
    assert done < 30 and done == distinct and dups == orphans == 0
    summary = run_map(str(db_path), plan(db_path), concurrency=4, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert summary.answered == 30 - done
    assert mapped(db_path) == (30, 30, 0, 0)


def test_two_runs_at_once_answer_each_item_once(db_path, fake):
    fake.latency = 0.005
    fake.vary_replies = True  # a second answer would differ, so it could not pass as a repeat
    plans = [plan(db_path), plan(db_path)]
    threads = [threading.Thread(target=run_map, args=(str(db_path), p),
                                kwargs={"concurrency": 4, "keys": llm.KEYS,
                                        "base_url": fake.openai_base_url}) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mapped(db_path) == (30, 30, 0, 0)


def test_identical_requests_are_sent_once(tmp_path, fake):
    db_path = tmp_path / "twins.db"
    with open_store(db_path) as store:
        llm.write_carebench(store, 1, rounds=1)
        with store.transaction() as conn:  # the same reply under another uid
            RecordWriter(conn, source="test").write([ItemRecord(
                uid="inv_case_00000_r01::m1-copy", kind="response", dataset="carebench-test",
                parent_uid="inv_case_00000_r01", round_id=1, model="m1-copy",
                payload={"response": "Invented reply by m1 to case 0 round 1: rest and fluids.",
                         "error": None})])
    summary = run_map(str(db_path), plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert len(fake.model_calls()) == 1
    assert (summary.answered, summary.cached) == (1, 1)


# -- batch APIs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, url, routes", [
    ("openai:gpt-4.1-mini", "openai_base_url",
     {"/v1/files", "/v1/batches"}),
    ("anthropic:claude-haiku-4-5", "base_url", {"/v1/messages/batches"}),
])
def test_batch_mode_sends_one_batch_and_records_every_result(db_path, fake, spec, url, routes):
    fake.script(Unparseable())  # one unreadable line: asked again directly
    the_plan = plan(db_path, spec)
    summary = run_map(str(db_path), the_plan, use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                      base_url=getattr(fake, url))
    rater = f"{spec}@mapper-v1"
    assert mapped(db_path, rater) == (30, 30, 0, 0)
    assert routes <= {r.path for r in fake.requests if r.method == "POST"}
    assert len(fake.model_calls()) == 1  # only the retry of the unreadable line
    assert summary.answered == 30 and summary.batch_id
    with open_store(db_path) as store:
        statuses = [r[0] for r in store.query("SELECT status FROM llm_calls ORDER BY id")]
        params = json.loads(store.scalar("SELECT params FROM llm_runs"))
    assert statuses.count("parse_failed") == 1 and statuses.count("ok") == 30
    assert params["batch"]["id"] == summary.batch_id
    assert summary.cost_usd < 1.05 * (the_plan.est_cost_batch_usd or 0) + 0.01


def test_an_interrupted_batch_is_collected_later(db_path, fake):
    fake.batch_polls = 3
    with pytest.raises(RunAborted, match="collect it later") as info:
        run_map(str(db_path), plan(db_path), use_batch=True, poll_interval=0.01, max_wait=0.0,
                keys=llm.KEYS, base_url=fake.openai_base_url)
    assert mapped(db_path)[0] == 0
    run_id = info.value.summary.run_id
    summary = collect_batch(str(db_path), run_id, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url)
    assert summary.answered == 30 and mapped(db_path) == (30, 30, 0, 0)


def test_scripted_replies_reach_the_batch(db_path, fake):
    fake.script(*[Reply({"rationale": "urgent", "label": CODES[3]})] * 30)
    run_map(str(db_path), plan(db_path), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
            base_url=fake.openai_base_url)
    with open_store(db_path) as store:
        values = {r[0] for r in store.query(
            "SELECT value FROM annotations WHERE source = 'llm'")}
    assert values == {CODES[3]}
