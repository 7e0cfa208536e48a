"""Who will read a reply, and where what a run learns comes from: the one mapping from a message.

Every surface that shows memory (the memory block, `memory list`, the App Home, citations) builds its
`Reader` here (`reader_for`). What a run learns is labelled from the same message: its visibility
(memory.visibility.origin_from_visibility) and its channel id, stamped by the reflection hook.
"""

from __future__ import annotations

from app.incoming import ChannelVisibility, IncomingMessage
from memory.visibility import Audience, Reader

# A conversation's visibility → who sees a reply posted in it. A DM and the terminal chat (machine) are
# the asker's alone. An unknown visibility is read as the widest audience: it shows the least.
_AUDIENCES: dict[str | None, Audience] = {
    "public": "public",
    "private": "private",
    "mpim": "mpim",
    "dm": "self",
    "machine": "self",
    None: "public",
}


def conversation_reader(
    visibility: ChannelVisibility | str | None,
    *,
    user_id: str | None,
    channel_id: str | None,
    private_reply: bool = False,
) -> Reader:
    """The Reader of a reply in a conversation of this visibility; `private_reply` for a reply only the
    asker sees wherever it is shown (the `/memory` slash command's ephemeral answer, the App Home)."""
    audience: Audience = "self" if private_reply else _AUDIENCES.get(visibility, "public")
    return Reader(audience=audience, user_id=user_id, conversation_id=channel_id)


def reader_for(message: IncomingMessage, *, private_reply: bool = False) -> Reader:
    """The Reader of the reply to `message` (see `conversation_reader`)."""
    return conversation_reader(
        message.channel_visibility,
        user_id=message.user_id,
        channel_id=message.channel_id,
        private_reply=private_reply,
    )
