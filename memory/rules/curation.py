"""What curating a scope decides, the same in every store: which row a pending write folds into, which
pending records the cap expires, how an edit or a merge changes a record, which rows are one record's
versions, and how a history is told. Pure: stores fetch the rows and persist the outcome.

A version chain follows `supersedes`: the newer row names the older one. A pending correction names
the active record it would replace before it has replaced anything, so a link counts only when the
older row is no longer live (`active` or `pending`): the target joins the chain on approval, when it
is superseded.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from memory.rules.engine import WritePlan, mint_record, parse_record_id, plan_write, prepare_batch
from memory.rules.restate import meaning_key
from memory.rules.scope import validate_scope_key
from memory.rules.visibility import narrower
from memory.types import (
    CURATION_ACTIONS,
    MACHINE_LABEL,
    MAX_LIMIT,
    MAX_REF_CHARS,
    CurationAction,
    CurationEntry,
    EraseReason,
    MemoryCandidate,
    MemoryRecord,
    OriginLabel,
    RecordVersion,
)

SYSTEM_ACTOR = "system"
REFLECTION_ACTOR = "reflection"

# Statuses whose row is still a record of its own: a `supersedes` naming one is a request, not a link.
_LIVE = frozenset({"active", "pending"})
# What `forget <id>` erases, with every version of its chain: any record whose text is still kept and
# shown by id (*Why?*, history) — active, evicted, or a superseded version, whose correction may be gone.
FORGETTABLE = ("active", "evicted", "superseded")


def run_actor(source_run_id: str | None) -> str:
    """Who a reflected write acts as: its run, or reflection when the run is unknown."""
    return f"run:{source_run_id}" if source_run_id else REFLECTION_ACTOR


def log_limit(limit: int) -> int:
    """A page of records or log entries, as every store reads one: at most MAX_LIMIT, never negative."""
    return max(0, min(limit, MAX_LIMIT))


def validate_actor(actor: object) -> str:
    if not isinstance(actor, str) or not actor.strip() or len(actor) > MAX_REF_CHARS:
        raise ValueError(f"actor must be a non-empty string of at most {MAX_REF_CHARS} characters")
    return actor


def validate_entry(entry: CurationEntry) -> CurationEntry:
    """An entry a caller appends: a known action, a scope key, the ids and the actor as strings of at
    most MAX_REF_CHARS, a time as epoch seconds. The message names the field."""
    validate_scope_key(entry.scope_key)
    if entry.action not in CURATION_ACTIONS:
        raise ValueError(f"action must be one of {sorted(CURATION_ACTIONS)}")
    for name, value in (("record_id", entry.record_id), ("related_id", entry.related_id)):
        if value is None and name == "related_id":
            continue
        if not isinstance(value, str) or not value or len(value) > MAX_REF_CHARS:
            raise ValueError(f"{name} must be a non-empty string of at most {MAX_REF_CHARS} characters")
    parsed = parse_record_id(entry.record_id)
    if parsed is None or parsed[0] != entry.scope_key:
        raise ValueError("record_id must be a record id of the entry's scope_key")
    validate_actor(entry.actor)
    if isinstance(entry.at, bool) or not isinstance(entry.at, int | float) or entry.at < 0:
        raise ValueError("at must be epoch seconds")
    return entry


def entry(
    record: MemoryRecord, action: CurationAction, actor: str, at: float, related_id: str | None = None
) -> CurationEntry:
    return CurationEntry(record.id, record.scope_key, action, actor, at, related_id)


def newest_first(entries: Iterable[CurationEntry], limit: int) -> builtins.list[CurationEntry]:
    """Entries in the order they were appended, newest first (equal times: the later append first)."""
    ordered = builtins.list(entries)[::-1]
    ordered.sort(key=lambda e: -e.at)  # stable: among equal times the later append stays first
    return ordered[: log_limit(limit)]


def names(entry_: CurationEntry, record_id: str) -> bool:
    return record_id in (entry_.record_id, entry_.related_id)


# -- the review queue -------------------------------------------------------------------------------


def write_pool(
    rows: Iterable[MemoryRecord], candidate: MemoryCandidate, *, pending: bool = False
) -> builtins.list[MemoryRecord]:
    """Exactly the rows `plan_write` reads (with `pending`, `plan_pending`), out of a scope's rows in
    seq order: the live rows with the candidate's meaning key and the active row it supersedes."""
    key = meaning_key(candidate.text)
    statuses = _LIVE if pending else frozenset({"active"})
    return [
        r
        for r in rows
        if r.status in statuses
        and (meaning_key(r.text) == key or (r.id == candidate.supersedes and r.status == "active"))
    ]


