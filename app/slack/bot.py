"""The Slack surface: a slack-bolt AsyncApp that turns mentions, DMs and thread follow-ups into
IncomingMessages for the dispatcher, and the `/memory` slash command into a registry call.

Every event is acknowledged at once; the work happens in a tracked background task (so shutdown can
wait for it). A redelivered event (same `event_id`) and the twin delivery of one message (`app_mention`
plus `message.channels` for the same `channel`/`ts`) are recognised before any task starts, so a
message is answered at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from aiohttp import web
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from app.audience import conversation_reader
from app.incoming import ChannelVisibility, HistoryTurn, IncomingMessage
from app.slack.agent_view import legacy_thread, set_suggested_prompts, set_title
from app.slack.events import (
    SURFACE,
    SlackIdentity,
    addressed_to_someone_else,
    history_from_replies,
    is_thread_reply,
    mentions_user,
    message_text,
    skip_reason,
    thread_has_bot,
    thread_root,
    user_team,
    visibility_from_channel_type,
    visibility_from_conversation,
    visibility_from_slash_channel,
)
from app.slack.feedback import FEEDBACK_ACTION, parse_feedback
from app.slack.format import POST_TEXT_LIMIT, markdown_to_mrkdwn, split_message
from app.slack.home import HomeTab
from app.slack.home import Permalinks as SlackPermalinks
from app.slack.home_view import HOME_ACTIONS, HomeState
from app.slack.http import HEALTH_PATH, build_web_app
from app.slack.provenance import (
    CHANNEL_DELETED_EVENTS,
    SOURCE_SUBTYPES,
    WHY_ACTION,
    SourceChange,
    action_value,
    deleted_channel_scope,
    source_change,
    source_messages,
)
from app.slack.state import RecentKeys, TtlCache
from app.slack.surface import ReplyOptions, SlackThreadSurface
from app.slack.thread_cache import ThreadCache
from app.surface import Surface
from commands.browse import MemoryBrowser
from commands.provenance import Permalinks, explain_run, render_why
from memory.rules.visibility import Reader
from memory.types import MemoryStore
from ops.http_guard import ConnectionGuard, GuardLimits
from ops.metrics import CONTENT_TYPE, METRICS_PATH, OTHER_ROUTE, Metrics, scrape_allowed
from ops.tracing import SpanKind, span

log = structlog.get_logger("slack")

EVENTS_PATH = "/slack/events"
WARNING_REPLY = "⚠️ Something went wrong while I was answering this (reference `{ref}`). Please try again."
EMPTY_MENTION_REPLY = "👋 Hi! Ask me something in this thread and I'll answer here."
SLASH_USAGE = (
    "Usage: `/memory list [words…] [--scope me|org|repo|channel|all] [--limit N]` or `/memory forget <id>`"
)
# conversations.replies pages of 200; a thread longer than this is trimmed anyway.
REPLIES_PAGE_SIZE = 200
MAX_REPLIES_PAGES = 5
# A response_url accepts five responses; a longer command answer is cut there.
MAX_SLASH_RESPONSES = 5


class Dispatcher(Protocol):
    """What the Slack surface needs from the bot's runtime (app/dispatch.py)."""

    async def dispatch(self, message: IncomingMessage, surface: Surface) -> object: ...


class CommandReplyLike(Protocol):
    @property
    def text(self) -> str: ...


class CommandHandler(Protocol):
    """What the slash command needs from the command registry (commands/registry.py)."""

    async def handle(self, text: str, caller: Any) -> CommandReplyLike | None: ...


