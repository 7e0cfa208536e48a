"""Answering a message the router accepted (a mention, a DM, a follow-up in a bot thread): the Slack
event becomes an IncomingMessage with its history and sources, and goes to the dispatcher with a
thread surface to answer on. A failure becomes a ⚠️ notice with a reference, never silence.

The channel's visibility feeds only memory (the write gate, the read rule): with memory off it is
what the events said, and no `conversations.info` call is made for it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.incoming import HistoryTurn, IncomingMessage
from app.slack.agent_view import TitledConversation, set_title
from app.slack.conversations import Conversations
from app.slack.events import SURFACE, SlackIdentity, history_from_replies, is_thread_reply, message_text
from app.slack.format import mentioned_users
from app.slack.options import SlackOptions
from app.slack.people import People
from app.slack.provenance import source_messages
from app.slack.state import TtlCache
from app.slack.surface import SlackThreadSurface
from app.slack.tasks import Spawn
from app.surface import Surface
from commands.provenance import Permalinks
from ops.tracing import SpanKind, span

log = structlog.get_logger("slack")

WARNING_REPLY = "⚠️ Something went wrong while I was answering this (reference `{ref}`). Please try again."
EMPTY_MENTION_REPLY = "👋 Hi! Ask me something in this thread and I'll answer here."


class Dispatcher(Protocol):
    """What the Slack surface needs from the bot's runtime (app/dispatch.py)."""

    async def dispatch(self, message: IncomingMessage, surface: Surface) -> object: ...


@dataclass(frozen=True, slots=True)
class Job:
    """One message to answer, with what the event told us about where it came from."""

    event: Mapping[str, Any]
    event_id: str
    team_id: str | None
    user_team_id: str | None
    channel: str
    # The envelope's is_ext_shared_channel, or an asker from another organization: read as external
    # (with memory on, a guest of the workspace too: app/slack/people.py).
    ext_shared: bool
    ts: str
    thread_ts: str
    bot_user_id: str | None
    bot_id: str | None
    # The thread as the router already fetched it (a follow-up check); None: not fetched yet.
    replies: tuple[Mapping[str, Any], ...] | None = None
    # The event's envelope (whether it names an Enterprise Grid org).
    body: Mapping[str, Any] = field(default_factory=dict)


