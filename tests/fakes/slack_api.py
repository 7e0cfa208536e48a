"""A fake Slack Web API on 127.0.0.1, plus helpers to deliver signed Events API requests to a bot.

The fake answers like Slack (same paths, `ok`/`error` envelopes, HTTP 429 + `Retry-After` for rate
limits, bearer-token auth) and keeps a tiny workspace: conversations with their kind, and messages with
their threads, so `conversations.replies` returns what the bot itself posted. Every call is recorded.

Fixtures:
- `slack_api`: a running `FakeSlackApi` (its `base_url` ends with "/", as the SDK expects).
- `slack_signing_secret`: the secret the delivery helpers sign with.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-fake-app-token"
SIGNING_SECRET = "fake-signing-secret-0123456789"
TEAM_ID = "T0TEAM"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0APP"

CONVERSATION_KINDS = ("public", "private", "im", "mpim")
_CHANNEL_TYPE = {"public": "channel", "private": "group", "im": "im", "mpim": "mpim"}


@dataclass(frozen=True)
class Call:
    """One recorded Web API call: the method and its merged arguments (query, form and JSON body)."""

    method: str
    args: dict[str, Any]
    token: str | None


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    user: str | None = None
    bot_id: str | None = None
    thread_ts: str | None = None
    subtype: str | None = None
    streaming: bool = False
    reactions: dict[str, set[str]] = field(default_factory=dict)
    # A streamed message: every chunk it was sent, in order, and how its task cards display.
    chunks: list[dict[str, Any]] = field(default_factory=list)
    task_display_mode: str | None = None

    def task_updates(self, task_id: str | None = None) -> list[dict[str, Any]]:
        """The `task_update` chunks this message got (of one task), in the order they came."""
        return [c for c in self.chunks if c["type"] == "task_update" and task_id in (None, c["id"])]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.user:
            data["user"] = self.user
        if self.bot_id:
            data["bot_id"] = self.bot_id
            data["app_id"] = APP_ID
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if self.subtype:
            data["subtype"] = self.subtype
        return data


class FakeSlackApi:
    """The Web API methods the bot uses, over real HTTP. Configure failures with `fail_next`,
    `rate_limit_next` and `refuse`; inspect with `calls_to` and `thread`."""

    def __init__(self) -> None:
        self.token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.team_id = TEAM_ID
        self.bot_user_id = BOT_USER_ID
        self.bot_id = BOT_ID
        self.calls: list[Call] = []
        self.responses: list[dict[str, Any]] = []  # what arrived at response_url endpoints
        self.home_views: dict[str, list[dict[str, Any]]] = {}  # user → every view published to them
        self.modals: list[dict[str, Any]] = []  # every view `views.open` opened, in order
        self.conversations: dict[str, str] = {}
        self.ext_shared: set[str] = set()  # Slack Connect: channels shared with another organization
        # users.info: everyone is a full member of this workspace unless named here — a guest
        # ("multi" → is_restricted, "single" → is_ultra_restricted) or of another team (user → team).
        self.guests: dict[str, str] = {}
        self.user_teams: dict[str, str] = {}
        self.messages: dict[str, list[Message]] = {}
        self.refused: dict[str, str] = {}  # method → error returned on every call
        # Stream calls carrying these chunk types (or a task display mode) answer this error.
        self.refused_chunks: tuple[str, tuple[str, ...]] | None = None
        self._fail_next: dict[str, list[str]] = {}
        self._rate_limit_next: dict[str, list[int]] = {}
        self._holds: dict[str, asyncio.Event] = {}
        self._clock = itertools.count(1)
        self._base_ts = int(time.time()) - 3600
        self._runner: web.AppRunner | None = None
        self.port = 0
        # Socket Mode: connected WebSockets and the envelope ids the app acknowledged.
        self._sockets: list[web.WebSocketResponse] = []
        self.socket_acks: list[str] = []
        self._socket_change = asyncio.Condition()
        self._api_change = asyncio.Condition()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str = "slash") -> str:
        return f"http://127.0.0.1:{self.port}/response/{name}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/response/{name}", self._handle_response_url)
        app.router.add_get("/socket", self._handle_socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = _port_of(self._runner)

    async def stop(self) -> None:
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- the workspace ---------------------------------------------------------------------------

    def next_ts(self) -> str:
        n = next(self._clock)
        return f"{self._base_ts + n}.{n:06d}"

    def add_conversation(self, channel: str, kind: str = "public") -> str:
        if kind not in CONVERSATION_KINDS:
            raise ValueError(f"kind must be one of {CONVERSATION_KINDS}, got {kind!r}")
        self.conversations[channel] = kind
        self.messages.setdefault(channel, [])
        return channel

    def post_as_user(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None, subtype: str | None = None
    ) -> dict[str, Any]:
        """Put a person's message into the workspace; returns the `message` event Slack would send."""
        message = Message(channel=channel, ts=self.next_ts(), text=text, user=user, thread_ts=thread_ts)
        message.subtype = subtype
        self.messages.setdefault(channel, []).append(message)
        event = {**message.to_json(), "channel": channel, "event_ts": message.ts, "team": self.team_id}
        kind = self.conversations.get(channel)
        if kind is not None:
            event["channel_type"] = _CHANNEL_TYPE[kind]
        return event

    def post_as_bot(self, channel: str, text: str, *, thread_ts: str | None = None) -> Message:
        """A message the bot posted earlier (e.g. before a restart)."""
        message = Message(
            channel=channel,
            ts=self.next_ts(),
            text=text,
            user=self.bot_user_id,
            bot_id=self.bot_id,
            thread_ts=thread_ts,
        )
        self.messages.setdefault(channel, []).append(message)
        return message

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's messages, root first, as conversations.replies sees them."""
        found = [m for m in self.messages.get(channel, []) if thread_ts in (m.ts, m.thread_ts)]
        return sorted(found, key=lambda m: _ts_key(m.ts))

    def bot_replies(self, channel: str, thread_ts: str | None = None) -> list[Message]:
        """Finished messages the bot posted (streams that were stopped, plain posts, updates)."""
        return [
            m
            for m in self.messages.get(channel, [])
            if m.user == self.bot_user_id
            and not m.streaming
            and (thread_ts is None or m.thread_ts == thread_ts)
        ]

    # ---- inspection and failure injection --------------------------------------------------------

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def fail_next(self, method: str, error: str = "internal_error") -> None:
        """The next call of `method` answers `{"ok": false, "error": error}`."""
        self._fail_next.setdefault(method, []).append(error)

    def refuse(self, method: str, error: str = "not_allowed") -> None:
        """Every call of `method` answers with `error` (e.g. streaming not enabled for this app)."""
        self.refused[method] = error

    def refuse_chunks(
        self, error: str = "invalid_arguments", types: tuple[str, ...] = ("task_update", "plan_update")
    ) -> None:
        """A workspace without thinking steps: a stream call with a chunk of `types`, or with a
        `task_display_mode`, answers `error`; Markdown streams as before."""
        self.refused_chunks = (error, types)

    def hold(self, method: str) -> asyncio.Event:
        """Calls of `method` wait (already recorded) until the returned event is set."""
        gate = self._holds[method] = asyncio.Event()
        return gate

    def rate_limit_next(self, method: str, retry_after: int = 0) -> None:
        """The next call of `method` gets HTTP 429 with `Retry-After`, as Slack does."""
        self._rate_limit_next.setdefault(method, []).append(retry_after)

    # ---- HTTP ------------------------------------------------------------------------------------

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        payload = await request.json()
        self.responses.append({"name": request.match_info["name"], **payload})
        async with self._api_change:
            self._api_change.notify_all()
        return web.Response(text="ok")

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            raw = await request.read()
            if request.content_type == "application/json":
                args.update(json.loads(raw or b"{}"))
            elif raw:
                args.update(dict(parse_qsl(raw.decode())))
        token = _bearer(request.headers.get("Authorization")) or args.pop("token", None)
        self.calls.append(Call(method=method, args=args, token=token))
        if method in self._holds:
            await self._holds[method].wait()
        if self._rate_limit_next.get(method):
            retry_after = self._rate_limit_next[method].pop(0)
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(retry_after)}
            )
        if method == "apps.connections.open":
            if token != self.app_token:
                return _error("invalid_auth" if token else "not_authed")
            return _ok(url=f"ws://127.0.0.1:{self.port}/socket")
        if token != self.token:
            return _error("not_authed" if not token else "invalid_auth")
        if self._fail_next.get(method):
            return _error(self._fail_next[method].pop(0))
        if method in self.refused:
            return _error(self.refused[method])
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return _error("unknown_method")
        result: web.Response = handler(args)
        async with self._api_change:
            self._api_change.notify_all()
        return result

    # ---- Socket Mode -----------------------------------------------------------------------------

    async def _handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": APP_ID}})
        async with self._socket_change:
            self._sockets.append(socket)
            self._socket_change.notify_all()
        try:
            async for frame in socket:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    envelope_id = json.loads(frame.data).get("envelope_id")
                    async with self._socket_change:
                        if envelope_id:
                            self.socket_acks.append(str(envelope_id))
                        self._socket_change.notify_all()
        finally:
            async with self._socket_change:
                if socket in self._sockets:
                    self._sockets.remove(socket)
                self._socket_change.notify_all()
        return socket

    async def drop_sockets(self) -> None:
        """Close every Socket Mode connection from Slack's side (the app is expected to reconnect)."""
        for socket in list(self._sockets):
            await socket.close()

    async def wait_for_socket(self, *, connected: bool = True, within: float = 10) -> None:
        """Until an app holds (or, with connected=False, no longer holds) a Socket Mode connection."""
        async with asyncio.timeout(within), self._socket_change:
            await self._socket_change.wait_for(lambda: bool(self._sockets) == connected)

    async def socket_event(
        self, event: Mapping[str, Any], *, event_id: str, retry_attempt: int = 0, within: float = 10
    ) -> str:
        """Deliver an Events API envelope over the app's Socket Mode connection; wait for its ack."""
        await self.wait_for_socket(within=within)
        envelope_id = f"env-{event_id}-{retry_attempt}"
        await self._sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "payload": event_envelope(event, event_id=event_id, team_id=self.team_id),
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            }
        )
        async with asyncio.timeout(within), self._socket_change:
            await self._socket_change.wait_for(lambda: envelope_id in self.socket_acks)
        return envelope_id

    async def wait_until(self, predicate: Callable[[], bool], *, within: float = 10) -> None:
        """Until `predicate()` holds; re-checked after every Web API call (for apps in other processes)."""
        async with asyncio.timeout(within), self._api_change:
            await self._api_change.wait_for(predicate)

    # ---- methods ---------------------------------------------------------------------------------

    def _m_auth_test(self, args: Mapping[str, Any]) -> web.Response:
        return _ok(
            url="https://fake.slack.com/",
            team="Fake Team",
            user="switchboard",
            team_id=self.team_id,
            user_id=self.bot_user_id,
            bot_id=self.bot_id,
            is_enterprise_install=False,
        )

    def _m_bots_info(self, args: Mapping[str, Any]) -> web.Response:
        if str(args.get("bot") or "") != self.bot_id:
            return _error("bot_not_found")
        return _ok(bot={"id": self.bot_id, "deleted": False, "name": "switchboard", "app_id": APP_ID})

    def _m_conversations_open(self, args: Mapping[str, Any]) -> web.Response:
        """A DM with one user (`users`): the same D… id every time, as Slack gives."""
        users = str(args.get("users") or "")
        if not users or "," in users:
            return _error("users_list_not_supplied" if not users else "not_allowed")
        channel = "D" + users
        self.conversations.setdefault(channel, "im")
        return _ok(channel={"id": channel, "is_im": True, "user": users})

    def _m_users_info(self, args: Mapping[str, Any]) -> web.Response:
        """The user object's `team_id`, `is_restricted` (a multi-channel guest) and
        `is_ultra_restricted` (a single-channel guest), as Slack documents them."""
        user = str(args.get("user") or "")
        if not user:
            return _error("user_not_found")
        guest = self.guests.get(user)
        if guest not in (None, "multi", "single"):
            raise ValueError(f"a guest is 'multi' or 'single', got {guest!r}")
        person = {
            "id": user,
            "team_id": self.user_teams.get(user, self.team_id),
            "name": user.lower(),
            "deleted": False,
            "is_admin": False,
            "is_owner": False,
            "is_restricted": guest is not None,
            "is_ultra_restricted": guest == "single",
            "is_bot": user == self.bot_user_id,
            "is_app_user": False,
        }
        return _ok(user=person)

    def dm_messages(self, user: str) -> list[Message]:
        """What the bot posted in its DM with `user` (opened by `conversations.open`)."""
        return list(self.messages.get("D" + user, []))

    def _m_conversations_info(self, args: Mapping[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        kind = self.conversations.get(channel)
        if kind is None:
            return _error("channel_not_found")
        info = {
            "id": channel,
            "name": channel.lower(),
            "is_channel": kind in ("public", "private"),
            "is_group": kind == "private",
            "is_im": kind == "im",
            "is_mpim": kind == "mpim",
            "is_private": kind in ("private", "im", "mpim"),
            "is_shared": channel in self.ext_shared,
            "is_ext_shared": channel in self.ext_shared,
        }
        return _ok(channel=info)

    def _m_conversations_replies(self, args: Mapping[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        ts = str(args.get("ts") or "")
        if channel not in self.conversations:
            return _error("channel_not_found")
        thread = self.thread(channel, ts)
        if not thread:
            return _error("thread_not_found")
        limit = int(args.get("limit") or 1000)
        start = int(args.get("cursor") or 0)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        return _ok(
            messages=[m.to_json() for m in page],
            has_more=more,
            response_metadata={"next_cursor": str(start + limit) if more else ""},
        )

    def _m_chat_postMessage(self, args: Mapping[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        if channel not in self.conversations:
            return _error("channel_not_found")
        text = args.get("text")
        if not text and not args.get("blocks"):
            return _error("no_text")
        message = self._bot_message(channel, str(text or ""), args.get("thread_ts"))
        return _ok(channel=channel, ts=message.ts, message=message.to_json())

    def _m_chat_postEphemeral(self, args: Mapping[str, Any]) -> web.Response:
        if str(args.get("channel") or "") not in self.conversations:
            return _error("channel_not_found")
        return _ok(message_ts=self.next_ts())

    def _m_chat_update(self, args: Mapping[str, Any]) -> web.Response:
        message = self._find(str(args.get("channel") or ""), str(args.get("ts") or ""))
        if message is None:
            return _error("message_not_found")
        message.text = str(args.get("text") or "")
        message.streaming = False
        return _ok(channel=message.channel, ts=message.ts, text=message.text)

    def _m_chat_startStream(self, args: Mapping[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        if channel not in self.conversations:
            return _error("channel_not_found")
        if not args.get("thread_ts"):
            return _error("invalid_arguments")
        kind = self.conversations[channel]
        if kind != "im" and not (args.get("recipient_user_id") and args.get("recipient_team_id")):
            return _error("missing_recipient_user_id")
        mode = args.get("task_display_mode")
        if mode is not None and mode not in TASK_DISPLAY_MODES:
            return _error("invalid_arguments")
        refused = self._chunks_refused(args)
        if refused:
            return _error(refused)
        chunks, problem = _chunks(args)
        if problem:
            return _error(problem)
        message = self._bot_message(channel, _stream_text(args), args.get("thread_ts"))
        message.streaming = True
        message.task_display_mode = mode
        message.chunks.extend(chunks)
        return _ok(channel=channel, ts=message.ts)

    def _m_chat_appendStream(self, args: Mapping[str, Any]) -> web.Response:
        message = self._find(str(args.get("channel") or ""), str(args.get("ts") or ""))
        if message is None:
            return _error("message_not_found")
        if not message.streaming:
            return _error("message_not_in_streaming_state")
        if not args.get("markdown_text") and not args.get("chunks"):
            return _error("invalid_arguments")
        refused = self._chunks_refused(args)
        chunks, problem = _chunks(args)
        if refused or problem:
            return _error(refused or problem or "")
        message.text += _stream_text(args)
        message.chunks.extend(chunks)
        return _ok(channel=message.channel, ts=message.ts)

    def _m_chat_stopStream(self, args: Mapping[str, Any]) -> web.Response:
        message = self._find(str(args.get("channel") or ""), str(args.get("ts") or ""))
        if message is None:
            return _error("message_not_found")
        if not message.streaming:
            return _error("message_not_in_streaming_state")
        refused = self._chunks_refused(args)
        chunks, problem = _chunks(args)
        if refused or problem:
            return _error(refused or problem or "")
        message.text += _stream_text(args)
        message.chunks.extend(chunks)
        message.streaming = False
        return _ok(channel=message.channel, ts=message.ts, message=message.to_json())

    def _m_assistant_threads_setStatus(self, args: Mapping[str, Any]) -> web.Response:
        if str(args.get("channel_id") or "") not in self.conversations:
            return _error("channel_not_found")
        if not args.get("thread_ts") or "status" not in args:
            return _error("invalid_arguments")
        return _ok()

    def _m_reactions_add(self, args: Mapping[str, Any]) -> web.Response:
        message = self._find(str(args.get("channel") or ""), str(args.get("timestamp") or ""))
        if message is None:
            return _error("message_not_found")
        users = message.reactions.setdefault(str(args.get("name")), set())
        if self.bot_user_id in users:
            return _error("already_reacted")
        users.add(self.bot_user_id)
        return _ok()

    def _m_reactions_remove(self, args: Mapping[str, Any]) -> web.Response:
        message = self._find(str(args.get("channel") or ""), str(args.get("timestamp") or ""))
        if message is None:
            return _error("message_not_found")
        users = message.reactions.get(str(args.get("name")), set())
        if self.bot_user_id not in users:
            return _error("no_reaction")
        users.discard(self.bot_user_id)
        return _ok()

    def _m_views_publish(self, args: Mapping[str, Any]) -> web.Response:
        user = str(args.get("user_id") or "")
        view = args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not user or not isinstance(view, dict) or view.get("type") != "home":
            return _error("invalid_arguments")
        if not _valid_blocks(view.get("blocks") or []):
            return _error("invalid_blocks")
        self.home_views.setdefault(user, []).append(view)
        return _ok(view={"id": f"V{len(self.calls)}", **view})

    def _m_views_open(self, args: Mapping[str, Any]) -> web.Response:
        view = args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not args.get("trigger_id") or not isinstance(view, dict) or view.get("type") != "modal":
            return _error("invalid_arguments")
        if not _valid_blocks(view.get("blocks") or []):
            return _error("invalid_blocks")
        self.modals.append(view)
        return _ok(view={"id": f"V{len(self.calls)}", **view})

    def _m_chat_getPermalink(self, args: Mapping[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        ts = str(args.get("message_ts") or "")
        if channel not in self.conversations:
            return _error("channel_not_found")
        return _ok(
            channel=channel, permalink=f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        )

    def _m_assistant_threads_setSuggestedPrompts(self, args: Mapping[str, Any]) -> web.Response:
        if str(args.get("channel_id") or "") not in self.conversations:
            return _error("channel_not_found")
        prompts = args.get("prompts")
        if isinstance(prompts, str):
            prompts = json.loads(prompts)
        if not prompts or len(prompts) > 4 or not all({"title", "message"} <= set(p) for p in prompts):
            return _error("invalid_arguments")
        return _ok()

    def _m_assistant_threads_setTitle(self, args: Mapping[str, Any]) -> web.Response:
        if str(args.get("channel_id") or "") not in self.conversations:
            return _error("channel_not_found")
        if not args.get("thread_ts") or not args.get("title"):
            return _error("invalid_arguments")
        return _ok()

    # ---- internals -------------------------------------------------------------------------------

    def _bot_message(self, channel: str, text: str, thread_ts: object) -> Message:
        message = Message(
            channel=channel,
            ts=self.next_ts(),
            text=text,
            user=self.bot_user_id,
            bot_id=self.bot_id,
            thread_ts=str(thread_ts) if thread_ts else None,
        )
        self.messages.setdefault(channel, []).append(message)
        return message

    def _find(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    def _chunks_refused(self, args: Mapping[str, Any]) -> str | None:
        if self.refused_chunks is None:
            return None
        error, types = self.refused_chunks
        sent = _json_list(args.get("chunks"))
        if args.get("task_display_mode") or any(isinstance(c, dict) and c.get("type") in types for c in sent):
            return error
        return None


# What Slack documents for the `chunks` of chat.startStream / appendStream / stopStream.
TASK_DISPLAY_MODES = ("timeline", "plan")
TASK_STATUSES = ("pending", "in_progress", "complete", "error")
CHUNK_FIELDS: dict[str, frozenset[str]] = {
    "markdown_text": frozenset({"type", "text"}),
    "task_update": frozenset({"type", "id", "title", "status", "details", "output", "sources"}),
    "plan_update": frozenset({"type", "title"}),
    "blocks": frozenset({"type", "blocks"}),
}
TASK_TEXT_LIMIT = 256  # a task's `details` and `output`


def _json_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        value = json.loads(value)
    return list(value) if isinstance(value, list) else []


def _chunks(args: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The call's chunks, and `invalid_chunks` when one is not of the documented shape."""
    raw = args.get("chunks")
    if raw is None:
        return [], None
    chunks = _json_list(raw)
    if not chunks and raw not in ([], "[]"):
        return [], "invalid_chunks"
    for chunk in chunks:
        if not isinstance(chunk, dict) or not _valid_chunk(chunk):
            return [], "invalid_chunks"
    return chunks, None


def _valid_chunk(chunk: dict[str, Any]) -> bool:
    kind = chunk.get("type")
    if kind not in CHUNK_FIELDS or not set(chunk) <= CHUNK_FIELDS[kind]:
        return False
    if kind == "markdown_text":
        return isinstance(chunk.get("text"), str)
    if kind == "plan_update":
        return _text(chunk.get("title"))
    if kind == "blocks":
        return isinstance(chunk.get("blocks"), list)
    texts_fit = all(
        name not in chunk or (isinstance(chunk[name], str) and len(chunk[name]) <= TASK_TEXT_LIMIT)
        for name in ("details", "output")
    )
    sources = chunk.get("sources", [])
    return (
        _text(chunk.get("id"))
        and _text(chunk.get("title"))
        and chunk.get("status") in TASK_STATUSES
        and texts_fit
        and isinstance(sources, list)
        and all(map(_valid_source, sources))
    )


def _valid_source(source: Any) -> bool:
    """A url source element: type `url`, an http(s) url and a display text, nothing else."""
    return (
        isinstance(source, dict)
        and set(source) == {"type", "url", "text"}
        and source["type"] == "url"
        and isinstance(source["url"], str)
        and source["url"].startswith(("https://", "http://"))
        and _text(source["text"])
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _valid_blocks(blocks: list[Any]) -> bool:
    """What Slack refuses in a view: over 100 blocks, a block id twice, a text input whose
    `max_length` is outside 1–3000."""
    ids = [block.get("block_id") for block in blocks if block.get("block_id")]
    if len(blocks) > 100 or len(ids) != len(set(ids)):
        return False
    for block in blocks:
        element = block.get("element") or {}
        limit = element.get("max_length")
        if element.get("type") == "plain_text_input" and limit is not None and not 1 <= limit <= 3000:
            return False
    return True


def _stream_text(args: Mapping[str, Any]) -> str:
    """Streaming methods take `markdown_text` or `chunks` of type `markdown_text`."""
    text = str(args.get("markdown_text") or "")
    chunks = args.get("chunks")
    if isinstance(chunks, str):
        chunks = json.loads(chunks)
    for chunk in chunks or []:
        if isinstance(chunk, dict) and chunk.get("type") == "markdown_text":
            text += str(chunk.get("text") or "")
    return text


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    return int(seconds), int(fraction or 0)


def _bearer(header: str | None) -> str | None:
    if header and header.startswith("Bearer "):
        return header[len("Bearer ") :]
    return None


def _ok(**fields: Any) -> web.Response:
    return web.json_response({"ok": True, **fields})


def _error(error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error})


def _port_of(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("fake Slack API is not listening")


# ---- delivering events to a bot, signed the way Slack signs them -----------------------------------


def signed_headers(
    body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None, content_type: str
) -> dict[str, str]:
    """`X-Slack-Signature` / `X-Slack-Request-Timestamp` computed with the SDK's SignatureVerifier."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
        "Content-Type": content_type,
    }


def event_envelope(
    event: Mapping[str, Any], *, event_id: str, team_id: str = TEAM_ID, ext_shared: bool = False
) -> dict[str, Any]:
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": APP_ID,
        "event": dict(event),
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team_id, "user_id": BOT_USER_ID, "is_bot": True, "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": ext_shared,
    }


def block_action(
    user: str,
    action: Mapping[str, Any],
    *,
    view: Mapping[str, Any] | None = None,
    channel: str | None = None,
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """A `block_actions` payload as Slack sends it for a click in a home view or a message."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "team": {"id": team_id},
        "api_app_id": APP_ID,
        "trigger_id": "1.trigger",
        "actions": [{"action_ts": str(time.time()), "block_id": "b", **action}],
    }
    if view is not None:
        payload["view"] = dict(view)
        payload["container"] = {"type": "view", "view_id": "V1"}
    if channel is not None:
        payload["channel"] = {"id": channel}
        payload["container"] = {"type": "message", "channel_id": channel}
    return payload


def as_app_mention(message_event: Mapping[str, Any]) -> dict[str, Any]:
    """The `app_mention` twin of a `message` event (Slack sends both for a message that mentions the app)."""
    event = {k: v for k, v in message_event.items() if k not in ("channel_type", "subtype")}
    event["type"] = "app_mention"
    return event


@dataclass
class Delivery:
    status: int
    body: str


class SlackDelivery:
    """Posts Events API payloads and slash commands to a bot's `/slack/events`, signed like Slack."""

    def __init__(self, url: str, *, secret: str = SIGNING_SECRET) -> None:
        self.url = url
        self.secret = secret
        self._ids = itertools.count(1)

    def new_event_id(self) -> str:
        return f"Ev{next(self._ids):08d}"

    async def post(self, body: str, headers: Mapping[str, str]) -> Delivery:
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.url, data=body.encode(), headers=dict(headers)) as response,
        ):
            return Delivery(status=response.status, body=await response.text())

    async def event(
        self,
        event: Mapping[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
        ext_shared: bool = False,
    ) -> Delivery:
        body = json.dumps(
            event_envelope(event, event_id=event_id or self.new_event_id(), ext_shared=ext_shared)
        )
        headers = signed_headers(
            body, secret=secret or self.secret, timestamp=timestamp, content_type="application/json"
        )
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.post(body, headers)

    async def interaction(self, payload: Mapping[str, Any]) -> Delivery:
        """An interactivity payload (`block_actions`, …), form-encoded as `payload=<json>` like Slack."""
        body = urlencode({"payload": json.dumps(payload)})
        headers = signed_headers(body, secret=self.secret, content_type="application/x-www-form-urlencoded")
        return await self.post(body, headers)

    async def slash(
        self,
        *,
        text: str,
        user_id: str,
        channel_id: str,
        response_url: str,
        command: str = "/memory",
        channel_name: str = "general",
        team_id: str = TEAM_ID,
    ) -> Delivery:
        form = {
            "token": "legacy-verification-token",
            "team_id": team_id,
            "team_domain": "fake",
            "channel_id": channel_id,
            "channel_name": channel_name,
            "user_id": user_id,
            "user_name": user_id.lower(),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": f"{next(self._ids)}.trigger",
        }
        body = urlencode(form)
        headers = signed_headers(body, secret=self.secret, content_type="application/x-www-form-urlencoded")
        return await self.post(body, headers)


@pytest.fixture
def slack_signing_secret() -> str:
    return SIGNING_SECRET


@pytest.fixture
async def slack_api() -> AsyncIterator[FakeSlackApi]:
    fake = FakeSlackApi()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()
