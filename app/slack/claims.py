"""One answer per message across bot replicas: the shared claim taken before an answer starts.

Each process already refuses a second delivery it has seen itself (app/slack/routing.py). A retry
that Slack sends to another replica — or the twin delivery of one message under the other event
type — is only recognised by a store the replicas share (memory/rules/claims.py): the SQLite ledger
of one data directory, PostgreSQL, or the memory service. The claim names the message, not the
event id, so a retry and a twin are the same claim.

The claim is taken after the ack, in the answer's task: a round trip to the store must not hold
Slack's 3-second ack, and it need not, because the store's atomic claim — not which replica is
faster — decides who answers. A claim the store cannot answer (down, slow, refused) never costs the
message its answer: the event is answered, and the failure is logged. Answering twice is better than
answering nobody.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

import structlog

from app.slack.state import RecentKeys
from app.slack.tasks import Spawn
from memory.stores.contract import EventClaims

log = structlog.get_logger("slack")

# The answer waits this long for the shared claim, at most; then it goes ahead.
CLAIM_TIMEOUT_SECONDS = 2.0


def event_claim_key(team_id: str | None, event_id: str) -> str:
    """An event that is not a message (a Home tab opened, an Assistant thread started): its id is the
    same on every delivery of it, retries included."""
    return f"slack:event:{team_id or '-'}:{event_id}"


def message_claim_key(team_id: str | None, channel: str, ts: str) -> str:
    """The message's key: the same for every delivery of it, on every replica."""
    return f"slack:message:{team_id or '-'}:{channel}:{ts}"


class SharedClaims:
    """The replicas' shared claims, or none (a store of this process only: per-process dedupe)."""

    def __init__(
        self, claims: EventClaims | None, *, ttl_seconds: float, timeout: float = CLAIM_TIMEOUT_SECONDS
    ) -> None:
        self._claims = claims
        self._ttl = ttl_seconds
        self._timeout = timeout

    @property
    def shared(self) -> bool:
        return self._claims is not None

    async def first(self, key: str, fields: Mapping[str, Any]) -> bool:
        """True when this process answers: it took the claim, there is nothing to share it with, or
        the store could not say (logged; at-least-once)."""
        if self._claims is None:
            return True
        try:
            async with asyncio.timeout(self._timeout):
                return await self._claims.claim_event(key, self._ttl)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            reason = "timeout" if isinstance(error, TimeoutError) else type(error).__name__
            log.warning("slack.claim_failed", error=reason, answered=True, **fields)
            return True


class EventsOnce:
    """The events that are not messages, each handled once: a redelivery this process saw is dropped
    before its work starts, and the work itself first takes the event's shared claim, so a retry that
    reached another replica is dropped there."""

    def __init__(self, shared: SharedClaims, seen: RecentKeys, spawn: Spawn) -> None:
        self._shared = shared
        self._seen = seen
        self._spawn = spawn

    def spawner(self, body: Mapping[str, Any], kind: str, team_id: str | None) -> Spawn | None:
        """The spawn the event's work goes through, or None when this process already took it."""
        event_id = str(body.get("event_id") or "")
        fields = {"event_id": event_id, "event_type": kind}
        if not event_id:  # nothing to recognise a retry by: handled, as before
            return self._spawn
        if not self._seen.claim(event_id):
            log.info("slack.event", action="duplicate", **fields)
            return None
        key = event_claim_key(body.get("team_id") or team_id, event_id)

        def spawn(coro: Coroutine[Any, Any, None], name: str) -> None:
            self._spawn(self._first(key, fields, coro), name=name)

        return spawn

    async def _first(self, key: str, fields: Mapping[str, Any], coro: Coroutine[Any, Any, None]) -> None:
        if not await self._shared.first(key, fields):
            coro.close()
            log.info("slack.event", action="claimed_elsewhere", **fields)
            return
        await coro
