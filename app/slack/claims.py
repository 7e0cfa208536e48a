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
from collections.abc import Mapping
from typing import Any

import structlog

from memory.stores.contract import EventClaims

log = structlog.get_logger("slack")

# The answer waits this long for the shared claim, at most; then it goes ahead.
CLAIM_TIMEOUT_SECONDS = 2.0


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
