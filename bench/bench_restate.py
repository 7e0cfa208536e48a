"""Could an embedder's similarity tell a restatement from a near miss? The threshold a restatement
check would need for 0 false matches on tests/memory/rules/restate_corpus.py, and what it then catches.

    .venv/bin/python bench/bench_restate.py                 # wordllama (the default embedder)
    .venv/bin/python bench/bench_restate.py --embedder minilm

Prints, per embedder, the cosine of every pair, the highest near miss (the lowest threshold with no
false match is just above it) and how many reworded restatements score above that. Not a test: it
loads a model and prints figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ranking.embedder import load_embedder
from tests.memory.rules.restate_corpus import NEAR_MISSES, RESTATEMENTS


def cosines(name: str, pairs: tuple[tuple[str, str], ...]) -> list[tuple[float, str, str]]:
    embedder = load_embedder(name)
    if embedder is None:
        raise SystemExit(f"--embedder {name}: no embedder of that name")
    out = []
    for first, second in pairs:
        matrix = embedder.embed([first, second])
        out.append((float(matrix[0] @ matrix[1]), first, second))
    return sorted(out, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="wordllama")
    args = parser.parse_args()
    near = cosines(args.embedder, NEAR_MISSES)
    same = cosines(args.embedder, RESTATEMENTS)
    highest = near[0][0]
    caught = sum(score > highest for score, _, _ in same)
    print(f"| {args.embedder} | pairs | cosine min | cosine max |")
    print("|---|---|---|---|")
    print(f"| near misses | {len(near)} | {near[-1][0]:.3f} | {highest:.3f} |")
    print(f"| restatements | {len(same)} | {same[-1][0]:.3f} | {same[0][0]:.3f} |")
    print(
        f"\n0 false matches needs a threshold above {highest:.3f}; "
        f"it would catch {caught} of {len(same)} restatements."
    )
    print("\nHighest near misses:")
    for score, first, second in near[:6]:
        print(f"- {score:.3f}  {first!r} vs {second!r}")


if __name__ == "__main__":
    main()
