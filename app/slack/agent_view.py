"""Slack's Agent messaging experience (manifest `agent_view`) and the older Assistant one.

Agent view: opening the app's Messages tab is `app_home_opened` with `tab == "messages"` (the bot sets
its suggested prompts for the DM, without a thread), and every top-level DM message starts a new
conversation (the bot gives it a title once the agent starts on it). Assistant view (still served
while workspaces move): `assistant_thread_started` carries the thread, and the prompts are set on
that thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.slack.tasks import Spawn
from app.steps import Step
from memory.rules.scorer import clean_memory_field

log = structlog.get_logger("slack")

# Also in manifest.yml (features.agent_view.suggested_prompts); a test keeps the two the same.
SUGGESTED_PROMPTS: tuple[dict[str, str], ...] = (
    {"title": "What do you remember about me?", "message": "memory list me"},
    {"title": "Summarize this week's decisions", "message": "What did we decide this week, and why?"},
    {"title": "Review a pull request", "message": "review owner/name#123"},
    {"title": "Explain how we deploy", "message": "How do we deploy, step by step?"},
)
PROMPTS_TITLE = "Try asking"
TITLE_LIMIT = 60


def conversation_title(text: str) -> str:
    """A new conversation's title: its first line, one line, cut at a word near the limit."""
    line = clean_memory_field(text.strip().splitlines()[0] if text.strip() else "") or "New conversation"
    if len(line) <= TITLE_LIMIT:
        return line
    cut = line[: TITLE_LIMIT - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[20:] else cut) + "…"


async def set_suggested_prompts(client: AsyncWebClient, channel: str, thread_ts: str | None = None) -> None:
    """Best effort. In the agent experience `thread_ts` must be absent (Slack ignores the call with it)."""
    try:
        await client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, thread_ts=thread_ts, title=PROMPTS_TITLE, prompts=list(SUGGESTED_PROMPTS)
        )
    except SlackClientError as error:
        log.info("slack.prompts_failed", channel=channel, error=type(error).__name__)


async def set_title(client: AsyncWebClient, channel: str, thread_ts: str, text: str) -> None:
    try:
        await client.assistant_threads_setTitle(
            channel_id=channel, thread_ts=thread_ts, title=conversation_title(text)
        )
    except SlackClientError as error:
        log.info("slack.title_failed", channel=channel, error=type(error).__name__)


class RunSurface(Protocol):
    """The Slack thread surface as the dispatcher uses it (app/slack/surface.py)."""

    async def set_status(self, text: str) -> None: ...
    async def send_reply(self, text: str) -> None: ...
    def note_run(self, run_id: str, memory_record_ids: tuple[str, ...]) -> None: ...
    def show_step(self, step: Step) -> None: ...
    def show_plan(self, title: str) -> None: ...


class TitledConversation:
    """A new conversation's surface that sets its title when the agent starts work on the message
    (its first status). A command is answered without the agent, so it never titles the conversation:
    `memory list` typed in the Messages tab is a command, not what the conversation is about."""

    def __init__(self, surface: RunSurface, set_title: Callable[[], None]) -> None:
        self._surface = surface
        self._set_title: Callable[[], None] | None = set_title

    async def set_status(self, text: str) -> None:
        set_title, self._set_title = self._set_title, None
        if set_title is not None:
            set_title()
        await self._surface.set_status(text)

    async def send_reply(self, text: str) -> None:
        await self._surface.send_reply(text)

    def note_run(self, run_id: str, memory_record_ids: tuple[str, ...]) -> None:
        self._surface.note_run(run_id, memory_record_ids)

    def show_step(self, step: Step) -> None:
        self._surface.show_step(step)

    def show_plan(self, title: str) -> None:
        self._surface.show_plan(title)


def legacy_thread(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """`assistant_thread_started` → (channel, thread_ts) of the Assistant thread, if well formed."""
    thread = event.get("assistant_thread")
    if not isinstance(thread, Mapping):
        return None
    channel, ts = thread.get("channel_id"), thread.get("thread_ts")
    return (channel, ts) if isinstance(channel, str) and isinstance(ts, str) and channel and ts else None


def on_thread_started(
    client: AsyncWebClient, body: Mapping[str, Any], event: Mapping[str, Any], spawn: Spawn
) -> None:
    """`assistant_thread_started` (the Assistant experience): the new thread gets the prompts."""
    thread = legacy_thread(event)
    log.info("slack.event", event_id=body.get("event_id"), event_type="assistant_thread_started")
    if thread is not None:
        channel, thread_ts = thread
        spawn(set_suggested_prompts(client, channel, thread_ts), name="slack-prompts")
