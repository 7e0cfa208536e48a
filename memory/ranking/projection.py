"""A scope's vectors in fewer dimensions, and how far each cosine read off them can be. Pure (numpy).

Scoring a large scope reads every record's vector at every query; at ten thousand records that pass
dominates a retrieve. Projected on the scope's principal directions (an orthonormal basis V of D
columns), a row r keeps y = Vᵀr, and its cosine with a query q splits exactly into y·(Vᵀq), read off
the small rows, and what lies outside the basis, r⊥·q⊥, which Cauchy–Schwarz bounds by |r⊥|·|q⊥|
(|r⊥|² = |r|² − |y|²). So the small rows give each record an interval its exact cosine lies in; the
scope index uses it to score exactly only the records that could reach the top (memory/ranking/
scope_index.py), with the float32 vectors, so the order is the full scan's.

Any orthonormal basis keeps the bound true; the principal one keeps it tight. The basis is made from
a sample of the vectors the scope holds when it is built, and later vectors are projected on it as they
come. A basis made from a vector carries something of it: a removal of a sampled slot
(`made_from`) must drop the whole projection (`wipe`), not just the slot's row (`drop`).
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from memory.ranking.fusion import Floats, Vectors, row_products

_Array = TypeVar("_Array", bound=npt.NDArray[Any])

# Columns kept, out of the vectors' own: a quarter of the bytes a query reads (96 of MiniLM's 384,
# which leave about a fifth of a unit vector's length to bound).
SHARE = 4
# What float32 rounding can move a cosine by (the exact product's, the small rows', the projection's):
# orders of magnitude below this, which only widens each interval.
SLACK = 1e-4
# Vectors the basis is computed from: its directions need a fair sample, not every row.
_SAMPLE = 1024
# Rounds of subspace iteration from the heaviest coordinates: enough to catch most of the spread.
_ITERATIONS = 4
# Rows projected at a time when the basis is made: a bounded float64 temporary.
_CHUNK = 1024


class Projection:
    """Each slot's vector on a fixed orthonormal basis, and the length of what the basis misses."""

    def __init__(self, basis: Floats, capacity: int) -> None:
        self._basis = basis  # (the vectors' dimensions, fewer), orthonormal columns
        self._rows: Vectors = np.zeros((capacity, basis.shape[1]), dtype=np.float32)
        self._residuals = np.zeros(capacity, dtype=np.float64)
        self._sampled = np.zeros(capacity, dtype=np.bool_)  # the slots the basis was made from

    @classmethod
    def of(cls, matrix: Vectors, present: npt.NDArray[np.bool_], capacity: int) -> Projection | None:
        """A basis from the `present` rows of `matrix` (near the principal directions of an even
        sample of them), every present row projected on it; None when there is nothing to project.

        Made with numpy's own loops (`einsum`, one thread), never BLAS or LAPACK: their worker threads
        on a busy host turned this one-off into seconds under the scope's lock."""
        width = matrix.shape[1] // SHARE
        slots = np.flatnonzero(present)
        if width == 0 or slots.size == 0:
            return None
        sampled = slots[:: max(1, slots.size // _SAMPLE)]
        wide = matrix[sampled].astype(np.float64)
        covariance = np.einsum("ki,kj->ij", wide, wide)
        basis = _orthonormal(covariance[:, np.argsort(-np.diag(covariance))[:width]])
        for _ in range(_ITERATIONS):  # subspace iteration: towards the directions that carry the most
            basis = _orthonormal(np.einsum("ij,jk->ik", covariance, basis))
        projection = cls(basis, capacity)
        projection._sampled[sampled] = True
        for start in range(0, slots.size, _CHUNK):
            projection._put(slots[start : start + _CHUNK], matrix[slots[start : start + _CHUNK]])
        return projection

    def put(self, slot: int, vector: Vectors) -> None:
        self._put(np.array([slot]), vector.reshape(1, -1))

    def _put(self, slots: npt.NDArray[np.intp], vectors: Vectors) -> None:
        wide = vectors.astype(np.float64)
        projected = np.einsum("ij,jk->ik", wide, self._basis)
        self._rows[slots] = projected
        lengths = np.einsum("ij,ij->i", wide, wide)
        outside = lengths - np.einsum("ij,ij->i", projected, projected)
        self._residuals[slots] = np.sqrt(np.maximum(outside, 0.0))

    def made_from(self, slot: int) -> bool:
        """Whether the basis was made from the slot's vector: its removal then calls for `wipe`."""
        return bool(self._sampled[slot])

    def drop(self, slot: int) -> None:
        """A removed record leaves no trace of its vector here either (one the basis was not made from)."""
        self._rows[slot] = 0.0
        self._residuals[slot] = 0.0

    def wipe(self) -> None:
        """Every array zeroed in place, before the projection is let go: the basis, and every row
        projected on it, carry something of the vectors it was made from, and freed memory is not
        cleared."""
        for array in (self._basis, self._rows, self._residuals):
            array.fill(0.0)

    def grow(self, capacity: int) -> None:
        self._rows = resized(self._rows, capacity)
        self._residuals = resized(self._residuals, capacity)
        self._sampled = resized(self._sampled, capacity)

    def cosines(self, size: int, query: Vectors) -> tuple[Floats, Floats]:
        """Per slot, the cosine read off the small rows and how far the exact one can be from it."""
        wide = query.astype(np.float64)
        projected = np.einsum("j,jk->k", wide, self._basis)
        approximate = row_products(self._rows[:size], projected.astype(np.float32))
        outside = float(np.sqrt(max(float(wide @ wide) - float(projected @ projected), 0.0)))
        spread = self._residuals[:size] * outside
        spread += SLACK
        return approximate, spread


def resized(array: _Array, capacity: int) -> _Array:
    """`array` with `capacity` rows, the new ones zero (False, no vector)."""
    grown: _Array = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)  # type: ignore[assignment]
    grown[: len(array)] = array
    return grown


def _orthonormal(columns: Floats) -> Floats:
    """Orthonormal columns spanning `columns`' (Gram–Schmidt, each column twice over, so the basis is
    orthonormal to rounding); a column already in the span of those before it is left out."""
    basis = np.zeros_like(columns)
    kept = 0
    for column in columns.T:
        vector = column.copy()
        for _ in range(2):
            held = basis[:, :kept]
            vector -= np.einsum("ij,j->i", held, np.einsum("ij,i->j", held, vector))
        length = float(np.sqrt(vector @ vector))
        if length > 1e-9 * float(np.sqrt(column @ column)):
            basis[:, kept] = vector / length
            kept += 1
    return np.ascontiguousarray(basis[:, :kept])
