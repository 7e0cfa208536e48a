"""HTTP mode's front door: Slack's signed requests at /slack/events, and /healthz for load balancers.

Every request is checked here before Bolt sees it, so each refusal is one structured log event with
its reason (never the body): a missing or malformed `X-Slack-Request-Timestamp` or signature, a stale
timestamp, a wrong signature → 401. A signed request whose payload is not what Slack sends is acked
(200) with one warning: Slack would only redeliver the same bytes.

Everything that can be refused without the body is refused before a byte of it is read, so a client
that is not Slack cannot hold a connection (and the handler) waiting on a body it will never send:
the timestamp and the signature's form (401), a missing Content-Length (chunked: 411), a longer one
than any Slack payload (`MAX_BODY_BYTES`: 413). Only the signature's value needs the body.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs

import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

log = structlog.get_logger("slack")

HEALTH_PATH = "/healthz"
# Slack's own replay window for a signed request.
MAX_CLOCK_SKEW_SECONDS = 300
# The largest body read. Slack's largest payloads are view submissions (a modal of 100 blocks at
# Slack's 3,000-character text limit, plus its state, is around 300 KB of JSON); this leaves headroom
# over that and keeps a client that is not Slack from making the handler buffer megabytes.
MAX_BODY_BYTES = 512 * 1024
# `v0=` and a hex HMAC-SHA256: the only signature form Slack sends.
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")

Rejection = Literal[
    "missing_timestamp",
    "malformed_timestamp",
    "stale_timestamp",
    "missing_signature",
    "malformed_signature",
    "bad_signature",
]


class ServedBot(Protocol):
    """What the front door needs from the Slack adapter (app/slack/app.py)."""

    app: AsyncApp

    @property
    def accepting(self) -> bool: ...

    @property
    def signing_secret(self) -> str | None: ...


def rejection(body: bytes, headers: Mapping[str, str], secret: str, *, now: float) -> Rejection | None:
    """Why a request is not Slack's (None when its `v0` signature and timestamp check out)."""
    early = head_rejection(headers, now=now)
    if early is not None:
        return early
    stamp, signature = headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    base = b"v0:" + stamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return "bad_signature"
    return None


def head_rejection(headers: Mapping[str, str], *, now: float) -> Rejection | None:
    """Why a request cannot be Slack's, from its head alone (None when only the body can tell)."""
    stamp = headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("X-Slack-Signature")
    if stamp is None or not stamp.strip():
        return "missing_timestamp"
    # Unix seconds: ten digits until 2286. A longer stamp is refused before int() sees it (Python
    # refuses to parse more than 4,300 digits, which would be a 500).
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        return "malformed_timestamp"
    if abs(now - int(stamp)) > MAX_CLOCK_SKEW_SECONDS:
        return "stale_timestamp"
    if not signature:
        return "missing_signature"
    if _SIGNATURE.fullmatch(signature) is None:
        return "malformed_signature"
    return None


def payload_problem(body: bytes, content_type: str) -> str | None:
    """Why a signed body is not a Slack payload Bolt can route (None when it looks like one)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8"
    if content_type == "application/json":
        try:
            data: Any = json.loads(text)
        except ValueError:
            return "invalid_json"
        return _envelope_problem(data)
    form = parse_qs(text, keep_blank_values=True)
    if "payload" in form:  # interactivity: block_actions, view_submission, …
        try:
            data = json.loads(form["payload"][0])
        except ValueError:
            return "invalid_json"
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            return "no_payload_type"
        return None
    if "command" in form or "ssl_check" in form:
        return None
    return "unknown_form"


def _envelope_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "not_an_object"
    kind = data.get("type")
    if not isinstance(kind, str):
        return "no_type"
    if kind == "event_callback":
        event = data.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return "no_event"
    return None


def build_web_app(bot: ServedBot, *, path: str, clock: Callable[[], float] = time.time) -> web.Application:
    """The aiohttp application: the events endpoint and the health check, nothing else."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(path, _events_handler(bot, clock))
    add_health_route(app, bot)
    return app


def add_health_route(app: web.Application, bot: ServedBot) -> None:
    """`GET /healthz`: 200 while serving, 503 once draining (the balancer stops sending)."""

    async def healthz(request: web.Request) -> web.Response:
        if bot.accepting:
            return web.Response(text="serving\n")
        return web.Response(status=503, text="draining\n")

    app.router.add_get(HEALTH_PATH, healthz)


def _events_handler(bot: ServedBot, clock: Callable[[], float]) -> Callable[[web.Request], Any]:
    async def handle(request: web.Request) -> web.Response:
        length = request.content_length
        if length is None or length > request.client_max_size:
            status = 411 if length is None else 413
            log.warning("slack.request_rejected", reason=f"http_{status}", path=request.path, length=length)
            return await _unread(request, status, "length required" if length is None else "too large")
        secret = bot.signing_secret
        if secret is None:  # never serve HTTP unverified
            log.warning("slack.request_rejected", reason="no_signing_secret", path=request.path)
            return await _unread(request, 401, "unverified")
        now = clock()
        early = head_rejection(request.headers, now=now)
        if early is not None:  # before the body: a client that is not Slack never holds the handler
            _log_refusal(request, early, length)
            return await _unread(request, 401, "invalid request")
        body = await request.read()
        reason = rejection(body, request.headers, secret, now=now)
        if reason is not None:
            _log_refusal(request, reason, len(body))
            return web.Response(status=401, text="invalid request")
        problem = payload_problem(body, request.content_type)
        if problem is not None:
            log.warning("slack.malformed_request", reason=problem, path=request.path, length=len(body))
            return web.Response(status=200, text="")
        bolt_request = AsyncBoltRequest(
            body=body.decode("utf-8"), query=request.query_string, headers=dict(request.headers)
        )
        response = await bot.app.async_dispatch(bolt_request)
        return await to_aiohttp_response(response)

    return handle


def _log_refusal(request: web.Request, reason: Rejection, length: int) -> None:
    log.warning(
        "slack.request_rejected", reason=reason, path=request.path, length=length, remote=request.remote
    )


async def _unread(request: web.Request, status: int, text: str) -> web.Response:
    """A refusal sent before the body was read, then the connection closed.

    aiohttp would otherwise keep reading ("lingering on") the unread body for up to 10 s after the
    answer, holding the connection's slot for a client that was refused.
    """
    response = web.Response(status=status, text=text)
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the answer is written first: the transport flushes before closing
    return response
