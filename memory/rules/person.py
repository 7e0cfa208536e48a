"""A person, named the way they are shown, as the one user scope key every store files them under; and
the pseudonym their entries in other people's logs take when they are erased.

Slack shows a person as `U…`, `<@U…>` or `<@U…|name>`; the bot shows them as `slack:U…`,
`user:slack:U…` or, when one app serves several workspaces, `slack:T…:U…` / `user:slack:T…:U…`; the
terminal's person is `cli:local` / `user:cli:local`. A Slack id without a team is read in the asking
admin's own workspace (their id carries it when the installation keys people by team), so the same
words name the same key the surfaces derived when the person talked. Anything else is refused: a guess
could erase nobody and say it did, or erase someone else.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace

from memory.rules.scope import is_dm_conversation
from memory.types import CurationEntry, MemoryRecord, ReadAudit

USER_PREFIX = "user:"
TERMINAL_PERSON = "user:cli:local"
# What a pseudonym looks like as a user id and as a user scope key: random, never derived from the id.
PSEUDONYM_PREFIX = "erased:"
_PSEUDONYM = re.compile(r"^erased:[0-9a-f]{32}$")
_PSEUDONYM_BYTES = 16

_QUOTES = "`'\"“”‘’"
_SLACK_ID = r"[UW][A-Z0-9]{1,30}"
_TEAM_ID = r"[TE][A-Z0-9]{1,30}"
_MENTION = re.compile(rf"^<@({_SLACK_ID})(?:\|[^<>]*)?>$")
_BARE = re.compile(rf"^(?:(?:user:)?slack:)?({_SLACK_ID})$")
_TEAMED = re.compile(rf"^(?:user:)?slack:({_TEAM_ID}):({_SLACK_ID})$")
_TERMINAL = re.compile(r"^(?:user:)?cli:local$")
_CALLER_TEAM = re.compile(rf"^slack:({_TEAM_ID}):{_SLACK_ID}$")
# The terminal's threads (`cli:<name>`): only its one person types there, and they named each.
_TERMINAL_THREAD = "cli:"

FORMS = "`U0123`, `<@U0123>`, `slack:U0123`, `user:slack:U0123`, `slack:T0123:U0123` or `cli:local`"


class PersonError(ValueError):
    """A name that is no person's form: the message says what the forms are."""


def resolve_person(value: str, *, caller_id: str | None) -> str:
    """The user scope key `value` names, a Slack id without a team read in `caller_id`'s workspace
    (`slack:T…:U…` carries one; `slack:U…` and the terminal's `cli:local` do not)."""
    text = value.strip().strip(_QUOTES).strip()
    mention = _MENTION.match(text)
    bare = _BARE.match(mention.group(1) if mention else text)
    if bare is not None:
        team = _CALLER_TEAM.match(caller_id or "")
        local = bare.group(1)
        return f"{USER_PREFIX}slack:{team.group(1)}:{local}" if team else f"{USER_PREFIX}slack:{local}"
    teamed = _TEAMED.match(text)
    if teamed is not None:
        return f"{USER_PREFIX}slack:{teamed.group(1)}:{teamed.group(2)}"
    if _TERMINAL.match(text):
        return TERMINAL_PERSON
    shown = text if len(text) <= 60 else text[:59] + "…"
    raise PersonError(f"`{shown}` names no person: use one of {FORMS}.")


def person_user_id(person_key: str) -> str:
    """`user:slack:U0123` → `slack:U0123`: the id a surface and the read audit name the person by."""
    return person_key.removeprefix(USER_PREFIX)


def logged_scope(scope_key: str, reason: str) -> dict[str, str]:
    """What an erasure's log line says of its scope: nothing for a person's own erasure (their user
    scope, `user_request`), whose key the line would otherwise keep after every store forgot it."""
    erasing_a_person = reason == "user_request" and scope_key.startswith(USER_PREFIX)
    return {} if erasing_a_person else {"scope_key": scope_key}


