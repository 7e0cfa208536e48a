"""The read rule: a record only goes where its audience could already see it.

One pure function, `may_show`, decides it for every path that shows a record to someone — the memory
block of a run, the records shown to the extractor, `memory list`, the App Home, citations, the audit.
A reply's audience must be no wider than the record's origin:

| record origin          | may be shown                                                              |
|------------------------|---------------------------------------------------------------------------|
| `public`, `machine`    | anywhere but a conversation shared with another organization              |
| `private`, `mpim`,     | in that same conversation to the same kind of audience (a private channel |
| `external`             | read as private, a shared channel read as external), or privately to the  |
|                        | record's owner                                                            |
| `dm`, `unknown`        | only privately to the record's owner (their DM with the bot, their        |
|                        | terminal, an ephemeral reply or App Home only they see)                   |

A conversation Slack marks as shared with another organization (Slack Connect) is its own audience,
`external`: a reply there — ephemeral ones too, as the asker may be from the other organization — is
shown only what was learned in that very conversation (origin `external`, the same conversation),
never the organization's own records, whatever their origin, nor another shared channel's.

The owner of a record is the person whose user scope holds it. A `dm`/`unknown` record is tied to that
owner, never to a conversation: a reader naming the DM it came from (a crafted payload, an admin's
listing there) is not its owner, so naming the conversation shows nothing. A shared-scope record has
no owner, so a `dm`/`unknown` one there is shown to nobody (the write gate never puts one there; a DM
has no shared scope, and the start-up migration moves what old versions wrote into their owner's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from memory.rules.scope import dm_channel_scope, scope_kind
from memory.types import ORIGINS, MemoryRecord, Origin

# Who will see a reply: everyone in a public channel, the members of a private channel or group DM,
# the members of a conversation shared with another organization (`external`, both organizations'),
# or only the asker (`self`: their DM with the bot, their terminal, an ephemeral reply, their App Home).
Audience = Literal["public", "private", "mpim", "external", "self"]

# Shown to any reader inside the organization; shown only in the conversation they came from.
OPEN_ORIGINS: frozenset[Origin] = frozenset({"public", "machine"})
CONVERSATION_ORIGINS: frozenset[Origin] = frozenset({"private", "mpim", "external"})


@dataclass(frozen=True, slots=True)
class Reader:
    """The audience of one reply: who sees it, who asked, and the conversation it lands in.

    `user_id` and `conversation_id` are platform-namespaced like `IncomingMessage` (`slack:U0123`,
    `slack:C0123`, `cli:local`).
    """

    audience: Audience
    user_id: str | None = None
    conversation_id: str | None = None


# How far an origin's audience reaches: a fact restated from a narrower origin takes that origin.
_REACH: dict[Origin, int] = {
    "public": 2,
    "machine": 2,
    "private": 1,
    "mpim": 1,
    "external": 1,
    "dm": 0,
    "unknown": 0,
}


def origin_from_visibility(visibility: str | None) -> Origin:
    """A run's stamped channel visibility as the origin of what it learns; None or anything else → unknown."""
    if visibility in ORIGINS:
        return cast(Origin, visibility)
    return "unknown"


def narrower(
    first: tuple[Origin, str | None], second: tuple[Origin, str | None]
) -> tuple[Origin, str | None]:
    """Of two (origin, conversation) labels, the one whose audience is smaller (the first on a tie).

    Two labels below public from different conversations have no common audience but their owner:
    the result is `unknown` with no conversation (read as dm), not either conversation's label. So
    do two conversation-bound labels of different kinds (a channel read as private, then as shared
    with another organization): neither audience holds the other.
    """
    if _REACH[first[0]] < _REACH["public"] and _REACH[second[0]] < _REACH["public"]:
        conversation_bound = _REACH[first[0]] == _REACH[second[0]] == _REACH["private"]
        if first[1] != second[1] or (conversation_bound and first[0] != second[0]):
            return "unknown", None
    return second if _REACH[second[0]] < _REACH[first[0]] else first


def legacy_origin(scope_key: str) -> tuple[Origin, str | None]:
    """The conservative label of a record written before origins were stored (the migration):
    org and repo records were only ever written from public runs; a DM's channel record (as older
    versions wrote them) is `dm`; any other channel record keeps its channel as the conversation but
    is read as `private` (its visibility then is not known); a user record has no evidence and is
    `unknown` (read as dm)."""
    kind, sep, rest = scope_key.partition(":")
    if kind in ("org", "repo") and sep:
        return "public", None
    if dm_channel_scope(scope_key) is not None:
        return "dm", rest
    if kind == "channel" and sep and rest:
        return "private", rest
    return "unknown", None


# The labels of a conversation that others read. A note for the typist's own scope typed there only to
# the bot (the `/memory` slash command, answered ephemerally) was never seen by them.
_SEEN_BY_OTHERS: frozenset[Origin] = frozenset({"public", "private", "mpim"})

# How the `/memory` slash command's thread key ends (app/slack/slash.py): what a note saved with it
# keeps as its source thread.
SLASH_THREAD_SUFFIX = ":slash"


def typed_alone(origin: Origin, scope_key: str) -> Origin:
    """The label of words typed where only the typist reads the reply (a slash command in a channel),
    labelled `origin` as the conversation is: a note for the typist's own scope is theirs alone, `dm`,
    as the App Home's notes are; a shared scope's note is written for that scope's audience, as typed.
    Used where the words arrive (commands/remember.py) and by the stores' one-time relabelling of the
    notes saved before that rule (memory/stores/sql_common.py `slash_relabels`)."""
    if origin in _SEEN_BY_OTHERS and scope_kind(scope_key) == "user":
        return "dm"
    return origin


def record_owner(scope_key: str) -> str | None:
    """The person a record belongs to: the id in a `user:` scope key, else nobody."""
    kind, sep, rest = scope_key.partition(":")
    return rest if kind == "user" and sep and rest else None


def shown_to_anyone(record: MemoryRecord) -> bool:
    """True when every reader inside the organization may see the record (a `public` or `machine`
    origin): only such records may shape the order in which other records reach a reader (the
    ranking's feedback pass). A reader in a channel shared with another organization is not shown
    them, though their words may still weigh in the order of the few records it is shown."""
    return record.origin in OPEN_ORIGINS


def may_show(record: MemoryRecord, reader: Reader) -> bool:
    """True when every member of the reader's audience could already see where the record was learned."""
    origin = record.origin
    if reader.audience == "external":
        # Another organization reads this reply: only what was typed in this very conversation, never
        # the organization's own records (not even the asker's: the reply is not theirs alone).
        return (
            origin == "external"
            and record.origin_conversation is not None
            and reader.conversation_id == record.origin_conversation
        )
    if origin in OPEN_ORIGINS:
        return True
    owner = record_owner(record.scope_key)
    to_owner_alone = reader.audience == "self" and owner is not None and reader.user_id == owner
    if origin in CONVERSATION_ORIGINS:
        # Only a reply to the same kind of audience in the same conversation: a private channel made
        # public later has new members, and so does a `self` reader there (an ephemeral reply to
        # whoever is in the channel now) — only the owner alone is shown it privately. An `external`
        # record reaches no internal reader of its channel either (the channel no longer shared).
        same_conversation = (
            reader.audience == origin
            and record.origin_conversation is not None
            and reader.conversation_id == record.origin_conversation
        )
        return same_conversation or to_owner_alone
    return to_owner_alone  # dm, unknown: the owner alone, wherever they name
