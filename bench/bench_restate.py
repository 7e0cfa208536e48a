"""Could an embedder's similarity fold restatements a write misses? The lowest cosine threshold with 0
false folds on the near-miss corpora (tests/memory/rules/restate_corpus.py and fold_corpus.py), and how
many true restatements beyond `meaning_key` it would then fold.

    .venv/bin/python bench/bench_restate.py                 # minilm (the default embedder)
    .venv/bin/python bench/bench_restate.py --embedder wordllama

Prints, per embedder, the cosine range of each kind of pair, the threshold (just above the highest near
miss), how many reworded restatements reach it, what lower thresholds would cost in false folds, and the
near misses that score highest. Not a test: it loads a model and prints figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ranking.embedder import Embedder, load_embedder
from memory.rules.restate import meaning_key
from tests.memory.rules.fold_corpus import FOLD_NEAR_MISSES, FOLD_RESTATEMENTS
from tests.memory.rules.restate_corpus import NEAR_MISSES, RESTATEMENTS

Scored = list[tuple[float, str, str]]
TRIED = (0.80, 0.85, 0.90, 0.95, 0.98, 0.99)


def cosines(embedder: Embedder, pairs: tuple[tuple[str, str], ...]) -> Scored:
    out = []
    for first, second in pairs:
        matrix = embedder.embed([first, second])
        out.append((float(matrix[0] @ matrix[1]), first, second))
    return sorted(out, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    embedder = load_embedder(args.embedder)
    if embedder is None:
        raise SystemExit(f"--embedder {args.embedder}: no embedder of that name")
    near = cosines(embedder, (*NEAR_MISSES, *FOLD_NEAR_MISSES))
    same = cosines(embedder, (*RESTATEMENTS, *FOLD_RESTATEMENTS))
    reworded = [pair for pair in same if meaning_key(pair[1]) != meaning_key(pair[2])]
    highest = near[0][0]
    folded = sum(score > highest for score, _, _ in reworded)
    print(f"| {embedder.name} | pairs | cosine min | median | max |")
    print("|---|---:|---:|---:|---:|")
    for label, rows in (("near misses", near), ("restatements beyond meaning_key", reworded)):
        low, mid, high = rows[-1][0], rows[len(rows) // 2][0], rows[0][0]
        print(f"| {label} | {len(rows)} | {low:.3f} | {mid:.3f} | {high:.3f} |")
    print(
        f"\n0 false folds needs a threshold above {highest:.3f}: it folds {folded} of {len(reworded)} "
        f"restatements beyond meaning_key ({len(same) - len(reworded)} more differ only in formatting)."
    )
    print("\n| threshold | false folds (of near misses) | restatements folded (beyond meaning_key) |")
    print("|---:|---:|---:|")
    for threshold in TRIED:
        wrong = sum(score >= threshold for score, _, _ in near)
        right = sum(score >= threshold for score, _, _ in reworded)
        print(f"| {threshold:.2f} | {wrong} / {len(near)} | {right} / {len(reworded)} |")
    print("\nHighest near misses:")
    for score, first, second in near[:8]:
        print(f"- {score:.3f}  {first!r} vs {second!r}")


if __name__ == "__main__":
    main()