class MessageAnswerer:
    """Turns an accepted message into the dispatcher's call, on a surface bound to its thread."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        client: AsyncWebClient,
        identity: SlackIdentity,
        conversations: Conversations,
        options: SlackOptions,
        runs: TtlCache[tuple[str, ...]],
        spawn: Spawn,
        people: People,
        memory_on: bool = False,
        permalinks: Permalinks | None = None,
    ) -> None:
        self._people = people
        self._dispatcher = dispatcher
        self._permalinks = permalinks  # the thinking steps link the threads recalled notes came from
        self._memory_on = memory_on
        self._client = client
        self._identity = identity
        self._conversations = conversations
        self._options = options
        # run id → the memory records it read, for the feedback a click on its answer logs.
        self._runs = runs
        self._spawn = spawn

    async def answer(self, job: Job, thread_key: str) -> None:
        """One event's answer under its root `slack.event` span (ids only, never the text)."""
        attributes = {"slack.event_id": job.event_id, "slack.event.type": str(job.event.get("type") or "")}
        with span("slack.event", attributes, kind=SpanKind.CONSUMER):
            await self._answer_event(job, thread_key)

    async def _answer_event(self, job: Job, thread_key: str) -> None:
        surface = SlackThreadSurface(
            self._client,
            channel=job.channel,
            thread_ts=job.thread_ts,
            message_ts=job.ts,
            team_id=job.user_team_id,
            user_id=str(job.event.get("user") or "") or None,
            options=self._options.reply,
            on_run=self._runs.put,
            on_posted=self._reply_recorder(thread_key, job),
            permalinks=self._permalinks,
            named=mentioned_users(str(job.event.get("text") or "")),
        )
        ref = uuid.uuid4().hex[:8]
        try:
            message = await self._incoming(job, thread_key)
            if message is None:
                await surface.post_notice(EMPTY_MENTION_REPLY)
                return
            log.info(
                "slack.dispatch",
                event_id=job.event_id,
                channel=job.channel,
                thread_ts=job.thread_ts,
                visibility=message.channel_visibility,
                history_turns=len(message.history),
            )
            await self._dispatcher.dispatch(message, self._titled(job, message, surface))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.error(
                "slack.answer_failed",
                ref=ref,
                event_id=job.event_id,
                channel=job.channel,
                error=type(error).__name__,
                exc_info=True,
            )
            with contextlib.suppress(Exception):
                await surface.post_notice(WARNING_REPLY.format(ref=ref))
        finally:
            with contextlib.suppress(Exception):
                await surface.finish()

    async def _incoming(self, job: Job, thread_key: str) -> IncomingMessage | None:
        """The event in the bot's own terms; None when the mention says nothing."""
        text = message_text(job.event, job.bot_user_id)
        if not text:
            return None
        channel_type = job.event.get("channel_type")
        user = str(job.event.get("user") or "") or None
        if self._memory_on:
            outsider = job.ext_shared or await self._people.outsider(job.body, job.event, user, job.team_id)
            visibility = await self._conversations.visibility(job.channel, channel_type, outsider)
        else:
            visibility = self._conversations.seen_visibility(job.channel, channel_type, job.ext_shared)
        history = await self._history(job, thread_key)
        return IncomingMessage(
            text=text,
            thread_key=thread_key,
            surface=SURFACE,
            user_id=self._identity.user(job.user_team_id, user),
            channel_id=self._identity.channel(job.team_id, job.channel),
            channel_visibility=visibility,
            history=history,
            source_messages=self._sources(job, thread_key),
        )

    def _titled(self, job: Job, message: IncomingMessage, surface: SlackThreadSurface) -> Surface:
        """A new agent conversation (a top-level DM) gets its title once the agent starts on it."""
        if message.channel_visibility != "dm" or is_thread_reply(job.event):
            return surface

        def title() -> None:
            self._spawn(set_title(self._client, job.channel, job.ts, message.text), name="slack-title")

        return TitledConversation(surface, title)

    async def _history(self, job: Job, thread_key: str) -> tuple[HistoryTurn, ...]:
        if not is_thread_reply(job.event):
            return ()
        replies = job.replies
        if replies is None:
            try:
                replies = tuple(
                    await self._conversations.thread_messages(thread_key, job.channel, job.thread_ts)
                )
            except SlackClientError as error:
                log.warning("slack.history_failed", channel=job.channel, error=type(error).__name__)
                return ()
        return history_from_replies(
            replies,
            current_ts=job.ts,
            bot_user_id=job.bot_user_id,
            bot_id=job.bot_id,
            max_turns=self._options.history_max_turns,
            max_chars=self._options.history_max_chars,
            asker=str(job.event.get("user") or "") or None,
        )

    def _sources(self, job: Job, thread_key: str) -> tuple[str, ...]:
        """The messages this run reads: the thread so far (from the history's fetch) and this one."""
        replies: Sequence[Mapping[str, Any]] = ()
        if is_thread_reply(job.event):
            replies = (
                job.replies
                if job.replies is not None
                else (self._conversations.cached_thread(thread_key) or ())
            )
        return source_messages(self._identity.channel(job.team_id, job.channel), job.ts, replies)

    def _reply_recorder(self, thread_key: str, job: Job) -> Callable[[str, str], None]:
        def record(ts: str, text: str) -> None:
            message = {"ts": ts, "thread_ts": job.thread_ts, "user": job.bot_user_id, "bot_id": job.bot_id}
            self._conversations.record_reply(thread_key, {**message, "text": text})

        return record
