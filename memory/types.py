"""The values memory is made of (what a store promises is memory/stores/contract.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

RecordKind = Literal["fact", "summary"]
# `pending`: written by reflection to a shared scope under `memory.review = "shared"`, waiting for an
# admin; never read, listed, cited or given to the extractor until approved.
RecordStatus = Literal["active", "superseded", "forgotten", "evicted", "pending"]

RECORD_KINDS: frozenset[str] = frozenset({"fact", "summary"})

# Where a record was learned: the visibility of that conversation (`machine` = the terminal chat and
# other machine surfaces: written where its audience asks, like a public origin, and readable like
# `public`; `external` = a channel shared with another organization (Slack Connect): read in that very
# channel only). `unknown` is read as `dm`, the narrowest: a record whose origin was lost never lands
# wider than it might have been learned; a label this version does not know (one a newer version
# wrote) is read back as `unknown` by the stores. See memory/rules/visibility.py for where each may go.
Origin = Literal["public", "private", "mpim", "external", "dm", "machine", "unknown"]
ORIGINS: frozenset[str] = frozenset({"public", "private", "mpim", "external", "dm", "machine", "unknown"})
# An origin with the conversation it names (a private channel's, a DM's id), or None.
OriginLabel = tuple[Origin, str | None]
# Words typed on a machine surface (a terminal, an admin's shared note): written for everyone, so an
# edit typed there narrows nothing.
MACHINE_LABEL: OriginLabel = ("machine", None)

# Why a record's text was erased (the row keeps id, scope, origin, provenance, dates, status, reason).
# `migrated`: a DM's old channel scope at start-up (moved into its owner's scope, or erased when no
# owner could be told).
# `rejected`: an admin turned a pending record down; `merged`: a near-duplicate folded into another
# record by `switchboard memory consolidate --apply` (the survivor keeps the meaning, and the
# duplicate's older versions go with it); `edited`: a pending version a person replaced before anyone
# approved it (words nobody approved are not kept).
EraseReason = Literal[
    "forgotten",
    "source_deleted",
    "source_edited",
    "expired",
    "channel_deleted",
    "user_request",
    "migrated",
    "rejected",
    "merged",
    "edited",
]
ERASE_REASONS: frozenset[str] = frozenset(get_args(EraseReason))

# The per-scope cap when nothing is configured (decay keeps stale records out of the ranking; the cap
# keeps them out of storage), and the most one may be (the config, the wire and every store agree).
DEFAULT_SCOPE_CAP = 500
MAX_SCOPE_CAP = 10_000
# The most records one retrieve or list may return, in every store and on the wire alike.
MAX_LIMIT = 50
# Field caps of a candidate: the wire refuses more, and so does every store's write, so a direct
# write cannot store what the service would not.
MAX_TEXT_CHARS = 4000
MAX_RECORD_KEYWORDS = 20
MAX_KEYWORD_CHARS = 64
MAX_REF_CHARS = 200  # source thread key, source run id, supersedes, origin conversation
# The latest time a record may say it was observed (3000-01-01 UTC): beyond it no calendar date can be
# shown, and a date that far out could only be a mistake or an attack on the ranking.
MAX_OBSERVED_AT = 32_503_680_000.0


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A distilled fact or summary, with the provenance that lets it be re-grounded."""

    id: str
    scope_key: str
    kind: RecordKind
    text: str
    source_thread_key: str
    created_at: float
    keywords: tuple[str, ...] = ()
    source_run_id: str | None = None
    last_used_at: float | None = None
    use_count: int = 0
    confidence: float | None = None
    supersedes: str | None = None
    status: RecordStatus = "active"
    origin: Origin = "unknown"
    origin_conversation: str | None = None
    # When the conversation it was learned from happened (epoch seconds, like `created_at`): every
    # store fills it (the candidate's, else the write's time; older rows took their `created_at`).
    observed_at: float | None = None


@dataclass(frozen=True, slots=True)
class MemoryCandidate:
    """What the reflection pass proposes to remember; the store decides how it lands."""

    kind: RecordKind
    text: str
    source_thread_key: str
    keywords: tuple[str, ...] = ()
    source_run_id: str | None = None
    confidence: float | None = None
    supersedes: str | None = None
    origin: Origin = "unknown"
    origin_conversation: str | None = None
    # When the source conversation happened (the Slack message's ts, the terminal turn's time), in
    # epoch seconds; None: the store takes the write's time.
    observed_at: float | None = None


