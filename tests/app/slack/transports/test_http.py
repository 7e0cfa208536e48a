"""HTTP mode's front door over real HTTP: refused requests (one log event with the reason, never the
body), signed but malformed payloads (200 and one warning, never a 500), and /healthz."""

from __future__ import annotations

import json
import time
from collections.abc import MutableMapping
from typing import Any

import aiohttp
from structlog.testing import capture_logs

from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.fakes.slack_api import (
    FakeSlackApi,
    event_envelope,
    signed_headers,
)

SECRET_WORD = "hunter2-in-the-body"


def _body() -> str:
    event = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "1.000001", "text": SECRET_WORD}
    return json.dumps(event_envelope(event, event_id="EvX"))


def _rejections(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "slack.request_rejected"]


async def test_a_non_integer_timestamp_is_a_401_with_one_logged_reason(slack_api: FakeSlackApi) -> None:
    body = _body()
    headers = signed_headers(body, content_type="application/json")
    headers["X-Slack-Request-Timestamp"] = "12abc"
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, headers)

    assert delivery.status == 401
    [rejected] = _rejections(logs)
    assert rejected["reason"] == "malformed_timestamp"
    assert SECRET_WORD not in repr(logs)


async def test_a_timestamp_of_thousands_of_digits_is_a_401_malformed_timestamp_not_a_500(
    slack_api: FakeSlackApi,
) -> None:
    body = _body()
    headers = signed_headers(body, content_type="application/json")
    headers["X-Slack-Request-Timestamp"] = "9" * 5000
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, headers)

    assert delivery.status == 401
    assert [r["reason"] for r in _rejections(logs)] == ["malformed_timestamp"]


async def test_a_stale_timestamp_is_refused_with_its_reason(slack_api: FakeSlackApi) -> None:
    body = _body()
    headers = signed_headers(body, content_type="application/json", timestamp=int(time.time()) - 3600)
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, headers)

    assert delivery.status == 401
    assert [r["reason"] for r in _rejections(logs)] == ["stale_timestamp"]


async def test_a_wrong_signature_is_refused_with_its_reason_and_never_the_body(
    slack_api: FakeSlackApi,
) -> None:
    body = _body()
    headers = signed_headers(body, content_type="application/json", secret="not-the-secret")
    dispatcher = RecordingDispatcher()
    async with running_bot(slack_api, dispatcher) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, headers)

    assert delivery.status == 401
    assert [r["reason"] for r in _rejections(logs)] == ["bad_signature"]
    assert SECRET_WORD not in repr(logs)
    assert dispatcher.messages == []


async def test_a_signature_not_of_slacks_form_is_refused_as_malformed(slack_api: FakeSlackApi) -> None:
    body = _body()
    headers = signed_headers(body, content_type="application/json")
    headers["X-Slack-Signature"] = "v1=" + headers["X-Slack-Signature"][3:]
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, headers)

    assert delivery.status == 401
    assert [r["reason"] for r in _rejections(logs)] == ["malformed_signature"]


async def test_a_signed_but_malformed_event_is_acked_with_one_warning(slack_api: FakeSlackApi) -> None:
    bodies = [
        json.dumps({"type": "event_callback", "event_id": "Ev1", "event": "not an object"}),
        '{"type": "event_callback", "event": {',  # cut off
        json.dumps(["a", "list"]),
    ]
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        statuses = []
        with capture_logs() as logs:
            for body in bodies:
                headers = signed_headers(body, content_type="application/json")
                statuses.append((await bot.slack.post(body, headers)).status)

    assert statuses == [200, 200, 200]
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [w["event"] for w in warnings] == ["slack.malformed_request"] * 3


async def test_healthz_is_200_while_serving_and_503_while_draining(slack_api: FakeSlackApi) -> None:
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        health = bot.url.replace("/slack/events", "/healthz")
        async with aiohttp.ClientSession() as session:
            async with session.get(health) as response:
                serving = response.status
            bot.bot.stop_accepting()
            async with session.get(health) as response:
                draining = response.status

    assert (serving, draining) == (200, 503)
