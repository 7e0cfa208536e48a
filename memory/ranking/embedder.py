"""The local semantic signal: sentence vectors from weights an installed package ships. No network, ever.

Two embedders, chosen by `memory.embedder`:

- `minilm` (the plain install's default): all-MiniLM-L6-v2, a 6-layer sentence encoder (384
  dimensions), as int8 ONNX run by onnxruntime, with its weights and vocabulary checked against pinned
  SHA-256s (memory/ranking/encoder.py). No torch. Several milliseconds a query, on up to two cores.
- `wordllama` (the extra `switchboard[light]`, for the smallest machines): WordLlama 0.4's
  `l2_supercat` static token embeddings (256 dimensions, numpy + tokenizers): about a millisecond a
  query and less memory, for a few points less recall. Its loader looks for
  the tokenizer under the wrong folder unless `cache_dir` is the package's own directory, and
  downloading is switched off, so a missing file is an error here and never a hub request.

Every vector is unit length (float32), so a dot product is the cosine. The embedder is the store's: the
seam stays text in, records out, and vectors never travel over the wire. A loaded embedder is kept for
the process: every store of it shares one model.
"""

from __future__ import annotations

import importlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memory.ranking.encoder import Matrix as Matrix
from memory.ranking.encoder import MiniLM, ModelUnavailable
from memory.ranking.fusion import NO_FEEDBACK, Feedback
from memory.ranking.lexical import hold_queries

EMBEDDER_NAMES: tuple[str, ...] = ("minilm", "wordllama", "none")
DEFAULT_EMBEDDER = "minilm"
# How many recent queries' vectors an embedder keeps: one request reads up to four scopes (in one or
# two hops), and each hop asks for the same query's vector.
QUERY_CACHE_SIZE = 256


# The cosine's share of the relevance each embedder was tuned to: the best ranking that still leaves
# unanswerable questions unanswered (a heavier cosine share lets near misses in; for MiniLM a share
# above .3 buys no recall and loses the questions that name the wrong person).
TUNED_WEIGHTS = {"wordllama-l2_supercat-256": 0.3, "all-minilm-l6-v2-int8": 0.3}
FALLBACK_WEIGHT = 0.3
# Lexical pseudo-relevance feedback each embedder was measured with (same section): it helps MiniLM;
# for wordllama it moved nothing that held, so it has none.
TUNED_FEEDBACK = {"all-minilm-l6-v2-int8": Feedback(records=3, stems=5, weight=0.2)}


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


class CachedEmbedder:
    """The shared part: normalization, a lock around the model, the query cache."""

    def __init__(self, name: str, encode: Callable[[list[str]], Matrix]) -> None:
        self._name = name
        self._encode = encode
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, Matrix] = OrderedDict()
        hold_queries(self)

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
        """The cache is looked up and filled under the model's lock: two hops of one read that ask at
        once (the repo's scope follows the others) make one forward pass, not two."""
        with self._lock:
            queries = self._queries  # `forget_queries` may swap it meanwhile: this one is then let go
            cached = queries.get(text)
            if cached is not None:
                queries.move_to_end(text)
                return cached
            vector: Matrix = normalize(np.asarray(self._encode([text]), dtype=np.float32))[0]
            queries[text] = vector
            while len(queries) > QUERY_CACHE_SIZE:
                queries.popitem(last=False)
        return vector

    def forget_queries(self) -> None:
        """The cached queries let go, without waiting for the model's lock (a forward pass may hold it,
        and a forget runs on the event loop): a new cache replaces the old."""
        self._queries = OrderedDict()


def normalize(matrix: Matrix) -> Matrix:
    """Rows scaled to unit length; an all-zero row (no known token) stays zero: cosine 0 with anything."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return scaled


_LOADED: dict[str, Embedder] = {}
_LOADING = threading.Lock()


def load_embedder(name: str, *, threads: int | None = None) -> Embedder | None:
    """The embedder `memory.embedder` names, loaded once a process; None for `none`. `threads`: the
    forward pass's, at that first load (default: the encoder's choice). Raises EmbedderUnavailable (one
    line naming the setting and the fix) when it cannot load here."""
    if name == "none":
        return None
    if name not in EMBEDDER_NAMES:
        raise EmbedderUnavailable(
            f"memory.embedder = {name!r}: allowed values are {', '.join(EMBEDDER_NAMES)} "
            f"(default {DEFAULT_EMBEDDER})"
        )
    with _LOADING:
        loaded = _LOADED.get(name)
        if loaded is None:
            loaded = _LOADED[name] = minilm_embedder(threads) if name == "minilm" else _wordllama()
    return loaded


def minilm_embedder(threads: int | None = None) -> Embedder:
    """The default embedder around a model loaded now (`load_embedder` keeps one a process); `threads`
    its forward pass's (default: the encoder's choice, memory/ranking/encoder.py)."""
    try:
        model = MiniLM.load(threads=threads)
    except ModelUnavailable as error:
        raise EmbedderUnavailable(str(error)) from None
    return CachedEmbedder(model.name, model.encode)


def _wordllama() -> Embedder:
    try:
        module: Any = importlib.import_module("wordllama")
    except ImportError:
        raise EmbedderUnavailable(
            "memory.embedder = 'wordllama' needs the package wordllama, which is not installed: "
            "pip install \"switchboard[light]\", or set memory.embedder = 'minilm' (the default)"
        ) from None
    package_dir = Path(module.__file__).resolve().parent
    try:
        model = module.WordLlama.load(
            config="l2_supercat", dim=256, cache_dir=package_dir, disable_download=True
        )
    except (FileNotFoundError, OSError) as error:
        raise EmbedderUnavailable(
            f"memory.embedder = 'wordllama': its bundled weights did not load ({error})"
        ) from None
    return CachedEmbedder("wordllama-l2_supercat-256", model.embed)
