"""Batches at their edges: a submission whose reply is lost, a batch the
provider can no longer give back, a run that finishes while another claims,
a batch forgotten while it is being submitted, short URL passwords, and an
OpenAI batch cancelled part way. Each request is paid once; every paid reply
is on record."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

import labels.llm.batches as batches
import labels.llm.providers as providers
import labels.llm.runner as runner
from labels.llm import RunAborted, abandon_batch, collect_batch, run_map
from labels.llm.batches import uncollected_batches
from labels.llm.record import forget_batch
from review.workspace import open_store
from tests import conftest_llm as llm
from tests.conftest_llm import plan, q
from tests.fake_llm_server import Reply, Status

SPECS = {"openai": "openai:gpt-4.1-mini", "anthropic": "anthropic:claude-haiku-4-5"}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 2)  # 6 responses
    return str(path)


def machine_answers(db):
    return q(db, "SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                 " WHERE r.kind = 'machine'")[0][0]


def url(fake, provider="openai"):
    return fake.openai_base_url if provider == "openai" else fake.base_url


def direct(db, fake, the_plan=None, **kw):
    return run_map(db, the_plan or plan(db), keys=llm.KEYS, base_url=fake.openai_base_url, **kw)


def by_batch(db, fake, the_plan=None, provider="openai", **kw):
    kw.setdefault("poll_interval", 0.01)
    return run_map(db, the_plan or plan(db, SPECS[provider]), use_batch=True, keys=llm.KEYS,
                   base_url=url(fake, provider), **kw)


def creates(fake):
    return [r for r in fake.requests if r.method == "POST"
            and r.path in ("/v1/batches", "/v1/messages/batches")]


def listed(db):
    with open_store(db) as store:
        return uncollected_batches(store)


def leave_a_batch(db, fake, limit=3):
    """Run 1 gives up waiting: its batch (of `limit` items) is left uncollected."""
    fake.batch_polls = 100
    with pytest.raises(RunAborted):
        by_batch(db, fake, max_wait=0.02, the_plan=plan(db, limit=limit))
    fake.batch_polls = 0


# -- 1. a submission whose reply was lost ----------------------------------------------


def test_a_batch_whose_reply_was_lost_is_kept_not_paid_for_again(db, fake):
    fake.batch_create_delay = 1.5  # created, but the reply comes after the client gave up
    with pytest.raises(RunAborted) as info:
        by_batch(db, fake, timeout=0.5, max_retries=0)
    assert "--batch-id" in str(info.value) and "--forget" in str(info.value)
    (batch_id,) = fake._batches
    (left,) = listed(db)
    assert left.state == "id unknown" and left.batch_id is None
    fake.batch_create_delay = 0.0
    summary = direct(db, fake)  # the six are held by that batch: not asked again
    assert fake.model_calls() == [] and summary.errors == 6
    summary = collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(fake._batches) == 1 and machine_answers(db) == 6


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_request_that_creates_a_batch_is_not_retried(db, fake, provider):
    fake.batch_create_delay = 1.0
    with pytest.raises(RunAborted):
        by_batch(db, fake, provider=provider, timeout=0.3, max_retries=3)
    assert len(creates(fake)) == 1 and len(fake._batches) == 1


def test_only_a_submission_that_cannot_have_made_a_batch_is_forgotten(db, fake):
    fake.batch_errors["submit"] = Status(503, "overloaded")  # may have been created
    with pytest.raises(RunAborted):
        by_batch(db, fake, provider="anthropic", max_retries=0)
    assert [b.state for b in listed(db)] == ["id unknown"]
    fake.batch_errors["submit"] = Status(400, "bad request")  # refused: nothing exists
    with pytest.raises(RunAborted):
        by_batch(db, fake, the_plan=plan(db, limit=2))
    fake.batch_errors["submit"] = Status(503, "overloaded")  # the upload failed: no batch
    with pytest.raises(RunAborted):
        by_batch(db, fake, the_plan=plan(db, limit=2), max_retries=0)
    assert [b.run_id for b in listed(db)] == [1]
    closed = "http://127.0.0.1:9"  # nothing listens: no request ever left
    with pytest.raises(RunAborted, match="submitting the batch"):
        run_map(db, plan(db, SPECS["anthropic"], limit=2),
                use_batch=True, keys=llm.KEYS, base_url=closed, max_retries=1)
    assert [b.run_id for b in listed(db)] == [1]


# -- 2. a batch the provider can no longer give back ------------------------------------------


def test_a_later_run_goes_on_when_a_batch_cannot_be_collected(db, fake):
    leave_a_batch(db, fake)  # 3 of the 6
    fake.batch_errors["results"] = Status(404, "file not found (expired)")
    summary = direct(db, fake)
    assert summary.answered == 3 and summary.errors == 3 and len(fake.model_calls()) == 3
    assert any("held by batch" in m and "carelens collect --run 1" in m
               for m in summary.messages), summary.messages
    assert [b.run_id for b in listed(db)] == [1]  # not closed by a run: only by collect


def test_a_batch_whose_status_is_refused_is_not_taken_for_running(db, fake):
    leave_a_batch(db, fake)
    fake.batch_errors["status"] = Status(404, "no such batch")
    summary = direct(db, fake)
    assert summary.answered == 3 and summary.errors == 3
    assert not any("not ended yet" in m for m in summary.messages), summary.messages
    assert any("could not be collected" in m and "HTTP 404" in m for m in summary.messages)


@pytest.mark.parametrize("stage", ["results", "status"])
def test_collect_closes_a_batch_the_provider_no_longer_has(db, fake, stage):
    leave_a_batch(db, fake)
    fake.batch_errors[stage] = Status(503, "try later")  # may pass: kept
    with pytest.raises(RunAborted, match="collect it later"):
        collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url,
                      max_retries=0)
    assert [b.run_id for b in listed(db)] == [1]
    fake.batch_errors[stage] = Status(404, "not found")
    with pytest.raises(RunAborted, match="is gone") as info:
        collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert "asked again" in str(info.value)
    assert listed(db) == []
    fake.batch_errors.clear()
    summary = direct(db, fake)
    assert summary.answered == 6 and len(fake.model_calls()) == 6


def test_forget_drops_a_submitted_batch_only_once_the_provider_has_lost_it(db, fake):
    leave_a_batch(db, fake)
    kw = {"keys": llm.KEYS, "base_url": fake.openai_base_url, "max_retries": 0}
    with pytest.raises(LookupError, match="still has"):
        abandon_batch(db, 1, **kw)
    fake.batch_errors["status"] = Status(503, "try later")
    with pytest.raises(LookupError, match="cannot say now"):
        abandon_batch(db, 1, **kw)
    del fake.batch_errors["status"]
    fake.batch_errors["results"] = Status(404, "file expired")
    abandon_batch(db, 1, **kw)
    assert listed(db) == []
    fake.batch_errors.clear()
    assert direct(db, fake).answered == 6


# -- 3. a run that finishes between another run's look and its claim ---------------------------


def test_a_run_that_finished_before_this_one_claims_is_not_paid_again(db, fake, monkeypatch):
    later = plan(db)  # planned, and checked, while nothing is answered
    real = runner.claim_units
    state = {"first": True}

    def another_run_first(*args, **kw):
        if state["first"]:
            state["first"] = False
            direct(db, fake)  # the same plan, start to finish
        return real(*args, **kw)

    monkeypatch.setattr(runner, "claim_units", another_run_first)
    summary = direct(db, fake, later)
    assert len(fake.model_calls()) == 6 and machine_answers(db) == 6
    assert summary.skipped == 6 and summary.answered == 0


# -- 4. a batch forgotten while it is being submitted ------------------------------------------


def _age_heartbeat(db, run_id, seconds):
    at = (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="microseconds")
    with open_store(db) as store, store.transaction() as conn:
        conn.execute("UPDATE llm_runs SET params = json_set(params, '$.heartbeat.at', ?)"
                     " WHERE id = ?", (at, run_id))


def _heartbeat_age(db, run_id=1):
    (at,) = q(db, "SELECT json_extract(params, '$.heartbeat.at') FROM llm_runs WHERE id = ?",
              (run_id,))[0]
    return (datetime.now(UTC) - datetime.fromisoformat(at)).total_seconds()


def test_a_batch_being_submitted_is_not_offered_to_forget(db, fake, monkeypatch):
    real = providers.OpenAIProvider._submit_batch
    seen = {}

    def long_upload(self, requests):
        batch_id = real(self, requests)
        _age_heartbeat(db, 1, 300)  # as if the run's own beat had not come for minutes
        (seen["left"],) = listed(db)
        with pytest.raises(LookupError, match="submitting its batch now"):
            abandon_batch(db, 1)
        return batch_id

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", long_upload)
    summary = by_batch(db, fake)
    assert seen["left"].state == "submitting" and seen["left"].live
    assert summary.answered == 6 and machine_answers(db) == 6


def test_the_heartbeat_is_kept_while_a_batch_is_submitted(db, fake, monkeypatch):
    monkeypatch.setattr(batches, "SUBMIT_BEAT", 0.05, raising=False)
    real = providers.OpenAIProvider._submit_batch
    ages = []

    def slow_upload(self, requests):
        _age_heartbeat(db, 1, 300)
        time.sleep(0.5)
        ages.append(_heartbeat_age(db))
        return real(self, requests)

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", slow_upload)
    by_batch(db, fake)
    assert ages and ages[0] < 5
    assert q(db, "SELECT json_extract(params, '$.batch.submitter') FROM llm_runs") == [(None,)]


def test_a_batch_forgotten_as_its_id_is_noted_is_named_and_can_be_collected(db, fake,
                                                                            monkeypatch):
    real = providers.OpenAIProvider._submit_batch

    def forgotten_meanwhile(self, requests):
        batch_id = real(self, requests)
        with open_store(db) as store:
            forget_batch(store, 1, "never submitted (abandoned)")
        return batch_id

    monkeypatch.setattr(providers.OpenAIProvider, "_submit_batch", forgotten_meanwhile)
    with pytest.raises(RunAborted) as info:
        by_batch(db, fake)
    (batch_id,) = fake._batches
    assert f"--batch-id {batch_id}" in str(info.value) and "forgotten" in str(info.value)
    assert q(db, "SELECT json_extract(params, '$.batch.id') FROM llm_runs") == [(None,)]
    monkeypatch.undo()
    summary = collect_batch(db, 1, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url, batch_id=batch_id)
    assert summary.answered == 6 and len(fake._batches) == 1 and listed(db) == []


# -- 5. a short password in a base URL ----------------------------------------------------------


def _compatible(db, fake, password, obj):
    host = fake.openai_base_url.replace("http://", "")
    fake.script(Reply(obj=obj))
    return run_map(db, plan(db, f"compatible:http://admin:{password}@{host}#llama3", limit=1),
                   keys={"compatible": "sk-compat-key-0123456789"}, reply_attempts=1)


def test_a_short_url_password_leaves_the_models_words_alone(db, fake):
    rationale = "Advise to administer fluids; the admin note says rest."
    summary = _compatible(db, fake, "admin", {"rationale": rationale, "label": llm.CODES[1]})
    assert summary.answered == 1
    assert q(db, "SELECT rationale FROM annotations")[-1] == (rationale,)


def test_a_redacted_secret_never_makes_a_valid_answer_unreadable(db, fake):
    # a long password is still redacted from what is stored, but after the reply is read
    password = "ESCALATION"  # part of the label code CODES[1]
    summary = _compatible(db, fake, password, {"rationale": f"pw {password} seen",
                                               "label": llm.CODES[1]})
    assert summary.answered == 1 and machine_answers(db) == 1, summary.messages
    assert q(db, "SELECT value, rationale FROM annotations")[-1] == (llm.CODES[1],
                                                                     "pw [redacted] seen")
    assert password not in str(q(db, "SELECT response, raw_text, parsed FROM llm_calls"))


# -- an OpenAI batch cancelled part way ------------------------------------------------------


def test_a_cancelled_openai_batch_keeps_what_it_completed(db, fake):
    fake.batch_cancel_after = 4  # billed for four
    summary = by_batch(db, fake)
    assert summary.answered == 4 and summary.errors == 2
    assert q(db, "SELECT json_extract(params, '$.batch.status') FROM llm_runs") == [("cancelled",)]
    fake.batch_cancel_after = None
    summary = by_batch(db, fake)
    assert summary.planned == summary.answered == 2 and machine_answers(db) == 6
