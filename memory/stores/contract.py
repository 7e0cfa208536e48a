"""What a memory store promises: every store protocol, declared once.

The core (the read path, reflection, the commands, the bot, the memory service) depends on these and
never on a concrete store. A store that cannot do something says so here, through its answer to
`curation()`, `claims()`, `maintenance()` or `compaction()` (None: it cannot), never by a caller
sniffing its type.

- `MemoryStore`: reading, writing with a cap, erasure, the run ledger and read audit, opening and
  closing. Every store, the disabled one included (its operations find and keep nothing by design).
- `CuratingStore`: the review queue, edits with history, consolidation, the curation log.
- `CuratedStore`: both at once, what `MemoryStore.curation()` hands out.
- `EventClaims`: "act on this key once" across every process sharing the store.
- `ScopeMaintenance`: listing the scopes a store holds, and giving older records their vectors.
- `CompactingStore`: rewriting a store's files so no erased byte stays in them.
- `StoreBackend`: what a backend does under the store front (memory/stores/front.py), its reading
  and erasing half `ReadBackend` (memory/stores/front_reads.py).

Lives under `memory.stores` (not beside the values in `memory.types`): nothing below the stores needs a
store, and everything above them may import this module.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from memory.ranking.embedder import Embedder
from memory.rules.person import PersonRename
from memory.stores.writing import Approval
from memory.types import (
    MACHINE_LABEL,
    AuditQuery,
    CompactionReport,
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    Ranked,
    ReadAudit,
    RecordVersion,
    SourceLink,
    WriteResult,
)

Progress = Callable[[str, int, int], None]


@runtime_checkable
class PseudonymizingStore(Protocol):
    """A store whose logs may name people: a person's erasure renames them there (memory/rules/person.py).
    Every store is one (`MemoryStore` includes it); the disabled store keeps no logs and renames none."""

    async def pseudonymize_person(self, person_key: str, pseudonym: str) -> int:
        """In every curation log and read-audit entry, the person's key (as actor, asker, a scope read
        and the ids of their records) becomes the pseudonym's, same for all; the shape stays. How many
        entries were renamed (0 the second time)."""
        ...


@runtime_checkable
class MemoryStore(PseudonymizingStore, Protocol):
    """Every store: the core depends on this and never on a concrete store (docs/architecture.md,
    invariant 1)."""

    async def open(self) -> None:
        """Verify the store at start-up (a database or service that answers); raises MemoryStoreError
        naming what to fix. A store with nothing behind it returns at once."""
        ...

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        """Relevant active records, ranked by the engine, usage bumped on the ones returned."""
        ...

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        """Several scopes' retrieves in one hop (one query embedding, usage bumped as `retrieve` bumps):
        each scope ranked and limited as its own retrieve would be. Scopes with nothing are left out."""
        ...

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """Apply one batch atomically: dedup, supersede, insert, then evict over `cap` (else the
        store's own cap) in the same transaction."""
        ...

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[MemoryRecord]:
        """Active records newest first, optionally whole-token filtered; never bumps usage."""
        ...

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """Erase one active or evicted record of this scope with every older version (reason
        `forgotten`); False when there was none."""
        ...

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        """Erase every record of one scope (a data-subject request, a deleted channel); how many."""
        ...

    async def erase_expired(self) -> int:
        """Erase every record past its scope's retention, in every scope (start-up); how many."""
        ...

    async def link_sources(self, link: SourceLink) -> None:
        """Remember which messages a run was distilled from (before its records are written)."""
        ...

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        """Erase the records of every run distilled from one of these messages; how many (0 the
        second time: idempotent under redelivery)."""
        ...

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> builtins.list[MemoryRecord]:
        """The records of this scope with these ids that are neither erased, expired nor pending (any
        other status), in id order."""
        ...

    async def record_read(self, entry: ReadAudit) -> None:
        """Append one read to the durable audit (and drop audit rows past their retention)."""
        ...

    async def read_audit(self, query: AuditQuery) -> builtins.list[ReadAudit]:
        """Audited reads matching the query, newest first."""
        ...

    async def aclose(self) -> None:
        """Release connections and threads."""
        ...

    def curation(self) -> CuratedStore | None:
        """This store as people curate it, or None when it keeps no review queue or history (the
        disabled store: a command then says so in one line, and a review queue is refused at start)."""
        ...

    def claims(self) -> EventClaims | None:
        """This store's claims shared by every process over it, or None when it shares nothing
        between processes (each process then dedupes events on its own)."""
        ...

    def maintenance(self) -> ScopeMaintenance | None:
        """This store's scope listing and reindexing, or None when it holds no vectors or scopes
        here (the memory service's client: maintenance runs on the service's host)."""
        ...

    def compaction(self) -> CompactingStore | None:
        """This store's rewrite of its files, or None when no erased byte outlives an erasure in
        them (SQLite rewrites at each erasure) or they are not here (the memory service's client)."""
        ...


@runtime_checkable
class CuratingStore(Protocol):
    """A store people can curate: the review queue, edits with history, consolidation. Every durable
    store (in-process, SQLite, PostgreSQL, the memory service's client) is one. Each action appends its
    curation entries in the same transaction as the change it records."""

    async def write_pending(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        """Like `write`, but new records wait as `pending` (a restatement of an active or pending
        record still folds into it; supersede and eviction wait for approval). `cap` (else the
        store's) also bounds how many may wait: the oldest beyond it expire."""
        ...

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        """Pending records of one scope, newest first."""
        ...

    async def review_scopes(self) -> builtins.list[str]:
        """Every shared scope the store holds (org, repo, channel): where records can wait for review,
        as the admins' digest reads them — whichever process or replica queued them."""
        ...

    async def approve(
        self, scope_key: str, record_id: str, actor: str, *, cap: int | None = None
    ) -> MemoryRecord | None:
        """Make a pending record active (then supersede and evict over `cap`, else the store's, as a
        write would); None if it was not pending."""
        ...

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        """Erase a pending record (reason `rejected`, no text left); False if it was not pending."""
        ...

    async def expire_pending(self, older_than: float, actor: str = "system") -> int:
        """Erase every pending record created before `older_than` (reason `expired`), every scope."""
        ...

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, *, typed_in: OriginLabel = MACHINE_LABEL
    ) -> MemoryRecord | None:
        """A new version of an active or pending record: same scope, kind, provenance and status,
        `supersedes` the old one (now `superseded`); its origin the narrower of the old one's and
        `typed_in`, the conversation the new words were typed in (`edit_candidate`). None if there
        was no such record."""
        ...

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        """Every version of the chain this record is in, oldest first; empty if none is known."""
        ...

    async def record_curation(self, entry: CurationEntry) -> None:
        """Append one entry for an action the store did not do itself (a remember, a forget)."""
        ...

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        """Entries naming this record (as `record_id` or `related_id`), newest first."""
        ...

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        """Every active record of one scope (for consolidation), oldest first; never bumps usage."""
        ...

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        """Fold active duplicates into the survivor (use count added, last use and observed time the
        latest), erase them (reason `merged`); how many were merged."""
        ...


@runtime_checkable
class CuratedStore(MemoryStore, CuratingStore, Protocol):
    """A store with both halves: what `MemoryStore.curation()` hands out."""


@runtime_checkable
class EventClaims(Protocol):
    """A store that can claim a key once across every process sharing it (memory/rules/claims.py)."""

    async def claim_event(self, key: str, ttl_seconds: float) -> bool:
        """True for the first claim of `key` until `ttl_seconds` have passed; False for every repeat."""
        ...


@runtime_checkable
class CompactingStore(Protocol):
    """A store whose files keep erased bytes until rewritten: `switchboard memory compact` rewrites
    them at once (the store does so by itself after its erasures, too)."""

    async def compact(self) -> CompactionReport:
        """Every table that held erased text rewritten now; waits for another replica's compaction."""
        ...


@runtime_checkable
class ScopeMaintenance(Protocol):
    """A store that holds its scopes here: `switchboard memory reindex`, `consolidate --scope all` and
    the start-up DM migration walk them."""

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope the store holds records for that it can read."""
        ...

    async def unreadable_scopes(self) -> builtins.list[str]:
        """What holds a scope the store cannot read (a damaged SQLite file: its name), which
        `scope_keys` therefore leaves out: a list shown to a person says so. [] where every scope is
        rows of one database."""
        ...

    async def reindex(self, scope_key: str, *, batch: int = ..., progress: Progress | None = None) -> int:
        """Vectors for a scope's records that have none of the store's embedder; resumable; how many
        (0 without an embedder)."""
        ...

    async def foreign_vectors(self) -> int:
        """How many active records carry a vector of another embedder than the store's (0 without
        one): what `reindex` would redo, said once at start-up."""
        ...


class ReadBackend(Protocol):
    """The reading and erasing half of a backend, under memory/stores/front_reads.py: arguments
    already checked, limits clamped, cutoffs computed, events logged by the front; a storage failure
    raised as a `MemoryStoreError`, a storage out of reach as a `MemoryUnavailable`."""

    async def rank(
        self, scope_key: str, query: str, terms: Sequence[str], limit: int
    ) -> builtins.list[Ranked]:
        """The scope's best unexpired active records for the query (`terms`: its prefilter terms,
        never empty), at most `limit`, best first, as their usage bump leaves them."""
        ...

    async def rank_many(
        self, scope_keys: Sequence[str], query: str, terms: Sequence[str], limit: int
    ) -> dict[str, builtins.list[Ranked]]:
        """Each distinct scope ranked as `rank` ranks it, in one hop with the query embedded once;
        scopes with nothing left out."""
        ...

    async def list_records(
        self, scope_key: str, limit: int, query: str | None, cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        """Active records created at `cutoff` or later, newest first, at most `limit`, whole-token
        filtered by `query` when there is one; no usage bump."""
        ...

    async def fetch(
        self, scope_key: str, record_ids: Sequence[str], cutoff: float | None
    ) -> builtins.list[MemoryRecord]:
        """The scope's records with these (distinct) ids that are neither erased nor pending, created
        at `cutoff` or later (None: no retention), in id order."""
        ...

    async def forget(self, scope_key: str, record_id: str) -> bool:
        """The active or evicted record of this scope and every version of its chain erased (reason
        `forgotten`); False when it was neither."""
        ...

    async def erase_scope(self, scope_key: str, reason: EraseReason) -> int:
        """Every not-yet-erased record of the scope erased; how many."""
        ...

    async def erase_expired(self) -> int:
        """Every scope's records past that scope's retention erased; how many."""
        ...

    async def link_sources(self, link: SourceLink) -> None:
        """The run's (message, scope) pairs stored; `link` has at least one of each, keys checked."""
        ...

    async def erase_sources(self, messages: Sequence[str], reason: EraseReason) -> int:
        """The records of every run linked to one of these (distinct) messages erased; how many."""
        ...

    async def pseudonymize(self, rename: PersonRename) -> int:
        """Every curation log and read-audit entry naming the person renamed; how many entries."""
        ...

    async def record_read(self, entry: ReadAudit, cutoff: float) -> None:
        """The read appended, audit rows older than `cutoff` dropped."""
        ...

    async def read_audit(self, query: AuditQuery, cutoff: float) -> builtins.list[ReadAudit]:
        """Audited reads matching the query at `cutoff` or later, newest first, at most `query.limit`."""
        ...

    async def claim(self, key: str, ttl_seconds: float) -> bool:
        """True for the first claim of the (checked) key until `ttl_seconds` have passed."""
        ...

    async def scope_keys(self) -> builtins.list[str]:
        """Every scope holding a record not yet erased, of those it can read (each one it cannot, a
        `memory.store.unreadable_scope` warning)."""
        ...

    async def unreadable_scopes(self) -> builtins.list[str]:
        """What holds a scope that cannot be read (a file's name); not logged again."""
        ...

    async def reindex_batch(self, scope_key: str, embedder: Embedder, batch: int) -> tuple[int, int]:
        """Vectors of `embedder` for up to `batch` of the scope's active records that lack one, in one
        transaction: how many were made and how many still lack one."""
        ...

    async def foreign_vectors(self, model: str) -> int:
        """Active records, every scope, whose vector another model than `model` made."""
        ...


