"""What a pending record would replace: the active record its approval supersedes.

`memory pending`, the App Home's review section and `memory approve` name it (its id always, its text
where the reader may see it, by the read rule), so an admin never retires a record they were not
shown. A pending correction's row names its target; once edited, its newest version names its own
earlier version instead, and the chain's history names the target (`pending_target_id`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memory.rules.curation import pending_target_id
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import CuratedStore
from memory.types import MemoryRecord


@dataclass(frozen=True, slots=True)
class Replaced:
    """The active record a pending one would supersede: its id, and its row where the reader may see it."""

    id: str
    record: MemoryRecord | None


async def replaced_records(
    store: CuratedStore, scope_key: str, pending: Sequence[MemoryRecord]
) -> dict[str, MemoryRecord]:
    """By pending id, the active record each would supersede; a pending record that corrects
    nothing (or whose target is gone) has no entry."""
    asked = {p.id: p.supersedes for p in pending if p.supersedes}
    active = await _active(store, scope_key, asked.values())
    found = {pending_id: active[target] for pending_id, target in asked.items() if target in active}
    unresolved = [pending_id for pending_id in asked if pending_id not in found]
    if unresolved:  # edited corrections: their rows name their own earlier versions
        histories = await asyncio.gather(*(store.history(scope_key, i) for i in unresolved))
        targets = {i: pending_target_id(h) for i, h in zip(unresolved, histories, strict=True)}
        active = await _active(store, scope_key, (t for t in targets.values() if t))
        found.update({i: active[t] for i, t in targets.items() if t in active})
    return found


async def replaced_record(store: CuratedStore, scope_key: str, record_id: str) -> MemoryRecord | None:
    """The active record one pending record would supersede, if any (read before it is approved)."""
    target = pending_target_id(await store.history(scope_key, record_id))
    return (await _active(store, scope_key, [target] if target else [])).get(target or "")


def as_shown(found: Mapping[str, MemoryRecord], reader: Reader) -> dict[str, Replaced]:
    """Each target by pending id, its row kept only where the reader may see it."""
    return {
        pending_id: Replaced(record.id, record if may_show(record, reader) else None)
        for pending_id, record in found.items()
    }


async def _active(store: CuratedStore, scope_key: str, ids: Iterable[str]) -> dict[str, MemoryRecord]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return {r.id: r for r in await store.fetch(scope_key, wanted) if r.status == "active"}
