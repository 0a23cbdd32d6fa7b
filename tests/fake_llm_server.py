"""A loopback server that speaks the OpenAI and Anthropic wire formats.

Tests and the bench point the real `openai` and `anthropic` SDKs at it, so the
code that calls a model is exercised end to end (HTTP, retries, parsing)
without a network. Current SDKs use `httpx2`, which respx and pytest-httpx do
not intercept: a real socket on 127.0.0.1 is the honest fake.

Endpoints
- OpenAI: POST /v1/chat/completions, POST /v1/files (multipart),
  GET /v1/files/{id}/content, POST /v1/batches, GET /v1/batches/{id}
- Anthropic: POST /v1/messages, POST /v1/messages/batches,
  GET /v1/messages/batches/{id}, GET /v1/messages/batches/{id}/results

Scripting
- `server.script(*behaviours)` queues canned behaviours; each model call
  (a chat completion, a message, or one line of a batch) takes the next one,
  and the default `Auto()` when the queue is empty.
- `server.latency` seconds are slept before every model call is answered.
- `server.requests` logs every request received (method, path, headers,
  parsed JSON body); `server.model_calls()` keeps only the model calls.
- `server.batch_polls` is how many status polls a batch stays in progress.
- `server.batch_errors` maps "submit", "status" or "results" to a `Status`
  that the batch endpoints of that stage answer with (OpenAI and Anthropic).
- `server.vary_replies = True` numbers every default reply, so identical
  requests get different answers (a stricter test of "never twice").
- `server.batch_create_delay` seconds are slept before a batch-create POST
  is answered; the batch exists already (a reply lost to a read timeout).
- `server.batch_cancel_after = n` ends an OpenAI batch "cancelled" with only
  its first n requests completed (in its output file; none: no output file).

Run standalone (the bench does, so the server has its own interpreter):
    python tests/fake_llm_server.py --latency 0.05   # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# -- behaviours --------------------------------------------------------------


@dataclass
class Auto:
    """A well-formed structured reply made up from the request's JSON schema
    (OpenAI `response_format`, Anthropic forced tool): enums are picked by a
    hash of the request, so answers are deterministic and varied. `note` is
    added to every text field (the server numbers its replies with it when
    `vary_replies` is set, so identical requests get different answers)."""

    note: str = ""


@dataclass
class Reply:
    """A normal reply with this content: `obj` is returned as the structured
    output (JSON text for OpenAI, tool input for Anthropic); `text` as plain
    model text."""

    obj: Any = None
    text: str | None = None


@dataclass
class Unparseable:
    """A well-formed reply whose model text is not the requested JSON."""

    text: str = "I think this one is probably urgent, but it is hard to say."


@dataclass
class RateLimited:
    """HTTP 429 with a retry-after-ms header (small, so retries are quick)."""

    retry_after_ms: int = 10


@dataclass
class ServerError:
    status: int = 500


@dataclass
class MalformedBody:
    """HTTP 200 with a body that is not JSON."""

    body: str = '{"id": "chatcmpl-broken", "choices": [ {'


@dataclass
class Cut:
    """A reply cut off at the output limit: OpenAI finish_reason "length",
    Anthropic stop_reason `stop_reason` ("max_tokens" or
    "model_context_window_exceeded"), with the start of an answer."""

    stop_reason: str = "max_tokens"
    text: str = '{"rationale": "The reply adv'


@dataclass
class Refusal:
    """The model declines: OpenAI `message.refusal`, Anthropic stop_reason "refusal"."""

    text: str = "I can't help with that."


@dataclass
class Status:
    """Any HTTP error status with a JSON error body; `echo_auth` copies the
    received credentials into the message (to prove they are redacted),
    encoded as `echo_as` says (`encode_echo`)."""

    status: int = 400
    message: str = "bad request"
    echo_auth: bool = False
    echo_as: str = "as sent"


@dataclass
class Echo:
    """A well-formed structured reply (as `Auto`) whose text fields carry the API
    key the request was sent with, encoded as `how` says (`encode_echo`): what
    a hostile compatible server does."""

    how: str = "as sent"


ECHOES = ("as sent", "upper-cased", "reversed", "hex", "hex upper-cased", "hex spaced",
          "base64", "base64 of the header", "url-encoded", "spaced out", "one a line",
          "zero-width split", "bidi split", "11-character pieces", "8-character piece",
          "a middle piece", "escaped bytes", "full-width")
"""The encodings `encode_echo` knows."""


def encode_echo(secret: str, how: str) -> str:
    """`secret` as a hostile server would send it back."""
    raw = secret.encode()
    if how == "as sent":
        return secret
    if how == "upper-cased":
        return secret.upper()
    if how == "reversed":
        return secret[::-1]
    if how == "hex":
        return raw.hex()
    if how == "hex upper-cased":
        return raw.hex().upper()
    if how == "hex spaced":
        return " ".join(f"{b:02x}" for b in raw)
    if how == "base64":
        return base64.b64encode(raw).decode()
    if how == "base64 of the header":
        return base64.b64encode(b"Bearer " + raw).decode()
    if how == "url-encoded":
        return "".join(f"%{b:02X}" for b in raw)
    if how == "spaced out":
        return " ".join(secret)
    if how == "one a line":
        return "\n".join(secret)
    if how == "zero-width split":
        return "\u200b".join(secret)
    if how == "bidi split":
        return "\u2066" + "\u2069\u2066".join(secret) + "\u2069"
    if how == "11-character pieces":
        return " / ".join(secret[i:i + 11] for i in range(0, len(secret), 11))
    if how == "8-character piece":
        return secret[-8:]
    if how == "a middle piece":
        return secret[5:15]
    if how == "escaped bytes":
        return "".join(f"\\x{b:02x}" for b in raw)
    if how == "full-width":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in secret)
    raise ValueError(f"unknown echo {how!r}")


@dataclass
class DeepInput:
    """In an Anthropic batch: a tool input nested `depth` lists deep (more than
    Python's json reads), written into the results line as raw text."""

    depth: int = 3000


_DEEP = '"__carelens_fake_deep__"'

Behaviour = (Auto | Reply | Unparseable | RateLimited | ServerError | MalformedBody | Status | Cut
             | Refusal | DeepInput | Echo)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    """Parsed JSON body, the raw text when not JSON, or the multipart fields."""


# -- replies -----------------------------------------------------------------


def _digest(value: Any) -> int:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def fill_schema(schema: dict, seed: int, note: str = "") -> Any:
    """A value that satisfies a (simple) JSON schema, chosen by `seed`."""
    if "enum" in schema:
        options = schema["enum"]
        return options[seed % len(options)]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: fill_schema(sub, seed // (i + 2) + i, note) for i, (name, sub) in
                enumerate(props.items())}
    if kind == "boolean":
        return bool(seed % 2)
    if kind == "integer":
        return 3
    if kind == "number":
        return 0.5
    if kind == "array":
        return []
    return "A short explanation from the fake model." + note


def _openai_schema(body: dict) -> dict | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt.get("json_schema", {}).get("schema")
    return None


def _anthropic_tool(body: dict) -> dict | None:
    choice = body.get("tool_choice") or {}
    for tool in body.get("tools") or []:
        if choice.get("type") == "tool" and tool.get("name") == choice.get("name"):
            return tool
    return None


def chat_completion(body: dict, behaviour: Behaviour) -> dict:
    """An OpenAI chat completion answering `body`."""
    refusal, finish = None, "stop"
    if isinstance(behaviour, Reply):
        content = json.dumps(behaviour.obj) if behaviour.obj is not None else behaviour.text
    elif isinstance(behaviour, Unparseable):
        content = behaviour.text
    elif isinstance(behaviour, Cut):
        content, finish = behaviour.text, "length"
    elif isinstance(behaviour, Refusal):
        content, refusal = None, behaviour.text
    else:
        schema = _openai_schema(body)
        note = behaviour.note if isinstance(behaviour, Auto) else ""
        content = (json.dumps(fill_schema(schema, _digest(body.get("messages")), note))
                   if schema else "A plain reply from the fake model.")
    prompt_chars = len(json.dumps(body.get("messages", [])))
    return {
        "id": f"chatcmpl-{_digest(body):x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{
            "index": 0,
            "finish_reason": finish,
            "logprobs": None,
            "message": {"role": "assistant", "content": content, "refusal": refusal},
        }],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(content or "") // 4,
                  "total_tokens": prompt_chars // 4 + len(content or "") // 4},
    }


