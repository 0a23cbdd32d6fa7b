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
0.5 s (capped at 8 s), at most `max_retries` times (default
`DEFAULT_MAX_RETRIES`); never for the request that creates a batch (it has
no idempotency key: a retry after a lost reply would make a second paid
batch), which is tried again only when no connection could be made. A retry-after header is honoured up to
`RETRY_AFTER_LIMIT` seconds; a server asking for a longer wait is not retried
(the call fails as a 429 and the item is left for the next run), so no worker
sleeps for hours. Authentication, billing, permission and not-found errors
are fatal for a run (every item would fail the same way). The batch
endpoints fail the same way as a direct call (`CallFailed`, redacted).

A reply is type-checked before it is read: JSON of the wrong shape is a
malformed reply (`CallFailed` with the raw text), never an AttributeError.
Why the model stopped is kept (`Reply.stop_reason`): a reply cut off at the
output limit is `Reply.cut_off`, an explicit refusal `Reply.refusal`.

Keys come from `spec.resolve_key` only and are passed to the SDK clients
explicitly; no header is ever recorded, and error texts are passed through
`spec.redact` before they are stored. A reply is read as the model wrote it
and redacted only in what is stored of it (`Reply.redacted`), so that a
secret's redaction never turns a valid answer into an unreadable one.
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from labels.llm.spec import (
    ModelSpec,
    Secret,
    public_url,
    redact,
    resolve_base_url,
    resolve_key,
    split_url_credentials,
    url_secret,
)
from labels.llm.tasks import Task


