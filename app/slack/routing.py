"""Event routing: which Slack message events the bot answers, and that it answers each at most once.

Every event is acknowledged at once; the work happens in a tracked background task (so shutdown can
wait for it). A redelivered event (same `event_id`) and the twin delivery of one message (`app_mention`
plus `message.channels` for the same `channel`/`ts`) are recognised before any task starts, so a
message is answered at most once by this process; with a store the replicas share, the answer first
takes the message's shared claim (app/slack/claims.py), so it is answered once by all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import structlog
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackClientError

from app.slack.claims import SharedClaims, message_claim_key
from app.slack.conversations import Conversations
from app.slack.events import (
    SlackIdentity,
    addressed_to_someone_else,
    from_another_organization,
    is_thread_reply,
    mentions_user,
    skip_reason,
    thread_has_bot,
    thread_root,
    user_team,
)
from app.slack.memory_events import MemoryFollowsSlack
from app.slack.messages import Job, MessageAnswerer
from app.slack.options import SlackOptions
from app.slack.provenance import SOURCE_SUBTYPES
from app.slack.state import RecentKeys
from app.slack.tasks import Spawn

log = structlog.get_logger("slack")


def retry_num(request: AsyncBoltRequest) -> str | None:
    """Slack's redelivery counter (`X-Slack-Retry-Num`; Bolt mirrors it for Socket Mode envelopes)."""
    values = request.headers.get("x-slack-retry-num")
    return values[0] if values else None


class EventRouter:
    """Claims each message event once and sends it on: to an answer, to memory, or nowhere (logged)."""

    def __init__(
        self,
        *,
        identity: SlackIdentity,
        options: SlackOptions,
        conversations: Conversations,
        answerer: MessageAnswerer,
        memory_events: MemoryFollowsSlack,
        spawn: Spawn,
        shared: SharedClaims | None = None,
    ) -> None:
        self._identity = identity
        self._allow_bots = options.allow_bots
        self._conversations = conversations
        self._answerer = answerer
        self._memory_events = memory_events
        self._spawn = spawn
        opts = options
        self._shared = shared or SharedClaims(None, ttl_seconds=opts.dedupe_ttl_seconds)
        self._seen_events = RecentKeys(ttl=opts.dedupe_ttl_seconds, max_size=opts.dedupe_max_entries)
        self._claimed_messages = RecentKeys(ttl=opts.dedupe_ttl_seconds, max_size=opts.dedupe_max_entries)
        self._bot_threads = RecentKeys(
            ttl=opts.thread_memory_ttl_seconds, max_size=opts.thread_memory_max_entries
        )
        self._not_bot_threads = RecentKeys(ttl=opts.not_a_bot_thread_ttl_seconds, max_size=10_000)

    def accept(
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
        team_id = body.get("team_id") or context.team_id
        self._conversations.observe(team_id, event)
        fields = {"event_id": event_id, "event_type": kind, "channel": channel, "ts": event.get("ts")}
        if retry_num is not None:
            fields["retry_num"] = retry_num
        if event_id and not self._seen_events.claim(event_id):
            log.info("slack.event", action="duplicate", **fields)
            return
        ext_shared = body.get("is_ext_shared_channel")
        self._conversations.note_visibility(channel, event.get("channel_type"), ext_shared)
        if kind == "message" and event.get("subtype") in SOURCE_SUBTYPES:
            self._memory_events.accept_source_change(body, event, context, fields)
            return
        bot_user_id: str | None = context.bot_user_id
        bot_id: str | None = context.bot_id
        reason = skip_reason(event, bot_user_id=bot_user_id, bot_id=bot_id, allow_bots=self._allow_bots)
        if reason is not None:
            log.info("slack.event", action="ignored", reason=reason, **fields)
            return
        job = Job(
            event=event,
            event_id=event_id,
            team_id=team_id,
            user_team_id=user_team(event, team_id),
            channel=channel,
            ext_shared=ext_shared is True or from_another_organization(body, event, team_id),
            ts=str(event.get("ts") or ""),
            thread_ts=thread_root(event),
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            body=body,
        )
        self._route(job, kind, fields)

    def _route(self, job: Job, kind: str, fields: Mapping[str, Any]) -> None:
        """Addressed to the bot, or a reply in a thread it speaks in: answered; anything else is not."""
        event, bot_user_id = job.event, job.bot_user_id
        thread_key = self._identity.thread_key(job.team_id, job.channel, job.thread_ts)
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

    def _start(self, job: Job, thread_key: str, fields: Mapping[str, Any], how: str) -> None:
        if not self._claimed_messages.claim(f"{job.team_id}:{job.channel}:{job.ts}"):
            log.info("slack.event", action="twin", **fields)
            return
        self._bot_threads.add(thread_key)
        log.info("slack.event", action="accepted", how=how, shared=self._shared.shared, **fields)
        self._spawn(self._answer_once(job, thread_key, fields), name=f"slack-answer-{job.channel}-{job.ts}")

    async def _answer_once(self, job: Job, thread_key: str, fields: Mapping[str, Any]) -> None:
        """The answer, unless another replica holds the message's shared claim."""
        if not await self._shared.first(message_claim_key(job.team_id, job.channel, job.ts), fields):
            log.info("slack.event", action="claimed_elsewhere", **fields)
            return
        await self._answerer.answer(job, thread_key)

    async def _follow_up_if_bot_thread(self, job: Job, thread_key: str, fields: Mapping[str, Any]) -> None:
        """A thread reply without a mention: ours only when the bot already speaks in that thread."""
        try:
            replies = await self._conversations.thread_messages(thread_key, job.channel, job.thread_ts)
        except SlackClientError as error:
            log.warning("slack.thread_check_failed", channel=job.channel, error=type(error).__name__)
            return
        if not thread_has_bot(replies, job.bot_user_id, job.bot_id):
            self._not_bot_threads.add(thread_key)
            log.info("slack.event", action="ignored", reason="not_a_bot_thread", **fields)
            return
        job = dataclasses.replace(job, replies=tuple(replies))
        self._start(job, thread_key, fields, "follow_up")
