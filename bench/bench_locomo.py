"""How well memory finds the right records: the LoCoMo retrieval benchmark (DEV split), no model calls.

    .venv/bin/python bench/bench_locomo.py                      # every ranking, SQLite store
    .venv/bin/python bench/bench_locomo.py --modes spec,v2      # some rankings only
    .venv/bin/python bench/bench_locomo.py --stores memory,sqlite   # the engine alone too
    .venv/bin/python bench/bench_locomo.py --records turns      # one record per dialogue turn
    .venv/bin/python bench/bench_locomo.py --data PATH          # another copy of locomo_dev.jsonl

Rankings (`--modes`): `spec` (the seed's scorer), `v2` (stems + IDF, no embedder), `minilm` (the
default) and `wordllama` (v2 fused with that embedder's cosine at its tuned default weight; `wordllama`
needs the extra `switchboard[light]`). The embedder is loaded once; its load time is not in the read
latency, the question's embedding is.

Protocol (../shared/bench/locomo/README.md): one scope per conversation; each observation (or turn)
becomes a record whose evidence is its dia_ids; each QA item with evidence is a query against its own
conversation; a hit is a returned record whose evidence meets the QA's. Recall@5/10 and MRR, overall
and per category, beside the ceiling (the share of questions some record of the index could hit: an
observation does not cover every evidence turn). The clock is fixed, so recency is equal for every
record and usage bumps from earlier queries cannot reorder later ones: the figures measure the
relevance gate, the keyword score and (for SQLite's `spec` ranking) the bm25 candidate prefilter; v2
scores every record of the scope.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ranking.embedder import Embedder, load_embedder, tuned_feedback, tuned_weight
from memory.ranking.fusion import Ranking
from memory.rules.engine import record_id
from memory.rules.restate import meaning_key
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate

_DATA = Path("shared") / "bench" / "locomo" / "locomo_dev.jsonl"
# The shared folder beside the checkout (main at /work/main, a worktree at /work/wt/<name>).
DEFAULT_DATA = next(
    (parent / _DATA for parent in Path(__file__).resolve().parents if (parent / _DATA).exists()),
    Path(__file__).resolve().parents[2] / _DATA,
)
NOW = 1_800_000_000.0
DAY = 86_400.0
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
BATCH = 50  # the memory service's batch cap


@dataclass
class Tally:
    queries: int = 0
    hit5: int = 0
    hit10: int = 0
    reciprocal: float = 0.0
    reachable: int = 0  # questions some record of the index could hit (the ceiling)

    def add(self, rank: int | None, reachable: bool = True) -> None:
        self.queries += 1
        self.reachable += reachable
        if rank is not None:
            self.hit5 += rank <= 5
            self.hit10 += rank <= 10
            self.reciprocal += 1 / rank

    def row(self, name: str) -> str:
        n = max(self.queries, 1)
        rates = (self.hit5 / n, self.hit10 / n, self.reciprocal / n, self.reachable / n)
        return f"| {name} | {self.queries} | " + " | ".join(f"{rate:.3f}" for rate in rates) + " |"


@dataclass
class Results:
    by_category: dict[int, Tally] = field(default_factory=lambda: {c: Tally() for c in CATEGORIES})
    read_seconds: list[float] = field(default_factory=list)

    def overall(self, categories: Sequence[int]) -> Tally:
        total = Tally()
        for c in categories:
            t = self.by_category[c]
            total.queries += t.queries
            total.hit5 += t.hit5
            total.hit10 += t.hit10
            total.reciprocal += t.reciprocal
            total.reachable += t.reachable
        return total


@dataclass
class Clock:
    """The stores' clock: fixed, or (with --dated) the day after the conversation being read."""

    now: float = NOW

    def __call__(self) -> float:
        return self.now


Record = tuple[str, frozenset[str], float]


