"""Which stored records restate each other, and which of them survives a merge (no I/O).

`switchboard memory consolidate` reads a scope's active records, asks `clusters` for the groups of
restatements in it and merges each group into its survivor. Two records restate each other when their
`meaning_key`s are equal — the key every write already folds on, so consolidation only catches up
with records stored before that rule (or written by a path that skipped it). No embedder similarity
joins them: on the near-miss corpus, every cosine threshold that folds a true restatement of either
embedder also folds near misses ("at least 30 days" / "at most 30 days" are all but one vector).

Only records with the same origin label are grouped: the survivor keeps its own origin, so a merge
across labels would change who may read the fact (a public restatement folded into a DM-learned one
would vanish for every channel). The survivor is the most used record, then the oldest, then the first
written: the one people already lean on keeps its id and citations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memory.rules.engine import parse_record_id
from memory.rules.restate import meaning_key
from memory.types import MemoryRecord


@dataclass(frozen=True, slots=True)
class Cluster:
    """Active records of one scope that say the same thing: the one to keep and the ones to fold in."""

    scope_key: str
    survivor: MemoryRecord
    duplicates: tuple[MemoryRecord, ...]

    @property
    def duplicate_ids(self) -> tuple[str, ...]:
        return tuple(record.id for record in self.duplicates)


def clusters(records: Iterable[MemoryRecord]) -> list[Cluster]:
    """Every group of two or more active records that restate each other, in the order their first
    record was written; records that are not active, or have no text left, are never grouped."""
    groups: dict[tuple[str, str, str, str | None], list[MemoryRecord]] = {}
    for record in records:
        key = meaning_key(record.text)
        if record.status != "active" or not key:
            continue
        label = (record.scope_key, key, record.origin, record.origin_conversation)
        groups.setdefault(label, []).append(record)
    found = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=survivor_order)
        found.append(Cluster(ordered[0].scope_key, ordered[0], tuple(sorted(ordered[1:], key=_written))))
    return sorted(
        found, key=lambda cluster: min(_written(r) for r in (cluster.survivor, *cluster.duplicates))
    )


def survivor_order(record: MemoryRecord) -> tuple[float, float, tuple[int, str]]:
    """Sort key putting the survivor first: most used, then oldest, then first written."""
    return (-record.use_count, record.created_at, _written(record))


def _written(record: MemoryRecord) -> tuple[int, str]:
    """Write order within a scope: the id's sequence number (an unparsable id sorts last, by id)."""
    parsed = parse_record_id(record.id)
    return (parsed[1], record.id) if parsed is not None else (2**63, record.id)