def draw_pseudonym() -> str:
    """A fresh random pseudonym (`erased:<32 hex>`): nothing of the person's id goes into it."""
    return PSEUDONYM_PREFIX + secrets.token_hex(_PSEUDONYM_BYTES)


def validate_pseudonym(value: object) -> str:
    if not isinstance(value, str) or _PSEUDONYM.match(value) is None:
        raise ValueError("pseudonym must be `erased:` and 32 lower-case hex digits")
    return value


@dataclass(frozen=True, slots=True)
class PersonRename:
    """How an erased person's mentions in logs are rewritten: their scope key, their user id and the
    ids of records in their scope all take the pseudonym; every other value is left as it was."""

    person_key: str
    pseudonym: str

    def __post_init__(self) -> None:
        if not self.person_key.startswith(USER_PREFIX) or len(self.person_key) == len(USER_PREFIX):
            raise ValueError("a person's key is a user scope key (`user:…`)")
        validate_pseudonym(self.pseudonym)

    @property
    def user_id(self) -> str:
        return person_user_id(self.person_key)

    @property
    def pseudonym_key(self) -> str:
        return USER_PREFIX + self.pseudonym

    @property
    def record_prefix(self) -> str:
        """What every id minted in the person's scope starts with (`mem:<scope key>:<n>`)."""
        return f"mem:{self.person_key}:"

    @property
    def pseudonym_record_prefix(self) -> str:
        return f"mem:{self.pseudonym_key}:"

    def key(self, value: str) -> str:
        """An actor or a scope key."""
        return self.pseudonym_key if value == self.person_key else value

    def user(self, value: str | None) -> str | None:
        """An asker (a user id)."""
        return self.pseudonym if value == self.user_id else value

    def record(self, record_id: str) -> str:
        if record_id.startswith(self.record_prefix):
            return self.pseudonym_record_prefix + record_id[len(self.record_prefix) :]
        return record_id

    def thread(self, thread_key: str, asker: str | None) -> str:
        """A thread the person asked in that was theirs alone (a DM, a terminal thread) becomes the
        pseudonym; any other thread (a channel's, seen by others too) keeps its key."""
        conversation = thread_key.rpartition(":")[0]
        theirs = thread_key.startswith(_TERMINAL_THREAD) or is_dm_conversation(conversation)
        return self.pseudonym if asker == self.user_id and theirs else thread_key

    def owned_thread(self, thread_key: str) -> str:
        """A thread key in the person's own scope (where a record of theirs was learned): the
        pseudonym when the thread was theirs alone, as `thread` reads it."""
        return self.thread(thread_key, self.user_id)

    def entry(self, item: CurationEntry) -> CurationEntry:
        """A curation entry with its actor renamed, and its scope and record ids when they are the
        person's own scope's (the scope moves to the pseudonym whole: memory/stores/*/person.py)."""
        return replace(
            item,
            actor=self.key(item.actor),
            scope_key=self.key(item.scope_key),
            record_id=self.record(item.record_id),
            related_id=None if item.related_id is None else self.record(item.related_id),
        )

    def row(self, record: MemoryRecord) -> MemoryRecord:
        """A record of the person's own scope as it lives on under the pseudonym (its text is erased
        before): id, scope, the id it supersedes and a thread that was theirs alone renamed."""
        return replace(
            record,
            id=self.record(record.id),
            scope_key=self.key(record.scope_key),
            supersedes=None if record.supersedes is None else self.record(record.supersedes),
            source_thread_key=self.owned_thread(record.source_thread_key),
        )

    def read(self, item: ReadAudit) -> ReadAudit:
        """A read-audit entry with its asker, its own thread, the scopes it read and its records' ids
        renamed."""
        return replace(
            item,
            thread_key=self.thread(item.thread_key, item.asker),
            asker=self.user(item.asker),
            scope_keys=tuple(self.key(key) for key in item.scope_keys),
            records=tuple((self.record(record_id), rank) for record_id, rank in item.records),
        )