CallerFactory = Callable[..., Any]
ChannelRepo = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class SlackOptions:
    """The adapter's knobs (the `slack` settings section maps onto these)."""

    multi_workspace: bool = False
    allow_bots: bool = False
    history_max_turns: int = 40
    history_max_chars: int = 24_000
    reply: ReplyOptions = field(default_factory=ReplyOptions)
    slash_command: str = "/memory"
    dedupe_ttl_seconds: float = 6 * 3600
    dedupe_max_entries: int = 50_000
    thread_memory_ttl_seconds: float = 7 * 24 * 3600
    thread_memory_max_entries: int = 20_000
    # A channel's visibility from conversations.info is trusted this long: a conversion inside the
    # window is caught by the next message event's channel_type (which refreshes the entry), not later.
    channel_cache_ttl_seconds: float = 60
    not_a_bot_thread_ttl_seconds: float = 60


@dataclass(frozen=True, slots=True)
class _Job:
    """One message to answer, with what the event told us about where it came from."""

    event: Mapping[str, Any]
    event_id: str
    team_id: str | None
    user_team_id: str | None
    channel: str
    ts: str
    thread_ts: str
    bot_user_id: str | None
    bot_id: str | None
    replies: tuple[Mapping[str, Any], ...] | None = None


def make_web_client(token: str | None, base_url: str | None = None) -> AsyncWebClient:
    """The Web API client with the SDK's retry handlers: connection errors and 429 rate limits."""
    kwargs: dict[str, Any] = {}
    if base_url:
        kwargs["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
    return AsyncWebClient(
        token=token,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
        **kwargs,
    )


def registry_caller(**fields: Any) -> Any:
    """The command registry's own Caller (imported late: the adapter does not need the registry)."""
    from commands.registry import Caller

    return Caller(**fields)


class SlackBot:
    """The Bolt app plus what it needs to answer exactly once: dedupe memory, bot-thread memory,
    channel visibility cache, and the set of background tasks shutdown waits for."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        bot_token: str,
        signing_secret: str | None,
        registry: CommandHandler | None = None,
        client: AsyncWebClient | None = None,
        base_url: str | None = None,
        options: SlackOptions | None = None,
        caller_factory: CallerFactory = registry_caller,
        channel_repo: ChannelRepo | None = None,
        browser: MemoryBrowser | None = None,
        memory_store: MemoryStore | None = None,
        permalinks: Permalinks | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        # Memory follows Slack (app/slack/provenance.py): edits, deletions, Why?. None: memory is off.
        self._memory = memory_store
        self._registry = registry
        self.signing_secret = signing_secret
        self._options = options or SlackOptions()
        self._identity = SlackIdentity(multi_workspace=self._options.multi_workspace)
        self._caller_factory = caller_factory
        self._channel_repo = channel_repo
        self.client = client or make_web_client(bot_token, base_url)
        self.permalinks: Permalinks = permalinks or SlackPermalinks(self.client)  # app/slack/home.py
        opts = self._options
        self._seen_events = RecentKeys(ttl=opts.dedupe_ttl_seconds, max_size=opts.dedupe_max_entries)
        self._claimed_messages = RecentKeys(ttl=opts.dedupe_ttl_seconds, max_size=opts.dedupe_max_entries)
        self._bot_threads = RecentKeys(
            ttl=opts.thread_memory_ttl_seconds, max_size=opts.thread_memory_max_entries
        )
        self._not_bot_threads = RecentKeys(ttl=opts.not_a_bot_thread_ttl_seconds, max_size=10_000)
        self._visibility_cache: TtlCache[ChannelVisibility] = TtlCache(
            ttl=opts.channel_cache_ttl_seconds, max_size=10_000
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepting = True
        self._thread_cache = ThreadCache(max_threads=opts.thread_memory_max_entries)
        # run id → the memory records it read, for the feedback a click on its answer logs.
        self._runs: TtlCache[tuple[str, ...]] = TtlCache(ttl=opts.thread_memory_ttl_seconds, max_size=20_000)
        self._home = HomeTab(
            client=self.client,
            browser=browser,
            registry=registry,
            caller_factory=caller_factory,
            identity=self._identity,
        )
        bolt_logger = logging.getLogger("slack_bolt.switchboard")
        # Bolt also reads SLACK_BOT_TOKEN itself and warns that our client wins; it does, on purpose.
        bolt_logger.setLevel(logging.ERROR)
        self.app = AsyncApp(
            client=self.client,
            logger=bolt_logger,
            signing_secret=signing_secret or "",
            request_verification_enabled=signing_secret is not None,
            # Listeners below only claim the event and start a task, so the ack is immediate and the
            # claim happens before the response: a retry can never race its original.
            process_before_response=True,
        )
        bolt_logger.setLevel(logging.NOTSET)
        self._register()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """False once draining: /healthz says 503 and new deliveries get one too."""
        return self._accepting

    @property
    def pending(self) -> int:
        return sum(1 for task in self._tasks if not task.done())

    def stop_accepting(self) -> None:
        """From now on Slack gets a 503 (and retries later, elsewhere) instead of a new run here."""
        self._accepting = False

    async def drain(self, within: float | None = None) -> bool:
        """Wait for every started answer; True when all finished within `within` seconds."""
        while self._tasks:
            pending = [task for task in self._tasks if not task.done()]
            if not pending:
                break
            _, still = await asyncio.wait(pending, timeout=within)
            if still:
                return False
        return True

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        session = getattr(self.client, "session", None)
        if session is not None and not session.closed:
            await session.close()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- Bolt wiring -----------------------------------------------------------------------------

    def _register(self) -> None:
        app = self.app

        @app.middleware
        async def refuse_when_stopping(
            req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
        ) -> BoltResponse | None:
            if not self._accepting:
                return BoltResponse(status=503, body="shutting down")
            return await next()

        @app.event("app_mention")
        async def on_app_mention(
            body: dict[str, Any], event: dict[str, Any], context: Any, request: AsyncBoltRequest
        ) -> None:
            self._accept_event(body, event, context, "app_mention", _retry_num(request))

        @app.event("message")
        async def on_message(
            body: dict[str, Any], event: dict[str, Any], context: Any, request: AsyncBoltRequest
        ) -> None:
            self._accept_event(body, event, context, "message", _retry_num(request))

        @app.event("app_home_opened")
        async def on_app_home_opened(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
            self._on_app_home_opened(body, event, context)

        @app.event("assistant_thread_started")
        async def on_assistant_thread_started(body: dict[str, Any], event: dict[str, Any]) -> None:
            self._on_assistant_thread_started(body, event)

        @app.action(re.compile(f"^({'|'.join(HOME_ACTIONS)})"))
        async def on_home_action(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()  # within Slack's 3 s; the work (and the re-publish) runs in the background
            self._spawn(self._home.on_action(body, action), name="slack-home-action")

        @app.action(FEEDBACK_ACTION)
        async def on_feedback(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            self._log_feedback(body, action)

        @app.action(WHY_ACTION)
        async def on_why(ack: Any, body: dict[str, Any], respond: Any, context: Any) -> None:
            await ack()
            self._spawn(self._why(body, respond, context.team_id), name="slack-why")

        for deleted in CHANNEL_DELETED_EVENTS:

            @app.event(deleted)
            async def on_channel_deleted(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
                self._accept_channel_deleted(body, event, context)

        @app.command(self._options.slash_command)
        async def on_slash(ack: Any, command: dict[str, Any], respond: Any, context: Any) -> None:
            await ack()
            self._spawn(self._run_slash(command, respond, context.team_id), name="slack-slash")

    def _on_app_home_opened(self, body: Mapping[str, Any], event: Mapping[str, Any], context: Any) -> None:
        user = str(event.get("user") or "")
        team_id = body.get("team_id") or context.team_id
        tab = event.get("tab")
        log.info("slack.event", event_id=body.get("event_id"), event_type="app_home_opened", tab=tab)
        if not user:
            return
        if tab == "home":
            home = self._home.publish(team_id, user, HomeState(), user_team=user_team(event, team_id))
            self._spawn(home, name="slack-home-publish")
        elif tab == "messages" and event.get("channel"):  # the Agent messaging experience's DM
            self._spawn(set_suggested_prompts(self.client, str(event["channel"])), name="slack-prompts")

    def _on_assistant_thread_started(self, body: Mapping[str, Any], event: Mapping[str, Any]) -> None:
        """The Assistant experience (manifest `assistant_view`), still served while workspaces move."""
        thread = legacy_thread(event)
        log.info("slack.event", event_id=body.get("event_id"), event_type="assistant_thread_started")
        if thread is not None:
            channel, thread_ts = thread
            self._spawn(set_suggested_prompts(self.client, channel, thread_ts), name="slack-prompts")

    def _log_feedback(self, body: Mapping[str, Any], action: Mapping[str, Any]) -> None:
        click = parse_feedback(action)
        user = str((body.get("user") or {}).get("id") or "")
        if click is None:
            log.warning("slack.feedback_refused", user=user, reason="unknown_value")
            return
        records = self._runs.get(click.run_id)
        log.info(
            "answer.feedback",
            run_id=click.run_id,
            value=click.verdict,
            memory_record_ids=list(records) if records is not None else None,
            user=user,
            channel=str((body.get("channel") or {}).get("id") or "") or None,
        )

    def _accept_event(
        self,
        body: Mapping[str, Any],
        event: Mapping[str, Any],
        context: Any,
        kind: str,
        retry_num: str | None,
    ) -> None:
        """Synchronous on purpose: every check-and-claim happens before the ack leaves."""
        event_id = str(body.get("event_id") or "")
        channel = str(event.get("channel") or "")
        self._observe(body, event, context)
        fields = {"event_id": event_id, "event_type": kind, "channel": channel, "ts": event.get("ts")}
        if retry_num is not None:
            fields["retry_num"] = retry_num
        if event_id and not self._seen_events.claim(event_id):
            log.info("slack.event", action="duplicate", **fields)
            return
        self._note_visibility(channel, event.get("channel_type"))
        if kind == "message" and event.get("subtype") in SOURCE_SUBTYPES:
            self._accept_source_change(body, event, context, fields)
            return
        bot_user_id: str | None = context.bot_user_id
        bot_id: str | None = context.bot_id
        reason = skip_reason(
            event, bot_user_id=bot_user_id, bot_id=bot_id, allow_bots=self._options.allow_bots
        )
        if reason is not None:
            log.info("slack.event", action="ignored", reason=reason, **fields)
            return
        team_id = body.get("team_id") or context.team_id
        job = _Job(
            event=event,
            event_id=event_id,
            team_id=team_id,
            user_team_id=user_team(event, team_id),
            channel=channel,
            ts=str(event.get("ts") or ""),
            thread_ts=thread_root(event),
            bot_user_id=bot_user_id,
            bot_id=bot_id,
        )
        thread_key = self._identity.thread_key(team_id, channel, job.thread_ts)
        addressed = (
            kind == "app_mention"
            or event.get("channel_type") == "im"
            or mentions_user(str(event.get("text") or ""), bot_user_id)
        )
        if addressed:
            self._start(job, thread_key, fields, "mention")
        elif addressed_to_someone_else(str(event.get("text") or ""), bot_user_id):
            log.info("slack.event", action="ignored", reason="addressed_to_someone_else", **fields)
        elif thread_key in self._bot_threads:
            self._start(job, thread_key, fields, "follow_up")
        elif is_thread_reply(event) and thread_key not in self._not_bot_threads:
            log.info("slack.event", action="checking_thread", **fields)
            self._spawn(self._follow_up_if_bot_thread(job, thread_key, fields), name="slack-thread-check")
        else:
            log.info("slack.event", action="ignored", reason="not_addressed", **fields)

    def _note_visibility(self, channel: str, channel_type: object) -> None:
        """Every event that names its channel's type is the freshest word on it — the twin of an
        app_mention, a message nobody addressed to us, Slack's own "made this channel private" notice
        (a `channel_convert_to_private` message) — so it replaces what conversations.info said."""
        visibility = visibility_from_channel_type(channel_type)
        if channel and visibility is not None:
            self._visibility_cache.put(channel, visibility)

    def _observe(self, body: Mapping[str, Any], event: Mapping[str, Any], context: Any) -> None:
        """Every message event feeds the thread cache, answered or not (app/slack/thread_cache.py)."""
        channel = event.get("channel")
        if not isinstance(channel, str) or not channel:
            return
        source = event
        if event.get("subtype") in ("message_changed", "message_deleted"):
            inner = event.get("message") or event.get("previous_message")
            source = inner if isinstance(inner, Mapping) else event
        key = self._identity.thread_key(body.get("team_id") or context.team_id, channel, thread_root(source))
        self._thread_cache.observe(key, event)

    def _start(self, job: _Job, thread_key: str, fields: Mapping[str, Any], how: str) -> None:
        if not self._claimed_messages.claim(f"{job.team_id}:{job.channel}:{job.ts}"):
            log.info("slack.event", action="twin", **fields)
            return
        self._bot_threads.add(thread_key)
        log.info("slack.event", action="accepted", how=how, **fields)
        self._spawn(self._answer(job, thread_key), name=f"slack-answer-{job.channel}-{job.ts}")

    async def _follow_up_if_bot_thread(self, job: _Job, thread_key: str, fields: Mapping[str, Any]) -> None:
        """A thread reply without a mention: ours only when the bot already speaks in that thread."""
        try:
            replies = await self._thread_messages(thread_key, job.channel, job.thread_ts)
        except SlackClientError as error:
            log.warning("slack.thread_check_failed", channel=job.channel, error=type(error).__name__)
            return
        if not thread_has_bot(replies, job.bot_user_id, job.bot_id):
            self._not_bot_threads.add(thread_key)
            log.info("slack.event", action="ignored", reason="not_a_bot_thread", **fields)
            return
        job = dataclasses.replace(job, replies=tuple(replies))
        self._start(job, thread_key, fields, "follow_up")

    # ---- answering -------------------------------------------------------------------------------

    async def _answer(self, job: _Job, thread_key: str) -> None:
        """One event's answer under its root `slack.event` span (ids only, never the text)."""
        attributes = {"slack.event_id": job.event_id, "slack.event.type": str(job.event.get("type") or "")}
        with span("slack.event", attributes, kind=SpanKind.CONSUMER):
            await self._answer_event(job, thread_key)

    async def _answer_event(self, job: _Job, thread_key: str) -> None:
        surface = SlackThreadSurface(
            self.client,
            channel=job.channel,
            thread_ts=job.thread_ts,
            message_ts=job.ts,
            team_id=job.user_team_id,
            user_id=str(job.event.get("user") or "") or None,
            options=self._options.reply,
            on_run=self._runs.put,
            on_posted=self._reply_recorder(thread_key, job),
        )
        ref = uuid.uuid4().hex[:8]
        try:
            text = message_text(job.event, job.bot_user_id)
            if not text:
                await surface.post_notice(EMPTY_MENTION_REPLY)
                return
            visibility = await self._visibility(job.channel, job.event.get("channel_type"))
            if visibility == "dm" and not is_thread_reply(job.event):  # a new agent conversation
                self._spawn(set_title(self.client, job.channel, job.ts, text), name="slack-title")
            history = await self._history(job, thread_key)
            message = IncomingMessage(
                text=text,
                thread_key=thread_key,
                surface=SURFACE,
                user_id=self._identity.user(job.user_team_id, str(job.event.get("user") or "") or None),
                channel_id=self._identity.channel(job.team_id, job.channel),
                channel_visibility=visibility,
                history=history,
                source_messages=self._sources(job, thread_key),
            )
            log.info(
                "slack.dispatch",
                event_id=job.event_id,
                channel=job.channel,
                thread_ts=job.thread_ts,
                visibility=visibility,
                history_turns=len(history),
            )
            await self._dispatcher.dispatch(message, surface)
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

    # ---- memory follows Slack (app/slack/provenance.py) -------------------------------------------

    def _sources(self, job: _Job, thread_key: str) -> tuple[str, ...]:
        """The messages this run reads: the thread so far (from the history's fetch) and this one."""
        replies: Sequence[Mapping[str, Any]] = ()
        if is_thread_reply(job.event):
            replies = (
                job.replies if job.replies is not None else (self._thread_cache.messages(thread_key) or ())
            )
        return source_messages(self._identity.channel(job.team_id, job.channel), job.ts, replies)

    def _accept_source_change(
        self, body: Mapping[str, Any], event: Mapping[str, Any], context: Any, fields: Mapping[str, Any]
    ) -> None:
        change = source_change(
            event,
            self._identity,
            body.get("team_id") or context.team_id,
            bot_user_id=context.bot_user_id,
            bot_id=context.bot_id,
        )
        if change is None or self._memory is None:
            log.info("slack.event", action="ignored", reason="no_memory_change", **fields)
            return
        log.info("slack.event", action="source_changed", erase_reason=change.reason, **fields)
        self._spawn(self._erase_sources(change), name="slack-source-change")

    async def _erase_sources(self, change: SourceChange) -> None:
        assert self._memory is not None
        try:
            erased = await self._memory.erase_sources([change.message], change.reason)
        except Exception as error:
            log.warning("slack.source_erase_failed", reason=change.reason, error=type(error).__name__)
            return
        log.info("memory.source_erased", reason=change.reason, erased=erased)

    def _accept_channel_deleted(
        self, body: Mapping[str, Any], event: Mapping[str, Any], context: Any
    ) -> None:
        scope = deleted_channel_scope(event, self._identity, body.get("team_id") or context.team_id)
        log.info(
            "slack.event",
            event_id=body.get("event_id"),
            event_type=event.get("type"),
            action="channel_deleted",
        )
        if scope is not None and self._memory is not None:
            self._spawn(self._erase_channel(scope), name="slack-channel-deleted")

    async def _erase_channel(self, scope: str) -> None:
        assert self._memory is not None
        try:
            erased = await self._memory.erase_scope(scope, "channel_deleted")
        except Exception as error:
            log.warning("slack.channel_erase_failed", scope_key=scope, error=type(error).__name__)
            return
        log.info("memory.channel_erased", scope_key=scope, erased=erased)

    async def _why(self, body: Mapping[str, Any], respond: Any, team_id: str | None) -> None:
        """*Why?*: the records the run read, to the one who clicked, ephemerally, under the read rule."""
        run_id = action_value(body, WHY_ACTION)
        team = (body.get("team") or {}).get("id") or team_id
        user = self._identity.person(body, (body.get("user") or {}).get("id"), team)
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        reader = Reader(audience="self", user_id=user, conversation_id=self._identity.channel(team, channel))
        try:
            if self._memory is None or run_id is None:
                text = "🔕 Memory is off here: no answer drew on it."
            else:
                answer = await explain_run(self._memory, reader, run_id=run_id)
                text = await render_why(answer, machine=False, permalinks=self.permalinks)
                log.info(
                    "memory.why",
                    run_id=run_id,
                    shown=len(answer.shown),
                    hidden=answer.hidden,
                    gone=answer.gone,
                )
        except Exception as error:
            log.warning("slack.why_failed", error=type(error).__name__)
            text = "⚠️ Couldn't look up what that answer drew on. Please try again."
        for piece in split_message(markdown_to_mrkdwn(text), POST_TEXT_LIMIT)[:MAX_SLASH_RESPONSES]:
            try:
                await respond(text=piece, response_type="ephemeral", replace_original=False)
            except Exception as error:
                log.warning("slack.why_respond_failed", error=type(error).__name__)
                return

    async def _visibility(self, channel: str, channel_type: object) -> ChannelVisibility | None:
        visibility = visibility_from_channel_type(channel_type)
        if visibility is not None:
            return visibility
        cached = self._visibility_cache.get(channel)
        if cached is not None:
            return cached
        try:
            response = await self.client.conversations_info(channel=channel)
        except SlackClientError as error:
            log.warning("slack.channel_info_failed", channel=channel, error=type(error).__name__)
            return None
        info = response.get("channel") or {}
        visibility = visibility_from_conversation(info)
        if visibility is not None:
            self._visibility_cache.put(channel, visibility)
        return visibility

    async def _history(self, job: _Job, thread_key: str) -> tuple[HistoryTurn, ...]:
        if not is_thread_reply(job.event):
            return ()
        replies = job.replies
        if replies is None:
            try:
                replies = tuple(await self._thread_messages(thread_key, job.channel, job.thread_ts))
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
        )

    async def _thread_messages(
        self, thread_key: str, channel: str, thread_ts: str
    ) -> list[Mapping[str, Any]]:
        """From the thread cache when it has the whole thread; else one fetch, which then seeds it."""
        cached = self._thread_cache.messages(thread_key)
        if cached is not None:
            log.info("slack.thread_cache", action="hit", channel=channel, messages=len(cached))
            return list(cached)
        log.info("slack.thread_cache", action="fetch", channel=channel)
        fetched = await self._fetch_replies(channel, thread_ts)
        self._thread_cache.seed(thread_key, fetched)
        return fetched

    def _reply_recorder(self, thread_key: str, job: _Job) -> Callable[[str, str], None]:
        def record(ts: str, text: str) -> None:
            message = {"ts": ts, "thread_ts": job.thread_ts, "user": job.bot_user_id, "bot_id": job.bot_id}
            self._thread_cache.record_reply(thread_key, {**message, "text": text})

        return record

    async def _fetch_replies(self, channel: str, thread_ts: str) -> list[Mapping[str, Any]]:
        messages: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_REPLIES_PAGES):
            response = await self.client.conversations_replies(
                channel=channel, ts=thread_ts, limit=REPLIES_PAGE_SIZE, cursor=cursor
            )
            messages.extend(response.get("messages") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not response.get("has_more") or not cursor:
                break
        return messages

    # ---- the slash command -----------------------------------------------------------------------

    async def _run_slash(self, command: Mapping[str, Any], respond: Any, team_id: str | None) -> None:
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "") or None
        team = str(command.get("team_id") or team_id or "") or None
        log.info("slack.command", command=command.get("command"), channel=channel)
        try:
            if self._registry is None:
                raise RuntimeError("no command registry configured")
            visibility = await self._visibility(channel, None) if channel else None
            if visibility is None and channel:
                visibility = visibility_from_slash_channel(channel, command.get("channel_name"))
            channel_key = self._identity.channel(team, channel)
            thread_repo = None
            if self._channel_repo is not None and channel_key is not None:
                lookup, key = self._channel_repo, channel_key

                async def thread_repo() -> str | None:
                    return await lookup(key)

            user_key = self._identity.person(command, user, team)
            caller = self._caller_factory(
                user_id=user_key,
                channel_id=channel_key,
                channel_visibility=visibility,
                thread_key=f"{channel_key}:slash",
                surface=SURFACE,
                thread_repo=thread_repo,
                # The answer is ephemeral: only the asker sees it, wherever it was typed.
                reader=conversation_reader(
                    visibility, user_id=user_key, channel_id=channel_key, private_reply=True
                ),
            )
            words = str(command.get("text") or "").strip()
            reply = await self._registry.handle(f"memory {words}".strip(), caller)
            text = reply.text if reply is not None else SLASH_USAGE
        except Exception as error:
            ref = uuid.uuid4().hex[:8]
            log.error("slack.command_failed", ref=ref, error=type(error).__name__, exc_info=True)
            text = WARNING_REPLY.format(ref=ref)
        pieces = split_message(markdown_to_mrkdwn(text), POST_TEXT_LIMIT)[:MAX_SLASH_RESPONSES]
        for piece in pieces:
            try:
                await respond(text=piece, response_type="ephemeral")
            except Exception as error:
                log.warning("slack.command_respond_failed", error=type(error).__name__)
                return


