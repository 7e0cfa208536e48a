"""Memory follows Slack: which messages a run read, what an edit or a deletion erases, the citation
under an answer, its *Why?* button, and permalinks to source threads.

Pure helpers over Slack's JSON plus three small I/O pieces (the citation post, the permalink cache, the
Why? reply); app/slack/memory_events.py does the I/O around them.

Edits: an edited source message erases the records its run was distilled from (reason `source_edited`);
the thread is distilled again on its next qualifying run — reflection reads the whole thread, so it
sees the edited text — or not at all if the thread never runs again. Slack's own edits that change no
text (link unfurls, attachments) and the bot's own messages (streamed answers are edited as they grow)
change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from app.slack.events import SlackIdentity, is_own_message
from app.slack.events import _ts_key as ts_key
from memory.types import EraseReason

log = structlog.get_logger("slack")

WHY_ACTION = "memory_why"
SOURCE_SUBTYPES = frozenset({"message_deleted", "message_changed"})
CHANNEL_DELETED_EVENTS = ("channel_deleted", "group_deleted")


@dataclass(frozen=True, slots=True)
class SourceChange:
    """A change to one message that memory may have been distilled from."""

    message: str  # `slack:C0123:1700000000.000100` (the channel id as IncomingMessage spells it)
    reason: EraseReason


def source_key(channel_key: str, ts: str) -> str:
    """How a message is named in the store's run sources: the namespaced channel id and its ts."""
    return f"{channel_key}:{ts}"


def source_messages(
    channel_key: str | None, current_ts: str, replies: Iterable[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The thread's messages a run reads: every earlier message of the thread and the current one."""
    if channel_key is None or not current_ts:
        return ()
    current = ts_key(current_ts)
    earlier = sorted(
        {str(m.get("ts")) for m in replies if m.get("ts") and ts_key(m.get("ts")) < current},
        key=ts_key,
    )
    return tuple(source_key(channel_key, ts) for ts in [*earlier, current_ts])


def source_change(
    event: Mapping[str, Any],
    identity: SlackIdentity,
    team_id: str | None,
    *,
    bot_user_id: str | None,
    bot_id: str | None,
) -> SourceChange | None:
    """What a `message_deleted` / `message_changed` event means for memory, or None (nothing)."""
    channel_key = identity.channel(team_id, str(event.get("channel") or "") or None)
    if channel_key is None:
        return None
    subtype = event.get("subtype")
    if subtype == "message_deleted":
        ts = event.get("deleted_ts") or _field(event.get("previous_message"), "ts")
        return SourceChange(source_key(channel_key, str(ts)), "source_deleted") if ts else None
    if subtype != "message_changed":
        return None
    message = event.get("message")
    previous = event.get("previous_message")
    if not isinstance(message, Mapping) or not message.get("ts"):
        return None
    key = source_key(channel_key, str(message["ts"]))
    if message.get("subtype") == "tombstone":  # a thread's parent deleted while it has replies
        return SourceChange(key, "source_deleted")
    if is_own_message(message, bot_user_id, bot_id):
        return None
    if isinstance(previous, Mapping) and previous.get("text") == message.get("text"):
        return None  # an unfurl, a reaction count, an attachment: the words did not change
    return SourceChange(key, "source_edited")


def deleted_channel_scope(
    event: Mapping[str, Any], identity: SlackIdentity, team_id: str | None
) -> str | None:
    """The channel scope a `channel_deleted` / `group_deleted` event empties."""
    channel = event.get("channel")
    if isinstance(channel, Mapping):  # some payloads carry the channel object
        channel = channel.get("id")
    key = identity.channel(team_id, str(channel or "") or None)
    return f"channel:{key}" if key else None


def citation_block(run_id: str, count: int) -> dict[str, Any]:
    """The compact line under an answer that drew on memory — "Drew on 3 memories · Why?" — whose
    button carries only the run id: what the run read comes from the audit, filtered for the clicker."""
    noun = "memory" if count == 1 else "memories"
    return {
        "type": "section",
        "block_id": f"citation:{run_id}",
        "text": {"type": "mrkdwn", "text": f"_Drew on {count} {noun}_"},
        "accessory": {
            "type": "button",
            "action_id": WHY_ACTION,
            "text": {"type": "plain_text", "text": "Why?"},
            "value": run_id,
        },
    }


def action_value(body: Mapping[str, Any], action_id: str) -> str | None:
    """The `value` of this action in a block_actions payload."""
    for action in body.get("actions") or ():
        if isinstance(action, Mapping) and action.get("action_id") == action_id:
            value = action.get("value")
            return value if isinstance(value, str) and value else None
    return None


def _field(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, Mapping) else None
