"""The read rule (memory/visibility.py): a record only goes where its audience could already see it.

The property test checks `may_show` against an independent model of audiences: who will read a reply
(everyone, the members of one conversation, or one person) and who could already see where the record
was learned. Whenever `may_show` says yes, the reply's audience must be a subset of the origin's.
"""

from __future__ import annotations

from typing import get_args

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.audience import conversation_reader
from memory.rules.visibility import (
    Audience,
    Reader,
    legacy_origin,
    may_show,
    narrower,
    origin_from_visibility,
    record_owner,
)
from memory.types import MemoryRecord, Origin

USERS = ("slack:U1", "slack:U2")
CONVERSATIONS = ("slack:C1", "slack:C2", "slack:G1", "slack:D1", "slack:D2", "slack:C7", "slack:C8")
SCOPES = (
    "org:acme",
    "repo:acme/api",
    "channel:slack:C1",
    "channel:slack:G1",
    "channel:slack:D1",
    "channel:slack:C7",
    "user:slack:U1",
    "user:slack:U2",
)
OPEN = frozenset({"public", "machine"})


def record(origin: Origin, conversation: str | None, scope_key: str) -> MemoryRecord:
    return MemoryRecord(
        id=f"mem:{scope_key}:1",
        scope_key=scope_key,
        kind="fact",
        text="a fact",
        source_thread_key="t",
        created_at=0.0,
        origin=origin,
        origin_conversation=conversation,
    )


def could_already_see(item: MemoryRecord, reader: Reader) -> bool:
    """The model: is everyone the reply reaches someone who could already see the record's origin?

    Origin audiences: public/machine → everyone in the organization; private/mpim/dm/unknown/external
    learned in conversation X →
    the members of X (the owner of a user-scope record is one of them: they were asked there); a
    dm/unknown origin is its owner alone — a DM is one person's, and an unknown one is read as a DM.
    Reply audiences: public → everyone (also people who join later); private/mpim in X → the members of
    X (a private record is read by a private audience, an mpim one by an mpim audience); self → the one
    reader, who says which conversation they are in (a payload can name any); external in X → the
    members of X, some of another organization, who could see nothing but what was typed in X.
    """
    where = item.origin_conversation
    if reader.audience == "external":
        return item.origin == "external" and where is not None and reader.conversation_id == where
    if item.origin in OPEN:
        return True
    owner = record_owner(item.scope_key)
    if reader.audience == "public":
        return False  # everyone ⊄ any narrower audience
    if item.origin in ("dm", "unknown"):
        return reader.audience == "self" and owner is not None and reader.user_id == owner
    if reader.audience in ("private", "mpim"):
        # A channel shared with another organization once: its members then are not its members now.
        return item.origin != "external" and where is not None and reader.conversation_id == where
    # self: one person — a member of the origin if they are its owner. In a private channel or group
    # DM they may have joined after (or it went public): owner alone.
    return owner is not None and reader.user_id == owner


origins = st.sampled_from(get_args(Origin))
conversations = st.none() | st.sampled_from(CONVERSATIONS)
readers = st.builds(
    Reader,
    audience=st.sampled_from(get_args(Audience)),
    user_id=st.none() | st.sampled_from(USERS),
    conversation_id=conversations,
)


@settings(max_examples=2000, deadline=None)
@given(origin=origins, conversation=conversations, scope_key=st.sampled_from(SCOPES), reader=readers)
def test_no_record_reaches_a_wider_audience_than_its_origin(
    origin: Origin, conversation: str | None, scope_key: str, reader: Reader
) -> None:
    item = record(origin, conversation, scope_key)
    if may_show(item, reader):
        assert could_already_see(item, reader), (item, reader)


@settings(max_examples=1000, deadline=None)
@given(
    origin=st.sampled_from(("private", "mpim", "external")), scope_key=st.sampled_from(SCOPES), reader=readers
)
def test_another_kind_of_audience_sees_a_conversation_record_only_as_its_owner_alone(
    origin: Origin, scope_key: str, reader: Reader
) -> None:
    """In the record's own conversation, a reader of another audience kind (public, self, another
    conversation kind) is shown a private/mpim/external record only when it is the record's owner
    alone."""
    item = record(origin, reader.conversation_id, scope_key)
    if reader.audience != origin and may_show(item, reader):
        owner = record_owner(scope_key)
        assert reader.audience == "self" and owner is not None and reader.user_id == owner, (item, reader)


