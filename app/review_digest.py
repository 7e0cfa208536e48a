"""Admins hear of waiting records: after reflection queued a record for review, each admin is sent
a digest (memory/rules/review_digest.py) at most once per `memory.review_digest_hours`.

Surface-agnostic: a `DigestSender` (app/slack/review_digest.py) reaches the admins it can and says it
its way. The window is a shared claim in the store when the store has claims (SQLite's ledger,
PostgreSQL, the memory service): it holds across restarts and across replicas sharing the store. A
store without claims is this process's own (in-process), and so is the window then.

The claim is taken before the digest is read and sent: at most once per window is the promise, so a
failure after the claim (the store's read, Slack) costs that window's digest — one warning — and never
a second DM. Nothing here ever raises into reflection: it runs after it, in the same tracked task set.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog

from memory.rules.review_digest import PendingDigest, digest_claim_key, summarize_pending, window_seconds
from memory.stores.contract import EventClaims, MemoryStore
from memory.types import MAX_LIMIT

log = structlog.get_logger("memory")

# How many admins are sent their DM at a time: a long admin list must not burst past Slack's per-minute
# limits on conversations.open and chat.postMessage, where a refusal costs that admin the window.
DIGEST_SENDS_AT_ONCE = 4


class DigestSender(Protocol):
    def recipient(self, admin: str) -> str | None:
        """Who `admin` is to this surface — one key per person, whichever form the settings name them
        in — or None for an admin it cannot message (the Slack sender: a Slack admin's user id)."""
        ...

    async def send(self, admin: str, digest: PendingDigest, now: float) -> None:
        """Tell `admin` (a user scope key, `user:slack:U0123`) what waits; raises on failure."""
        ...


class _LocalClaims:
    """The window in this process only: for a store that cannot claim (nobody shares it anyway)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}

    async def claim_event(self, key: str, ttl_seconds: float) -> bool:
        now = self._clock()
        if self._until.get(key, 0.0) > now:
            return False
        self._until[key] = now + ttl_seconds
        return True


class ReviewDigest:
    """Sends each reachable admin the digest of what waits, at most once per window."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        admins: Iterable[str],
        review_days: float,
        window_hours: float,
        sender: DigestSender,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._admins = tuple(dict.fromkeys(a.strip() for a in admins if a.strip()))
        self._review_days = review_days
        self._window = window_seconds(window_hours)
        self._sender = sender
        self._clock = clock
        self._claims: EventClaims = store.claims() or _LocalClaims(clock)

    async def queued(self) -> int:
        """Reflection queued records for review: send the admins whose window is open what waits in
        every shared scope of the store (whichever process or replica queued it). How many were sent;
        every failure is a warning."""
        admins = self._recipients()
        claimed = [admin for person, admin in admins.items() if await self._claim(person)]
        if not claimed:
            if admins:
                log.info("memory.review_digest", sent=0, admins=len(admins), claimed_elsewhere=len(admins))
            return 0
        digest = await self._digest()
        if digest is None:
            return 0
        now = self._clock()
        turns = asyncio.Semaphore(DIGEST_SENDS_AT_ONCE)
        results = await asyncio.gather(*(self._send(admin, digest, now, turns) for admin in claimed))
        sent = sum(results)
        log.info(
            "memory.review_digest",
            sent=sent,
            failed=len(claimed) - sent,
            admins=len(admins),
            claimed_elsewhere=len(admins) - len(claimed),
            waiting=digest.total,
            at_least=digest.at_least,
            scopes=len(digest.scopes),
            oldest_age_seconds=round(now - digest.oldest_at),
        )
        return sent

    def _recipients(self) -> dict[str, str]:
        """Each person the sender reaches, once (by their first listed form): the window is theirs."""
        recipients: dict[str, str] = {}
        for admin in self._admins:
            person = self._sender.recipient(admin)
            if person is not None:
                recipients.setdefault(person, admin)
        return recipients

    async def _claim(self, person: str) -> bool:
        try:
            return await self._claims.claim_event(digest_claim_key(person), self._window)
        except Exception as error:  # refuse rather than guess: a second DM is what the window forbids
            log.warning("memory.review_digest_failed", stage="claim", error=type(error).__name__)
            return False

    async def _digest(self) -> PendingDigest | None:
        store = self._store.curation()
        if store is None:
            return None
        try:
            keys = await store.review_scopes()
            found = await asyncio.gather(*(store.pending(key, MAX_LIMIT) for key in keys))
        except Exception as error:
            log.warning("memory.review_digest_failed", stage="read", error=type(error).__name__)
            return None
        return summarize_pending(dict(zip(keys, found, strict=True)), self._review_days, read_limit=MAX_LIMIT)

    async def _send(self, admin: str, digest: PendingDigest, now: float, turns: asyncio.Semaphore) -> bool:
        try:
            async with turns:
                await self._sender.send(admin, digest, now)
        except Exception as error:  # a warning; reflection already wrote, and nothing waits on this
            log.warning("memory.review_digest_failed", stage="send", error=type(error).__name__)
            return False
        return True
