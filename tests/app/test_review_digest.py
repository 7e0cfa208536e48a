"""The admins' digest over the memory service: it tells what waits in every shared scope the service
holds, whichever bot process queued it (the real service app in-process, the bot's HTTP client, a real
SQLite store behind it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.review_digest import ReviewDigest
from memory.rules.review_digest import PendingDigest
from memory.service.app import create_app
from memory.stores.http import HttpMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate
from tests.memory.service_support import TOKEN

ADMIN = "user:slack:UADMIN"


class Recorder:
    """A sender that reaches every admin and keeps what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, PendingDigest]] = []

    def recipient(self, admin: str) -> str | None:
        return admin

    async def send(self, admin: str, digest: PendingDigest, now: float) -> None:
        self.sent.append((admin, digest))


def waiting(text: str, channel: str) -> MemoryCandidate:
    return MemoryCandidate(
        "fact",
        text,
        f"slack:{channel}:1700000000.000100",
        origin="public",
        origin_conversation=f"slack:{channel}",
    )


@pytest.fixture
async def service_clients(tmp_path: Path) -> AsyncIterator[tuple[HttpMemoryStore, HttpMemoryStore]]:
    """Two bot processes' HTTP clients of one memory service over one SQLite store."""
    inner = SqliteMemoryStore(tmp_path / "memory")
    app = create_app(inner, TOKEN)
    clients = tuple(
        HttpMemoryStore("http://memory.test", TOKEN, transport=httpx.ASGITransport(app=app)) for _ in range(2)
    )
    try:
        yield clients[0], clients[1]
    finally:
        for client in clients:
            await client.aclose()
        await inner.aclose()


async def test_the_digest_counts_what_another_process_queued_behind_the_same_service(
    service_clients: tuple[HttpMemoryStore, HttpMemoryStore],
) -> None:
    this, other = service_clients
    await other.write_pending("channel:slack:C2", [waiting("Standups moved to ten", "C2")])
    await this.write_pending("org:acme", [waiting("Deploys freeze on Fridays", "C1")])
    sender = Recorder()
    digest = ReviewDigest(store=this, admins=[ADMIN], review_days=7, window_hours=24, sender=sender)

    assert await digest.queued() == 1
    [(admin, told)] = sender.sent
    assert admin == ADMIN
    assert (told.total, sorted(told.scopes)) == (2, [("channel:slack:C2", 1), ("org:acme", 1)])