@settings(max_examples=500, deadline=None)
@given(conversation=conversations, scope_key=st.sampled_from(SCOPES), reader=readers)
def test_unknown_is_read_exactly_as_dm(conversation: str | None, scope_key: str, reader: Reader) -> None:
    assert may_show(record("unknown", conversation, scope_key), reader) == may_show(
        record("dm", conversation, scope_key), reader
    )


def test_public_and_machine_records_are_shown_anywhere_inside_the_organization() -> None:
    open_origins: tuple[Origin, ...] = ("public", "machine")
    for origin in open_origins:
        assert may_show(record(origin, None, "org:acme"), Reader("public", "slack:U2", "slack:C2"))


@settings(max_examples=1000, deadline=None)
@given(
    origin=origins,
    conversation=conversations,
    scope_key=st.sampled_from(SCOPES),
    user=st.none() | st.sampled_from(USERS),
    shared=st.sampled_from(CONVERSATIONS),
)
def test_a_channel_shared_with_another_organization_is_shown_only_what_was_learned_in_it(
    origin: Origin, conversation: str | None, scope_key: str, user: str | None, shared: str
) -> None:
    """Whatever the record's origin, scope or owner (the asker's own records too: the reply is not
    theirs alone), an external reader is shown it only when it was learned in that very channel."""
    item = record(origin, conversation, scope_key)
    expected = origin == "external" and conversation == shared
    assert may_show(item, Reader("external", user, shared)) == expected, item


def test_the_organizations_open_records_are_not_shown_in_a_shared_channel() -> None:
    for origin in ("public", "machine"):
        for scope_key in ("org:acme", "repo:acme/api", "channel:slack:C7", "user:slack:U1"):
            item = record(origin, "slack:C7", scope_key)
            assert not may_show(item, Reader("external", "slack:U1", "slack:C7")), item


def test_a_fact_from_a_shared_channel_stays_in_it_or_with_its_owner() -> None:
    fact = record("external", "slack:C7", "channel:slack:C7")
    assert may_show(fact, Reader("external", "slack:U2", "slack:C7"))
    assert not may_show(fact, Reader("external", "slack:U2", "slack:C8"))  # another shared channel
    assert not may_show(fact, Reader("public", "slack:U2", "slack:C7"))  # no longer shared
    assert not may_show(fact, Reader("public", "slack:U2", "slack:C1"))  # an internal public channel
    assert not may_show(fact, Reader("private", "slack:U2", "slack:C7"))
    assert not may_show(fact, Reader("self", "slack:U2", "slack:C7"))
    own = record("external", "slack:C7", "user:slack:U1")
    assert may_show(own, Reader("self", "slack:U1", "slack:D1"))  # privately, to the one who said it
    assert not may_show(own, Reader("public", "slack:U1", "slack:C1"))


def test_a_private_reply_in_a_shared_channel_reads_as_the_channel() -> None:
    """An ephemeral reply or `/memory` there may be to a member of the other organization."""
    reader = conversation_reader("external", user_id="slack:U2", channel_id="slack:C7", private_reply=True)
    assert reader == Reader("external", "slack:U2", "slack:C7")
    assert not may_show(record("public", None, "org:acme"), reader)


def test_a_dm_fact_reaches_its_owner_privately_and_nobody_else() -> None:
    fact = record("dm", "slack:D1", "user:slack:U1")
    assert may_show(fact, Reader("self", "slack:U1", "slack:D1"))  # the owner's DM
    assert may_show(fact, Reader("self", "slack:U1", None))  # the owner's terminal or App Home
    assert may_show(fact, Reader("self", "slack:U1", "slack:C1"))  # an ephemeral reply to the owner
    assert not may_show(fact, Reader("public", "slack:U1", "slack:C1"))  # the owner, in public
    assert not may_show(fact, Reader("private", "slack:U1", "slack:G1"))
    assert not may_show(fact, Reader("self", "slack:U2", "slack:D2"))  # someone else's DM


