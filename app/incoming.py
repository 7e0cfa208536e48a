"""The bot's own message type: every surface turns its platform event into one of these."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

ChannelVisibility = Literal["public", "private", "dm", "mpim", "external", "machine"]
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """One earlier message of the thread, as the model will see it. `by_requester`: a person's message
    the surface knows the requester wrote (the same user as the message being answered), so reflection
    may take it as the requester's own words; anyone else's is a participant's."""

    role: Role
    text: str
    by_requester: bool = False


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message to answer.

    `user_id` and `channel_id` are platform-namespaced by the surface (`slack:U0123`, `slack:C0123`,
    `cli:local`); `channel_visibility` is `None` when the surface could not tell (the write gate treats
    that as private). `thread_key` names the conversation (`slack:C0123:1700000000.000100`).
    `source_messages` are the thread's messages the run read, as `<channel id>:<ts>` keys.
    """

    text: str
    thread_key: str
    surface: str
    user_id: str | None = None
    channel_id: str | None = None
    channel_visibility: ChannelVisibility | None = None
    history: tuple[HistoryTurn, ...] = field(default=())
    # The messages this run reads (`slack:C0123:1700000000.000100`): its reflection's sources, so an
    # edit or a deletion of one of them reaches the records distilled from it.
    source_messages: tuple[str, ...] = field(default=())
    # When the message was sent (epoch seconds), where the surface knows it better than its source keys.
    sent_at: float | None = None


# A source key's message timestamp: Slack's `ts` is the epoch seconds the message was posted at.
_SOURCE_TS = re.compile(r":(?P<ts>[0-9]{9,12}\.[0-9]{1,6})$")


def message_time(message: IncomingMessage) -> float | None:
    """When the message was sent: `sent_at`, else the `ts` of the run's latest source message (the one
    being answered comes last), else None (a surface with neither, like the terminal: the run's time)."""
    if message.sent_at is not None:
        return message.sent_at
    if message.source_messages:
        match = _SOURCE_TS.search(message.source_messages[-1])
        if match is not None:
            return float(match.group("ts"))
    return None
