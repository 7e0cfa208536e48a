"""The disabled store: memory switched off. Its reads find nothing and its writes keep nothing, by
design; it keeps no review queue, shares no claims and holds no scopes, and says so through the
contract (`curation()`, `claims()` and `maintenance()` answer None)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from memory.ranking.fusion import Ranked
from memory.stores.contract import CompactingStore, CuratedStore, EventClaims, ScopeMaintenance
from memory.types import (
    AuditQuery,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    ReadAudit,
    SourceLink,
    WriteResult,
)


class NullMemoryStore:
    """Memory switched off: remembers nothing, finds nothing."""

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        return []

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        return {}

    async def open(self) -> None:
        return None

    def curation(self) -> CuratedStore | None:
        """None: a disabled store keeps no review queue or history (a command says so in one line)."""
        return None

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        return WriteResult()

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[MemoryRecord]:
        return []

    async def forget(self, scope_key: str, record_id: str) -> bool:
        return False

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        return 0

    async def pseudonymize_person(self, person_key: str, pseudonym: str) -> int:
        """0: it keeps no log that could name anyone."""
        return 0

    async def erase_expired(self) -> int:
        return 0

    def claims(self) -> EventClaims | None:
        """None: it shares nothing with another process."""
        return None

    async def link_sources(self, link: SourceLink) -> None:
        return None

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        return 0

    def maintenance(self) -> ScopeMaintenance | None:
        """None: it holds no scope to walk or reindex."""
        return None

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        return []

    async def record_read(self, entry: ReadAudit) -> None:
        return None

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        return []

    def compaction(self) -> CompactingStore | None:
        return None

    async def aclose(self) -> None:
        return None
