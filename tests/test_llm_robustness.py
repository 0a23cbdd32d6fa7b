"""What a provider or a run can throw at the LLM raters: errors from the batch
endpoints, replies of the wrong shape, replies cut off or refused, a 429 asking
for hours, batches interrupted and run again, and the price table's edges."""

from __future__ import annotations

import json
import threading
import time

import pytest

import labels.llm.asking as asking
from cli import main
from labels.llm import (
    RunAborted,
    collect_batch,
    parse_model_spec,
    plan_map_run,
    provider_for,
    run_map,
    uncollected_batches,
)
from labels.llm.mapper import MAPPER
from labels.llm.pricing import price_for
from labels.llm.providers import CallFailed
from review.workspace import open_store
from tests import conftest_llm as llm
from tests.conftest_llm import plan
from tests.fake_llm_server import (
    Cut,
    MalformedBody,
    RateLimited,
    Refusal,
    Status,
)
from tests.helpers import CODES

URLS = {"openai": "openai_base_url", "anthropic": "base_url"}
SPECS = {"openai": "openai:gpt-4.1-mini", "anthropic": "anthropic:claude-haiku-4-5"}




@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 10)  # 30 responses
    return path


def url(fake, provider):
    return getattr(fake, URLS[provider])


def runs(db_path):
    with open_store(db_path) as store:
        return [json.loads(r[0]) for r in store.query("SELECT params FROM llm_runs ORDER BY id")]


def annotations(db_path, rater="openai:gpt-4.1-mini@mapper-v1"):
    with open_store(db_path) as store:
        return store.query("SELECT a.status, a.value, a.extra FROM annotations a JOIN raters r"
                           " ON r.id = a.rater_id WHERE r.name = ?", (rater,))


def calls(db_path):
    with open_store(db_path) as store:
        return store.query("SELECT status, error, raw_text FROM llm_calls ORDER BY id")


def batches_submitted(fake):
    return [r for r in fake.requests if r.method == "POST"
            and r.path in ("/v1/batches", "/v1/messages/batches")]


# -- 1. errors from the batch endpoints ---------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stage", ["submit", "status", "results"])
def test_a_batch_endpoint_error_stops_the_run_redacted_and_on_record(db_path, fake, provider, stage):
    fake.batch_errors[stage] = Status(401, "invalid key", echo_auth=True)
    with pytest.raises(RunAborted) as info:
        run_map(db_path, plan(db_path, SPECS[provider], limit=3), use_batch=True, poll_interval=0.01,
                keys=llm.KEYS, base_url=url(fake, provider))
    assert "HTTP 401" in str(info.value) and llm.KEYS[provider] not in str(info.value)
    assert info.value.summary is not None and info.value.summary.answered == 0
    (params,) = runs(db_path)
    assert params["finished"]["status"] == "aborted"
    assert "HTTP 401" in params["finished"]["error"]
    assert llm.KEYS[provider] not in json.dumps(params)
    if stage != "submit":  # submitted, and paid for: left to collect once the key is right
        fake.batch_errors.clear()
        with open_store(db_path) as store:
            assert [b.run_id for b in uncollected_batches(store)] == [1]
        summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                                base_url=url(fake, provider))
        assert summary.answered == 3 and summary.errors == 0