def session_time(text: str) -> float:
    """A LoCoMo session's `date_time` ("1:56 pm on 8 May, 2023") as epoch seconds, UTC."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def records_of(conversation: dict[str, object], kind: str) -> list[Record]:
    """(text, evidence dia_ids, when its session happened) for each record of a conversation."""
    sessions: list[dict[str, object]] = conversation["sessions"]  # type: ignore[assignment]
    when = {session["session"]: session_time(str(session["date_time"])) for session in sessions}
    if kind == "turns":
        return [
            (f"{turn['speaker']}: {turn['text']}", frozenset({turn["dia_id"]}), when[session["session"]])
            for session in sessions
            for turn in session["turns"]  # type: ignore[attr-defined]
        ]
    return [
        (f"{obs['speaker']}: {obs['text']}", frozenset(obs["evidence"]), when[obs["session"]])
        for obs in conversation["observations"]  # type: ignore[attr-defined]
    ]


async def evaluate(
    store: MemoryStore, conversations: list[dict[str, object]], kind: str, clock: Clock | None = None
) -> Results:
    """With a clock, records carry the time their session happened and each conversation is read on
    the day after its last session (time phrases in its questions then mean what they meant)."""
    results = Results()
    for conversation in conversations:
        scope = f"org:{conversation['sample_id']}"
        records = records_of(conversation, kind)
        if clock is not None:
            clock.now = max(when for _, _, when in records) + DAY
        evidence_by_id = expected_ids(scope, records)
        inserted = 0
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            # Learned where its readers could see it: every record is public, as a conversation the
            # asker took part in would be (an `unknown` origin would be shown to its owner only).
            candidates = [
                MemoryCandidate(
                    kind="fact",
                    text=text,
                    source_thread_key=scope,
                    origin="public",
                    observed_at=when if clock is not None else None,
                )
                for text, _, when in chunk
            ]
            inserted += (await store.write(scope, candidates)).inserted
        assert inserted == len(evidence_by_id), "ids are not what the engine mints"
        for qa in conversation["qa"]:  # type: ignore[attr-defined]
            if not qa["has_evidence"]:
                continue
            wanted = frozenset(qa["evidence"])
            started = time.perf_counter()
            found = await store.retrieve(scope, qa["question"], 10)
            results.read_seconds.append(time.perf_counter() - started)
            rank = next((i for i, r in enumerate(found, 1) if evidence_by_id[r.id] & wanted), None)
            reachable = any(evidence & wanted for evidence in evidence_by_id.values())
            results.by_category[qa["category"]].add(rank, reachable)
    return results


def expected_ids(scope: str, records: list[Record]) -> dict[str, frozenset[str]]:
    """The id each record gets (mem:<scope>:<n>, n counting inserts); a duplicate text dedups into the
    earlier record, which then stands for both evidences."""
    by_norm: dict[str, str] = {}
    evidence: dict[str, frozenset[str]] = {}
    for text, ids, _ in records:
        norm = meaning_key(text)
        if norm in by_norm:
            evidence[by_norm[norm]] |= ids
            continue
        by_norm[norm] = record_id(scope, len(by_norm) + 1)
        evidence[by_norm[norm]] = ids
    return evidence


def table(title: str, results: Results) -> str:
    lines = [
        f"**{title}**",
        "",
        "| subset | n | R@5 | R@10 | MRR | ceiling |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c, name in CATEGORIES.items():
        lines.append(results.by_category[c].row(f"cat {c} {name}"))
    lines.append(results.overall([1, 2, 3, 4]).row("overall cat 1–4"))
    lines.append(results.overall([1, 2, 3, 4, 5]).row("overall cat 1–5"))
    reads = sorted(results.read_seconds)
    if reads:
        p50 = reads[len(reads) // 2] * 1000
        lines += ["", f"read latency (retrieve, limit 10): p50 {p50:.2f} ms, p95 {p95_ms(results):.2f} ms"]
    return "\n".join(lines)


def summary_row(label: str, results: Results) -> str:
    """One line of the headline table: cat 1–4 R@5 / R@10 / MRR, temporal and cat 5 R@5, read p95."""
    overall = results.overall([1, 2, 3, 4])
    temporal, adversarial = results.by_category[2], results.by_category[5]
    n, t, m = (max(tally.queries, 1) for tally in (overall, temporal, adversarial))
    cells = (
        overall.hit5 / n,
        overall.hit10 / n,
        overall.reciprocal / n,
        temporal.hit5 / t,
        adversarial.hit5 / m,
    )
    return f"| {label} | " + " | ".join(f"{value:.3f}" for value in cells) + f" | {p95_ms(results):.2f} |"


def p95_ms(results: Results) -> float:
    """The 95th percentile of the read latencies, in milliseconds (0 with no reads)."""
    reads = sorted(results.read_seconds)
    if not reads:
        return 0.0
    return reads[min(len(reads) - 1, round(0.95 * (len(reads) - 1)))] * 1000


def ranking_of(mode: str) -> tuple[Ranking, Embedder | None]:
    if mode == "spec":
        return Ranking(mode="spec"), None
    if mode == "v2":
        return Ranking(mode="v2"), None
    if mode in ("wordllama", "minilm"):
        embedder = load_embedder(mode)
        assert embedder is not None
        ranking = Ranking(semantic_weight=tuned_weight(embedder), feedback=tuned_feedback(embedder))
        return ranking, embedder
    raise SystemExit(f"unknown mode {mode!r}: expected spec, v2, wordllama or minilm")


async def run(
    conversations: list[dict[str, object]],
    kind: str,
    modes: Sequence[str],
    stores: Sequence[str],
    dated: bool,
) -> None:
    summary = [
        "| mode, store | cat 1–4 R@5 | R@10 | MRR | temporal R@5 | cat 5 R@5 | read p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in modes:
        ranking, embedder = ranking_of(mode)
        for name in stores:
            with tempfile.TemporaryDirectory() as workdir:
                clock = Clock()
                store: MemoryStore
                if name == "memory":
                    store = InProcessMemoryStore(clock=clock, ranking=ranking, embedder=embedder)
                    title = "in-process store"
                else:
                    store = SqliteMemoryStore(
                        Path(workdir), cap=10_000, clock=clock, ranking=ranking, embedder=embedder
                    )
                    how = "scope index" if ranking.stemmed else "FTS5 bm25 prefilter + engine"
                    title = f"SQLite store ({how})"
                try:
                    results = await evaluate(store, conversations, kind, clock if dated else None)
                finally:
                    await store.aclose()
            print(table(f"{mode}: {title}, {kind}{', dated' if dated else ''}", results))
            print()
            summary.append(summary_row(f"{mode}, {name}", results))
    print("\n".join(summary))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--records", choices=("observations", "turns"), default="observations")
    parser.add_argument(
        "--modes", default="spec,v2,wordllama", help="comma-separated: spec, v2, wordllama, minilm"
    )
    parser.add_argument("--stores", default="sqlite", help="comma-separated: sqlite, memory")
    parser.add_argument(
        "--dated", action="store_true", help="records carry their session's date; read the day after"
    )
    args = parser.parse_args(argv)
    conversations = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    modes = [mode for mode in args.modes.split(",") if mode]
    stores = [name for name in args.stores.split(",") if name]
    asyncio.run(run(conversations, args.records, modes, stores, args.dated))
    return 0


if __name__ == "__main__":
    sys.exit(main())