def plan_pending(scope_key: str, candidate: MemoryCandidate, pool: Sequence[MemoryRecord]) -> WritePlan:
    """A pending write's one candidate: fold into an active record as a write would (`plan_write`), else
    into a pending one it restates (a correction only into a pending correction of the same target),
    else insert a pending record that names the active record it would supersede.

    `pool`: the scope's active and pending rows with the candidate's meaning key (seq order) and the
    active row it names to supersede."""
    plan = plan_write(scope_key, candidate, pool)
    if plan.action == "dedup":
        return plan
    key = meaning_key(candidate.text)
    for row in pool:
        if row.status != "pending" or row.scope_key != scope_key or meaning_key(row.text) != key:
            continue
        if not candidate.supersedes or row.supersedes == plan.supersede_id:
            return WritePlan("dedup", dedup_id=row.id)
    return plan


def pending_record(
    scope_key: str, seq: int, candidate: MemoryCandidate, now: float, plan: WritePlan
) -> MemoryRecord:
    """The row a pending insert stores: minted as a write mints it, waiting, naming its target."""
    return replace(mint_record(scope_key, seq, candidate, now, plan.supersede_id), status="pending")


def pending_to_expire(pending: Iterable[MemoryRecord], cap: int) -> builtins.list[str]:
    """Ids of the oldest pending records beyond the scope's cap (oldest first)."""
    waiting = sorted((r for r in pending if r.status == "pending"), key=_age)
    excess = len(waiting) - cap
    return [] if excess <= 0 else [r.id for r in waiting[:excess]]


def record_candidate(record: MemoryRecord) -> MemoryCandidate:
    """The record as the candidate that would write it: its text, kind, keywords, origin, provenance."""
    return MemoryCandidate(
        kind=record.kind,
        text=record.text,
        source_thread_key=record.source_thread_key,
        keywords=record.keywords,
        source_run_id=record.source_run_id,
        confidence=record.confidence,
        origin=record.origin,
        origin_conversation=record.origin_conversation,
        observed_at=record.observed_at,
    )


def approval_candidate(record: MemoryRecord, target: MemoryRecord | None) -> MemoryCandidate:
    """The pending record as the candidate its approval writes: `plan_write` decides it exactly as it
    decides a write (fold into an active restatement, supersede the target, or insert)."""
    return replace(record_candidate(record), supersedes=None if target is None else target.id)


def approved_record(
    record: MemoryRecord, plan: WritePlan, versions: Iterable[MemoryRecord], now: float
) -> MemoryRecord:
    """The pending row made active, confirmed now (so the eviction an approval runs, as a write runs
    it, never takes the record it just let in for the least recently used). It keeps a `supersedes`
    naming its own earlier version (an edit of it) or the target it now supersedes; a target that is
    gone is no longer named."""
    own = {v.id for v in versions}
    keeps = record.supersedes is not None and (
        record.supersedes in own or record.supersedes == plan.supersede_id
    )
    supersedes = record.supersedes if keeps else plan.supersede_id
    return replace(record, status="active", supersedes=supersedes, last_used_at=now)


# -- edits and merges -------------------------------------------------------------------------------


def edit_candidate(
    record: MemoryRecord, text: object, typed_in: OriginLabel = MACHINE_LABEL
) -> MemoryCandidate:
    """The new version's candidate: the person's text (validated and redacted as any write is) with
    the record's kind and provenance. Keywords are not carried: they described the old text. Its
    origin is the narrower of the record's and the conversation the words were typed in: an edit
    never shows new words wider than where they were said (a DM's words in a public record stay out
    of public channels)."""
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    origin, conversation = narrower((record.origin, record.origin_conversation), typed_in)
    candidate = replace(
        record_candidate(record),
        text=text,
        keywords=(),
        origin=origin,
        origin_conversation=conversation,
    )
    try:
        (prepared,) = prepare_batch([candidate])
    except ValueError as error:
        raise ValueError(str(error).removeprefix("candidates[0].")) from None
    return prepared


def edited_record(old: MemoryRecord, seq: int, candidate: MemoryCandidate, now: float) -> MemoryRecord:
    """The new version: a fresh id in the same scope, superseding the old one, in the old one's status
    (a pending record's edit still waits), with its use so far (an edit does not make it a stranger)."""
    minted = mint_record(old.scope_key, seq, candidate, now, supersedes=old.id)
    return replace(minted, status=old.status, use_count=old.use_count, last_used_at=old.last_used_at)


def merged_survivor(survivor: MemoryRecord, duplicates: Iterable[MemoryRecord]) -> MemoryRecord:
    """The survivor of a merge: every duplicate's uses added, last used and observed as late as any."""
    folded = survivor
    for duplicate in duplicates:
        folded = replace(
            folded,
            use_count=folded.use_count + duplicate.use_count,
            last_used_at=_latest(folded.last_used_at, duplicate.last_used_at),
            observed_at=_latest(folded.observed_at, duplicate.observed_at),
        )
    return folded


