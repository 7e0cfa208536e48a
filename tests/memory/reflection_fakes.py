"""A scripted extractor model and a store that records its writes, for the reflection tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from app.agent.providers.base import Completion, CompletionRequest
from app.policy import authorize, reflection_actor
from memory.rules.scope import RequestScopes
from memory.rules.write_gate import WRITE_ACTION, WriteGate
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, Ranked, WriteResult

SCOPES = RequestScopes(org="org:acme", repo="repo:acme/api", channel="channel:slack:C1", user="user:slack:UA")
THREAD = "slack:C1:1700000000.000100"
RUN_ID = "run-42"


class ScriptedProvider:
    """Answers each `complete` with the next scripted reply (text, or an exception to raise)."""

    def __init__(self, *replies: str | BaseException, gate: asyncio.Event | None = None) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []
        self.gate = gate

    async def complete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return Completion(text=reply, stop_reason="end_turn")


class RecordingStore(NullMemoryStore):
    """The real in-process store behind the MemoryStore seam, plus a log of every write batch."""

    def __init__(self) -> None:
        self.inner = InProcessMemoryStore(clock=lambda: 1_800_000_000.0)
        self.writes: list[tuple[str, list[MemoryCandidate]]] = []

    def records(self, scope_key: str) -> list[MemoryRecord]:
        return self.inner.records(scope_key)

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        return await self.inner.retrieve(scope_key, query, limit)

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        return await self.inner.retrieve_many(scope_keys, query, limit)

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        self.writes.append((scope_key, list(candidates)))
        return await self.inner.write(scope_key, candidates)

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[MemoryRecord]:
        return await self.inner.list(scope_key, limit, query)

    async def forget(self, scope_key: str, record_id: str) -> bool:
        return await self.inner.forget(scope_key, record_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


def envelope(*facts: dict[str, Any], summary: str = "") -> str:
    return json.dumps({"facts": list(facts), "summary": summary})


def fact(text: str, audience: str | None = None, confidence: float = 0.9, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"text": text, "confidence": confidence, **extra}
    if audience is not None:
        out["audience"] = audience
    return out


def policy_gate(scopes: RequestScopes) -> WriteGate:
    """The real policy with the run's actor bound, as the app wires it."""
    return partial(authorize, reflection_actor(scopes), WRITE_ACTION)
