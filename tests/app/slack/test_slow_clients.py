"""The Slack HTTP endpoint under slow clients and floods (raw sockets), and its `/metrics`.

The server runs in the test's event loop, so the raw clients here are asyncio streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.slack.transports.http import MAX_BODY_BYTES
from ops.http_guard import GuardLimits
from ops.metrics import Metrics
from tests.app.slack.harness import RecordingDispatcher, RunningBot, running_bot
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, as_app_mention

HEAD_DEADLINE = 0.5
BODY_DEADLINE = 1.0
CAP = 6
METRICS_TOKEN = "test-metrics-token-5d1e"
LIMITS = GuardLimits(header_timeout=HEAD_DEADLINE, body_timeout=BODY_DEADLINE, max_connections=CAP)


@asynccontextmanager
async def guarded_bot(
    slack_api: FakeSlackApi, metrics: Metrics | None = None, limits: GuardLimits = LIMITS
) -> AsyncIterator[RunningBot]:
    slack_api.add_conversation("C1", "public")
    http = {"limits": limits, "metrics": metrics or Metrics(), "metrics_token": METRICS_TOKEN}
    async with running_bot(slack_api, RecordingDispatcher(), http=http) as bot:
        yield bot


def signed_looking() -> bytes:
    """The head lines of a request that may be Slack's until its body is read: a fresh timestamp and a
    signature of the right form (the wrong value, which only the body can show)."""
    return f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0={'ab' * 32}\r\n".encode()


def address(bot: RunningBot) -> tuple[str, int]:
    parts = urlsplit(bot.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


async def until_closed(
    bot: RunningBot, sent: bytes, within: float = 5
) -> tuple[bytes, float, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*address(bot))
    writer.write(sent)
    started = time.monotonic()
    async with asyncio.timeout(within):
        received = await reader.read()
    return received, time.monotonic() - started, writer


async def timed_mention(bot: RunningBot, slack_api: FakeSlackApi) -> float:
    started = time.monotonic()
    delivery = await bot.slack.event(
        as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi"))
    )
    assert delivery.status == 200
    return time.monotonic() - started


async def test_a_half_sent_request_gets_a_408_at_the_head_deadline_and_a_signed_event_is_not_delayed(
    slack_api: FakeSlackApi,
) -> None:
    async with guarded_bot(slack_api) as bot:
        slow = asyncio.create_task(until_closed(bot, b"POST /slack/ev"))
        await asyncio.sleep(0.05)
        assert await timed_mention(bot, slack_api) < 1.0
        received, elapsed, writer = await slow
        writer.close()
        await bot.settle()
    assert received.startswith(b"HTTP/1.1 408 ")
    assert HEAD_DEADLINE * 0.8 <= elapsed < HEAD_DEADLINE + 1.0


async def test_a_head_still_arriving_gets_its_408_though_the_keep_alive_is_shorter(
    slack_api: FakeSlackApi,
) -> None:
    # As the defaults are (a 5 s keep-alive, a 10 s head deadline), shortened: aiohttp's keep-alive
    # closed such a connection silently before the head deadline came.
    limits = GuardLimits(header_timeout=HEAD_DEADLINE * 2, keep_alive=HEAD_DEADLINE)
    async with guarded_bot(slack_api, limits=limits) as bot:
        received, elapsed, writer = await until_closed(bot, b"POST /slack/events HTTP/1.1\r\nHost: bot\r\n")
        writer.close()
    assert received.startswith(b"HTTP/1.1 408 ")
    assert HEAD_DEADLINE * 1.6 <= elapsed < HEAD_DEADLINE * 2 + 1.0


async def test_a_body_that_stops_short_is_closed_at_the_body_deadline(slack_api: FakeSlackApi) -> None:
    head = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\n" + signed_looking()
    head += b'Content-Length: 500\r\n\r\n{"type"'
    async with guarded_bot(slack_api) as bot:
        received, elapsed, writer = await until_closed(bot, head)
        writer.close()
    assert received == b""
    assert BODY_DEADLINE * 0.8 <= elapsed < BODY_DEADLINE + 1.0


CHUNKED_HEAD = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "chunks",
    [b"ffffffffffffffff\r\nab", b"5\r\nhello\r\n", b"20\r\nab\r\n0\r\n\r\n"],
    ids=["largest-chunk-size", "unterminated", "fake-last-chunk-inside-data"],
)
async def test_a_chunked_body_gets_a_411_at_once_without_being_waited_for(
    slack_api: FakeSlackApi, chunks: bytes
) -> None:
    async with guarded_bot(slack_api) as bot:  # Slack always sends a Content-Length
        reader, writer = await asyncio.open_connection(*address(bot))
        writer.write(CHUNKED_HEAD + chunks)
        started = time.monotonic()
        async with asyncio.timeout(BODY_DEADLINE * 3):
            status_line = await reader.readline()
        elapsed = time.monotonic() - started
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 411 ")
    assert elapsed < BODY_DEADLINE / 2


async def test_a_malformed_chunk_size_line_gets_a_400_at_once(slack_api: FakeSlackApi) -> None:
    async with guarded_bot(slack_api) as bot:
        received, elapsed, writer = await until_closed(bot, CHUNKED_HEAD + b"2\r\n{}\r\n0x10\r\n")
        writer.close()
    assert received.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert elapsed < BODY_DEADLINE / 2


async def test_at_the_cap_an_idle_connection_is_shed_and_one_in_a_request_is_not(
    slack_api: FakeSlackApi,
) -> None:
    async with guarded_bot(slack_api) as bot:
        held = [await asyncio.open_connection(*address(bot)) for _ in range(CAP)]
        await asyncio.sleep(0.05)
        assert await timed_mention(bot, slack_api) < 1.0  # the oldest idle connection made room
        async with asyncio.timeout(2):
            shed = await held[0][0].read()
        busy = [await asyncio.open_connection(*address(bot)) for _ in range(CAP)]
        for _, writer in busy:
            writer.write(
                b"POST /slack/events HTTP/1.1\r\nHost: bot\r\n"
                + signed_looking()
                + b"Content-Length: 50\r\n\r\n{"
            )
        await asyncio.sleep(0.05)
        received, _, writer = await until_closed(bot, b"")
        writer.close()
        for _, held_writer in held + busy:
            held_writer.close()
        await asyncio.sleep(0.05)
        assert await timed_mention(bot, slack_api) < 1.0
        await bot.settle()
    assert shed.startswith(b"HTTP/1.1 503 ")
    assert received.startswith(b"HTTP/1.1 503 ")


async def test_metrics_are_beside_the_signature_check_behind_their_own_token(slack_api: FakeSlackApi) -> None:
    async with guarded_bot(slack_api) as bot:
        event = as_app_mention(slack_api.post_as_user("C1", "U1", f"<@{BOT_USER_ID}> hi"))
        await bot.slack.event(event)
        await bot.slack.event(event, secret="not-the-signing-secret")
        await bot.settle()
        metrics_url = bot.url.replace("/slack/events", "/metrics")
        async with aiohttp.ClientSession() as session:
            async with session.get(metrics_url) as anonymous:
                anonymous_status = anonymous.status
            async with session.get(
                metrics_url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
            ) as reply:
                scraped_status, text = reply.status, await reply.text()

    assert (anonymous_status, scraped_status) == (401, 200)
    counts = {
        (sample.labels.get("route"), sample.labels.get("status")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "switchboard_http_requests_total"
    }
    assert counts[("/slack/events", "200")] == 1
    assert counts[("/slack/events", "401")] == 1
    assert counts[("/metrics", "401")] == 1


async def test_300_idle_half_open_connections_delay_a_signed_event_by_under_a_second(
    slack_api: FakeSlackApi,
) -> None:
    slack_api.add_conversation("C1", "public")
    http = {"limits": GuardLimits(), "metrics": Metrics()}  # the default deadlines and cap
    async with running_bot(slack_api, RecordingDispatcher(), http=http) as bot:
        baseline = await timed_mention(bot, slack_api)
        idle = [await asyncio.open_connection(*address(bot)) for _ in range(300)]
        try:
            for _, writer in idle:
                writer.write(b"POST /slack/ev")
            await asyncio.sleep(0.2)
            delayed = await timed_mention(bot, slack_api)
        finally:
            for _, writer in idle:
                writer.close()
        await bot.settle()
    assert delayed - baseline < 1.0


FLOOD_CAP = 4


async def healthz_status(bot: RunningBot) -> tuple[int, float]:
    started = time.monotonic()
    health = bot.url.replace("/slack/events", "/healthz")
    async with aiohttp.ClientSession() as session, session.get(health) as reply:
        return reply.status, time.monotonic() - started


async def test_unsigned_requests_owing_big_bodies_are_refused_at_once_and_free_their_slots(
    slack_api: FakeSlackApi,
) -> None:
    limits = GuardLimits(header_timeout=10.0, body_timeout=30.0, max_connections=FLOOD_CAP)
    flood = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Length: 500000\r\n\r\n{"
    async with guarded_bot(slack_api, limits=limits) as bot:
        refused = await asyncio.gather(*(until_closed(bot, flood, within=3) for _ in range(FLOOD_CAP)))
        health = await healthz_status(bot)
        for _, _, writer in refused:
            writer.close()
    for received, elapsed, _ in refused:
        assert received.startswith(b"HTTP/1.1 401 ") and elapsed < 1.0
    assert health[0] == 200 and health[1] < 1.0


async def test_a_content_length_beyond_any_slack_payload_is_a_413_before_the_body(
    slack_api: FakeSlackApi,
) -> None:
    head = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\n" + signed_looking()
    head += b"Content-Length: %d\r\n\r\n{" % (MAX_BODY_BYTES + 1)
    async with guarded_bot(slack_api) as bot:
        received, elapsed, writer = await until_closed(bot, head)
        writer.close()
    assert received.startswith(b"HTTP/1.1 413 ") and elapsed < BODY_DEADLINE / 2


async def test_requests_that_may_be_signed_and_then_stall_are_shed_after_the_head_deadline(
    slack_api: FakeSlackApi,
) -> None:
    limits = GuardLimits(header_timeout=HEAD_DEADLINE, body_timeout=30.0, max_connections=FLOOD_CAP)
    stall = b"POST /slack/events HTTP/1.1\r\nHost: bot\r\n" + signed_looking()
    stall += b"Content-Length: 500000\r\n\r\n{"
    async with guarded_bot(slack_api, limits=limits) as bot:
        held = [await asyncio.open_connection(*address(bot)) for _ in range(FLOOD_CAP)]
        for _, writer in held:
            writer.write(stall)
        await asyncio.sleep(HEAD_DEADLINE * 1.5)
        health = await healthz_status(bot)
        for _, writer in held:
            writer.close()
    assert health[0] == 200 and health[1] < 1.0
