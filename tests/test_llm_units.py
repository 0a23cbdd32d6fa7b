"""LLM raters, the parts that need no server: model specs, keys, prompts,
prices, strict readers and what a judge reads."""

from __future__ import annotations

import json

import pytest

from labels.llm.judge import read_extract_reply, read_judge_reply
from labels.llm.mapper import MAPPER, read_mapper_reply
from labels.llm.pricing import cost_usd, price_for
from labels.llm.prompts import PromptError, load_prompt, shipped_versions
from labels.llm.render import (
    ItemView,
    patient_turns,
    render_record,
    report_text,
    shorten,
)
from labels.llm.spec import (
    NO_KEY,
    MissingKeyError,
    ModelSpecError,
    parse_model_spec,
    public_url,
    redact,
    resolve_base_url,
    resolve_key,
)
from labels.llm.tasks import ReplyUnreadable, read_json_object
from tests.helpers import CODES

# -- model specs and keys ------------------------------------------------------


@pytest.mark.parametrize("text, provider, model, base", [
    ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
    ("openai:gpt-4.1-mini", "openai", "gpt-4.1-mini", None),
    ("OpenAI:gpt-4.1", "openai", "gpt-4.1", None),
    ("compatible:llama3.1:8b", "compatible", "llama3.1:8b", None),
    ("compatible:http://10.0.0.5:8000/v1#llama3.1:8b", "compatible", "llama3.1:8b",
     "http://10.0.0.5:8000/v1"),
])
def test_model_specs_are_read(text, provider, model, base):
    spec = parse_model_spec(text)
    assert (spec.provider, spec.model, spec.base_url) == (provider, model, base)
    assert spec.name == f"{provider}:{model}"


@pytest.mark.parametrize("text", ["gpt-4.1", "google:gemini", "openai:", "compatible:http://h:1/v1",
                                  "openai:gpt 4", "anthropic:claude@v1"])
def test_bad_model_specs_say_what_is_accepted(text):
    with pytest.raises(ModelSpecError, match="anthropic:MODEL|no spaces|#MODEL"):
        parse_model_spec(text)


def test_keys_come_from_the_given_mapping_or_the_environment(monkeypatch):
    assert resolve_key("openai", {"openai": "k1"}) == "k1"
    assert resolve_key("openai", {"OPENAI_API_KEY": "k2"}) == "k2"
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        resolve_key("anthropic", {})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k3")
    assert resolve_key("anthropic") == "k3"
    assert resolve_key("compatible") == NO_KEY  # local servers need none


def test_a_compatible_model_needs_a_base_url(monkeypatch):
    with pytest.raises(ModelSpecError, match="CARELENS_COMPATIBLE_BASE_URL"):
        resolve_base_url(parse_model_spec("compatible:m"))
    monkeypatch.setenv("CARELENS_COMPATIBLE_BASE_URL", "http://127.0.0.1:8000/v1")
    assert resolve_base_url(parse_model_spec("compatible:m")) == "http://127.0.0.1:8000/v1"


def test_recorded_urls_and_texts_lose_their_secrets():
    assert public_url("http://user:pw-secret@host:8000/v1") == "http://host:8000/v1"
    key = "sk-live-abcdefghijklmnop1234"
    text = f"bad key {key}; provider shows ...{key[-8:]}"
    assert key not in redact(text, [key]) and key[-8:] not in redact(text, [key])


# -- prompts -----------------------------------------------------------------------

SHIPPED = {
    "mapper-v1": "611c41a32e60d8179fa0ca1264736cc15aa1d5771968854783d98c638a4d294e",
    "mapper-v2": "e6fc702e7285aa1fffc86238b4f5cf6e2c30ddbe16611f5badaeb6e2555471b2",
    "judge-v1": "81a56e3dee073973aa184b6bf28bcbbaea5175e343d4fc6697e8a1281d642a9e",
    "extract-v1": "bddcc8240f6a9d3bee0b8a2b39c39caa86c08af07e76dbfe17cf4074bbccdd19",
}


def test_shipped_prompts_are_never_edited():
    """A rater name means one prompt text: edit a shipped prompt and this
    fails; add a new version instead."""
    assert shipped_versions("map") == ["mapper-v1", "mapper-v2"]
    for version, digest in SHIPPED.items():
        task = {"mapper": "map"}.get(version.split("-")[0], version.split("-")[0])
        assert load_prompt(task, version).sha256 == digest, version
    assert load_prompt("map", "v2").version == "mapper-v2"


def test_a_users_template_is_versioned_by_its_content(tmp_path):
    path = tmp_path / "our mapper.txt"
    path.write_text("# ours\n--- system ---\nCodes: $labels\n--- user ---\n$patient_turns\n$response\n")
    first = load_prompt("map", str(path))
    assert first.version == f"our-mapper-{first.sha256[:8]}" and not first.shipped
    path.write_text(path.read_text() + "Answer with care.\n")
    assert load_prompt("map", str(path)).version != first.version


