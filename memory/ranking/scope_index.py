"""One scope's active records held as arrays, so a retrieve scores the whole scope at once. Pure (numpy).

The SQLite store keeps one per open scope and keeps it in step with the database (memory/sqlite_store.py,
`_synced_index`); a retrieve then costs no SQL beyond a freshness check. `select` scores every active
record with the ranking's own formula (`memory.ranking.score_arrays`, which `memory.ranking.rank`
applies to the candidates other stores prefilter) — the IDF-weighted match from posting lists, the
plain and centered cosines from one matrix product (the centroid is a running sum of the scope's
vectors), the recency from the last use — and returns the best, in rank order.

In a large scope the vector pass dominates, so a read first bounds every record's cosine from the
vectors projected on a few principal directions (memory/ranking/projection.py): the score is monotone
in the cosine, so the records whose highest possible score stays under what a handful of records
surely reach can never place. Only the others are scored, with their full vectors and the same
arithmetic, so the records chosen and their order are the full scan's.

Rows are slots in insertion order; a removed record leaves a dead slot until the next compaction, so
adding and removing a record costs O(its stems), not O(the scope).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memory.ranking.embedder import Matrix
from memory.ranking.fusion import (
    Centering,
    Floats,
    Ranking,
    Scored,
    Timed,
    blend_feedback,
    centered_cosines,
    row_products,
    score_arrays,
    score_with_feedback,
)
from memory.ranking.lexical import TermStats, idf_weights
from memory.ranking.projection import Projection, resized
from memory.rules.scorer import last_seen, observed_time
from memory.rules.visibility import shown_to_anyone
from memory.rules.when import TimeWindow
from memory.types import MemoryRecord

_FIRST_CAPACITY = 64
# A compaction rewrites every array: only once dead slots are a good share of them.
_MIN_DEAD_TO_COMPACT = 256
# From this many vectors a query reads the projected rows first and the full vectors of a shortlist
# only (memory/ranking/projection.py); below it the full pass costs less than the detour.
_PROJECT_FROM = 2048
# Reads that take the full pass after a removal dropped the basis, before it is made again. A rebuild
# projects every row on every column of the basis (besides the sample's covariance): it costs what the
# shortlist saves over a few hundred reads. So a scope whose removals go on (a write over the cap evicts
# one) spends on rebuilds about what it spends on full passes, and one whose removals stop gets the
# shortlist back.
_READS_BEFORE_REBUILD = 256
# Records scored exactly to set the floor of the shortlist, per record asked for.
_PROBE_PER_PLACE = 4
# A shortlist longer than this share of the scope reads more than the full pass would: score them all.
_SHORTLIST_SHARE = 4


@dataclass(frozen=True, slots=True)
class Candidate:
    """A selected record, its relevance, and its vector's cosine to the query (None: no vector)."""

    seq: int
    record: MemoryRecord
    relevance: float
    cosine: float | None