def test_a_private_fact_stays_in_its_conversation_or_with_its_owner() -> None:
    fact = record("private", "slack:G1", "channel:slack:G1")
    assert may_show(fact, Reader("private", "slack:U2", "slack:G1"))
    assert not may_show(fact, Reader("private", "slack:U2", "slack:G2"))
    assert not may_show(fact, Reader("public", "slack:U2", "slack:G1"))  # made public later
    assert not may_show(fact, Reader("self", "slack:U2", "slack:G1"))  # an ephemeral reply: a late joiner
    assert not may_show(
        record("mpim", "slack:G1", "channel:slack:G1"), Reader("private", "slack:U2", "slack:G1")
    )
    own = record("private", "slack:G1", "user:slack:U1")
    assert may_show(own, Reader("self", "slack:U1", "slack:D1"))
    assert not may_show(own, Reader("public", "slack:U1", "slack:C1"))


def test_a_dm_fact_in_a_shared_scope_is_shown_to_nobody_not_even_in_that_dm() -> None:
    """Issue 23: the old "in that DM" branch showed it to any `self` reader naming the DM."""
    fact = record("dm", "slack:D1", "channel:slack:D1")
    for reader in (
        Reader("self", "slack:U1", "slack:D1"),
        Reader("self", "slack:U2", "slack:D1"),  # a crafted Why? payload naming U1's DM
        Reader("self", None, "slack:D1"),
        Reader("private", "slack:U1", "slack:D1"),
    ):
        assert not may_show(fact, reader), reader


# Conversation ids a reader may claim: the record's own, the multi-workspace and look-alike forms of a
# DM, anything an attacker types into a payload.
FORGED = st.sampled_from(
    ("slack:D1", "slack:T1:D1", "slack:d1", "slack:D1 ", "D1", "slack:D1:1.0", "cli:local", "")
) | st.text(max_size=12)


@settings(max_examples=3000, deadline=None)
@given(
    origin=st.sampled_from(("dm", "unknown")),
    conversation=conversations,
    scope_key=st.sampled_from(SCOPES),
    audience=st.sampled_from(get_args(Audience)),
    user=st.none() | st.sampled_from((*USERS, "slack:U3", "slack:T1:U1", "U1", "user:slack:U1")),
    forged=FORGED,
    names_the_origin=st.booleans(),
)
def test_a_dm_record_is_shown_to_its_owner_alone_whatever_conversation_a_reader_names(
    origin: Origin,
    conversation: str | None,
    scope_key: str,
    audience: Audience,
    user: str | None,
    forged: str,
    names_the_origin: bool,
) -> None:
    """Readers × records: naming the record's own conversation (or a forgery of it) never stands in
    for being its owner, and the owner is shown it only privately."""
    item = record(origin, conversation, scope_key)
    reader = Reader(audience, user, conversation if names_the_origin else forged)
    owner = record_owner(scope_key)
    expected = audience == "self" and owner is not None and user == owner
    assert may_show(item, reader) == expected, (item, reader)


@settings(max_examples=1000, deadline=None)
@given(
    origin=st.sampled_from(("dm", "unknown")),
    scope_key=st.sampled_from(SCOPES),
    visibility=st.none() | st.sampled_from(("public", "private", "mpim", "dm", "machine", "shared")),
    user=st.sampled_from(USERS),
    forged=FORGED,
    private_reply=st.booleans(),
)
def test_no_surface_shows_another_persons_dm_record_through_a_forged_conversation(
    origin: Origin, scope_key: str, visibility: str | None, user: str, forged: str, private_reply: bool
) -> None:
    """Every surface builds its reader with `conversation_reader` (the Why? button, `/memory list`,
    the App Home, a run): a payload naming U1's DM as its channel gets U2 nothing of U1's."""
    item = record(origin, "slack:D1", scope_key)
    reader = conversation_reader(visibility, user_id=user, channel_id=forged, private_reply=private_reply)
    if may_show(item, reader):
        assert record_owner(scope_key) == user and reader.audience == "self", (item, reader)


def test_a_run_visibility_becomes_its_origin_and_anything_else_is_unknown() -> None:
    for visibility in ("public", "private", "mpim", "external", "dm", "machine"):
        assert origin_from_visibility(visibility) == visibility
    assert origin_from_visibility(None) == "unknown"
    assert origin_from_visibility("shared") == "unknown"