def test_a_server_error_while_waiting_leaves_the_batch_to_collect(db_path, fake):
    fake.batch_errors["status"] = Status(503, "try later")
    with pytest.raises(RunAborted, match="collect it later"):
        run_map(db_path, plan(db_path, limit=2), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                base_url=fake.openai_base_url)
    fake.batch_errors.clear()
    summary = run_map(db_path, plan(db_path, limit=2), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert summary.answered == 2 and len(batches_submitted(fake)) == 1


def test_the_command_line_shows_a_batch_error_as_one_clean_line(db_path, fake, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    fake.batch_errors["submit"] = Status(401, "invalid key", echo_auth=True)
    code = main(["--db", str(db_path), "map", "--model", "openai:gpt-4.1-mini", "--limit", "2", "--batch"])
    err = capsys.readouterr().err
    assert code == 2
    assert "carelens: run stopped: submitting the batch: HTTP 401" in err
    assert llm.KEYS["openai"] not in err and "Traceback" not in err


def test_a_billing_error_is_fatal(db_path, fake):
    fake.script(*[Status(402, "Your credit balance is too low")] * 30)
    with pytest.raises(RunAborted, match="HTTP 402"):
        run_map(db_path, plan(db_path, SPECS["anthropic"]), concurrency=2, keys=llm.KEYS,
                base_url=fake.base_url)
    assert len(fake.model_calls()) < 30
    assert runs(db_path)[0]["finished"]["status"] == "aborted"


def test_a_completed_run_says_so_on_its_row(db_path, fake):
    run_map(db_path, plan(db_path, limit=2), keys=llm.KEYS, base_url=fake.openai_base_url)
    finished = runs(db_path)[0]["finished"]
    assert finished["status"] == "completed" and finished["answered"] == 2
    assert finished["error"] is None


# -- 2. replies of the wrong shape --------------------------------------------------------------

ANSWER = {"rationale": "Advises urgent care.", "label": CODES[3]}
OPENAI_BAD = {
    "message null": {"choices": [{"index": 0, "finish_reason": "stop", "message": None}]},
    "no choices": {"choices": []},
    "choices not a list": {"choices": {"0": {}}},
    "choice not an object": {"choices": ["hello"]},
    "content a number": {"choices": [{"index": 0, "message": {"content": 7}}]},
    "a part not text": {"choices": [{"index": 0, "message": {"content": [{"type": "image_url"}]}}]},
    "part not an object": {"choices": [{"index": 0, "message": {"content": ["{}"]}}]},
}
ANTHROPIC_BAD = {
    "content null": {"type": "message", "content": None},
    "content an object": {"type": "message", "content": {"type": "text"}},
    "block not an object": {"type": "message", "content": ["text"]},
    "text a number": {"type": "message", "content": [{"type": "text", "text": 5}]},
}


@pytest.mark.parametrize("provider, body", [("openai", b) for b in OPENAI_BAD.values()]
                         + [("anthropic", b) for b in ANTHROPIC_BAD.values()],
                         ids=[f"openai {k}" for k in OPENAI_BAD] + [f"anthropic {k}" for k in ANTHROPIC_BAD])
def test_a_reply_of_the_wrong_shape_is_malformed_not_a_crash(provider, body):
    p = provider_for(parse_model_spec(f"{provider}:m"), llm.KEYS, llm.UNREACHABLE)
    with pytest.raises(ValueError):
        p.read_reply(body, MAPPER)
    custom_id, result = p._read_batch_reply("i1-q1", body, MAPPER)
    assert custom_id == "i1-q1" and isinstance(result, str) and "malformed" in result


def test_usage_of_the_wrong_shape_is_no_token_count():
    p = provider_for(parse_model_spec("openai:m"), llm.KEYS, llm.UNREACHABLE)
    reply = p.read_reply({"choices": [{"message": {"content": "{}"}}], "usage": [1, 2]}, MAPPER)
    assert (reply.input_tokens, reply.output_tokens) == (None, None)
    p = provider_for(parse_model_spec("anthropic:m"), llm.KEYS, llm.UNREACHABLE)
    reply = p.read_reply({"content": [], "usage": {"input_tokens": "many"}}, MAPPER)
    assert reply.input_tokens is None


def test_content_given_as_text_parts_is_joined_and_read(db_path, fake):
    text = json.dumps(ANSWER)
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": [{"type": "text", "text": text[:20]},
                                                 {"type": "text", "text": text[20:]}]}}]}
    fake.script(MalformedBody(json.dumps(body)))
    summary = run_map(db_path, plan(db_path, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 1
    assert [(r[0], r[1]) for r in annotations(db_path)] == [("answered", CODES[3])]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_wrong_shaped_replies_are_recorded_and_the_run_goes_on(db_path, fake, provider):
    bad = json.dumps(OPENAI_BAD["message null"] if provider == "openai"
                     else ANTHROPIC_BAD["block not an object"])
    fake.script(*[MalformedBody(bad)] * 3)
    summary = run_map(db_path, plan(db_path, SPECS[provider], limit=3), concurrency=1, keys=llm.KEYS,
                      base_url=url(fake, provider))
    assert (summary.answered, summary.errors) == (2, 1)
    assert len(calls(db_path)) == len(fake.model_calls()) == 5
    assert sum(r[0] == "error" and "malformed reply" in r[1] for r in calls(db_path)) == 3


def test_an_unforeseen_error_reading_one_reply_does_not_stop_the_workers(db_path, fake, monkeypatch):
    real, seen = asking.read_reply, []

    def flaky(task, call, reply):
        seen.append(1)
        if len(seen) == 2:
            raise RuntimeError("a reader bug")
        return real(task, call, reply)

    monkeypatch.setattr(asking, "read_reply", flaky)
    summary = run_map(db_path, plan(db_path, limit=6), concurrency=3, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert (summary.answered, summary.errors) == (5, 1)
    assert any("a reader bug" in m for m in summary.messages)
    statuses = [r[0] for r in calls(db_path)]
    assert len(statuses) == len(fake.model_calls()) == 6 and statuses.count("error") == 1


# -- 4. replies cut off at the output limit, refusals --------------------------------------------


@pytest.mark.parametrize("provider, stop", [("openai", "length"), ("anthropic", "max_tokens"),
                                            ("anthropic", "model_context_window_exceeded")])
def test_a_reply_cut_off_is_not_sent_again_and_not_answered(db_path, fake, provider, stop):
    fake.script(Cut(stop))
    summary = run_map(db_path, plan(db_path, SPECS[provider], limit=1), keys=llm.KEYS,
                      base_url=url(fake, provider))
    assert len(fake.model_calls()) == 1
    assert (summary.answered, summary.failed, summary.errors) == (0, 0, 1)
    ((status, error, raw),) = calls(db_path)
    assert status == "error" and "cut off" in error and stop in error and raw
    assert annotations(db_path, f"{SPECS[provider]}@mapper-v1") == []  # a later run may answer it
    summary = run_map(db_path, plan(db_path, SPECS[provider], limit=1), keys=llm.KEYS,
                      base_url=url(fake, provider))
    assert summary.answered == 1


def test_a_reply_cut_off_in_a_batch_is_not_asked_again(db_path, fake):
    fake.script(Cut("length"))
    summary = run_map(db_path, plan(db_path, limit=3), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert (summary.answered, summary.errors) == (2, 1) and fake.model_calls() == []
    assert sum("cut off" in (r[1] or "") for r in calls(db_path)) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refusal_is_recorded_as_a_refusal_and_not_asked_again(db_path, fake, provider):
    fake.script(Refusal("I can't help with medical questions."))
    summary = run_map(db_path, plan(db_path, SPECS[provider], limit=1), keys=llm.KEYS,
                      base_url=url(fake, provider))
    assert len(fake.model_calls()) == 1 and summary.refused == 1 and summary.failed == 0
    assert "1 refused" in summary.text()
    ((status, value, extra),) = annotations(db_path, f"{SPECS[provider]}@mapper-v1")
    assert (status, value) == ("cannot_assess", None)
    assert json.loads(extra)["failure"] == "refused"
    assert "medical questions" in json.loads(extra)["refusal"]
    ((call_status, error, _),) = calls(db_path)
    assert call_status == "error" and error.startswith("the model refused")
    assert len(plan(db_path, SPECS[provider]).units) == 29  # the refusal is the rater's answer


# -- 5. a 429 asking for a long wait ------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_429_asking_for_an_hour_fails_the_call_at_once(fake, provider):
    p = provider_for(parse_model_spec(f"{provider}:m"), llm.KEYS, url(fake, provider))
    fake.script(RateLimited(retry_after_ms=3_600_000))
    done: list = []

    def call():
        try:
            p.send(p.request_body("m", "s", "u", MAPPER), MAPPER)
        except CallFailed as exc:
            done.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(10)
    assert done, "the call is still waiting on retry-after"
    assert time.monotonic() - started < 5
    assert done[0].status == 429 and not done[0].fatal
    assert len(fake.model_calls()) == 1  # not retried


def test_an_item_rate_limited_for_hours_is_left_for_the_next_run(db_path, fake):
    fake.script(RateLimited(retry_after_ms=3_600_000))
    summaries: list = []
    the_plan = plan(db_path, SPECS["anthropic"], limit=2)
    thread = threading.Thread(target=lambda: summaries.append(run_map(
        db_path, the_plan, concurrency=1, keys=llm.KEYS, base_url=fake.base_url)), daemon=True)
    thread.start()
    thread.join(15)
    assert summaries, "the run is still waiting on retry-after"
    (summary,) = summaries
    assert (summary.answered, summary.errors) == (1, 1)
    assert any("HTTP 429" in m for m in summary.messages)


# -- 3. and 6. interrupted batches: collected, never paid for twice ------------------------------


def interrupted_batch(db_path, fake, provider="openai", **plan_kw):
    fake.batch_polls = 3
    with pytest.raises(RunAborted, match="collect it later") as info:
        run_map(db_path, plan(db_path, SPECS[provider], **plan_kw), use_batch=True, poll_interval=0.01,
                max_wait=0.0, keys=llm.KEYS, base_url=url(fake, provider))
    fake.batch_polls = 0
    return info.value.summary.run_id


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_running_again_collects_the_waiting_batch_instead_of_paying_twice(db_path, fake, provider):
    interrupted_batch(db_path, fake, provider)
    with open_store(db_path) as store:
        (waiting,) = uncollected_batches(store)
    assert waiting.requests == 30 and waiting.run_id == 1
    summary = run_map(db_path, plan(db_path, SPECS[provider]), use_batch=True, poll_interval=0.01,
                      keys=llm.KEYS, base_url=url(fake, provider))
    assert summary.answered == 30 and summary.errors == 0
    assert len(batches_submitted(fake)) == 1
    assert len(annotations(db_path, f"{SPECS[provider]}@mapper-v1")) == 30
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []
        assert store.scalar("SELECT COUNT(DISTINCT run_id) FROM llm_calls") == 1  # the batch's run
    assert runs(db_path)[0]["batch"]["collected_by_run"] == 2


def test_a_larger_run_collects_the_waiting_batch_and_submits_only_the_rest(db_path, fake):
    interrupted_batch(db_path, fake, limit=5)
    summary = run_map(db_path, plan(db_path), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert summary.answered == 30 and summary.errors == 0
    first, second = batches_submitted(fake)
    with open_store(db_path) as store:
        second_batch = json.loads(store.scalar("SELECT params FROM llm_runs WHERE id = 2"))["batch"]
    assert second_batch["requests"] == 25 and len(second_batch["custom_ids"]) == 25
    assert not set(second_batch["custom_ids"]) & set(runs(db_path)[0]["batch"]["custom_ids"])


def test_a_smaller_run_records_the_whole_waiting_batch_and_counts_its_own(db_path, fake):
    interrupted_batch(db_path, fake)
    summary = run_map(db_path, plan(db_path, limit=4), use_batch=True, poll_interval=0.01, keys=llm.KEYS,
                      base_url=fake.openai_base_url)
    assert (summary.planned, summary.answered, summary.errors) == (4, 4, 0)
    assert len(annotations(db_path)) == 30  # every paid-for result kept
    assert len(batches_submitted(fake)) == 1


def test_collect_counts_only_what_the_batch_held(db_path, fake):
    run_id = interrupted_batch(db_path, fake, limit=5)
    summary = collect_batch(db_path, run_id, poll_interval=0.01, keys=llm.KEYS,
                            base_url=fake.openai_base_url)
    assert (summary.planned, summary.answered, summary.errors) == (5, 5, 0)
    assert runs(db_path)[0]["finished"]["status"] == "collected"
    with pytest.raises(LookupError, match="collected already"):
        collect_batch(db_path, run_id, keys=llm.KEYS, base_url=fake.openai_base_url)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_direct_run_collects_an_ended_batch_instead_of_paying_twice(db_path, fake, provider):
    interrupted_batch(db_path, fake, provider, limit=5)
    summary = run_map(db_path, plan(db_path, SPECS[provider]), keys=llm.KEYS, base_url=url(fake, provider))
    assert (summary.answered, summary.errors) == (30, 0)
    assert len(fake.model_calls()) == 25  # the 5 the batch held came from it
    with open_store(db_path) as store:
        assert uncollected_batches(store) == []
        assert store.scalar("SELECT COUNT(*) FROM llm_calls WHERE run_id = 1") == 5


def test_a_direct_run_leaves_what_a_running_batch_holds_to_it(db_path, fake, capsys, monkeypatch):
    interrupted_batch(db_path, fake, limit=5)
    fake.batch_polls = 10  # still running
    summary = run_map(db_path, plan(db_path), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert (summary.answered, summary.errors) == (25, 5) and len(fake.model_calls()) == 25
    (message,) = summary.messages
    assert "held by batch" in message and "carelens collect --run 1" in message
    with open_store(db_path) as store:
        assert len(uncollected_batches(store)) == 1
    fake.batch_polls = 0
    assert collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS,
                         base_url=fake.openai_base_url).answered == 5
    assert len(annotations(db_path)) == 30 and len(fake.model_calls()) == 25


@pytest.mark.parametrize("provider, field", [("openai", "max_completion_tokens"),
                                             ("anthropic", "max_tokens")])
def test_a_reply_cut_off_is_answered_by_a_run_with_a_larger_output_limit(db_path, fake, provider, field):
    fake.script(Cut())
    summary = run_map(db_path, plan(db_path, SPECS[provider], limit=1), keys=llm.KEYS,
                      base_url=url(fake, provider))
    assert summary.errors == 1 and "2048 tokens" in summary.messages[0]
    larger = plan(db_path, SPECS[provider], limit=1, max_output_tokens=8192)
    assert larger.units[0].body[field] == 8192 and runs(db_path)[0]["max_output_tokens"] == 2048
    summary = run_map(db_path, larger, keys=llm.KEYS, base_url=url(fake, provider))
    assert summary.answered == 1 and runs(db_path)[1]["max_output_tokens"] == 8192
    assert [c.body[field] for c in fake.model_calls()] == [2048, 8192]


@pytest.mark.parametrize("bad", [0, -1, 10 ** 9, 1.5])
def test_an_output_limit_out_of_range_is_refused_before_anything_is_sent(db_path, bad):
    with pytest.raises(ValueError, match="output limit"):
        plan(db_path, max_output_tokens=bad)


def test_a_batch_sent_with_a_larger_output_limit_is_collected_with_it(db_path, fake):
    interrupted_batch(db_path, fake, limit=3, max_output_tokens=4096)
    assert runs(db_path)[0]["max_output_tokens"] == 4096
    summary = collect_batch(db_path, 1, poll_interval=0.01, keys=llm.KEYS, base_url=fake.openai_base_url)
    assert summary.answered == 3 and summary.errors == 0


def test_the_command_line_takes_an_output_limit(db_path, capsys):
    code = main(["--db", str(db_path), "map", "--model", "openai:gpt-4.1-mini", "--limit", "1", "--dry-run",
                 "--max-output-tokens", "5000"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["request"]["max_completion_tokens"] == 5000
    assert main(["--db", str(db_path), "map", "--model", "openai:gpt-4.1-mini", "--dry-run",
                 "--max-output-tokens", "0"]) == 2
    assert "output limit" in capsys.readouterr().err


def test_the_collect_command_collects_what_is_waiting(db_path, fake, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    interrupted_batch(db_path, fake, limit=3)
    code = main(["--db", str(db_path), "collect", "--wait", "0"])
    out = capsys.readouterr().out
    assert code == 0 and "run 1 as openai:gpt-4.1-mini@mapper-v1: 3 answered" in out
    assert main(["--db", str(db_path), "collect"]) == 0
    assert "no batch is waiting" in capsys.readouterr().out
    assert main(["--db", str(db_path), "collect", "--run", "1"]) == 2
    assert "collected already" in capsys.readouterr().err


def test_the_collect_command_leaves_a_batch_in_progress(db_path, fake, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    interrupted_batch(db_path, fake, limit=3)
    fake.batch_polls = 10
    code = main(["--db", str(db_path), "collect", "--run", "1", "--wait", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "still in_progress" in err and "carelens collect --run 1" in err
    with open_store(db_path) as store:
        assert len(uncollected_batches(store)) == 1


def test_the_data_screen_offers_to_collect_a_waiting_batch(demo_copy, fake, monkeypatch):
    from tests.test_team_pages import app_as

    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    fake.batch_polls = 3
    with open_store(demo_copy) as store:
        the_plan = plan_map_run(store, "openai:gpt-4.1-mini", "mapper-v1", limit=3)
    with pytest.raises(RunAborted):
        run_map(str(demo_copy), the_plan, use_batch=True, max_wait=0.0, keys=llm.KEYS,
                base_url=fake.openai_base_url)
    fake.batch_polls = 0
    with open_store(demo_copy) as store:
        (waiting,) = uncollected_batches(store)
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/data.py").run()
    assert any("not collected yet" in w.value for w in at.warning)
    [b for b in at.button if b.label == "Collect batches"][0].click()
    at.run(timeout=60)
    assert not at.exception
    assert any(f"{waiting.requests} answered" in s.value for s in at.success)
    with open_store(demo_copy) as store:
        assert uncollected_batches(store) == []


def test_the_data_screen_runs_with_the_output_limit_given(demo_copy, fake, monkeypatch):
    from tests.test_team_pages import app_as

    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    at = app_as("Jordan Lee", demo_copy, monkeypatch).run()
    at.switch_page("pages/data.py").run()
    (limit,) = [n for n in at.number_input if n.label == "Output limit (tokens)"]
    assert limit.value == 2048
    [t for t in at.text_input if t.label == "Model"][0].input("openai:gpt-4.1-mini")
    [n for n in at.number_input if n.label.startswith("At most")][0].set_value(2)
    limit.set_value(6000)
    [b for b in at.button if b.label == "Run"][0].click()
    at.run(timeout=60)
    assert not at.exception and any("2 answered" in s.value for s in at.success), \
        [e.value for e in (*at.error, *at.info, *at.success)]
    assert [c.body["max_completion_tokens"] for c in fake.model_calls()] == [6000, 6000]


# -- prices -------------------------------------------------------------------------------------


def test_a_model_variant_is_not_priced_as_its_family():
    assert price_for("openai", "o3-mini") is None
    assert price_for("openai", "gpt-5-pro") is None
    assert price_for("openai", "gpt-4o-mini-audio-preview") is None
    assert price_for("anthropic", "claude-opus-4-5-thinking") is None
    assert price_for("openai", "o3") == (2.0, 8.0)
    assert price_for("openai", "o3-2025-04-16") == (2.0, 8.0)  # a dated snapshot is the model
    assert price_for("anthropic", "claude-opus-4-1-20250805") == (15.0, 75.0)
    assert price_for("anthropic", "claude-sonnet-4-0") == (3.0, 15.0)  # an alias