class _Slots:
    """A scope index's storage: the active records in slots, their posting lists, vectors and usage
    times; adding and removing a record costs O(its stems), not O(the scope)."""

    def __init__(self, project_from: int = _PROJECT_FROM) -> None:
        """`project_from`: the vectors from which a read shortlists by the projected rows first."""
        self._project_from = project_from
        self._clear()

    def _clear(self) -> None:
        """Empty, at the first capacity (a new index, or one about to be rebuilt by `_compact`)."""
        self._size = 0  # slots in use, dead ones included
        self._seqs = np.zeros(_FIRST_CAPACITY, dtype=np.int64)
        self._live = np.zeros(_FIRST_CAPACITY, dtype=np.bool_)
        self._created = np.zeros(_FIRST_CAPACITY, dtype=np.float64)
        self._seen = np.zeros(_FIRST_CAPACITY, dtype=np.float64)
        self._observed = np.zeros(_FIRST_CAPACITY, dtype=np.float64)
        self._has_vector = np.zeros(_FIRST_CAPACITY, dtype=np.bool_)
        self._open = np.zeros(_FIRST_CAPACITY, dtype=np.bool_)  # shown to anyone (`shown_to_anyone`)
        self._matrix: npt.NDArray[np.float32] | None = None
        self._norms = np.zeros(_FIRST_CAPACITY, dtype=np.float64)  # each vector's squared length
        self._vector_sum: npt.NDArray[np.float64] | None = None  # over the live slots with a vector
        self._vectors = 0
        # The centroid and each vector's dot product with it, kept until a vector comes or goes.
        self._centering: Centering | None = None
        # The vectors projected on a small basis, how many there were when it was made, and the reads
        # left before it may be made again after a removal took a vector it was made from.
        self._projection: Projection | None = None
        self._projected_from = 0
        self._reads_unprojected = 0
        self._records: list[MemoryRecord | None] = []
        self._stems: list[frozenset[str]] = []
        self._slot: dict[int, int] = {}
        self._postings: dict[str, list[int]] = {}
        self._posting_arrays: dict[str, npt.NDArray[np.intp]] = {}
        self._frequencies: dict[str, int] = {}
        self._dead = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, seq: object) -> bool:
        return seq in self._slot

    def seqs(self) -> list[int]:
        return list(self._slot)

    def record(self, seq: int) -> MemoryRecord | None:
        slot = self._slot.get(seq)
        return None if slot is None else self._records[slot]

    def has_vector(self, seq: int) -> bool:
        slot = self._slot.get(seq)
        return slot is not None and bool(self._has_vector[slot])

    def add(self, seq: int, record: MemoryRecord, stems: frozenset[str], vector: Matrix | None) -> None:
        """Index an active record (a seq already held is replaced). A vector whose length differs from
        the scope's others (a corrupt row) counts as none."""
        if seq in self._slot:
            self.remove(seq)
        if self._size == len(self._seqs):
            self._grow()
        slot = self._size
        self._size += 1
        self._seqs[slot] = seq
        self._live[slot] = True
        self._created[slot] = record.created_at
        self._seen[slot] = last_seen(record)
        self._observed[slot] = observed_time(record)
        self._has_vector[slot] = self._put_vector(slot, vector)
        if self._has_vector[slot] and self._projection is not None and self._matrix is not None:
            self._projection.put(slot, self._matrix[slot])
        self._open[slot] = shown_to_anyone(record)
        self._records.append(record)
        self._stems.append(stems)
        self._slot[seq] = slot
        for stem in stems:
            self._postings.setdefault(stem, []).append(slot)
            self._posting_arrays.pop(stem, None)
            self._frequencies[stem] = self._frequencies.get(stem, 0) + 1

    def remove(self, seq: int) -> None:
        slot = self._slot.pop(seq, None)
        if slot is None:
            return
        if self._has_vector[slot] and self._matrix is not None and self._vector_sum is not None:
            self._vector_sum -= self._matrix[slot]
            self._vectors -= 1
            self._centering = None
            self._matrix[slot] = 0.0  # a forgotten record's vector is not kept in any form
            self._norms[slot] = 0.0
            self._unproject(slot)
        self._live[slot] = False
        self._records[slot] = None
        for stem in self._stems[slot]:
            left = self._frequencies[stem] - 1
            if left:
                self._frequencies[stem] = left
            else:  # a stem only erased text held: its posting list (dead slots alone) goes now too
                del self._frequencies[stem]
                del self._postings[stem]
                self._posting_arrays.pop(stem, None)
        self._stems[slot] = frozenset()
        self._dead += 1
        if self._dead >= _MIN_DEAD_TO_COMPACT and self._dead * 2 >= self._size:
            self._compact()

    def set_record(self, seq: int, record: MemoryRecord) -> None:
        """The same record with other usage counts (a bump): its stems and vector stay."""
        slot = self._slot.get(seq)
        if slot is None:
            return
        self._records[slot] = record
        self._seen[slot] = last_seen(record)

    def term_stats(self, stems: Collection[str]) -> TermStats:
        """The scope's document frequencies for `stems`, counted over the active records."""
        return TermStats(len(self._slot), {stem: self._frequencies.get(stem, 0) for stem in stems})

    def _unproject(self, slot: int) -> None:
        """The removed slot's vector out of the projection: its row, or the whole projection when the
        basis was made from it (made again from the live vectors after `_READS_BEFORE_REBUILD` reads)."""
        projection = self._projection
        if projection is None:
            return
        if not projection.made_from(slot):
            projection.drop(slot)
            return
        projection.wipe()
        self._projection = None
        self._projected_from = 0
        self._reads_unprojected = _READS_BEFORE_REBUILD

    def _projection_of(self) -> Projection | None:
        """The projected rows, (re)made once the scope holds twice the vectors its basis was made from;
        None for the reads that take the full pass after a removal dropped them."""
        if self._vectors < self._project_from or self._matrix is None:
            return None
        if self._reads_unprojected > 0:
            self._reads_unprojected -= 1
            return None
        if self._projected_from == 0 or self._vectors > 2 * self._projected_from:
            present = self._live & self._has_vector
            self._projection = Projection.of(self._matrix, present, len(self._seqs))
            self._projected_from = self._vectors
        return self._projection

    def _centering_of(self, size: int) -> Centering | None:
        """The centroid of the live vectors and what each slot needs of it (one matrix product per
        change of the scope's vectors, not per query)."""
        if self._vector_sum is None or self._vectors == 0 or self._matrix is None:
            return None
        centering = self._centering
        if centering is None or len(centering.offsets) != size:
            centroid = self._vector_sum / self._vectors
            offsets = row_products(self._matrix[:size], centroid.astype(np.float32))
            centering = self._centering = Centering.of(centroid, offsets, self._norms[:size])
        return centering

    def _put_vector(self, slot: int, vector: Matrix | None) -> bool:
        if vector is None or vector.ndim != 1 or vector.shape[0] == 0:
            return False
        if self._matrix is None:
            self._matrix = np.zeros((len(self._seqs), vector.shape[0]), dtype=np.float32)
        if self._matrix.shape[1] != vector.shape[0]:
            return False
        self._matrix[slot] = vector
        stored = self._matrix[slot].astype(np.float64)
        self._norms[slot] = float(stored @ stored)
        if self._vector_sum is None:
            self._vector_sum = np.zeros(vector.shape[0], dtype=np.float64)
        self._vector_sum += stored
        self._vectors += 1
        self._centering = None
        return True

    def _posting_array(self, stem: str) -> npt.NDArray[np.intp] | None:
        slots = self._posting_arrays.get(stem)
        if slots is None:
            listed = self._postings.get(stem)
            if not listed:
                return None
            slots = np.fromiter(listed, dtype=np.intp, count=len(listed))
            self._posting_arrays[stem] = slots
        return slots

    def _grow(self) -> None:
        capacity = 2 * len(self._seqs)
        self._seqs = resized(self._seqs, capacity)
        self._live = resized(self._live, capacity)
        self._created = resized(self._created, capacity)
        self._seen = resized(self._seen, capacity)
        self._observed = resized(self._observed, capacity)
        self._norms = resized(self._norms, capacity)
        self._has_vector = resized(self._has_vector, capacity)
        self._open = resized(self._open, capacity)
        if self._matrix is not None:
            self._matrix = resized(self._matrix, capacity)
        if self._projection is not None:
            self._projection.grow(capacity)

    def _compact(self) -> None:
        """Rebuild from the live slots only, in the same order."""
        live = [slot for slot in range(self._size) if self._live[slot]]
        vectors = self._matrix
        entries = []
        for slot in live:
            record = self._records[slot]
            assert record is not None
            vector = vectors[slot] if vectors is not None and self._has_vector[slot] else None
            entries.append((int(self._seqs[slot]), record, self._stems[slot], vector))
        self._clear()
        for seq, record, stems, vector in entries:
            self.add(seq, record, stems, vector)