def test_the_narrower_of_two_labels_wins_and_a_tie_keeps_the_first() -> None:
    assert narrower(("public", "slack:C1"), ("dm", "slack:D1")) == ("dm", "slack:D1")
    assert narrower(("dm", "slack:D1"), ("dm", "slack:D1")) == ("dm", "slack:D1")
    assert narrower(("private", "slack:G1"), ("dm", "slack:G1")) == ("dm", "slack:G1")
    assert narrower(("machine", None), ("private", "slack:G1")) == ("private", "slack:G1")
    assert narrower(("public", "slack:C1"), ("machine", None)) == ("public", "slack:C1")


def test_two_narrow_labels_from_different_conversations_are_unknown() -> None:
    """REVIEW2 #5: a run in C2 restating (private, C1) keeps neither conversation's label."""
    assert narrower(("private", "slack:C2"), ("private", "slack:C1")) == ("unknown", None)
    assert narrower(("dm", "slack:D1"), ("private", "slack:G1")) == ("unknown", None)
    assert narrower(("private", "slack:G1"), ("mpim", "slack:M1")) == ("unknown", None)
    assert narrower(("external", "slack:C7"), ("external", "slack:C8")) == ("unknown", None)


def test_a_shared_channels_label_is_narrower_than_an_open_one() -> None:
    """No run in a shared channel is shown an open record, so a label from both is words typed in the
    shared channel (an edit of an org record typed there, a fact said there again): shown there only."""
    assert narrower(("public", "slack:C1"), ("external", "slack:C7")) == ("external", "slack:C7")
    assert narrower(("external", "slack:C7"), ("machine", None)) == ("external", "slack:C7")
    assert narrower(("external", "slack:C7"), ("dm", "slack:C7")) == ("dm", "slack:C7")


def test_a_channel_read_as_private_and_as_shared_has_no_common_audience() -> None:
    """The same channel before and after it was shared with another organization: neither label's
    audience holds the other's."""
    assert narrower(("private", "slack:C7"), ("external", "slack:C7")) == ("unknown", None)
    assert narrower(("external", "slack:C7"), ("private", "slack:C7")) == ("unknown", None)


labels = st.tuples(origins, conversations)


@settings(max_examples=1000, deadline=None)
@given(first=labels, second=labels, scope_key=st.sampled_from(SCOPES), reader=readers)
def test_the_narrower_label_of_two_from_different_conversations_shows_no_one_either_would_not(
    first: tuple[Origin, str | None], second: tuple[Origin, str | None], scope_key: str, reader: Reader
) -> None:
    assume(first[1] != second[1])
    # A shared channel's label restating an open one keeps the shared channel's: the words were typed
    # there (an edit typed in it, a fact said in it again); see the test below.
    assume({first[0], second[0]} & OPEN == set() or "external" not in (first[0], second[0]))
    origin, conversation = narrower(first, second)
    if may_show(record(origin, conversation, scope_key), reader):
        assert may_show(record(*first, scope_key), reader), (first, second, reader)
        assert may_show(record(*second, scope_key), reader), (first, second, reader)


def test_records_from_before_origins_get_conservative_labels() -> None:
    assert legacy_origin("org:acme") == ("public", None)
    assert legacy_origin("repo:acme/api") == ("public", None)
    assert legacy_origin("channel:slack:C0PRIV") == ("private", "slack:C0PRIV")
    assert legacy_origin("channel:slack:D0OLD") == ("dm", "slack:D0OLD")  # a DM's old channel scope
    assert legacy_origin("channel:slack:T1:D0OLD") == ("dm", "slack:T1:D0OLD")
    assert legacy_origin("user:slack:U1") == ("unknown", None)


def test_a_late_joiner_of_a_channel_made_public_is_not_shown_its_private_era_by_a_private_reply() -> None:
    """REVIEW2 #1: `/memory list channel` (an ephemeral reply) in C1, now public, by U9 who joined later."""
    fact = record("private", "slack:C1", "channel:slack:C1")
    unknown = record("unknown", "slack:C1", "channel:slack:C1")
    for visibility in ("public", None):
        reader = conversation_reader(
            visibility, user_id="slack:U9", channel_id="slack:C1", private_reply=True
        )
        assert not may_show(fact, reader)
        assert not may_show(unknown, reader)
