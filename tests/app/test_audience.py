"""The one mapping from a message to the Reader of its reply."""

from __future__ import annotations

import pytest

from app.audience import conversation_reader, reader_for
from app.incoming import ChannelVisibility, IncomingMessage
from memory.rules.visibility import Reader


def incoming(visibility: ChannelVisibility | None, channel: str | None = "slack:C1") -> IncomingMessage:
    return IncomingMessage(
        text="hi",
        thread_key="slack:C1:1.0",
        surface="slack",
        user_id="slack:U1",
        channel_id=channel,
        channel_visibility=visibility,
    )


@pytest.mark.parametrize(
    ("visibility", "audience"),
    [
        ("public", "public"),
        ("private", "private"),
        ("mpim", "mpim"),
        ("dm", "self"),  # a DM with the bot is the asker's alone
        ("machine", "self"),  # the terminal chat too
        (None, "public"),  # could not tell: read as the widest audience, which shows the least
    ],
)
def test_a_conversations_visibility_is_who_reads_the_reply(
    visibility: ChannelVisibility | None, audience: str
) -> None:
    assert reader_for(incoming(visibility)) == Reader(audience, "slack:U1", "slack:C1")  # type: ignore[arg-type]


@pytest.mark.parametrize("visibility", ["private", "mpim", "dm"])
def test_a_private_reply_is_the_askers_alone_wherever_it_is_shown(
    visibility: ChannelVisibility | None,
) -> None:
    reader = conversation_reader(visibility, user_id="slack:U1", channel_id="slack:C1", private_reply=True)
    assert reader == Reader("self", "slack:U1", "slack:C1")


@pytest.mark.parametrize("visibility", ["public", "machine", None])
def test_a_private_reply_in_a_public_or_unknown_channel_reads_as_the_asker_outside_it(
    visibility: ChannelVisibility | None,
) -> None:
    """Its asker may have joined after the channel's private era (REVIEW2 #1): no conversation."""
    reader = conversation_reader(visibility, user_id="slack:U1", channel_id="slack:C1", private_reply=True)
    assert reader == Reader("self", "slack:U1", None)