@pytest.mark.parametrize("text, message", [
    ("just text $response $patient_turns", "--- system ---"),
    ("--- system ---\n$gold_label\n--- user ---\n$response $patient_turns", "unknown placeholder"),
    ("--- system ---\nx\n--- user ---\n$patient_turns", r"must use \$response"),
    ("--- system ---\ncosts $ 5\n--- user ---\n$patient_turns $response", r"\$\$"),
])
def test_bad_templates_are_refused_with_the_file_named(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(PromptError, match=message) as info:
        load_prompt("map", str(path))
    assert "bad.txt" in str(info.value)


def test_unknown_shipped_version_lists_the_known_ones():
    with pytest.raises(PromptError, match="mapper-v1, mapper-v2"):
        load_prompt("map", "v9")


# -- prices -----------------------------------------------------------------------


def test_prices_match_the_longest_model_prefix():
    assert price_for("openai", "gpt-4.1-mini") == (0.4, 1.6)
    assert price_for("openai", "gpt-4.1-mini-2025-04-14") == (0.4, 1.6)
    assert price_for("openai", "gpt-4.1") == (2.0, 8.0)
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") == (3.0, 15.0)
    assert price_for("openai", "gpt-4.10") is None
    assert price_for("compatible", "llama") is None
    assert cost_usd("openai", "gpt-4.1", 1_000_000, 0) == 2.0
    assert cost_usd("openai", "gpt-4.1", 1_000_000, 0, batch=True) == 1.0
    assert cost_usd("openai", "unknown-model", 10, 10) is None


# -- strict readers ---------------------------------------------------------------------


def test_the_mapper_reader_accepts_exactly_one_code():
    answer = read_mapper_reply({"rationale": " Sends to A&E. ", "label": CODES[3]})
    assert (answer.status, answer.value, answer.rationale) == ("answered", CODES[3], "Sends to A&E.")


@pytest.mark.parametrize("obj", [
    {"label": CODES[3]},                                            # missing rationale
    {"rationale": "x", "label": CODES[3], "confidence": 5},         # extra key
    {"rationale": "x", "label": "1B"},                              # a short form is a guess
    {"rationale": "x", "label": CODES[3].lower()},
    {"rationale": "x", "label": "urgent care"},
    {"rationale": "x", "label": [CODES[3]]},
    {"rationale": 3, "label": CODES[3]},
])
def test_the_mapper_reader_never_guesses(obj):
    with pytest.raises(ReplyUnreadable):
        MAPPER.read(obj)


OBJ = json.dumps({"rationale": "r", "label": CODES[0]})


@pytest.mark.parametrize("text, ok", [
    (OBJ, True),
    (f"```json\n{OBJ}\n```", True),
    (f"The label is {OBJ}", False),
    (f"I would say {CODES[0]}.", False),
    (json.dumps([CODES[0]]), False),
    ("", False),
])
def test_replies_are_read_as_one_json_object_or_not_at_all(text, ok):
    if ok:
        assert MAPPER.read(read_json_object(text)).value == CODES[0]
    else:
        with pytest.raises(ReplyUnreadable):
            MAPPER.read(read_json_object(text))


def test_the_judge_reader_wants_a_json_boolean():
    assert read_judge_reply({"explanation": "e", "criteria_met": False}).value == "not_met"
    assert read_judge_reply({"explanation": "e", "criteria_met": True}).value == "met"
    for met in ("true", 1, None):
        with pytest.raises(ReplyUnreadable):
            read_judge_reply({"explanation": "e", "criteria_met": met})


def test_a_report_without_a_verdict_is_cannot_assess_not_a_guess():
    assert read_extract_reply({"explanation": "e", "verdict": "YES"}).value == "YES"
    answer = read_extract_reply({"explanation": "no line", "verdict": "NO_VERDICT_STATED"})
    assert (answer.status, answer.value) == ("cannot_assess", None)
    with pytest.raises(ReplyUnreadable):
        read_extract_reply({"explanation": "e", "verdict": "MAYBE"})


# -- what a judge reads -------------------------------------------------------------------


def test_shorten_keeps_head_and_tail_within_the_limit():
    text = "HEAD" + "x" * 10_000 + "TAIL"
    short = shorten(text, 500)
    assert len(short) <= 500 and short.startswith("HEAD") and short.endswith("TAIL")
    assert "characters left out" in short
    assert shorten("short", 500) == "short"


def test_patient_turns_never_go_beyond_the_round():
    payload = {"turns": ["one", "two", "three"]}
    assert patient_turns(payload, 2) == ["one", "two"]
    assert patient_turns(payload, None) == ["one", "two", "three"]


def test_a_long_trajectory_is_rendered_compactly_within_the_limit():
    steps = [{"step_id": i, "source": "agent", "message": f"step {i} " + "m" * 3000,
              "tool_calls": [{"tool_call_id": f"c{i}", "function_name": "order_test",
                              "arguments": {"test": "cbc", "note": "n" * 5000}}],
              "observation": {"results": [{"source_call_id": f"c{i}", "content": "r" * 9000}]}}
             for i in range(1, 201)]
    payload = {"steps": steps, "transcript": [{"role": "user", "content": "I feel dizzy."}],
               "final_answer": {"text": "Diagnosis: benign positional vertigo.", "verdict": None}}
    text = render_record(ItemView("trajectory", payload), limit=20_000)
    assert len(text) <= 20_000
    assert "I feel dizzy." in text and "benign positional vertigo" in text
    assert "call order_test(" in text and "characters left out" in text


def test_a_completion_shares_its_prompts_conversation():
    parent = {"turns": [{"role": "user", "content": "Is it safe to take ibuprofen?"}],
              "completion": None}
    child = {"completion": "Usually, with food; not with kidney disease.",
             "completion_source": "model"}
    text = render_record(ItemView("graded_conversation", child, parent))
    assert text.index("ibuprofen") < text.index("not with kidney disease")
    assert render_record(ItemView("graded_conversation", parent)) is None  # nothing to grade
    assert render_record(ItemView("prefix", {"turns": ["x"]})) is None     # no renderer


def test_the_report_is_the_final_answer_or_the_last_agent_message():
    assert report_text({"final_answer": {"text": "## Answer: NO"}}) == "## Answer: NO"
    steps = [{"source": "agent", "message": "first"}, {"source": "user", "message": "ok"},
             {"source": "agent", "message": "the report"}]
    assert report_text({"steps": steps}) == "the report"
    assert report_text({}) is None
    assert json.loads(json.dumps(MAPPER.schema))["additionalProperties"] is False
