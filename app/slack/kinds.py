"""Which Slack payloads the bot handles, by kind: an event's type, an interaction's type, a slash
command. The listeners (app/slack/bot.py) are registered for exactly these, and every other signed
payload is acked with 200 and one `slack.malformed_request` warning naming its kind — before Bolt sees
it over HTTP (so it never waits on, or fails with, Slack's API), by Bolt's error handler in Socket
Mode. Slack only sends what the manifest subscribes to, so anything else is not a payload Slack sends
us; a test keeps these kinds and manifest.yml the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.slack.events import SHARING_EVENTS
from app.slack.provenance import CHANNEL_DELETED_EVENTS

HANDLED_EVENTS = frozenset(
    {
        "app_mention",
        "message",
        "app_home_opened",
        "assistant_thread_started",
        "user_change",
        *CHANNEL_DELETED_EVENTS,
        *SHARING_EVENTS,
    }
)
# Button clicks (Home tab, feedback, Why?) and the Home tab's modals; `command` is a slash command;
# Bolt answers `url_verification` and `ssl_check` itself.
HANDLED_REQUESTS = frozenset({"block_actions", "view_submission", "command", "url_verification", "ssl_check"})
UNKNOWN_KIND = "unknown"
# A kind is logged only when it has the shape of Slack's names: never an arbitrary string from a body.
_KIND_SHAPE = re.compile(r"[a-z][a-z0-9_.]{0,63}")


def payload_kind(body: Mapping[str, Any]) -> str:
    """The payload's kind: its event's type inside an `event_callback`, `command` for a slash command,
    else its `type` (`block_actions`, `block_suggestion`, …); `unknown` when it names none."""
    if "command" in body:
        return "command"
    if "ssl_check" in body:
        return "ssl_check"
    kind = body.get("type")
    if kind == "event_callback":
        event = body.get("event")
        kind = event.get("type") if isinstance(event, Mapping) else None
    return kind if isinstance(kind, str) and _KIND_SHAPE.fullmatch(kind) else UNKNOWN_KIND


def handled(body: Mapping[str, Any]) -> bool:
    """True when a listener of the bot takes this payload."""
    kind = payload_kind(body)
    return kind in (HANDLED_EVENTS if body.get("type") == "event_callback" else HANDLED_REQUESTS)