class _SDK:
    """An SDK module imported when first used: anthropic and openai take seconds to
    import, and a screen that only lists tasks, prompt versions and batches (the Data
    screen) never calls a provider."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


anthropic = _SDK("anthropic")
openai = _SDK("openai")

DEFAULT_MAX_RETRIES = 4
DEFAULT_TIMEOUT = 120.0
FATAL_STATUS = (401, 402, 403, 404)
"""Bad key, no credit (Anthropic's billing_error), no permission, unknown model."""
RETRY_AFTER_LIMIT = 60.0
"""Longest retry-after (seconds) a call waits for; a longer one is not retried."""
READ_ERRORS = (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError)
"""What reading a reply of an unexpected shape may raise (RecursionError: JSON
nested deeper than Python reads, e.g. `[[[[...]]]]` from a degenerate model)."""
MAX_DEPTH = 100
"""The deepest JSON a reply may nest; deeper is a malformed reply."""
_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([^"\\]{1,200})"')
"""The first custom id of a batch result line (it comes before the model's output)."""
T = TypeVar("T")


TEMPERATURE = 0
"""Sampling temperature of every call: as close to deterministic as the provider allows."""
SEED = 20261201
"""The fixed seed sent where the provider takes one (OpenAI and compatible servers)."""
FIXED_TEMPERATURE_MODELS = ("o1", "o3", "o4", "gpt-5")
"""OpenAI model families that accept only their default temperature (reasoning models):
they are sent the seed but no temperature, and the run's record says so."""


def sampling(provider: str, model: str) -> dict[str, Any]:
    """The sampling settings a call sends, recorded with every call (in its request) and
    with the run (``llm_runs.params["sampling"]``): temperature 0 and a fixed seed where
    the provider allows; None where it does not, and why."""
    if provider == "anthropic":
        return {"temperature": None, "seed": None,
                "note": "Anthropic's Messages API (SDK 2.x) takes neither a temperature nor a "
                        "seed: replies may vary from call to call"}
    if provider == "openai" and model.lower().startswith(FIXED_TEMPERATURE_MODELS):
        return {"temperature": None, "seed": SEED,
                "note": f"{model} accepts only its default temperature"}
    return {"temperature": TEMPERATURE, "seed": SEED, "note": None}


def _sampling_fields(provider: str, model: str) -> dict[str, Any]:
    return {k: v for k, v in sampling(provider, model).items() if k != "note" and v is not None}


class CallFailed(RuntimeError):
    """A call that produced no usable reply (after the SDK's retries)."""

    def __init__(self, message: str, *, fatal: bool = False, status: int | None = None,
                 raw_text: str | None = None, retries: int = 0, not_created: bool = False):
        super().__init__(message)
        self.fatal = fatal
        self.status = status
        self.raw_text = raw_text
        self.retries = retries
        self.not_created = not_created
        """Submitting a batch: it failed before the batch could be created (its
        requests' upload failed), so no batch exists."""

    @property
    def refused(self) -> bool:
        """The server answered, and said no: a 4xx other than 408 / 409 / 429
        (which may have been done after all, or are to be tried again). A
        request refused so did nothing; any other failure (a timeout, a
        reply lost, a 5xx) may have been carried out."""
        return self.status is not None and 400 <= self.status < 500 \
            and self.status not in (408, 409, 429)

    @property
    def gone(self) -> bool:
        """Not found (404) or gone (410): what was asked for does not exist (for
        this key)."""
        return self.status in (404, 410)


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
    stop_reason: str | None = None
    """Why the model stopped, as the provider said it (finish_reason / stop_reason)."""
    cut_off: bool = False
    """The output hit the token limit (or the context window): the answer is incomplete."""
    refusal: str | None = None
    """The model declined to answer: its refusal text, or the stop reason."""
    scrub: Callable[[Any], Any] | None = None
    """Redacts secrets from a text or parsed JSON. The reply is read as the model
    wrote it (`structured`, `text`, `refusal`); only what is stored of it is
    redacted (`response` is already), so a redaction never changes an answer."""

    def redacted(self, value: T) -> T:
        """`value` (a text or parsed JSON) as it may be stored."""
        return value if self.scrub is None else self.scrub(value)

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
        # user:password in a base URL is never given to the SDK (it would send it as
        # Basic auth in place of the key, and a server may echo it): only redacted.
        self.base_url, self.url_secrets = split_url_credentials(resolve_base_url(spec, base_url))
        self.max_retries = max_retries
        self.timeout = timeout
        self.client = self._client()

    @property
    def secrets(self) -> list[str | Secret]:
        """The key (redacted in any piece of 8 of its characters) and a base URL's
        credentials (chosen by a person: in runs of 12, `url_secret`)."""
        return [self.key, *(url_secret(s) for s in self.url_secrets)]

    @property
    def recorded_base_url(self) -> str | None:
        return public_url(self.base_url)

    def clean(self, text: str | None) -> str | None:
        return redact(text, self.secrets)

    def _scrub(self, value: Any, depth: int = 0) -> Any:
        """`value` (parsed JSON) with every secret redacted from its texts and keys.
        Raises ValueError for JSON nested more than `MAX_DEPTH` deep (no reply
        needs it, and writing it could exhaust the stack later)."""
        if depth > MAX_DEPTH:
            raise ValueError(f"the reply is JSON nested more than {MAX_DEPTH} deep")
        if isinstance(value, str):
            return self.clean(value)
        if isinstance(value, list):
            return [self._scrub(v, depth + 1) for v in value]
        if isinstance(value, dict):
            return {self.clean(k) if isinstance(k, str) else k: self._scrub(v, depth + 1)
                    for k, v in value.items()}
        return value

    def _clean_reply(self, reply: Reply) -> Reply:
        """The reply with secrets redacted from the whole response (stored as it
        is), and a redactor for what is stored of the rest (`Reply.redacted`):
        the tool input, the text and a refusal are read as the model wrote them
        (a redaction inside a label code would make a valid answer unreadable)."""
        reply.response = self._scrub(reply.response)
        reply.scrub = self._scrub
        return reply

    def _client(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def request_body(cls, model: str, system: str, user: str, task: Task) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:  # pragma: no cover
        raise NotImplementedError

    def _create(self, body: dict[str, Any]) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _sdk_call(self, fn: Callable[[], T], doing: str = "") -> T:
        """`fn()`, with the SDKs' errors turned into CallFailed (redacted; 401/402/403/404 fatal)."""
        prefix = f"{doing}: " if doing else ""
        try:
            return fn()
        except (openai.APIStatusError, anthropic.APIStatusError) as exc:
            status = exc.status_code
            raise CallFailed(self.clean(f"{prefix}HTTP {status}: {exc.message}"),
                             fatal=status in FATAL_STATUS, status=status) from None
        except (openai.APIError, anthropic.APIError) as exc:
            raise CallFailed(self.clean(f"{prefix}{type(exc).__name__}: {exc}")) from None

    def send(self, body: dict[str, Any], task: Task) -> Reply:
        """One call (with the SDK's bounded retries). Raises CallFailed."""
        started = time.perf_counter()
        raw = self._sdk_call(lambda: self._create(body))
        latency = (time.perf_counter() - started) * 1000
        try:
            data = raw.http_response.json()
            if not isinstance(data, dict):
                raise ValueError("not an object")
            reply = self._clean_reply(self.read_reply(data, task))
        except READ_ERRORS as exc:
            text = raw.http_response.text
            raise CallFailed(self.clean(f"malformed reply from the provider: {exc}"),
                             raw_text=self.clean(text[:20_000]), retries=raw.retries_taken) from None
        reply.retries = raw.retries_taken
        reply.latency_ms = latency
        return reply

    # -- batches -------------------------------------------------------------
    # Each raises CallFailed (redacted, fatal for 401/402/403/404) like `send`.
    def submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        """Submit one batch; returns its id. The request that creates the batch
        is sent once, never retried (it has no idempotency key: a retry after a
        reply lost on the way would create, and pay for, a second batch)."""
        return self._sdk_call(lambda: self._submit_batch(requests), "submitting the batch")

    def batch_gone(self, batch_id: str, task: Task) -> str | None:
        """Why the provider can no longer give a batch back (it answers 404 or
        410 for the batch or its results: expired, deleted, another key), or
        None when it can, or cannot say now (then CallFailed is raised)."""
        try:
            ended, status = self.batch_status(batch_id)
            if ended:
                results = self.batch_results(batch_id, task)
                try:
                    next(results, None)
                finally:
                    results.close()  # type: ignore[attr-defined]
        except CallFailed as exc:
            if exc.gone:
                return str(exc)
            raise
        return None

    def batch_status(self, batch_id: str) -> tuple[bool, str]:
        """(ended, the provider's status word)."""
        return self._sdk_call(lambda: self._batch_status(batch_id), f"batch {batch_id}")

    def batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:
        """(custom id, reply or error text) for each request of an ended batch."""
        doing = f"batch {batch_id} results"
        results = iter(self._batch_results(batch_id, task))
        while True:
            try:
                item = self._sdk_call(lambda: next(results, None), doing)
            except CallFailed:
                raise
            except Exception as exc:  # noqa: BLE001 - a stream cut or garbled mid-way
                raise CallFailed(self.clean(f"{doing}: {type(exc).__name__}: {exc}")) from None
            if item is None:
                return
            yield item

    def _create_batch(self, create: Callable[[Any], T]) -> T:
        """`create(client)` (the request that creates a batch) on a client that
        never retries: a retry after a reply lost on the way (a timeout, a 5xx)
        would create, and pay for, a second batch. Tried again here only when no
        connection could be made (nothing was sent); when none ever could, the
        CallFailed says that no batch was created."""
        client = self.client.with_options(max_retries=0)
        for attempt in range(self.max_retries + 1):
            try:
                return create(client)
            except (openai.APIConnectionError, anthropic.APIConnectionError) as exc:
                cause = type(exc.__cause__).__mro__ if exc.__cause__ is not None else ()
                # httpx's (httpx2's) ConnectError / ConnectTimeout: the request never left
                if not any(c.__name__ in ("ConnectError", "ConnectTimeout") for c in cause):
                    raise
                if attempt == self.max_retries:
                    raise CallFailed(self.clean(f"submitting the batch: {type(exc).__name__}:"
                                                f" {exc}"), not_created=True) from None
                time.sleep(min(0.5 * 2 ** attempt, 8.0))
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_batch_reply(self, custom_id: Any, data: Any, task: Task) -> tuple[str, Reply | str]:
        try:
            if not isinstance(data, dict):
                raise ValueError("the reply is not an object")
            return str(custom_id), self._clean_reply(self.read_reply(data, task))
        except READ_ERRORS as exc:
            return str(custom_id), self.clean(f"malformed batch reply: {exc}") or ""

    def _submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:  # pragma: no cover
        raise NotImplementedError(f"{self.name} has no batch API here; run without batch mode")

    def _batch_status(self, batch_id: str) -> tuple[bool, str]:  # pragma: no cover
        raise NotImplementedError

    def _batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:  # pragma: no cover
        raise NotImplementedError


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


def _count(usage: dict[str, Any], name: str) -> int | None:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _word(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """The lines of a JSONL stream."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if buf:
        yield buf.decode("utf-8", errors="replace")


def _batch_line(raw: str) -> dict[str, Any] | tuple[str, str] | None:
    """One line of a batch's results: the object; or (custom id, error) for a line
    nested too deeply to read whose custom id can still be seen; None for a blank
    or garbled line (its request then counts as missing)."""
    if not raw.strip():
        return None
    try:
        line = json.loads(raw)
    except RecursionError:
        found = _CUSTOM_ID.search(raw)
        return (found.group(1), "malformed batch reply: JSON nested too deeply to read") \
            if found else None
    except ValueError:
        return None
    return line if isinstance(line, dict) else None


class _BoundedRetryAfter:
    """Mixed into the SDK clients: a retry-after longer than `RETRY_AFTER_LIMIT`
    is not waited for (the call fails with its status), and no wait is longer.
    (openai refuses more than 120 s itself; anthropic would sleep for any.)"""

    def _should_retry(self, response: Any) -> bool:
        wait = self._parse_retry_after_header(response.headers)  # type: ignore[attr-defined]
        if wait is not None and (not math.isfinite(wait) or wait > RETRY_AFTER_LIMIT):
            return False
        return super()._should_retry(response)  # type: ignore[misc]

    def _calculate_retry_timeout(self, remaining_retries: int, options: Any,
                                 response_headers: Any = None) -> float:
        wait = super()._calculate_retry_timeout(  # type: ignore[misc]
            remaining_retries, options, response_headers)
        return min(wait, RETRY_AFTER_LIMIT)


@functools.cache
def _client_class(sdk: str) -> type:
    """The SDK's client with `_BoundedRetryAfter` mixed in, made when first asked for."""
    base = anthropic.Anthropic if sdk == "anthropic" else openai.OpenAI
    return type(f"_{base.__name__}Client", (_BoundedRetryAfter, base), {})


class AnthropicProvider(Provider):
    name = "anthropic"

    CUT_OFF = ("max_tokens", "model_context_window_exceeded")

    def _client(self) -> anthropic.Anthropic:
        return _client_class("anthropic")(
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
            **_sampling_fields("anthropic", model),
        }

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.messages.with_raw_response.create(**body)

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise ValueError("the reply's content is not a list of blocks")
        structured = None
        texts = []
        for block in blocks:
            block = _object(block, "a content block")
            if block.get("type") == "tool_use" and block.get("name") == task.tool_name:
                structured = block.get("input")
                if not isinstance(structured, dict):
                    structured = None
                    texts.append(json.dumps(block.get("input")))
            elif block.get("type") == "text":
                text = block.get("text")
                if text is not None and not isinstance(text, str):
                    raise ValueError("a text block's text is not text")
                texts.append(text or "")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        stop = _word(data.get("stop_reason"))
        text = "\n".join(texts) or None
        return Reply(structured, text, data, _count(usage, "input_tokens"),
                     _count(usage, "output_tokens"), stop_reason=stop,
                     cut_off=stop in self.CUT_OFF,
                     refusal=(text or stop) if stop == "refusal" else None)

    def _submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        batch = self._create_batch(lambda client: client.messages.batches.create(
            requests=[{"custom_id": cid, "params": body} for cid, body in requests]))
        return batch.id

    def _batch_status(self, batch_id: str) -> tuple[bool, str]:
        batch = self.client.messages.batches.retrieve(batch_id)
        return batch.processing_status == "ended", batch.processing_status

    def _batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:
        # Lines read here, not by the SDK's decoder: one line it cannot read (JSON
        # nested too deeply) must fail its own request, not the whole paid batch.
        decoder = self.client.messages.batches.results(batch_id)
        try:
            for raw in _lines(decoder.http_response.iter_bytes()):
                line = _batch_line(raw)
                if isinstance(line, tuple):
                    yield line
                    continue
                custom_id = None if line is None else line.get("custom_id")
                result = None if line is None else line.get("result")
                if not isinstance(custom_id, str) or not isinstance(result, dict):
                    continue  # no custom id to give it to: its request counts as missing
                if result.get("type") == "succeeded":
                    yield self._read_batch_reply(custom_id, result.get("message"), task)
                else:
                    said = json.dumps(result.get("error") or result.get("type"))[:2000]
                    yield custom_id, self.clean(
                        f"batch request {result.get('type')}: {said}") or ""
        finally:
            decoder.close()


class OpenAIProvider(Provider):
    name = "openai"
    batch_endpoint = "/v1/chat/completions"
    max_tokens_field = "max_completion_tokens"
    CUT_OFF = ("length",)

    def _client(self) -> openai.OpenAI:
        return _client_class("openai")(api_key=self.key, base_url=self.base_url,
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
            **_sampling_fields(cls.name, model),
        }

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.chat.completions.with_raw_response.create(**body)

    def read_reply(self, data: dict[str, Any], task: Task) -> Reply:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ValueError("the reply has no choices")
        choice = _object(choices[0], "the reply's first choice")
        message = _object(choice.get("message"), "the reply's message")
        content = message.get("content")
        if isinstance(content, list):  # content parts, as some compatible servers send
            parts = [_object(part, "a content part") for part in content]
            if any(part.get("type") not in ("text", "output_text")
                   or not isinstance(part.get("text"), str) for part in parts):
                raise ValueError("the reply's content has a part that is not text")
            content = "".join(part["text"] for part in parts)
        elif content is not None and not isinstance(content, str):
            raise ValueError("the reply's content is not text")
        stop = _word(choice.get("finish_reason"))
        refusal = _word(message.get("refusal")) or (
            (content or stop) if stop == "content_filter" else None)
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return Reply(None, content or None, data, _count(usage, "prompt_tokens"),
                     _count(usage, "completion_tokens"), stop_reason=stop,
                     cut_off=stop in self.CUT_OFF, refusal=refusal)

    def _submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": self.batch_endpoint,
                             "body": body}, ensure_ascii=False) for cid, body in requests]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        try:  # retried as any call: an upload creates no batch
            upload = self._sdk_call(lambda: self.client.files.create(
                file=("carelens-batch.jsonl", io.BytesIO(data), "application/jsonl"),
                purpose="batch"), "submitting the batch")
        except CallFailed as exc:
            exc.not_created = True
            raise
        batch = self._create_batch(lambda client: client.batches.create(
            input_file_id=upload.id, endpoint=self.batch_endpoint, completion_window="24h"))
        return batch.id

    def _batch_status(self, batch_id: str) -> tuple[bool, str]:
        batch = self.client.batches.retrieve(batch_id)
        return batch.status in ("completed", "failed", "expired", "cancelled"), batch.status

    def _batch_results(self, batch_id: str, task: Task) -> Iterator[tuple[str, Reply | str]]:
        batch = self.client.batches.retrieve(batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for raw in self.client.files.content(file_id).text.splitlines():
                line = _batch_line(raw)
                if isinstance(line, tuple):
                    yield line
                    continue
                if line is None or not isinstance(line.get("custom_id"), str):
                    continue  # no custom id to give it to: its request counts as missing
                response = line.get("response")
                response = response if isinstance(response, dict) else {}
                if response.get("status_code") == 200 and not line.get("error"):
                    yield self._read_batch_reply(line.get("custom_id"), response.get("body"), task)
                else:
                    detail = line.get("error") or response.get("body")
                    yield line["custom_id"], self.clean(
                        f"batch request failed (HTTP {response.get('status_code')}): "
                        f"{json.dumps(detail)[:2000]}") or ""


class CompatibleProvider(OpenAIProvider):
    """Any server that speaks OpenAI Chat Completions (vLLM, llama.cpp, Ollama, ...)."""

    name = "compatible"
    max_tokens_field = "max_tokens"

    def _submit_batch(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
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
