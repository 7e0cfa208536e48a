"""How far ranking alone could take LoCoMo recall on today's encoder: the ceiling of any mix of its signals.

    .venv/bin/python bench/locomo_headroom.py                  # minilm, dated, DEV split
    .venv/bin/python bench/locomo_headroom.py --embedder wordllama

bench/bench_locomo.py measures the ranking; this asks what any reordering of the same signals could
reach, per cat 1–4 question of the DEV split (the clock as `bench_locomo.py --dated` sets it):

- the store's fused list (`retrieve`, limit 40, in-process store: it scores as the SQLite store does),
  and its top 5 / top 10 (the bench's figures);
- the semantic list alone: every record of the scope by its centered cosine with the question (no gate,
  no lexical score), as the store computes it;
- whether a gold record is in the fused top 40 at all (what any rerank of a 40-record shortlist can reach);
- the best of the two lists per question (an oracle that knows, for each question, which list to trust);
- the fused top 5 kept, slots 6–10 taken alternately from the semantic and the fused list;
- each question missed in the top 10 though some record could answer it, by where the semantic list puts
  its best gold record (top 10, 11–30, beyond).

No figure here is a ranking the store could ship: the oracle is a bound, the alternation a probe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_locomo as locomo

from memory.ranking.embedder import Embedder, load_embedder, tuned_feedback, tuned_weight
from memory.ranking.fusion import Ranking
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate

SHORTLIST = 40


@dataclass(frozen=True)
class Question:
    category: int
    fused: list[str]  # record ids, the store's order
    semantic: list[str]  # record ids by centered cosine, best first
    gold: frozenset[str]  # ids of the records whose evidence meets the question's


def first_hit(ids: Sequence[str], gold: frozenset[str]) -> int | None:
    return next((rank for rank, record_id in enumerate(ids, 1) if record_id in gold), None)


def alternated(fused: Sequence[str], semantic: Sequence[str], keep: int = 5, slots: int = 10) -> list[str]:
    """The fused list's first `keep`, then the semantic and the fused list in turn, each skipping what
    is already in, until `slots` are filled."""
    out = list(fused[:keep])
    queues = [[x for x in semantic if x not in out], [x for x in fused[keep:]]]
    turn = 0
    while len(out) < slots and any(queues):
        queue = queues[turn % 2]
        while queue and queue[0] in out:
            queue.pop(0)
        if queue:
            out.append(queue.pop(0))
        turn += 1
    return out


async def questions_of(
    conversation: dict[str, object], ranking: Ranking, embedder: Embedder
) -> list[Question]:
    clock = locomo.Clock()
    store = InProcessMemoryStore(clock=clock, ranking=ranking, embedder=embedder)
    scope = f"org:{conversation['sample_id']}"
    records = locomo.records_of(conversation, "observations")
    clock.now = max(when for _, _, when in records) + locomo.DAY
    evidence = locomo.expected_ids(scope, records)
    try:
        for start in range(0, len(records), locomo.BATCH):
            chunk = records[start : start + locomo.BATCH]
            candidates = [
                MemoryCandidate(
                    kind="fact", text=text, source_thread_key=scope, origin="public", observed_at=when
                )
                for text, _, when in chunk
            ]
            await store.write(scope, candidates)
        active = [record for record in store.records(scope) if record.status == "active"]
        ids = [record.id for record in active]
        vectors = embedder.embed([record.text for record in active]).astype(np.float64)
        centroid = vectors.mean(axis=0)
        centered = vectors - centroid
        centered /= np.maximum(np.linalg.norm(centered, axis=1, keepdims=True), 1e-12)
        found: list[Question] = []
        for qa in conversation["qa"]:  # type: ignore[attr-defined]
            if not qa["has_evidence"] or qa["category"] == 5:
                continue
            wanted = frozenset(qa["evidence"])
            fused = [record.id for record in await store.retrieve(scope, qa["question"], SHORTLIST)]
            query = embedder.embed_query(qa["question"]).astype(np.float64) - centroid
            query /= max(float(np.linalg.norm(query)), 1e-12)
            semantic = [ids[i] for i in np.argsort(-(centered @ query), kind="stable")]
            gold = frozenset(record_id for record_id, ids_ in evidence.items() if ids_ & wanted)
            found.append(Question(qa["category"], fused, semantic, gold))
        return found
    finally:
        await store.aclose()


def fused_rank(q: Question) -> int | None:
    return first_hit(q.fused, q.gold)


def semantic_rank(q: Question) -> int | None:
    return first_hit(q.semantic, q.gold)


def mixed_rank(q: Question) -> int | None:
    return first_hit(alternated(q.fused, q.semantic), q.gold)


def hits(questions: Sequence[Question], rank_of: Callable[[Question], int | None], k: int) -> int:
    return sum(1 for q in questions if (rank := rank_of(q)) is not None and rank <= k)


def report(questions: Sequence[Question]) -> str:
    n = len(questions)
    reachable = [q for q in questions if q.gold]

    def share(count: int) -> str:
        return f"{count / n:.3f} ({count})"

    def row(name: str, rank_of: Callable[[Question], int | None]) -> str:
        return f"| {name} | {share(hits(questions, rank_of, 5))} | {share(hits(questions, rank_of, 10))} |"

    either = sum(
        1 for q in questions if any(r is not None and r <= 10 for r in (fused_rank(q), semantic_rank(q)))
    )
    buckets: Counter[str] = Counter()
    for q in reachable:
        if (fused_rank(q) or SHORTLIST + 1) <= 10:
            continue
        best = semantic_rank(q) or len(q.semantic) + 1
        buckets["semantic top 10" if best <= 10 else "semantic 11–30" if best <= 30 else "beyond 30"] += 1
    lines = [
        f"cat 1–4 questions: {n}; some record could answer (the ceiling): {share(len(reachable))}",
        "",
        "| list | R@5 | R@10 |",
        "|---|---:|---:|",
        row("fused (the store's ranking)", fused_rank),
        row("semantic alone (centered cosine)", semantic_rank),
        row("fused top 5, then semantic / fused in turn", mixed_rank),
        f"| best of fused and semantic per question (oracle) | — | {share(either)} |",
        "",
        f"A gold record in the fused top {SHORTLIST} (what any rerank of that shortlist can reach): "
        f"{share(hits(questions, fused_rank, SHORTLIST))}",
        "",
        "Reachable questions missed in the fused top 10, by the semantic rank of their best gold record: "
        + ", ".join(f"{name} {count}" for name, count in sorted(buckets.items())),
    ]
    return "\n".join(lines)


async def run(conversations: list[dict[str, object]], embedder_name: str) -> str:
    embedder = load_embedder(embedder_name)
    if embedder is None:
        raise SystemExit("an embedder is needed: the semantic list is its cosine")
    ranking = Ranking(semantic_weight=tuned_weight(embedder), feedback=tuned_feedback(embedder))
    questions: list[Question] = []
    for conversation in conversations:
        questions += await questions_of(conversation, ranking, embedder)
    return report(questions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "wordllama"))
    args = parser.parse_args(argv)
    conversations = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    print(asyncio.run(run(conversations, args.embedder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
