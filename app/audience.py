"""Who will read a reply, and where what a run learns comes from: the one mapping from a message.

Every surface that shows memory (the memory block, `memory list`, the App Home, citations) builds its
`Reader` here (`reader_for`). What a run learns is labelled from the same message: its visibility
(memory.visibility.origin_from_visibility) and its channel id, stamped by the reflection hook.
"""

from __future__ import annotations

from app.incoming import ChannelVisibility, IncomingMessage
from memory.rules.visibility import Audience, Reader

# A conversation's visibility → who sees a reply posted in it. A DM and the terminal chat (machine) are
# the asker's alone. An unknown visibility is read as the widest audience: it shows the least.
_AUDIENCES: dict[str | None, Audience] = {
    "public": "public",
    "private": "private",
    "mpim": "mpim",
    "external": "external",
    "dm": "self",
    "machine": "self",
    None: "public",
}
# The visibilities whose members a private reply's asker is one of, as far as their records go.
_CONVERSATION_KINDS = frozenset({"private", "mpim", "dm"})


def conversation_reader(
    visibility: ChannelVisibility | str | None,
    *,
    user_id: str | None,
    channel_id: str | None,
    private_reply: bool = False,
) -> Reader:
    """The Reader of a reply in a conversation of this visibility; `private_reply` for a reply only the
    asker sees wherever it is shown (the `/memory` slash command's ephemeral answer, the App Home).

    In a conversation shared with another organization a private reply is read as the conversation's
    too: the asker may be one of the other organization's members, and as themselves they would be
    shown the organization's open records.
    """
    if not private_reply or visibility == "external":
        return Reader(
            audience=_AUDIENCES.get(visibility, "public"), user_id=user_id, conversation_id=channel_id
        )
    # Only the asker sees the reply, but they may have joined a now-public (or unknown) channel after
    # its private era: they read it as themselves alone (their own records), never as its members.
    conversation = channel_id if visibility in _CONVERSATION_KINDS else None
    return Reader(audience="self", user_id=user_id, conversation_id=conversation)


def reader_for(message: IncomingMessage, *, private_reply: bool = False) -> Reader:
    """The Reader of the reply to `message` (see `conversation_reader`)."""
    return conversation_reader(
        message.channel_visibility,
        user_id=message.user_id,
        channel_id=message.channel_id,
        private_reply=private_reply,
    )
