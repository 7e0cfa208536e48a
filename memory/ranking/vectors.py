"""Record vectors as stores keep them, and the cosine arithmetic every store shares. Pure (numpy only).

A vector is stored as float32 bytes (SQLite BLOB, PostgreSQL bytea) beside the name of the model that
made it; a vector of another model counts as missing. A store may hold a scope's vectors as one matrix
(`ScopeVectors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memory.ranking.embedder import Matrix
from memory.ranking.fusion import closeness

# Records embedded per transaction by a store's `reindex`: small, so an interruption loses little.
REINDEX_BATCH = 64
# (scope_key, done, total) after each reindex batch: what `switchboard memory reindex` shows.
Progress = Callable[[str, int, int], None]


def to_blob(vector: Matrix) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> Matrix:
    return np.frombuffer(blob, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class ScopeVectors:
    """Every active record's vector of one scope, as rows of one matrix, with the generation read,
    and what the centered cosine needs: the rows' squared lengths and their mean (None: no rows)."""

    generation: int
    seqs: tuple[int, ...]
    matrix: Matrix
    norms: npt.NDArray[np.float64]
    centroid: npt.NDArray[np.float64] | None

    @classmethod
    def of(cls, generation: int, seqs: Iterable[int], matrix: Matrix) -> ScopeVectors:
        rows = matrix.astype(np.float64)
        norms = np.einsum("ij,ij->i", rows, rows) if len(rows) else np.zeros(0, dtype=np.float64)
        centroid = rows.mean(axis=0) if len(rows) else None
        return cls(generation, tuple(seqs), matrix, norms, centroid)

    @classmethod
    def build(cls, generation: int, rows: Iterable[tuple[int, bytes]]) -> ScopeVectors:
        """From (seq, blob) rows; blobs of another length than the first (a corrupt row) are skipped."""
        seqs: list[int] = []
        blobs: list[bytes] = []
        for seq, blob in rows:
            if blobs and len(blob) != len(blobs[0]):
                continue
            seqs.append(int(seq))
            blobs.append(bytes(blob))
        if not blobs:
            return cls.of(generation, (), np.zeros((0, 0), dtype=np.float32))
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
        return cls.of(generation, seqs, matrix)

    def cosines(self, query: Matrix) -> tuple[dict[int, float], dict[int, float]]:
        """Each seq's plain cosine with the query (all vectors are unit length) and its centered one
        (`memory.ranking.closeness`, against this scope's centroid); {} on a dimension mismatch."""
        if not self.seqs or self.matrix.shape[1] != query.shape[0]:
            return {}, {}
        return self._by_seq(self.seqs, self.matrix, self.norms, query)

    def cosines_of(
        self, seqs: Iterable[int], vectors: Matrix, query: Matrix
    ) -> tuple[dict[int, float], dict[int, float]]:
        """The same for vectors made after this matrix was read (on use), against its centroid."""
        rows = np.asarray(vectors, dtype=np.float32).reshape(-1, query.shape[0])
        wide = rows.astype(np.float64)
        return self._by_seq(tuple(seqs), rows, np.einsum("ij,ij->i", wide, wide), query)

    def _by_seq(
        self, seqs: tuple[int, ...], rows: Matrix, norms: npt.NDArray[np.float64], query: Matrix
    ) -> tuple[dict[int, float], dict[int, float]]:
        centroid = self.centroid
        if centroid is not None and centroid.shape[0] != query.shape[0]:
            centroid = None
        plain, centered = closeness(rows, norms, query, centroid)
        return (
            dict(zip(seqs, plain.tolist(), strict=True)),
            dict(zip(seqs, centered.tolist(), strict=True)),
        )
