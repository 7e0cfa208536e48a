"""Start-up migration: a DM has no shared scope, so the `channel:` scopes older versions wrote for DMs
are emptied — each active record moved into the person's own user scope when the store can tell who
that person is, and every row of the old scope erased (reason `migrated`) either way.

A DM's scope is told by its key's Slack form (`channel:slack:D…`, `channel:slack:T…:D…`,
memory/rules/scope.py), not by the records' origins: rows from before origins were stored read as
`private`. The owner is the one person the read audit names for the scope's runs and threads (its
`asker`, and the user scope each of those runs read); no evidence, or two people, and nothing is
moved — erased rather than guessed, since a wrong guess would show one person's DM to another.

Written over the store protocol only, so the durable stores (SQLite, PostgreSQL) migrate the same
way; a second run finds nothing active and does nothing. A store that cannot list its scopes has
nothing to migrate here: the in-process store starts empty, and the memory service migrates its own
store when it starts (the bot's HTTP client is not asked to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import structlog

from memory.rules.curation import record_candidate
from memory.rules.engine import parse_record_id, record_id
from memory.rules.scope import dm_channel_scope, scope_kind, validate_scope_key
from memory.rules.visibility import record_owner
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, AuditQuery, MemoryCandidate, MemoryRecord

log = structlog.get_logger("memory")

# Records per write: the wire's batch bound, so the service over HTTP takes each as one batch.
_BATCH = 50


@dataclass(frozen=True, slots=True)
class DmMigration:
    """What one start-up migration did: scopes emptied, records moved, records erased unmoved."""

    scopes: int = 0
    moved: int = 0
    erased: int = 0


async def migrate_dm_scopes(store: MemoryStore) -> DmMigration:
    """Empty every DM `channel:` scope into its owner's user scope (see the module docstring)."""
    maintenance = store.maintenance()
    if maintenance is None:
        return DmMigration()
    scopes = moved = erased = 0
    for scope_key in await maintenance.scope_keys():
        conversation = dm_channel_scope(scope_key)
        if conversation is None:
            continue
        records = await _active_records(store, scope_key)
        owner = await _owner(store, records) if records else None
        if owner is not None:
            for start in range(0, len(records), _BATCH):
                batch = records[start : start + _BATCH]
                await store.write(owner, [_moved(record, conversation) for record in batch])
        # Every row, not only the active ones: a superseded row still holds its text.
        gone = await store.erase_scope(scope_key, "migrated")
        if not gone:
            continue
        scopes += 1
        moved += len(records) if owner is not None else 0
        erased += gone if owner is None else 0
        log.info(
            "memory.dm_scope_migrated",
            scope_key=scope_key,
            owner=owner,
            records=len(records),
            erased=gone,
        )
    return DmMigration(scopes=scopes, moved=moved, erased=erased)


async def _active_records(store: MemoryStore, scope_key: str) -> list[MemoryRecord]:
    """Every active record of the scope, oldest first. A listing is capped (newest first), so the
    records are fetched by id, window by window, up to the newest one listed."""
    newest = await store.list(scope_key, MAX_LIMIT)
    seqs = [parsed[1] for record in newest if (parsed := parse_record_id(record.id)) is not None]
    if not seqs:
        return []
    found: list[MemoryRecord] = []
    for start in range(1, max(seqs) + 1, MAX_LIMIT):
        ids = [record_id(scope_key, seq) for seq in range(start, min(start + MAX_LIMIT, max(seqs) + 1))]
        found += [record for record in await store.fetch(scope_key, ids) if record.status == "active"]
    return found


async def _owner(store: MemoryStore, records: Sequence[MemoryRecord]) -> str | None:
    """The user scope of the one person the read audit names for these records' runs and threads."""
    queries = {AuditQuery(run_id=r.source_run_id, limit=MAX_LIMIT) for r in records if r.source_run_id}
    queries |= {AuditQuery(thread_key=r.source_thread_key, limit=MAX_LIMIT) for r in records}
    owners: set[str] = set()
    for query in queries:
        for entry in await store.read_audit(query):
            if entry.asker:
                owners.add(f"user:{entry.asker}")
            owners.update(key for key in entry.scope_keys if scope_kind(key) == "user")
    if len(owners) != 1:
        return None
    (owner,) = owners
    try:
        validate_scope_key(owner)
    except ValueError:
        return None
    return owner if record_owner(owner) is not None else None


def _moved(record: MemoryRecord, conversation: str) -> MemoryCandidate:
    """The record as its owner's, labelled as learned in that DM (whatever an old row said), still
    dated by when its conversation happened (the move itself is no new observation)."""
    return replace(
        record_candidate(record),
        origin="dm",
        origin_conversation=conversation,
        observed_at=record.observed_at if record.observed_at is not None else record.created_at,
    )


async def migrate_dm_scopes_at_start(store: MemoryStore) -> None:
    """The migration at start-up: a failure is one warning, never a refused start (what it would have
    moved stays unread: no run reads a DM's channel scope, and the read rule shows its rows to nobody)."""
    try:
        done = await migrate_dm_scopes(store)
    except Exception as error:
        log.warning("memory.dm_scope_migration_failed", error=type(error).__name__)
        return
    if done.scopes:
        log.info("memory.dm_scopes_migrated", scopes=done.scopes, moved=done.moved, erased=done.erased)
