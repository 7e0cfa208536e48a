"""A deterministic embedder for the stores' tests: words of one concept share one direction.

It implements the `Embedder` protocol the real ones do (memory/embedder.py), so a store treats it
exactly as it treats WordLlama; the tests can then say which texts are close in meaning.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from memory.ranking.embedder import CachedEmbedder, Matrix, normalize
from memory.ranking.encoder import MiniLM
from memory.rules.scorer import query_terms

DIMENSIONS = 32
CONCEPTS = {
    **dict.fromkeys(("deploy", "deploys", "ship", "ships", "release", "rollout"), 0),
    **dict.fromkeys(("lunch", "menu", "pasta", "food"), 1),
    **dict.fromkeys(("kubernetes", "k8s", "cluster"), 2),
}


class ConceptEmbedder:
    """Each content word adds one unit to its concept's dimension (others hash to their own)."""

    def __init__(self, name: str = "concept-test") -> None:
        self.name = name
        self.calls: list[int] = []  # how many texts each `embed` call got

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(len(texts))
        matrix = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in query_terms(text):
                dimension = CONCEPTS.get(word, 3 + zlib.crc32(word.encode()) % (DIMENSIONS - 3))
                matrix[row, dimension] += 1.0
        return normalize(matrix)

    def embed_query(self, text: str) -> Matrix:
        vector: Matrix = self.embed([text])[0]
        return vector


class CountingMiniLM(MiniLM):
    """The real model (its session and tokenizer), keeping the texts of every forward pass."""

    def __init__(self, model: MiniLM) -> None:
        super().__init__(model.weights, model.tokenizer, model.session)
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(list(texts))
        return super().encode(texts)

    def embedder(self) -> CachedEmbedder:
        """The embedder the store is given, as `load_embedder` builds it around the model."""
        return CachedEmbedder(self.name, self.encode)
