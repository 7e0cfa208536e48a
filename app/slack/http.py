"""HTTP mode's front door: Slack's signed requests at /slack/events, and /healthz for load balancers.

Every request is checked here before Bolt sees it, so each refusal is one structured log event with
its reason (never the body): a missing or malformed `X-Slack-Request-Timestamp` or signature, a stale
timestamp, a wrong signature → 401. A signed request whose payload is not what Slack sends is acked
(200) with one warning: Slack would only redeliver the same bytes.

Slack always sends a Content-Length: a body without one (chunked) gets a 411 and a longer one than
aiohttp reads (`client_max_size`) a 413, both before a byte of it is read, so no client holds the
handler waiting on a body it will never send.
"""

from __future__ import annotations

import hashlib
import hmac
import json
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

Rejection = Literal[
    "missing_timestamp", "malformed_timestamp", "stale_timestamp", "missing_signature", "bad_signature"
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
    base = b"v0:" + stamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return "bad_signature"
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
    app = web.Application()
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
            return web.Response(status=status, text="length required" if length is None else "too large")
        body = await request.read()
        secret = bot.signing_secret
        if secret is None:  # never serve HTTP unverified
            log.warning("slack.request_rejected", reason="no_signing_secret", path=request.path)
            return web.Response(status=401, text="unverified")
        reason = rejection(body, request.headers, secret, now=clock())
        if reason is not None:
            log.warning(
                "slack.request_rejected",
                reason=reason,
                path=request.path,
                length=len(body),
                remote=request.remote,
            )
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
