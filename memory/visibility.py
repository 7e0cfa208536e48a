"""The read rule: a record only goes where its audience could already see it.

One pure function, `may_show`, decides it for every path that shows a record to someone — the memory
block of a run, the records shown to the extractor, `memory list`, the App Home, citations, the audit.
A reply's audience must be no wider than the record's origin:

| record origin          | may be shown                                                              |
|------------------------|---------------------------------------------------------------------------|
| `public`, `machine`    | anywhere                                                                  |
| `private`, `mpim`      | in that same conversation, or privately to the record's owner             |
| `dm`, `unknown`        | only privately to the record's owner (their DM with the bot, their        |
|                        | terminal, an ephemeral reply or App Home only they see)                   |

The owner of a record is the person whose user scope holds it; a shared-scope record has no owner, so
a `dm`/`unknown` one there is shown nowhere (the write gate never puts one there; a migrated row might).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory.types import MemoryRecord, Origin

# Who will see a reply: everyone in a public channel, the members of a private channel or group DM,
# or only the asker (`self`: their DM with the bot, their terminal, an ephemeral reply, their App Home).
Audience = Literal["public", "private", "mpim", "self"]

_OPEN_ORIGINS: frozenset[Origin] = frozenset({"public", "machine"})
_CONVERSATION_ORIGINS: frozenset[Origin] = frozenset({"private", "mpim"})


@dataclass(frozen=True, slots=True)
class Reader:
    """The audience of one reply: who sees it, who asked, and the conversation it lands in.

    `user_id` and `conversation_id` are platform-namespaced like `IncomingMessage` (`slack:U0123`,
    `slack:C0123`, `cli:local`).
    """

    audience: Audience
    user_id: str | None = None
    conversation_id: str | None = None


def record_owner(scope_key: str) -> str | None:
    """The person a record belongs to: the id in a `user:` scope key, else nobody."""
    kind, sep, rest = scope_key.partition(":")
    return rest if kind == "user" and sep and rest else None


def may_show(record: MemoryRecord, reader: Reader) -> bool:
    """True when every member of the reader's audience could already see where the record was learned."""
    origin = record.origin
    if origin in _OPEN_ORIGINS:
        return True
    owner = record_owner(record.scope_key)
    to_owner_alone = reader.audience == "self" and owner is not None and reader.user_id == owner
    if origin in _CONVERSATION_ORIGINS:
        same_conversation = (
            reader.audience != "public"  # a private channel made public later has new members
            and record.origin_conversation is not None
            and reader.conversation_id == record.origin_conversation
        )
        return same_conversation or to_owner_alone
    return to_owner_alone  # dm, unknown
