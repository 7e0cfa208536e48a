"""What the bot knows about channels and threads, and the Web API reads that refresh it: each
channel's visibility (briefly cached) and each thread's messages (the thread cache)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.incoming import ChannelVisibility
from app.slack.events import (
    SlackIdentity,
    sharing_change,
    thread_root,
    visibility_from_channel_type,
    visibility_from_conversation,
)
from app.slack.options import SlackOptions
from app.slack.state import TtlCache
from app.slack.thread_cache import ThreadCache

log = structlog.get_logger("slack")

# conversations.replies pages of 200; a thread longer than this is trimmed anyway.
REPLIES_PAGE_SIZE = 200
MAX_REPLIES_PAGES = 5


class Conversations:
    """Channel visibility and thread messages, from the events seen first and the Web API after."""

    def __init__(self, client: AsyncWebClient, identity: SlackIdentity, options: SlackOptions) -> None:
        self._client = client
        self._identity = identity
        self._visibility_cache: TtlCache[ChannelVisibility] = TtlCache(
            ttl=options.channel_cache_ttl_seconds, max_size=10_000
        )
        self._threads = ThreadCache(max_threads=options.thread_memory_max_entries)

    def note_visibility(self, channel: str, channel_type: object, ext_shared: object = None) -> None:
        """Every event that names its channel's type is the freshest word on it — the twin of an
        app_mention, a message nobody addressed to us, Slack's own "made this channel private" notice
        (a `channel_convert_to_private` message), its envelope's word that the channel is shared with
        another organization — so it replaces what conversations.info said."""
        visibility = visibility_from_channel_type(channel_type, ext_shared)
        if channel and visibility is not None:
            self._visibility_cache.put(channel, visibility)

    def sharing_changed(self, event: Mapping[str, Any]) -> None:
        """Slack says a channel was shared with another organization, or no longer is (SHARING_EVENTS):
        the cached visibility changes now, not at the channel's next event or the cache's expiry.
        Shared reads as `external` at once; no longer shared is forgotten, so the next read asks
        conversations.info what the channel is now."""
        change = sharing_change(event)
        if change is None:
            return
        channel, shared = change
        if shared:
            self._visibility_cache.put(channel, "external")
        else:
            self._visibility_cache.discard(channel)
        log.info("slack.channel_sharing", event_type=event.get("type"), channel=channel, shared=shared)

    def observe(self, team_id: str | None, event: Mapping[str, Any]) -> None:
        """Every message event feeds the thread cache, answered or not (app/slack/thread_cache.py)."""
        channel = event.get("channel")
        if not isinstance(channel, str) or not channel:
            return
        source = event
        if event.get("subtype") in ("message_changed", "message_deleted"):
            inner = event.get("message") or event.get("previous_message")
            source = inner if isinstance(inner, Mapping) else event
        key = self._identity.thread_key(team_id, channel, thread_root(source))
        self._threads.observe(key, event)

    def seen_visibility(
        self, channel: str, channel_type: object, ext_shared: object = None
    ) -> ChannelVisibility | None:
        """What the events already said (this one's channel type and envelope, else an earlier one's),
        with no Web API call: all the bot needs with memory off, which has no write gate or read rule
        to feed."""
        visibility = visibility_from_channel_type(channel_type, ext_shared)
        return visibility if visibility is not None else self._visibility_cache.get(channel)

    async def visibility(
        self, channel: str, channel_type: object, ext_shared: object = None
    ) -> ChannelVisibility | None:
        """What the events said, else conversations.info (briefly cached); None when Slack cannot say."""
        seen = self.seen_visibility(channel, channel_type, ext_shared)
        if seen is not None:
            return seen
        try:
            response = await self._client.conversations_info(channel=channel)
        except SlackClientError as error:
            log.warning("slack.channel_info_failed", channel=channel, error=type(error).__name__)
            return None
        info = response.get("channel") or {}
        visibility = visibility_from_conversation(info)
        if visibility is not None:
            self._visibility_cache.put(channel, visibility)
        return visibility

    def cached_thread(self, thread_key: str) -> Sequence[Mapping[str, Any]] | None:
        """The thread's messages when the cache holds the whole thread, else None."""
        return self._threads.messages(thread_key)

    async def thread_messages(self, thread_key: str, channel: str, thread_ts: str) -> list[Mapping[str, Any]]:
        """From the thread cache when it has the whole thread; else one fetch, which then seeds it."""
        cached = self._threads.messages(thread_key)
        if cached is not None:
            log.info("slack.thread_cache", action="hit", channel=channel, messages=len(cached))
            return list(cached)
        log.info("slack.thread_cache", action="fetch", channel=channel)
        fetched = await self._fetch_replies(channel, thread_ts)
        self._threads.seed(thread_key, fetched)
        return fetched

    def record_reply(self, thread_key: str, message: Mapping[str, Any]) -> None:
        """The bot's own reply, as posted, so the next turn's history has it without a fetch."""
        self._threads.record_reply(thread_key, message)

    async def _fetch_replies(self, channel: str, thread_ts: str) -> list[Mapping[str, Any]]:
        messages: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_REPLIES_PAGES):
            response = await self._client.conversations_replies(
                channel=channel, ts=thread_ts, limit=REPLIES_PAGE_SIZE, cursor=cursor
            )
            messages.extend(response.get("messages") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not response.get("has_more") or not cursor:
                break
        return messages