def merge_duplicates(
    scope_key: str, survivor_id: str, duplicate_ids: Iterable[str], rows: Iterable[MemoryRecord]
) -> tuple[MemoryRecord | None, builtins.list[MemoryRecord]]:
    """The active survivor and the active duplicates of this scope a merge folds (none without an
    active survivor; the survivor never folds into itself)."""
    active = {r.id: r for r in rows if r.status == "active" and r.scope_key == scope_key}
    survivor = active.get(survivor_id)
    if survivor is None:
        return None, []
    wanted = dict.fromkeys(d for d in duplicate_ids if d != survivor_id)
    return survivor, [active[d] for d in wanted if d in active]


# -- version chains and histories -------------------------------------------------------------------


def is_link(newer: MemoryRecord, older: MemoryRecord) -> bool:
    """`newer` is the version that replaced `older` (not merely a request to replace a live record)."""
    return newer.supersedes == older.id and older.status not in _LIVE


@dataclass
class ChainWalk:
    """Gathers one record's version chain from a store that can fetch rows by id and by the id they
    supersede. Loop: `wanted()` → fetch those rows → `add(rows)`, until `wanted()` asks for nothing."""

    start: MemoryRecord
    _rows: dict[str, MemoryRecord] = field(default_factory=dict)
    _asked_ids: set[str] = field(default_factory=set)
    _asked_successors: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._rows[self.start.id] = self.start

    def wanted(self) -> tuple[builtins.list[str], builtins.list[str]]:
        """(ids of rows to fetch, ids whose successors — rows superseding them — to fetch)."""
        members = self.versions()
        ids = sorted(
            {m.supersedes for m in members if m.supersedes and m.supersedes not in self._rows}
            - self._asked_ids
        )
        successors = sorted({m.id for m in members if m.status not in _LIVE} - self._asked_successors)
        self._asked_ids.update(ids)
        self._asked_successors.update(successors)
        return ids, successors

    def add(self, rows: Iterable[MemoryRecord]) -> None:
        for row in rows:
            if row.scope_key == self.start.scope_key:
                self._rows.setdefault(row.id, row)

    def versions(self) -> builtins.list[MemoryRecord]:
        """The chain as gathered so far, oldest first: what the start replaced, what that replaced,
        …, and what replaced the start, what replaced that, … — never another branch off an older
        version: two corrections of one record are two chains, so forgetting or merging one never
        reaches the other (live) one."""
        chain = {self.start.id}
        newer = self.start
        while (older := self._rows.get(newer.supersedes or "")) is not None:
            if older.id in chain or not is_link(newer, older):
                break
            chain.add(older.id)
            newer = older
        frontier = [self.start]
        while frontier:
            row = frontier.pop()
            for other in self._rows.values():
                if other.id not in chain and is_link(other, row):
                    chain.add(other.id)
                    frontier.append(other)
        return sorted((self._rows[i] for i in chain), key=_age)

    def target(self) -> MemoryRecord | None:
        """The active record the chain's newest pending version asks to supersede (an edit of a
        pending correction still corrects what the first version named)."""
        versions = self.versions()
        for version in reversed(versions):
            named = self._rows.get(version.supersedes or "")
            if named is not None and named.status == "active" and named.id not in {v.id for v in versions}:
                return named
        return None


def pending_target_id(history: Sequence[RecordVersion]) -> str | None:
    """The id a pending record's chain asks to supersede: the newest `supersedes` naming a row
    outside the chain (an edit of a pending correction still corrects what its first version named,
    as `ChainWalk.target` reads it). None when no version names one."""
    own = {v.id for v in history}
    named = [v.supersedes for v in history if v.supersedes is not None and v.supersedes not in own]
    return named[-1] if named else None


def history_of(
    versions: Sequence[MemoryRecord],
    erased: Mapping[str, EraseReason | None],
    entries: Iterable[CurationEntry],
) -> builtins.list[RecordVersion]:
    """Each version (oldest first) with the entries naming it as their record, oldest first; text
    None once erased."""
    by_record: dict[str, builtins.list[CurationEntry]] = {}
    for item in sorted(entries, key=lambda e: e.at):
        by_record.setdefault(item.record_id, []).append(item)
    return [
        RecordVersion(
            id=v.id,
            scope_key=v.scope_key,
            status=v.status,
            created_at=v.created_at,
            text=None if erased.get(v.id) is not None else v.text,
            source_run_id=v.source_run_id,
            erased_reason=erased.get(v.id),
            entries=tuple(by_record.get(v.id, ())),
            supersedes=v.supersedes,
        )
        for v in versions
    ]


def _age(record: MemoryRecord) -> tuple[float, int]:
    parsed = parse_record_id(record.id)
    return record.created_at, -1 if parsed is None else parsed[1]


def _latest(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a, b)