class StoreBackend(ReadBackend, Protocol):
    """What a backend does under the store front (memory/stores/front.py): each call one transaction
    holding the scope's lock (or one read), its arguments already checked, its curation entries
    appended in that transaction; a storage failure raised as a `MemoryStoreError`."""

    async def write(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        """The prepared batch planned (memory/stores/writing.py) and applied after the scope's expired
        records are erased, evicting over `cap`."""
        ...

    async def write_pending(self, scope_key: str, batch: Sequence[MemoryCandidate], cap: int) -> WriteResult:
        """The prepared batch written as `CuratingStore.write_pending` says, under `cap`."""
        ...

    async def pending(self, scope_key: str, limit: int) -> builtins.list[MemoryRecord]:
        """The unexpired pending records, newest first, at most `limit`."""
        ...

    async def approve(self, scope_key: str, record_id: str, actor: str, cap: int) -> Approval | None:
        """The pending record approved (memory/stores/writing.py plans it); None if not pending."""
        ...

    async def reject(self, scope_key: str, record_id: str, actor: str) -> bool:
        """The pending record erased (reason `rejected`); False if it was not pending."""
        ...

    async def expire_pending(self, older_than: float, actor: str) -> int:
        """Every scope's pending records created before `older_than` erased (reason `expired`),
        each expiry logged; how many."""
        ...

    async def edit(
        self, scope_key: str, record_id: str, text: str, actor: str, typed_in: OriginLabel
    ) -> MemoryRecord | None:
        """The record's new version (`edit_candidate` checks `text` and narrows the origin by
        `typed_in`); None if there is no such record."""
        ...

    async def history(self, scope_key: str, record_id: str) -> builtins.list[RecordVersion]:
        """The record's chain with the log entries naming each version, oldest first."""
        ...

    async def append_entry(self, entry: CurationEntry) -> None:
        """One checked entry appended (entries past the log's retention dropped)."""
        ...

    async def curation_log(self, scope_key: str, record_id: str, limit: int) -> builtins.list[CurationEntry]:
        """Entries naming the record, newest first, at most `limit`, within the log's retention."""
        ...

    async def active_records(self, scope_key: str) -> builtins.list[MemoryRecord]:
        """The unexpired active records, oldest first."""
        ...

    async def merge(self, scope_key: str, survivor_id: str, duplicate_ids: Sequence[str], actor: str) -> int:
        """The active duplicates folded into the survivor and erased (reason `merged`); how many."""
        ...