class ScopeIndex(_Slots):
    """The active records of one scope: posting lists per stem, a vector matrix, usage times."""

    def select(
        self,
        stems: Sequence[str],
        terms: Collection[str],
        query_vector: Matrix | None,
        now: float,
        ranking: Ranking,
        count: int,
        created_after: float | None = None,
        window: TimeWindow | None = None,
    ) -> list[Candidate]:
        """The `count` best records by the v2 score over the whole scope, best first (ties: lower seq
        first, as `rank` breaks them over seq-ordered candidates). A record must share one of `terms`
        (the prefilter's stems) with the query or be close enough in meaning; one created before
        `created_after` (expired) is never chosen; `window` is the query's time phrase, if any."""
        size = self._size
        if size == 0 or count <= 0 or not stems:
            return []
        lexical, matched = self._lexical(size, idf_weights(stems, self.term_stats(stems)), terms)
        eligible = self._live[:size]
        if created_after is not None:
            eligible = eligible & (self._created[:size] >= created_after)
        # Feedback voters: records anyone may see.
        read = _Read(lexical, matched, eligible, eligible & self._open[:size], now, ranking, stems, window)
        shortlist = None if query_vector is None else self._shortlist(read, query_vector, count)
        rows = None if shortlist is None else shortlist.rows
        scored, cosine, feedback = self._scored(read, query_vector, rows)
        if shortlist is not None and feedback is not None:
            missed = shortlist.missed(read, self._match(size, feedback), scored, count)
            if missed.size:
                rows = np.union1d(shortlist.rows, missed)
                scored, cosine, _ = self._scored(read, query_vector, rows)
        slots = np.arange(size) if rows is None else rows
        chosen = np.flatnonzero(scored.admitted & eligible[slots])
        if chosen.size > count:
            scores = scored.score[chosen]
            # Everything tied with the count-th best stays in, so the tie-break below decides.
            floor = np.partition(scores, chosen.size - count)[chosen.size - count]
            chosen = chosen[scores >= floor]
        order = chosen[np.lexsort((self._seqs[slots[chosen]], -scored.score[chosen]))[:count]]
        found: list[Candidate] = []
        for at, slot in zip(order.tolist(), slots[order].tolist(), strict=True):
            record = self._records[slot]
            assert record is not None  # a live slot always holds its record
            value = None if cosine is None or np.isnan(cosine[at]) else float(cosine[at])
            found.append(Candidate(int(self._seqs[slot]), record, float(scored.relevance[at]), value))
        return found

    def _lexical(
        self, size: int, weights: Mapping[str, float], terms: Collection[str]
    ) -> tuple[Floats, npt.NDArray[np.bool_]]:
        """Each slot's weighted match with the query, and whether it holds one of `terms`."""
        total = sum(weights.values())
        lexical = np.zeros(size, dtype=np.float64)
        matched = np.zeros(size, dtype=np.bool_)
        for stem, weight in weights.items():  # the order `weighted_match` sums in: the same floats
            slots = self._posting_array(stem)
            if slots is None:
                continue
            if total > 0.0:
                lexical[slots] += weight
            if stem in terms:
                matched[slots] = True
        if total > 0.0:
            lexical /= total
        return lexical, matched

    def _scored(
        self, read: _Read, query_vector: Matrix | None, rows: npt.NDArray[np.intp] | None
    ) -> tuple[Scored, Floats | None, Mapping[str, float] | None]:
        """`score_with_feedback` over the slots `rows` (None: every slot), aligned with them; with
        the cosines it read and the feedback query it used (None: none)."""
        size = len(read.lexical)
        at: slice | npt.NDArray[np.intp] = slice(0, size) if rows is None else rows
        slots = np.arange(size) if rows is None else rows
        cosine, centered = (None, None) if query_vector is None else self._closeness(size, query_vector, rows)
        used: list[Mapping[str, float]] = []

        def match(weights: Mapping[str, float]) -> Floats:
            used.append(weights)
            return self._match(size, weights)[at]

        scored = score_with_feedback(
            read.lexical[at],
            read.matched[at],
            cosine,
            self._seen[at],
            read.now,
            read.ranking,
            centered,
            query=read.stems,
            stats=TermStats(len(self._slot), self._frequencies),
            stems_at=lambda index: self._stems[int(slots[index])],
            match=match,
            eligible=read.voters[at],
            ties=self._seqs[at],
            timed=self._timed(read, at),
        )
        return scored, cosine, (used[0] if used else None)

    def _timed(self, read: _Read, at: slice | npt.NDArray[np.intp]) -> Timed | None:
        return None if read.window is None else Timed(read.window, self._observed[at])

    def _shortlist(self, read: _Read, query_vector: Matrix, count: int) -> _Shortlist | None:
        """The slots that may reach the top `count` (and the feedback's first-pass top) by what the
        projected rows bound their cosines to, scored exactly to set the floor; None: score every slot
        (a small scope, no projection, or a shortlist too long to gain anything)."""
        size = len(read.lexical)
        projection = self._projection_of()
        if projection is None or self._matrix is None or self._matrix.shape[1] != query_vector.shape[0]:
            return None
        approximate, spread = projection.cosines(size, query_vector)
        high = np.where(self._has_vector[:size], approximate + spread, np.nan)
        centering = self._centering_of(size)
        centered = high if centering is None else centered_cosines(high, centering, query_vector)
        seen = self._seen[:size]
        timed = self._timed(read, slice(0, size))
        upper = score_arrays(
            read.lexical, read.matched, high, seen, read.now, read.ranking, centered, timed=timed
        )
        places = [(read.eligible, count)]
        if read.ranking.feedback.enabled:
            places.append((read.voters, read.ranking.feedback.records))
        keep = np.zeros(size, dtype=np.bool_)
        for mask, wanted in places:
            open_slots = np.flatnonzero(upper.admitted & mask)
            floor = -np.inf
            if open_slots.size > wanted:
                probes = min(open_slots.size, _PROBE_PER_PLACE * wanted)
                probe = open_slots[np.argpartition(-upper.score[open_slots], probes - 1)[:probes]]
                cosine, closer = self._closeness(size, query_vector, probe)
                exact = score_arrays(
                    read.lexical[probe],
                    read.matched[probe],
                    cosine,
                    seen[probe],
                    read.now,
                    read.ranking,
                    closer,
                    timed=self._timed(read, probe),
                )
                sure = exact.score[exact.admitted]
                if sure.size >= wanted:  # `wanted` records score this much: none under it can place
                    floor = float(np.partition(sure, sure.size - wanted)[sure.size - wanted])
            keep[open_slots[upper.score[open_slots] >= floor]] = True
        rows = np.flatnonzero(keep)
        if rows.size * _SHORTLIST_SHARE > size:
            return None
        return _Shortlist(rows, high, centered, seen, timed)

    def _closeness(
        self, size: int, query_vector: Matrix, rows: npt.NDArray[np.intp] | None = None
    ) -> tuple[Floats, Floats | None]:
        """Each slot's plain cosine with the query and its centered one (None: the plain one is
        fused), for the slots `rows` (None: every slot); NaN for a slot with no vector, and everywhere
        when no vector has the query's length. A row's cosine is the same whichever rows are read."""
        matrix = self._matrix
        if matrix is None or matrix.shape[1] != query_vector.shape[0]:
            return np.full(size if rows is None else len(rows), np.nan, dtype=np.float64), None
        at: slice | npt.NDArray[np.intp] = slice(0, size) if rows is None else rows
        cosine = row_products(matrix[at], query_vector)
        centered = cosine
        centering = self._centering_of(size)
        if centering is not None:
            if rows is not None:
                centering = Centering(
                    centering.centroid, centering.offsets[rows], centering.inverse_lengths[rows]
                )
            centered = centered_cosines(cosine, centering, query_vector)
        missing = ~self._has_vector[at]
        if missing.any():
            return np.where(missing, np.nan, cosine), np.where(missing, np.nan, centered)
        return cosine, centered

    def _match(self, size: int, weights: Mapping[str, float]) -> npt.NDArray[np.float64]:
        """Each slot's weighted share of `weights` (what `weighted_match` gives its record), summed
        in the same order from the posting lists."""
        total = sum(weights.values())
        found = np.zeros(size, dtype=np.float64)
        if total <= 0.0:
            return found
        for stem, weight in weights.items():
            slots = self._posting_array(stem)
            if slots is not None:
                found[slots] += weight
        found /= total
        return found


