"""Provider clients through the official SDKs: Anthropic, OpenAI, OpenAI-compatible.

Each provider turns a prompt and a task into the exact JSON body it sends
(`request_body`; this is what is hashed, cached, shown by a dry run and
stored), sends it (`send`) and reads a reply (`read_reply`) the same way
whether it came from a direct call or a batch. Structured output:
- Anthropic: Messages API with one strict tool that the model is forced to
  call (`tool_choice: {"type": "tool"}`); the tool's input is the answer.
- OpenAI and compatible servers: Chat Completions with a strict
  `response_format: {"type": "json_schema"}`. (Chat Completions rather than
  Responses because compatible servers implement it, so one path serves both,
  and the Batch API accepts it.)

Retries on 429, 408/409 and 5xx are the SDKs' own: exponential backoff from
0.5 s (capped at 8 s), honouring retry-after headers, at most `max_retries`
times (default `DEFAULT_MAX_RETRIES`). Authentication, permission and
not-found errors are fatal for a run (every item would fail the same way).

Keys come from `spec.resolve_key` only and are passed to the SDK clients
explicitly; no header is ever recorded, and error texts are passed through
`spec.redact` before they are stored.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import openai

from labels.llm.spec import ModelSpec, public_url, redact, resolve_base_url, resolve_key
from labels.llm.tasks import Task

DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT = 120.0
FATAL_STATUS = (401, 403, 404)


class CallFailed(RuntimeError):
    """A call that produced no usable reply (after the SDK's retries)."""

    def __init__(self, message: str, *, fatal: bool = False, status: int | None = None,
                 raw_text: str | None = None, retries: int = 0):
        super().__init__(message)
        self.fatal = fatal
        self.status = status
        self.raw_text = raw_text
        self.retries = retries


@dataclass
class Reply:
    """A provider's reply, read the same way for direct and batch calls."""

    structured: dict[str, Any] | None
    """The tool input (Anthropic) when the forced tool was called."""
    text: str | None
    """The model's text (OpenAI content, or Anthropic text blocks)."""
    response: dict[str, Any]
    """The provider's reply as JSON."""
    input_tokens: int | None
    output_tokens: int | None
    retries: int = 0
    """Retries the SDK made before this reply (429 / 5xx)."""
    latency_ms: float | None = None

    @property
    def raw_text(self) -> str:
        """The model's output verbatim: tool input as JSON, else the text."""
        if self.structured is not None:
            return json.dumps(self.structured, ensure_ascii=False)
        return self.text or ""

    @property
    def output(self) -> dict[str, Any] | str:
        return self.structured if self.structured is not None else (self.text or "")


class Provider:
    """Base: one SDK client for a model spec, shared by the runner's threads
    (the SDK clients are thread-safe; their connection pools are shared)."""

    name = ""
    batch_endpoint = ""

    def __init__(self, spec: ModelSpec, keys: Mapping[str, str] | None = None,
                 base_url: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 timeout: float = DEFAULT_TIMEOUT):
        if max_retries < 0 or max_retries > 10:
            raise ValueError("max_retries must be between 0 and 10")
        self.spec = spec
        self.key = resolve_key(spec.provider, keys)
        self.base_url = resolve_base_url(spec, base_url)
        self.max_retries = max_retries
        self.timeout = timeout
        self.client = self._client()

    @property
    def secrets(self) -> list[str]:
        return [self.key]

    @property
    def recorded_base_url(self) -> str | None:
        return public_url(self.base_url)

    def clean(self, text: str | None) -> str | None:
        return redact(text, self.secrets)

    def _client(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def request_body(cls, model: str, system: str, user: str, task: Task) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:  # pragma: no cover
        raise NotImplementedError

    def _create(self, body: dict[str, Any]) -> Any:  # pragma: no cover
        raise NotImplementedError

    def send(self, body: dict[str, Any], task: Task) -> Reply:
        """One call (with the SDK's bounded retries). Raises CallFailed."""
        started = time.perf_counter()
        try:
            raw = self._create(body)
        except (openai.APIStatusError, anthropic.APIStatusError) as exc:
            status = exc.status_code
            raise CallFailed(self.clean(f"HTTP {status}: {exc.message}"),
                             fatal=status in FATAL_STATUS, status=status) from None
        except (openai.APIError, anthropic.APIError) as exc:
            raise CallFailed(self.clean(f"{type(exc).__name__}: {exc}")) from None
        latency = (time.perf_counter() - started) * 1000
        try:
            data = raw.http_response.json()
            if not isinstance(data, dict):
                raise ValueError("not an object")
            reply = self.read_reply(data, task)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            text = raw.http_response.text
            raise CallFailed(self.clean(f"malformed reply from the provider: {exc}"),
                             raw_text=self.clean(text[:20_000]), retries=raw.retries_taken) from None
        reply.retries = raw.retries_taken
        reply.latency_ms = latency
        return reply

    # -- batches -------------------------------------------------------------
    def submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:  # pragma: no cover
        raise NotImplementedError(f"{self.name} has no batch API here; run without batch mode")

    def batch_status(self, batch_id: str) -> tuple[bool, str]:  # pragma: no cover
        raise NotImplementedError

    def batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:  # pragma: no cover
        raise NotImplementedError


class AnthropicProvider(Provider):
    name = "anthropic"

    def _client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key=self.key, base_url=self.base_url, max_retries=self.max_retries,
            timeout=self.timeout,
            # No spans, no trace headers: patient text and task ids stay on this machine.
            open_telemetry={"traces": False, "propagation": False},
        )

    @classmethod
    def request_body(cls, model: str, system: str, user: str, task: Task) -> dict[str, Any]:
        return {
            "model": model,
            "max_tokens": task.max_output_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "tools": [{"name": task.tool_name, "description": task.tool_description,
                       "input_schema": task.schema, "strict": True}],
            "tool_choice": {"type": "tool", "name": task.tool_name},
        }

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.messages.with_raw_response.create(**body)

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:
        blocks = data["content"]
        structured = None
        texts = []
        for block in blocks:
            if block.get("type") == "tool_use" and block.get("name") == task.tool_name:
                structured = block.get("input")
                if not isinstance(structured, dict):
                    structured = None
                    texts.append(json.dumps(block.get("input")))
            elif block.get("type") == "text":
                texts.append(block.get("text") or "")
        usage = data.get("usage") or {}
        return Reply(structured, "\n".join(texts) or None, data,
                     usage.get("input_tokens"), usage.get("output_tokens"))

    def submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        batch = self.client.messages.batches.create(
            requests=[{"custom_id": cid, "params": body} for cid, body in requests])
        return batch.id

    def batch_status(self, batch_id: str) -> tuple[bool, str]:
        batch = self.client.messages.batches.retrieve(batch_id)
        return batch.processing_status == "ended", batch.processing_status

    def batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:
        for line in self.client.messages.batches.results(batch_id):
            result = line.result
            if result.type == "succeeded":
                yield line.custom_id, self.read_reply(result.message.to_dict(), task)
            else:
                detail = getattr(result, "error", None)
                message = detail.to_json() if detail is not None else result.type
                yield line.custom_id, self.clean(f"batch request {result.type}: {message}") or ""


class OpenAIProvider(Provider):
    name = "openai"
    batch_endpoint = "/v1/chat/completions"
    max_tokens_field = "max_completion_tokens"

    def _client(self) -> openai.OpenAI:
        return openai.OpenAI(api_key=self.key, base_url=self.base_url,
                             max_retries=self.max_retries, timeout=self.timeout)

    @classmethod
    def request_body(cls, model: str, system: str, user: str, task: Task) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": task.tool_name, "description": task.tool_description,
                "strict": True, "schema": task.schema}},
            cls.max_tokens_field: task.max_output_tokens,
        }

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.chat.completions.with_raw_response.create(**body)

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:
        message = data["choices"][0]["message"]
        text = message.get("content")
        if not text and message.get("refusal"):
            text = f"[refusal] {message['refusal']}"
        usage = data.get("usage") or {}
        return Reply(None, text, data, usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": self.batch_endpoint,
                             "body": body}, ensure_ascii=False) for cid, body in requests]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        upload = self.client.files.create(
            file=("carelens-batch.jsonl", io.BytesIO(data), "application/jsonl"), purpose="batch")
        batch = self.client.batches.create(input_file_id=upload.id, endpoint=self.batch_endpoint,
                                           completion_window="24h")
        return batch.id

    def batch_status(self, batch_id: str) -> tuple[bool, str]:
        batch = self.client.batches.retrieve(batch_id)
        return batch.status in ("completed", "failed", "expired", "cancelled"), batch.status

    def batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:
        batch = self.client.batches.retrieve(batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for raw in self.client.files.content(file_id).text.splitlines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                response = line.get("response") or {}
                if response.get("status_code") == 200 and not line.get("error"):
                    try:
                        yield line["custom_id"], self.read_reply(response["body"], task)
                    except (KeyError, IndexError, TypeError) as exc:
                        yield line["custom_id"], f"malformed batch reply: {exc}"
                else:
                    detail = line.get("error") or response.get("body")
                    yield line["custom_id"], self.clean(
                        f"batch request failed (HTTP {response.get('status_code')}): "
                        f"{json.dumps(detail)[:2000]}") or ""


class CompatibleProvider(OpenAIProvider):
    """Any server that speaks OpenAI Chat Completions (vLLM, llama.cpp, Ollama, ...)."""

    name = "compatible"
    max_tokens_field = "max_tokens"

    def submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        raise NotImplementedError("compatible endpoints have no batch API here; run without batch mode")


PROVIDERS: dict[str, type[Provider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
    "compatible": CompatibleProvider,
}


def provider_for(spec: ModelSpec, keys: Mapping[str, str] | None = None,
                 base_url: str | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 timeout: float = DEFAULT_TIMEOUT) -> Provider:
    """A ready client for the spec; raises MissingKeyError naming the variable to set."""
    return PROVIDERS[spec.provider](spec, keys, base_url, max_retries, timeout)


def request_body_for(spec: ModelSpec, system: str, user: str, task: Task) -> dict[str, Any]:
    """The body a provider would send, without making a client (no key needed):
    for plans and dry runs."""
    return PROVIDERS[spec.provider].request_body(spec.model, system, user, task)
