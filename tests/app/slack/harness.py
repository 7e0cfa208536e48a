"""Runs a real SlackBot (Bolt AsyncApp over aiohttp on 127.0.0.1) against the fake Slack Web API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from app.incoming import IncomingMessage
from app.slack.bot import SlackBot, build_slack_app
from app.slack.options import SlackOptions
from app.slack.transports.http_site import EVENTS_PATH, bound_port, start_http
from app.surface import Surface
from tests.fakes.slack_api import SIGNING_SECRET, FakeSlackApi, SlackDelivery


@dataclass
class RecordingDispatcher:
    """A stand-in for the runtime's dispatcher: records each message, shows a status, replies."""

    answer: Callable[[IncomingMessage], str] = lambda message: f"answer to: {message.text}"
    error: Exception | None = None
    gate: asyncio.Event | None = None
    messages: list[IncomingMessage] = field(default_factory=list)

    async def dispatch(self, message: IncomingMessage, surface: Surface) -> None:
        self.messages.append(message)
        await surface.set_status("is thinking…")
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        await surface.send_reply(self.answer(message))


@dataclass(frozen=True)
class FakeReply:
    text: str
    ok: bool = True
    receipt: Any = None


@dataclass
class RecordingRegistry:
    reply: str | None = "your records: none"
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def handle(self, text: str, caller: Any) -> FakeReply | None:
        self.calls.append((text, dict(caller)))
        return FakeReply(self.reply) if self.reply is not None else None


def dict_caller(**fields: Any) -> dict[str, Any]:
    return fields


@dataclass
class RunningBot:
    bot: SlackBot
    slack: SlackDelivery
    url: str

    async def settle(self) -> None:
        """Wait until every answer the bot started has finished."""
        assert await self.bot.drain(within=10), "the bot did not finish its answers"


@asynccontextmanager
async def running_bot(
    fake: FakeSlackApi,
    dispatcher: Any,
    *,
    registry: Any = None,
    options: SlackOptions | None = None,
    caller_factory: Callable[..., Any] = dict_caller,
    http: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncIterator[RunningBot]:
    """`http` goes to `start_http` (slow-client limits, metrics and their token)."""
    bot = build_slack_app(
        dispatcher=dispatcher,
        registry=registry,
        bot_token=fake.token,
        signing_secret=SIGNING_SECRET,
        base_url=fake.base_url,
        options=options,
        caller_factory=caller_factory,
        **kwargs,
    )
    runner = await start_http(bot, host="127.0.0.1", port=0, **(http or {}))
    url = f"http://127.0.0.1:{bound_port(runner)}{EVENTS_PATH}"
    try:
        yield RunningBot(bot=bot, slack=SlackDelivery(url), url=url)
    finally:
        await bot.drain(within=10)
        await runner.cleanup()
        await bot.aclose()
