"""Fake model servers: the Anthropic Messages API and the OpenAI chat-completions API on 127.0.0.1.

The real SDKs talk to these over real HTTP, so a test exercises exactly the bytes a provider sends.
Each server runs in a background thread on a free port, records every request, and answers from a
script (first in, first out).

Fixtures (function-scoped, registered through tests/conftest.py):

    fake_anthropic  FakeModelServer speaking POST /v1/messages
                    .base_url = "http://127.0.0.1:<port>"    (AsyncAnthropic(base_url=…), ANTHROPIC_BASE_URL)
    fake_openai     FakeModelServer speaking POST /v1/chat/completions
                    .base_url = "http://127.0.0.1:<port>/v1" (AsyncOpenAI(base_url=…), OPENAI_BASE_URL)

Scripting — every item is a `Reply`, a plain string (a final text answer) or a callable
`(RecordedRequest) -> Reply | str` evaluated when the request arrives:

    fake_anthropic.script(
        tool_reply("lookup", {"q": "deploy"}),   # the model asks for a tool
        "All done.",                             # then answers
    )
    fake_openai.script(error_reply(500, "boom"))        # an error status in the provider's own shape
    fake_anthropic.script(Reply(text="slow", delay=2))  # answer after 2 s
    fake_anthropic.script(Reply(text="held", hold=True)); …; fake_anthropic.release()  # answer on demand

A request with nothing scripted gets `default_reply` when set (`server.default_reply = "ok"`), else a 500
whose message says the script ran dry — so build clients with max_retries=0 unless retries are the point.

Inspecting:

    fake_anthropic.requests            list[RecordedRequest] (method, path, headers (lower-case keys),
                                       body (bytes), json (the parsed body or None)), in arrival order
    fake_anthropic.bodies()            [r.json for r in requests on the model route]
    fake_anthropic.wait_for_requests(n, timeout=5.0)   block until n requests arrived (thread-safe)

Outside pytest: `with running_model_server("openai") as server: …`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

Flavor = Literal["anthropic", "openai"]

ROUTES: dict[str, str] = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    name: str
    arguments: Mapping[str, Any]
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. `status` ≥ 400 sends an error body in the provider's shape instead.

    `raw` (a dict or bytes) replaces the generated body entirely; `delay` sleeps before answering;
    `hold` waits until `server.release()` (or server shutdown) before answering.
    """

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    status: int = 200
    error_message: str = "scripted error"
    input_tokens: int = 11
    output_tokens: int = 7
    stop_reason: str | None = None
    delay: float = 0.0
    hold: bool = False
    raw: Mapping[str, Any] | bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


def text_reply(text: str, **options: Any) -> Reply:
    return Reply(text=text, **options)


def tool_reply(
    name: str, arguments: Mapping[str, Any], *, id: str | None = None, text: str = "", **options: Any
) -> Reply:
    """The model asks for one tool call (use Reply(tool_calls=…) for several)."""
    return Reply(text=text, tool_calls=(ScriptedToolCall(name, arguments, id),), **options)


def error_reply(status: int, message: str = "scripted error", **options: Any) -> Reply:
    return Reply(status=status, error_message=message, **options)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any


ScriptItem = Reply | str | Callable[[RecordedRequest], "Reply | str"]


class FakeModelServer:
    """One fake provider endpoint; see the module docstring for the API."""

    def __init__(self, flavor: Flavor) -> None:
        self.flavor: Flavor = flavor
        self.requests: list[RecordedRequest] = []
        self.default_reply: Reply | str | None = None
        self._script: deque[ScriptItem] = deque()
        self._cond = threading.Condition()
        self._released = threading.Event()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-{flavor}",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root if self.flavor == "anthropic" else f"{root}/v1"

    def start(self) -> FakeModelServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def script(self, *items: ScriptItem) -> None:
        """Queue answers; each request takes the next one."""
        with self._cond:
            self._script.extend(items)

    def release(self) -> None:
        """Let every held reply (Reply(hold=True)) answer now, and later ones answer at once."""
        self._released.set()

    def bodies(self) -> list[Any]:
        """The parsed JSON bodies sent to the model route, in order."""
        with self._cond:
            return [r.json for r in self.requests if r.path.split("?")[0] == ROUTES[self.flavor]]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout=timeout):
                raise AssertionError(
                    f"expected {count} request(s) at the fake {self.flavor} server, "
                    f"got {len(self.requests)} within {timeout}s"
                )

    # -- request handling (runs on the server's threads) --

    def _record_and_pick(self, request: RecordedRequest) -> Reply:
        with self._cond:
            self.requests.append(request)
            item: ScriptItem | None = self._script.popleft() if self._script else self.default_reply
            self._cond.notify_all()
        if item is None:
            return error_reply(500, f"fake {self.flavor} server: no scripted reply left")
        if callable(item) and not isinstance(item, Reply):
            item = item(request)
        return Reply(text=item) if isinstance(item, str) else item

    def _body_for(self, reply: Reply, request: RecordedRequest) -> bytes:
        if reply.raw is not None:
            return reply.raw if isinstance(reply.raw, bytes) else json.dumps(reply.raw).encode()
        model = request.json.get("model", "") if isinstance(request.json, dict) else ""
        n = next(self._ids)
        if reply.status >= 400:
            payload = _anthropic_error(reply) if self.flavor == "anthropic" else _openai_error(reply)
        elif self.flavor == "anthropic":
            payload = _anthropic_message(reply, model, n)
        else:
            payload = _openai_completion(reply, model, n)
        return json.dumps(payload).encode()

    def _wait(self, reply: Reply) -> None:
        if reply.delay:
            self._closing.wait(reply.delay)
        if reply.hold:
            self._released.wait()


def _anthropic_message(reply: Reply, model: str, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, call in enumerate(reply.tool_calls):
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{n:04d}_{i}",
                "name": call.name,
                "input": dict(call.arguments),
            }
        )
    stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    return {
        "id": f"msg_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def _openai_completion(reply: Reply, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{n:04d}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    finish = reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"chatcmpl-{n:06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _anthropic_error(reply: Reply) -> dict[str, Any]:
    kind = _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": reply.error_message}}


def _openai_error(reply: Reply) -> dict[str, Any]:
    kind = "invalid_request_error" if reply.status < 500 else "server_error"
    return {"error": {"message": reply.error_message, "type": kind, "param": None, "code": None}}


def _handler_for(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                parsed: Any = json.loads(body) if body else None
            except ValueError:
                parsed = None
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                json=parsed,
            )
            if self.path.split("?")[0] != ROUTES[server.flavor]:
                with server._cond:
                    server.requests.append(request)
                    server._cond.notify_all()
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                return
            reply = server._record_and_pick(request)
            server._wait(reply)
            self._send(reply.status, server._body_for(reply, request), reply.headers)

        def do_GET(self) -> None:
            self._send(404, b'{"error": {"message": "not found"}}')

        def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("request-id", "req_fake")
            self.send_header("x-request-id", "req_fake")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return None

    return Handler


@contextmanager
def running_model_server(flavor: Flavor) -> Iterator[FakeModelServer]:
    server = FakeModelServer(flavor).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeModelServer]:
    with running_model_server("anthropic") as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeModelServer]:
    with running_model_server("openai") as server:
        yield server
