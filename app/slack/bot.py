"""The Slack surface: a slack-bolt AsyncApp whose listeners each hand their event to one feature —
messages and mentions to the router (app/slack/routing.py), `/memory` to the slash command, the App
Home to its tab, feedback and *Why?* clicks to their handlers, the agent view to its prompts.

Listeners only acknowledge and start work: the ack leaves at once and the work runs as a tracked
background task, so shutdown can wait for it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec

import structlog
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from app.slack.agent_view import on_thread_started
from app.slack.claims import EventsOnce, SharedClaims
from app.slack.conversations import Conversations
from app.slack.events import SHARING_EVENTS, SlackIdentity
from app.slack.feedback import FEEDBACK_ACTION, log_feedback
from app.slack.home.edit import EDIT_VIEW
from app.slack.home.tab import HomeTab
from app.slack.home.tab import Permalinks as SlackPermalinks
from app.slack.home.view import ADD_VIEW, HOME_ACTIONS
from app.slack.kinds import handled, payload_kind
from app.slack.memory_events import MemoryFollowsSlack
from app.slack.messages import Dispatcher, MessageAnswerer
from app.slack.options import SlackOptions
from app.slack.people import People
from app.slack.provenance import CHANNEL_DELETED_EVENTS, WHY_ACTION
from app.slack.routing import EventRouter, retry_num
from app.slack.slash import CallerFactory, ChannelRepo, SlashCommand
from app.slack.state import RecentKeys, TtlCache
from app.slack.tasks import BackgroundTasks
from commands.browse import MemoryBrowser
from commands.provenance import Permalinks
from commands.registry import CommandSet
from memory.stores.contract import MemoryStore

P = ParamSpec("P")

log = structlog.get_logger("slack")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SlackBotParts:
    """What the bot is built from. `signing_secret=None` → Socket Mode only (no request
    verification, which HTTP mode must never run without); `memory_store=None` → memory is off."""

    dispatcher: Dispatcher
    bot_token: str
    signing_secret: str | None
    registry: CommandSet | None = None
    client: AsyncWebClient | None = None
    base_url: str | None = None
    options: SlackOptions | None = None
    caller_factory: CallerFactory = registry_caller
    channel_repo: ChannelRepo | None = None
    browser: MemoryBrowser | None = None
    memory_store: MemoryStore | None = None
    permalinks: Permalinks | None = None


class SlackBot:
    """The Bolt app, the features its listeners hand events to, and the background tasks (with the
    accepting flag) that shutdown stops and drains."""

    def __init__(self, parts: SlackBotParts) -> None:
        options = parts.options or SlackOptions()
        self.signing_secret = parts.signing_secret
        self.client = parts.client or make_web_client(parts.bot_token, parts.base_url)
        self.permalinks: Permalinks = parts.permalinks or SlackPermalinks(self.client)
        self._options = options
        self._tasks = BackgroundTasks()
        self._accepting = True
        identity = SlackIdentity(multi_workspace=options.multi_workspace)
        conversations = self._conversations = Conversations(self.client, identity, options)
        people = self._people = People(self.client, ttl_seconds=options.person_cache_ttl_seconds)
        # run id → the memory records it read, for the feedback a click on its answer logs.
        self._runs: TtlCache[tuple[str, ...]] = TtlCache(
            ttl=options.thread_memory_ttl_seconds, max_size=20_000
        )
        spawn = self._tasks.spawn
        self._memory_events = MemoryFollowsSlack(
            memory=parts.memory_store,
            identity=identity,
            conversations=conversations,
            people=people,
            permalinks=self.permalinks,
            spawn=spawn,
        )
        answerer = MessageAnswerer(
            dispatcher=parts.dispatcher,
            client=self.client,
            identity=identity,
            conversations=conversations,
            options=options,
            runs=self._runs,
            spawn=spawn,
            people=people,
            memory_on=parts.memory_store is not None,
            permalinks=self.permalinks,
        )
        shared = _shared_claims(parts.memory_store, options)
        self._once = EventsOnce(
            shared,
            RecentKeys(ttl=options.dedupe_ttl_seconds, max_size=options.dedupe_max_entries),
            spawn,
        )
        self._router = EventRouter(
            identity=identity,
            options=options,
            conversations=conversations,
            answerer=answerer,
            memory_events=self._memory_events,
            spawn=spawn,
            shared=shared,
        )
        self._slash = SlashCommand(
            registry=parts.registry,
            identity=identity,
            conversations=conversations,
            people=people,
            caller_factory=parts.caller_factory,
            channel_repo=parts.channel_repo,
        )
        self._home = HomeTab(
            client=self.client,
            browser=parts.browser,
            registry=parts.registry,
            caller_factory=parts.caller_factory,
            identity=identity,
            people=people,
        )
        self.app = _bolt_app(self.client, parts.signing_secret)
        self._register()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """False once draining: /healthz says 503 and new deliveries get one too."""
        return self._accepting

    @property
    def pending(self) -> int:
        return self._tasks.pending

    def stop_accepting(self) -> None:
        """From now on Slack gets a 503 (and retries later, elsewhere) instead of a new run here."""
        self._accepting = False

    async def drain(self, within: float | None = None) -> bool:
        """Wait for every started answer; True when all finished within `within` seconds."""
        return await self._tasks.drain(within)

    async def aclose(self) -> None:
        await self._tasks.cancel()
        session = getattr(self.client, "session", None)
        if session is not None and not session.closed:
            await session.close()

    # ---- Bolt wiring -----------------------------------------------------------------------------

    def _register(self) -> None:
        """Each listener turns its event into a feature's call; nothing here decides anything."""
        app, spawn = self.app, self._tasks.spawn

        @app.middleware
        async def refuse_when_stopping(
            req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
        ) -> BoltResponse | None:
            if not self.accepting:
                return BoltResponse(status=503, body="shutting down")
            return await next()

        @app.error
        async def on_error(error: Exception, body: dict[str, Any]) -> BoltResponse:
            return failed_request(error, body)

        @app.event("app_mention")
        async def on_app_mention(
            body: dict[str, Any], event: dict[str, Any], context: Any, request: AsyncBoltRequest
        ) -> None:
            self._router.accept(body, event, context, "app_mention", retry_num(request))

        @app.event("message")
        async def on_message(
            body: dict[str, Any], event: dict[str, Any], context: Any, request: AsyncBoltRequest
        ) -> None:
            self._router.accept(body, event, context, "message", retry_num(request))

        @app.event("app_home_opened")
        async def on_app_home_opened(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
            once = self._once.spawner(body, "app_home_opened", context.team_id)
            if once is not None:
                self._home.opened(body, event, context.team_id, once)

        @app.event("assistant_thread_started")
        async def on_assistant_thread_started(
            body: dict[str, Any], event: dict[str, Any], context: Any
        ) -> None:
            once = self._once.spawner(body, "assistant_thread_started", context.team_id)
            if once is not None:
                on_thread_started(self.client, body, event, once)

        @app.action(re.compile(f"^({'|'.join(HOME_ACTIONS)})"))
        async def on_home_action(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()  # within Slack's 3 s; the work (and the re-publish) runs in the background
            spawn(self._home.on_action(body, action), name="slack-home-action")

        @app.view(ADD_VIEW)
        async def on_home_add(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
            await ack()  # the modal closes at once; the write and the re-drawn tab follow
            spawn(self._home.on_add(body, view), name="slack-home-add")

        @app.view(EDIT_VIEW)
        async def on_home_edit(ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
            await ack()  # the modal closes at once; the edit and the re-drawn tab follow
            spawn(self._home.on_edit(body, view), name="slack-home-edit")

        @app.action(FEEDBACK_ACTION)
        async def on_feedback(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
            await ack()
            log_feedback(body, action, self._runs)

        @app.action(WHY_ACTION)
        async def on_why(ack: Any, body: dict[str, Any], respond: Any, context: Any) -> None:
            await ack()
            spawn(self._memory_events.why(body, respond, context.team_id), name="slack-why")

        @app.command(self._options.slash_command)
        async def on_slash(ack: Any, command: dict[str, Any], respond: Any, context: Any) -> None:
            await ack()
            spawn(self._slash.run(command, respond, context.team_id), name="slack-slash")

        self._register_workspace_changes()

    def _register_workspace_changes(self) -> None:
        """What changes in the workspace that the bot keeps up with: a deleted channel's memory, a
        channel's sharing with another organization, a person made a guest or a member."""
        app = self.app
        for deleted in CHANNEL_DELETED_EVENTS:

            @app.event(deleted)
            async def on_channel_deleted(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
                self._memory_events.accept_channel_deleted(body, event, context)

        for sharing in SHARING_EVENTS:

            @app.event(sharing)
            async def on_sharing_changed(event: dict[str, Any]) -> None:
                self._conversations.sharing_changed(event)

        @app.event("user_change")
        async def on_user_change(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
            person = event.get("user")
            if isinstance(person, dict) and isinstance(person.get("id"), str):
                self._people.forget(body.get("team_id") or context.team_id, person["id"])


def failed_request(error: Exception, body: dict[str, Any]) -> BoltResponse:
    """Bolt's error path, in one warning without the body. A payload no listener takes — or whose
    shape broke Bolt's own matching (an `interactive_message` without `actions`) — is acked: Slack
    would only send the same bytes again. A kind the bot handles that failed (Slack's API unreachable
    when Bolt first asks who the bot is) is a 500, so Slack redelivers it later."""
    kind = payload_kind(body)
    if isinstance(error, BoltUnhandledRequestError) or not handled(body):
        log.warning("slack.malformed_request", reason="unhandled", kind=kind)
        return BoltResponse(status=200, body="")
    log.warning("slack.request_failed", kind=kind, error=type(error).__name__)
    return BoltResponse(status=500, body="")


def _shared_claims(store: MemoryStore | None, options: SlackOptions) -> SharedClaims:
    """A store that claims across processes (SQLite, PostgreSQL, the memory service) shares the
    replicas' dedupe; any other (in-process, none: memory off) leaves it to each process."""
    claims = None if store is None else store.claims()
    return SharedClaims(claims, ttl_seconds=options.dedupe_ttl_seconds)


def _bolt_app(client: AsyncWebClient, signing_secret: str | None) -> AsyncApp:
    bolt_logger = logging.getLogger("slack_bolt.switchboard")
    # Bolt also reads SLACK_BOT_TOKEN itself and warns that our client wins; it does, on purpose.
    bolt_logger.setLevel(logging.ERROR)
    app = AsyncApp(
        client=client,
        logger=bolt_logger,
        signing_secret=signing_secret or "",
        request_verification_enabled=signing_secret is not None,
        # Listeners only claim the event and start a task, so the ack is immediate and the claim
        # happens before the response: a retry can never race its original.
        process_before_response=True,
        # A request no listener takes goes to the error handler (one warning, 200), not to Bolt's
        # warning, which prints the payload (a search box's text included) as a code suggestion.
        raise_error_for_unhandled_request=True,
    )
    bolt_logger.setLevel(logging.NOTSET)
    return app


def _built_from(parts: Callable[P, SlackBotParts]) -> Callable[P, SlackBot]:
    """`build_slack_app` takes exactly the parts' fields, as keywords, and passes them on once."""

    def build(*args: P.args, **kwargs: P.kwargs) -> SlackBot:
        return SlackBot(parts(*args, **kwargs))

    build.__doc__ = "The Slack surface, ready for `start_http` or Socket Mode (fields: `SlackBotParts`)."
    return build


build_slack_app = _built_from(SlackBotParts)