@dataclass(frozen=True, slots=True)
class WriteResult:
    inserted: int = 0
    deduped: int = 0
    superseded: int = 0
    evicted: int = 0

    def __add__(self, other: WriteResult) -> WriteResult:
        """Two writes' counts together (one batch sent as several requests)."""
        return WriteResult(
            self.inserted + other.inserted,
            self.deduped + other.deduped,
            self.superseded + other.superseded,
            self.evicted + other.evicted,
        )


@dataclass(frozen=True, slots=True)
class Ranked:
    """A retrieved record with its relevance (its score without recency): the cross-scope merge
    re-scores the union with each record's recency after the usage bump."""

    record: MemoryRecord
    relevance: float


@dataclass(frozen=True, slots=True)
class SourceLink:
    """Which messages (`<channel id>:<ts>`, platform-namespaced like `slack:C0123:1700000000.000100`)
    one run was distilled from, and the scopes that run could write: a deleted or edited source message
    finds exactly the records to erase."""

    run_id: str
    scope_keys: tuple[str, ...]
    messages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReadAudit:
    """One memory read of one run: who asked where, which scopes were read, which records (by id, with
    their rank in the block) were used. Never record text, never the query."""

    run_id: str
    thread_key: str
    asker: str | None
    scope_keys: tuple[str, ...]
    records: tuple[tuple[str, int], ...]
    at: float


# What a person (or the store on their behalf) did to a record, for `memory history` and
# `memory audit --record`: `remembered` (added by hand), `approved` / `rejected` / `expired` (the review
# queue), `edited` (superseded by a person's new version, `related_id` = the new one), `superseded`
# (by a reflected correction, `related_id` = the new one), `folded` (a restatement confirmed it),
# `merged` (consolidated into `related_id`), `forgotten`.
CurationAction = Literal[
    "remembered", "approved", "rejected", "expired", "edited", "superseded", "folded", "merged", "forgotten"
]
CURATION_ACTIONS: frozenset[str] = frozenset(get_args(CurationAction))


@dataclass(frozen=True, slots=True)
class CurationEntry:
    """One curation action on one record: who (a scope key like `user:slack:U1`, `run:<id>` for
    reflection, `system` for expiry, `machine` for the terminal) did what, when. Never record text."""

    record_id: str
    scope_key: str
    action: CurationAction
    actor: str
    at: float
    related_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordVersion:
    """One version in a record's chain, oldest first in a history: its row (text None once erased)
    and the curation entries that name it."""

    id: str
    scope_key: str
    status: RecordStatus
    created_at: float
    text: str | None
    source_run_id: str | None
    erased_reason: EraseReason | None
    entries: tuple[CurationEntry, ...]
    # The id its row names: an older version of the chain, or the active record a pending one asks
    # to supersede (`pending_target_id`).
    supersedes: str | None = None


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Exactly one of the filters; newest reads first, at most `limit`."""

    record_id: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    thread_key: str | None = None
    limit: int = 20

    def __post_init__(self) -> None:
        given = [v for v in (self.record_id, self.run_id, self.user_id, self.thread_key) if v is not None]
        if len(given) != 1:
            raise ValueError("an audit query names exactly one of record_id, run_id, user_id, thread_key")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"an audit query's limit must be 1-{MAX_LIMIT}")


class MemoryStoreError(RuntimeError):
    """A store could not do what a human asked; carries the service's status when there is one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class MemoryUnavailable(MemoryStoreError):
    """The store could not be reached (a server down or lost): a retrieve, advisory, then reads as
    nothing with a warning, while every other operation still fails (memory/stores/front_reads.py)."""


# How soon after an erasure a store whose files keep erased bytes (PostgreSQL) rewrites them, when
# nothing is configured (memory.compact_after_seconds; config/settings.py states the same default).
DEFAULT_COMPACT_AFTER_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class RewrittenTable:
    """One table a compaction wrote afresh: its size (heap, indexes, TOAST) before and after, and how
    long it was locked against every read and write while it was rewritten."""

    table: str
    bytes_before: int
    bytes_after: int
    locked_seconds: float


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What a compaction rewrote, how long it waited for another replica's, and whether the server
    wrote the new pages out at once (`checkpointed`; else its next checkpoint does)."""

    tables: tuple[RewrittenTable, ...]
    waited_seconds: float
    checkpointed: bool
