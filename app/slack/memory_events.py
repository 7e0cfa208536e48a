"""Memory follows Slack (app/slack/provenance.py): an edited or deleted source message erases what
was learned from it, a deleted channel erases its scope, and *Why?* shows the asker what an answer
drew on. With memory off (no store) the events are logged and ignored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from app.audience import conversation_reader
from app.slack.conversations import Conversations
from app.slack.ephemeral import respond_ephemeral
from app.slack.events import SlackIdentity
from app.slack.people import People, asker_visibility
from app.slack.provenance import WHY_ACTION, SourceChange, action_value, deleted_channel_scope, source_change
from app.slack.tasks import Spawn
from commands.provenance import Permalinks, explain_run, render_why
from memory.stores.contract import MemoryStore

log = structlog.get_logger("slack")

MEMORY_OFF_WHY = "🔕 Memory is off here: no answer drew on it."
WHY_FAILED = "⚠️ Couldn't look up what that answer drew on. Please try again."


class MemoryFollowsSlack:
    """The listeners that keep memory in step with Slack: erasures, and the Why? button."""

    def __init__(
        self,
        *,
        memory: MemoryStore | None,
        identity: SlackIdentity,
        conversations: Conversations,
        people: People,
        permalinks: Permalinks,
        spawn: Spawn,
    ) -> None:
        self._people = people
        self._memory = memory
        self._identity = identity
        self._conversations = conversations
        self._permalinks = permalinks
        self._spawn = spawn

    def accept_source_change(
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
        self._spawn(self._erase_sources(self._memory, change), name="slack-source-change")

    def accept_channel_deleted(self, body: Mapping[str, Any], event: Mapping[str, Any], context: Any) -> None:
        scope = deleted_channel_scope(event, self._identity, body.get("team_id") or context.team_id)
        log.info(
            "slack.event",
            event_id=body.get("event_id"),
            event_type=event.get("type"),
            action="channel_deleted",
        )
        if scope is not None and self._memory is not None:
            self._spawn(self._erase_channel(self._memory, scope), name="slack-channel-deleted")

    async def why(self, body: Mapping[str, Any], respond: Any, team_id: str | None) -> None:
        """*Why?*: the records the run read, to the one who clicked, ephemerally, under the read rule."""
        run_id = action_value(body, WHY_ACTION)
        team = (body.get("team") or {}).get("id") or team_id
        clicker = (body.get("user") or {}).get("id")
        user = self._identity.person(body, clicker, team)
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        try:
            if self._memory is None or run_id is None:
                text = MEMORY_OFF_WHY
            else:
                # Only the clicker sees the answer, but in a channel shared with another organization
                # they may be one of its members: read as the channel (app/audience.py); an outsider
                # (a guest, another organization's member) anywhere as such a channel.
                visibility = await asker_visibility(
                    self._people, self._conversations, body, user=clicker, workspace=team, channel=channel
                )
                reader = conversation_reader(
                    visibility,
                    user_id=user,
                    channel_id=self._identity.channel(team, channel),
                    private_reply=True,
                )
                answer = await explain_run(self._memory, reader, run_id=run_id)
                text = await render_why(answer, machine=False, permalinks=self._permalinks)
                log.info(
                    "memory.why",
                    run_id=run_id,
                    shown=len(answer.shown),
                    hidden=answer.hidden,
                    gone=answer.gone,
                )
        except Exception as error:
            log.warning("slack.why_failed", error=type(error).__name__)
            text = WHY_FAILED
        await respond_ephemeral(
            respond, text, failed_event="slack.why_respond_failed", replace_original=False
        )

    async def _erase_sources(self, memory: MemoryStore, change: SourceChange) -> None:
        try:
            erased = await memory.erase_sources([change.message], change.reason)
        except Exception as error:
            log.warning("slack.source_erase_failed", reason=change.reason, error=type(error).__name__)
            return
        log.info("memory.source_erased", reason=change.reason, erased=erased)

    async def _erase_channel(self, memory: MemoryStore, scope: str) -> None:
        try:
            erased = await memory.erase_scope(scope, "channel_deleted")
        except Exception as error:
            log.warning("slack.channel_erase_failed", scope_key=scope, error=type(error).__name__)
            return
        log.info("memory.channel_erased", scope_key=scope, erased=erased)
