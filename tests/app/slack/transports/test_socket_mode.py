"""Socket Mode against a Slack it cannot reach: `switchboard serve` keeps trying for the configured
`[slack] connect_timeout_seconds`, not a backoff less, then says so in one line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.app.slack.transports.test_serve import serve, unreachable_slack_env
from tests.fakes.model_server import FakeModelServer

CONNECT_TIMEOUT = 12.0


async def test_an_unreachable_slack_is_retried_for_the_configured_connect_timeout(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    async with serve(tmp_path, unreachable_slack_env(fake_anthropic, tmp_path, CONNECT_TIMEOUT)) as bot:
        await bot.wait_for_log("slack.socket_retry", within=60)  # the first attempt has failed
        first_failure = time.monotonic()
        code = await asyncio.wait_for(bot.process.wait(), 60)
        gave_up_after = time.monotonic() - first_failure

    assert code != 0, "".join(bot.lines)
    # Generous bounds for a loaded machine: giving up a backoff early would be about 7.5 s here, and
    # the deadline also counts the first attempt, before this clock starts.
    assert CONNECT_TIMEOUT - 3.0 <= gave_up_after <= CONNECT_TIMEOUT + 15, gave_up_after
