"""HTTP mode's front door over real HTTP: refused requests (one log event with the reason, never the
body), signed but malformed payloads (200 and one warning, never a 500), and /healthz."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import MutableMapping
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from app.slack.bot import make_web_client
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.fakes.slack_api import (
    FakeSlackApi,
    event_envelope,
    signed_headers,
)
from tests.memory.service_support import free_port

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


# ---- signed payloads no listener takes: 200 and one warning naming the kind, never a payload value --

CLOSED = "closed"  # the Slack API client points at a port nobody listens on


def _unreachable_client() -> Any:
    return make_web_client("xoxb-test", f"http://127.0.0.1:{free_port()}/api/")


def _bot_kwargs(api: str) -> dict[str, Any]:
    return {"client": _unreachable_client()} if api == CLOSED else {}


def _warnings(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["log_level"] in ("warning", "error")]


UNHANDLED_EVENTS = [
    pytest.param({"type": "weird", "text": SECRET_WORD}, "weird", id="weird-type"),
    pytest.param(
        event_envelope({"type": "reaction_added", "user": "U1", "reaction": SECRET_WORD}, event_id="EvR"),
        "reaction_added",
        id="unhandled-event-type",
    ),
]


@pytest.mark.parametrize("api", ["reachable", CLOSED])
@pytest.mark.parametrize(("payload", "kind"), UNHANDLED_EVENTS)
async def test_a_signed_payload_no_listener_takes_is_a_200_with_one_warning_naming_its_kind(
    slack_api: FakeSlackApi,
    caplog: pytest.LogCaptureFixture,
    payload: dict[str, Any],
    kind: str,
    api: str,
) -> None:
    body = json.dumps(payload)
    async with running_bot(slack_api, RecordingDispatcher(), **_bot_kwargs(api)) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.post(body, signed_headers(body, content_type="application/json"))

    assert delivery.status == 200
    [warning] = _warnings(logs)
    assert (warning["event"], warning["reason"]) == ("slack.malformed_request", "unhandled")
    assert warning["kind"] == kind
    assert SECRET_WORD not in repr(logs) + caplog.text


INTERACTIONS = [
    pytest.param(
        {"type": "block_suggestion", "action_id": "pick", "block_id": "b", "value": SECRET_WORD},
        "block_suggestion",
        id="block_suggestion",
    ),
    pytest.param(
        {"type": "dialog_suggestion", "callback_id": "d", "name": "n", "value": SECRET_WORD},
        "dialog_suggestion",
        id="dialog_suggestion",
    ),
    pytest.param(
        {"type": "interactive_message", "callback_id": "legacy", "original_message": {"text": SECRET_WORD}},
        "interactive_message",
        id="interactive_message-without-actions",
    ),
    pytest.param(
        {
            "type": "block_actions",
            "user": {"id": "U1"},
            "actions": [{"action_id": "nobody_listens", "value": SECRET_WORD}],
        },
        "block_actions",
        id="block_actions-no-listener-takes",
    ),
]


@pytest.mark.parametrize(("payload", "kind"), INTERACTIONS)
async def test_an_interaction_no_listener_takes_is_a_200_with_one_warning_and_never_its_text(
    slack_api: FakeSlackApi, caplog: pytest.LogCaptureFixture, payload: dict[str, Any], kind: str
) -> None:
    async with running_bot(slack_api, RecordingDispatcher()) as bot:
        with capture_logs() as logs:
            delivery = await bot.slack.interaction(payload)

    assert delivery.status == 200
    [warning] = _warnings(logs)
    assert (warning["event"], warning["kind"]) == ("slack.malformed_request", kind)
    assert SECRET_WORD not in repr(logs) + caplog.text
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