@dataclass(frozen=True, slots=True)
class _Read:
    """One query's arrays over the scope's slots, as every pass of `select` scores them."""

    lexical: Floats
    matched: npt.NDArray[np.bool_]
    eligible: npt.NDArray[np.bool_]  # may be chosen: live, not expired
    voters: npt.NDArray[np.bool_]  # may vote for the feedback query: eligible and shown to anyone
    now: float
    ranking: Ranking
    stems: Sequence[str]
    window: TimeWindow | None


@dataclass(frozen=True, slots=True)
class _Shortlist:
    """The slots a read scores exactly, and what bounds every slot's score from above: its cosine and
    centered cosine at the top of the interval the projected rows give (NaN: no vector)."""

    rows: npt.NDArray[np.intp]
    high: Floats
    centered: Floats
    seen: Floats
    timed: Timed | None

    def missed(self, read: _Read, feedback_match: Floats, scored: Scored, count: int) -> npt.NDArray[np.intp]:
        """Slots off the list that the feedback query could still lift into the top `count`: the
        list was cut by first-pass scores, and the feedback pass rescores every record."""
        blended = blend_feedback(read.lexical, feedback_match, read.ranking.feedback.weight)
        upper = score_arrays(
            blended,
            read.matched,
            self.high,
            self.seen,
            read.now,
            read.ranking,
            self.centered,
            gate=read.lexical,
            timed=self.timed,
        )
        candidates = upper.admitted & read.eligible
        candidates[self.rows] = False
        held = scored.score[scored.admitted & read.eligible[self.rows]]
        if held.size >= count:
            candidates &= upper.score >= np.partition(held, held.size - count)[held.size - count]
        return np.flatnonzero(candidates)
