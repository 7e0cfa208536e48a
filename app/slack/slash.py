"""The `/memory` slash command: the command's words go to the command registry with who asked and
where, and the reply comes back ephemerally (only the asker sees it, wherever it was typed)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from app.audience import conversation_reader
from app.slack.conversations import Conversations
from app.slack.ephemeral import respond_ephemeral
from app.slack.events import SURFACE, SlackIdentity, visibility_from_slash_channel
from app.slack.messages import WARNING_REPLY
from app.slack.people import People, asker_visibility
from commands.registry import CommandSet
from memory.rules.visibility import SLASH_THREAD_SUFFIX

log = structlog.get_logger("slack")

# The registry's group word: `/memory list …` reaches it as `memory list …`.
GROUP = "memory"


CallerFactory = Callable[..., Any]
ChannelRepo = Callable[[str], Awaitable[str | None]]


class SlashCommand:
    """One registry call per invocation; its usage is the registry's, so it names every command."""

    def __init__(
        self,
        *,
        registry: CommandSet | None,
        identity: SlackIdentity,
        conversations: Conversations,
        people: People,
        caller_factory: CallerFactory,
        channel_repo: ChannelRepo | None,
    ) -> None:
        self._people = people
        self._registry = registry
        self._identity = identity
        self._conversations = conversations
        self._caller_factory = caller_factory
        self._channel_repo = channel_repo

    async def run(self, command: Mapping[str, Any], respond: Any, team_id: str | None) -> None:
        log.info(
            "slack.command", command=command.get("command"), channel=str(command.get("channel_id") or "")
        )
        try:
            if self._registry is None:
                raise RuntimeError("no command registry configured")
            caller = await self._caller(command, team_id)
            words = str(command.get("text") or "").strip()
            reply = await self._registry.handle(f"{GROUP} {words}".strip(), caller)
            # Words the registry reads as prose are no command here: the slash command only runs commands.
            text = reply.text if reply is not None else self._registry.usage(GROUP)
        except Exception as error:
            ref = uuid.uuid4().hex[:8]
            log.error("slack.command_failed", ref=ref, error=type(error).__name__, exc_info=True)
            text = WARNING_REPLY.format(ref=ref)
        await respond_ephemeral(respond, text, failed_event="slack.command_respond_failed")

    async def _caller(self, command: Mapping[str, Any], team_id: str | None) -> Any:
        """Who typed the command, where, and who reads the answer: the asker alone."""
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "") or None
        team = str(command.get("team_id") or team_id or "") or None
        visibility = await asker_visibility(
            self._people, self._conversations, command, user=user, workspace=team, channel=channel
        )
        if visibility is None and channel:
            visibility = visibility_from_slash_channel(channel, command.get("channel_name"))
        channel_key = self._identity.channel(team, channel)
        thread_repo = None
        if self._channel_repo is not None and channel_key is not None:
            lookup, key = self._channel_repo, channel_key

            async def thread_repo() -> str | None:
                return await lookup(key)

        user_key = self._identity.person(command, user, team)
        return self._caller_factory(
            user_id=user_key,
            channel_id=channel_key,
            channel_visibility=visibility,
            thread_key=f"{channel_key}{SLASH_THREAD_SUFFIX}",
            surface=SURFACE,
            thread_repo=thread_repo,
            # The answer is ephemeral: only the asker sees it, wherever it was typed.
            reader=conversation_reader(
                visibility, user_id=user_key, channel_id=channel_key, private_reply=True
            ),
        )