def anthropic_message(body: dict, behaviour: Behaviour) -> dict:
    """An Anthropic message answering `body` (a tool_use block when a tool is forced)."""
    tool = _anthropic_tool(body)
    if isinstance(behaviour, DeepInput) and tool:
        blocks = [{"type": "tool_use", "id": "toolu_fake", "name": tool["name"],
                   "input": {"deep": _DEEP.strip('"')}}]
    elif isinstance(behaviour, Reply) and behaviour.obj is not None and tool:
        blocks = [{"type": "tool_use", "id": "toolu_fake", "name": tool["name"],
                   "input": behaviour.obj}]
    elif isinstance(behaviour, Reply):
        blocks = [{"type": "text", "text": behaviour.text or json.dumps(behaviour.obj)}]
    elif isinstance(behaviour, (Unparseable, Cut, Refusal)):
        blocks = [{"type": "text", "text": behaviour.text}]
    elif tool:
        blocks = [{"type": "tool_use", "id": "toolu_fake", "name": tool["name"],
                   "input": fill_schema(tool["input_schema"], _digest(body.get("messages")),
                                        getattr(behaviour, "note", ""))}]
    else:
        blocks = [{"type": "text", "text": "A plain reply from the fake model."}]
    prompt_chars = len(json.dumps(body.get("messages", []))) + len(str(body.get("system", "")))
    return {
        "id": f"msg_{_digest(body):x}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": blocks,
        "stop_reason": (behaviour.stop_reason if isinstance(behaviour, Cut) else
                        "refusal" if isinstance(behaviour, Refusal) else
                        "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_chars // 4,
                  "output_tokens": len(json.dumps(blocks)) // 4},
    }


def _error_body(status: int, message: str) -> dict:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
             403: "permission_error", 404: "not_found_error",
             429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
    kind = kinds.get(status, "api_error")
    # One body both SDKs read: OpenAI looks at error.message, Anthropic at error.type.
    return {"type": "error", "error": {"type": kind, "message": message, "code": None}}


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


# -- the server --------------------------------------------------------------


class FakeLLMServer:
    """Start with `start()` (or as a context manager); `base_url` is the root,
    `openai_base_url` adds /v1 as the OpenAI SDK expects."""

    def __init__(self, latency: float = 0.0):
        self.latency = latency
        self.batch_polls = 1
        self.batch_errors: dict[str, Status] = {}
        self.vary_replies = False
        self.batch_create_delay = 0.0
        self.batch_cancel_after: int | None = None
        self.requests: list[Received] = []
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict] = {}
        self._polls: dict[str, int] = {}
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------
    def start(self) -> FakeLLMServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="fake-llm-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._queue.extend(behaviours)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def model_calls(self) -> list[Received]:
        return [r for r in list(self.requests)
                if r.method == "POST" and r.path in ("/v1/chat/completions", "/v1/messages")]

    # -- internals ---------------------------------------------------------
    def _next(self) -> Behaviour:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            self._counter += 1
            return Auto(f" (reply {self._counter})" if self.vary_replies else "")

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}{self._counter:06d}"

    def _log(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    # OpenAI batch -----------------------------------------------------------
    def _openai_batch_output(self, input_file_id: str, limit: int | None = None) -> bytes:
        lines = []
        for raw in self._files[input_file_id].decode().splitlines():
            if not raw.strip():
                continue
            if limit is not None and len(lines) >= limit:
                break
            req = json.loads(raw)
            behaviour = self._next()
            if isinstance(behaviour, (RateLimited, ServerError, Status, MalformedBody)):
                status = getattr(behaviour, "status", 429 if isinstance(behaviour, RateLimited) else 500)
                response = {"status_code": status, "request_id": "req_fake",
                            "body": _error_body(status, "fake batch line failure")}
            else:
                response = {"status_code": 200, "request_id": "req_fake",
                            "body": chat_completion(req["body"], behaviour)}
            lines.append(json.dumps({"id": self._new_id("batch_req_"),
                                     "custom_id": req["custom_id"], "response": response,
                                     "error": None}))
        return ("\n".join(lines) + "\n").encode()

    def _openai_batch(self, batch_id: str) -> dict:
        batch = self._batches[batch_id]
        with self._lock:
            self._polls[batch_id] = self._polls.get(batch_id, 0) + 1
            done = self._polls[batch_id] > self.batch_polls
        if done and batch["status"] not in ("completed", "cancelled"):
            cancel = self.batch_cancel_after
            output = self._openai_batch_output(batch["input_file_id"], cancel)
            n = len(output.splitlines())
            out_id = None
            if n:
                out_id = self._new_id("file-out")
                self._files[out_id] = output
            total = len([ln for ln in self._files[batch["input_file_id"]].decode().splitlines()
                         if ln.strip()])
            batch.update(status="completed" if cancel is None else "cancelled",
                         output_file_id=out_id, completed_at=int(time.time()),
                         request_counts={"total": total, "completed": n, "failed": 0})
        elif not done:
            batch["status"] = "in_progress"
        return batch

    # Anthropic batch --------------------------------------------------------
    def _anthropic_batch(self, batch_id: str) -> dict:
        batch = self._batches[batch_id]
        with self._lock:
            self._polls[batch_id] = self._polls.get(batch_id, 0) + 1
            done = self._polls[batch_id] > self.batch_polls
        if done and batch["processing_status"] != "ended":
            results = []
            for req in batch.pop("_requests"):
                behaviour = self._next()
                if isinstance(behaviour, (RateLimited, ServerError, Status, MalformedBody)):
                    result = {"type": "errored",
                              "error": _error_body(500, "fake batch line failure")}
                else:
                    result = {"type": "succeeded",
                              "message": anthropic_message(req["params"], behaviour)}
                line = json.dumps({"custom_id": req["custom_id"], "result": result})
                if isinstance(behaviour, DeepInput):
                    line = line.replace(_DEEP, "[" * behaviour.depth + "1" + "]" * behaviour.depth)
                results.append(line)
            batch["_results"] = ("\n".join(results) + "\n").encode()
            n = len(results)
            batch.update(processing_status="ended", ended_at=_iso(datetime.now(UTC)),
                         results_url=f"{self.base_url}/v1/messages/batches/{batch_id}/results",
                         request_counts={"processing": 0, "succeeded": n, "errored": 0,
                                         "canceled": 0, "expired": 0})
        return {k: v for k, v in batch.items() if not k.startswith("_")}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed run) is not an error worth a traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle's
    # algorithm and delayed ACKs add ~40 ms to every keep-alive reply.
    disable_nagle_algorithm = True
    fake: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    # -- plumbing ----------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _receive(self) -> Received:
        raw = self._read_body()
        ctype = self.headers.get("Content-Type", "")
        body: Any
        if ctype.startswith("multipart/form-data"):
            msg = BytesParser(policy=HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
            body = {part.get_param("name", header="content-disposition"):
                    part.get_payload(decode=True) for part in msg.iter_parts()}
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = Received(self.command, self.path.split("?")[0], headers, body)
        self.fake._log(received)
        return received

    def _credentials(self) -> str:
        """The key the request came with (a bearer token's, or Anthropic's header)."""
        auth = self.headers.get("Authorization") or ""
        return auth.removeprefix("Bearer ") if auth else (self.headers.get("x-api-key") or "")

    def _error(self, behaviour: Behaviour) -> bool:
        """Answer with an error behaviour; False when the behaviour is a reply."""
        if isinstance(behaviour, RateLimited):
            self._send(429, _error_body(429, "rate limited (fake)"),
                       {"retry-after-ms": str(behaviour.retry_after_ms)})
        elif isinstance(behaviour, ServerError):
            self._send(behaviour.status, _error_body(behaviour.status, "server error (fake)"),
                       {"retry-after-ms": "5"})
        elif isinstance(behaviour, MalformedBody):
            self._send(200, behaviour.body)
        elif isinstance(behaviour, Status):
            message = behaviour.message
            if behaviour.echo_auth:
                message += " credentials received: " + encode_echo(
                    self._credentials(), behaviour.echo_as)
            self._send(behaviour.status, _error_body(behaviour.status, message),
                       {"x-should-retry": "false"})
        else:
            return False
        return True

    def _batch_error(self, req: Received) -> bool:
        """Answer a batch endpoint with the error `fake.batch_errors` sets for its stage."""
        parts = req.path.strip("/").split("/")
        if req.method == "POST":
            stage = "submit" if req.path in ("/v1/files", "/v1/batches", "/v1/messages/batches") else None
        elif parts[:2] == ["v1", "files"] or parts[-1] == "results":
            stage = "results"
        elif parts[:2] == ["v1", "batches"] or parts[:3] == ["v1", "messages", "batches"]:
            stage = "status"
        else:
            stage = None
        error = self.fake.batch_errors.get(stage) if stage else None
        return error is not None and self._error(error)

    # -- routes ------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        req = self._receive()
        fake = self.fake
        if self._batch_error(req):
            return
        if req.path in ("/v1/chat/completions", "/v1/messages"):
            if not isinstance(req.body, dict):  # e.g. a client killed mid-request
                self._send(400, _error_body(400, "the request body is not a JSON object"))
                return
            if fake.latency:
                time.sleep(fake.latency)
            behaviour = fake._next()
            if self._error(behaviour):
                return
            if isinstance(behaviour, Echo):
                behaviour = Auto(" key " + encode_echo(self._credentials(), behaviour.how))
            if req.path == "/v1/messages":
                self._send(200, anthropic_message(req.body, behaviour))
            else:
                self._send(200, chat_completion(req.body, behaviour))
        elif req.path == "/v1/files":
            file_id = fake._new_id("file-")
            content = req.body.get("file") or b""
            fake._files[file_id] = content
            purpose = (req.body.get("purpose") or b"batch").decode()
            self._send(200, {"id": file_id, "object": "file", "bytes": len(content),
                             "created_at": int(time.time()), "filename": "input.jsonl",
                             "purpose": purpose, "status": "processed"})
        elif req.path == "/v1/batches":
            batch_id = fake._new_id("batch_")
            batch = {"id": batch_id, "object": "batch", "endpoint": req.body["endpoint"],
                     "input_file_id": req.body["input_file_id"],
                     "completion_window": req.body["completion_window"],
                     "status": "validating", "created_at": int(time.time()),
                     "output_file_id": None, "error_file_id": None,
                     "request_counts": {"total": 0, "completed": 0, "failed": 0}}
            fake._batches[batch_id] = batch
            time.sleep(fake.batch_create_delay)
            self._send(200, batch)
        elif req.path == "/v1/messages/batches":
            batch_id = fake._new_id("msgbatch_")
            now = datetime.now(UTC)
            requests = req.body["requests"]
            fake._batches[batch_id] = {
                "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
                "created_at": _iso(now), "expires_at": _iso(now + timedelta(days=1)),
                "ended_at": None, "archived_at": None, "cancel_initiated_at": None,
                "results_url": None,
                "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "_requests": requests,
            }
            time.sleep(fake.batch_create_delay)
            self._send(200, {k: v for k, v in fake._batches[batch_id].items()
                             if not k.startswith("_")})
        else:
            self._send(404, _error_body(404, f"no route POST {req.path}"))

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        req = self._receive()
        fake = self.fake
        if self._batch_error(req):
            return
        parts = req.path.strip("/").split("/")
        if parts[:2] == ["v1", "batches"] and len(parts) == 3 and parts[2] in fake._batches:
            self._send(200, fake._openai_batch(parts[2]))
        elif (parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content"
              and parts[2] in fake._files):
            self._send(200, fake._files[parts[2]], content_type="application/octet-stream")
        elif parts[:3] == ["v1", "messages", "batches"] and len(parts) >= 4 \
                and parts[3] in fake._batches:
            if len(parts) == 5 and parts[4] == "results":
                self._send(200, fake._batches[parts[3]].get("_results", b""),
                           content_type="application/binary")
            else:
                self._send(200, fake._anthropic_batch(parts[3]))
        else:
            self._send(404, _error_body(404, f"no route GET {req.path}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per model call")
    args = parser.parse_args()
    server = FakeLLMServer(latency=args.latency).start()
    print(f"PORT {server.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
