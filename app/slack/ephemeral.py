"""Answers only the asker sees (the slash command, the Why? button), through Slack's response_url."""

from __future__ import annotations

from typing import Any

import structlog

from app.slack.format import POST_TEXT_LIMIT, markdown_to_mrkdwn, split_message

log = structlog.get_logger("slack")

# A response_url accepts five responses; a longer answer is cut there.
MAX_EPHEMERAL_RESPONSES = 5


async def respond_ephemeral(respond: Any, text: str, *, failed_event: str, **extra: Any) -> None:
    """`text` as Slack mrkdwn in pieces Slack accepts; the first failed piece ends it (logged)."""
    for piece in split_message(markdown_to_mrkdwn(text), POST_TEXT_LIMIT)[:MAX_EPHEMERAL_RESPONSES]:
        try:
            await respond(text=piece, response_type="ephemeral", **extra)
        except Exception as error:
            log.warning(failed_event, error=type(error).__name__)
            return