def _retry_num(request: AsyncBoltRequest) -> str | None:
    """Slack's redelivery counter (`X-Slack-Retry-Num`; Bolt mirrors it for Socket Mode envelopes)."""
    values = request.headers.get("x-slack-retry-num")
    return values[0] if values else None


def build_slack_app(
    *,
    dispatcher: Dispatcher,
    bot_token: str,
    signing_secret: str | None,
    registry: CommandHandler | None = None,
    base_url: str | None = None,
    client: AsyncWebClient | None = None,
    options: SlackOptions | None = None,
    caller_factory: CallerFactory = registry_caller,
    channel_repo: ChannelRepo | None = None,
    browser: MemoryBrowser | None = None,
    memory_store: MemoryStore | None = None,
    permalinks: Permalinks | None = None,
) -> SlackBot:
    """The Slack surface, ready for `start_http` or Socket Mode. `signing_secret=None` → Socket Mode
    only (no request verification, which HTTP mode must never run without)."""
    return SlackBot(
        dispatcher=dispatcher,
        bot_token=bot_token,
        signing_secret=signing_secret,
        registry=registry,
        client=client,
        base_url=base_url,
        options=options,
        caller_factory=caller_factory,
        channel_repo=channel_repo,
        browser=browser,
        memory_store=memory_store,
        permalinks=permalinks,
    )


async def start_http(
    bot: SlackBot,
    *,
    host: str,
    port: int,
    path: str = EVENTS_PATH,
    limits: GuardLimits | None = None,
    metrics: Metrics | None = None,
    metrics_token: str | None = None,
) -> web.AppRunner:
    """Serve the Bolt app's Events API / slash command / interactivity endpoint and /healthz on aiohttp
    (app/slack/http.py); returns the runner to clean up. Port 0 picks a free port (see `bound_port`).

    Every connection is under the slow-client guard (ops/http_guard.py); `/metrics` sits beside the
    Bolt route, outside Slack's signature check, behind its own token (ops/metrics.py).
    """
    limits = limits or GuardLimits()
    metrics = metrics if metrics is not None else Metrics()
    web_app = build_web_app(bot, path=path)
    web_app.middlewares.append(_measured(metrics, path))
    web_app.router.add_get(METRICS_PATH, _scrape(metrics, metrics_token))
    runner = web.AppRunner(web_app, keepalive_timeout=limits.keep_alive)
    await runner.setup()
    site = _GuardedSite(runner, _listening_socket(host, port), ConnectionGuard("slack", limits, metrics))
    await site.start()
    return runner


def _measured(metrics: Metrics, path: str) -> Any:
    """Requests by route and status: the events path, /healthz, /metrics, or `other` (never the raw path)."""
    known = {path, HEALTH_PATH, METRICS_PATH}

    @web.middleware
    async def measured(request: web.Request, handler: Any) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.path if request.path in known else OTHER_ROUTE
        status = 500
        try:
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as error:
            status = error.status
            raise
        finally:
            metrics.observe_request("slack", route, status, time.perf_counter() - started)

    return measured


def _scrape(metrics: Metrics, token: str | None) -> Any:
    async def scrape(request: web.Request) -> web.Response:
        if not scrape_allowed(request.headers.get("Authorization"), token):
            return web.json_response({"error": "unauthorized"}, status=401)
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    return scrape


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


class _GuardedSite(web.SockSite):
    """aiohttp's socket site with every connection's protocol wrapped by the guard."""

    def __init__(self, runner: web.AppRunner, sock: socket.socket, guard: ConnectionGuard) -> None:
        super().__init__(runner, sock)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.wrap(server), sock=self._sock, backlog=self._backlog
        )


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise RuntimeError("the Slack HTTP server is not listening")
