"""The scope index (memory/scope_index.py): scoring a whole scope at once must choose and order exactly
what `rank` chooses and orders over every record of the scope."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memory.ranking.fusion import Feedback, Ranked, Ranking, merge_score, rank, stats_stems
from memory.ranking.lexical import query_stems, record_stems, term_stats
from memory.ranking.scope_index import ScopeIndex
from memory.rules.engine import longest_terms
from memory.types import MemoryRecord, Origin

NOW = 1_800_000_000.0
WORDS = ["deploy", "deploys", "billing", "bills", "cluster", "api", "apis", "staging", "rollback", "menu"]
RANKING = Ranking(semantic_weight=0.4, semantic_threshold=0.5)
ROUNDING = 1e-4


def record(
    seq: int,
    text: str,
    *,
    created_at: float = NOW - 100,
    last_used_at: float | None = None,
    origin: Origin = "public",
) -> MemoryRecord:
    return MemoryRecord(
        id=f"mem:org:acme:{seq}",
        scope_key="org:acme",
        kind="fact",
        text=text,
        source_thread_key="slack:C1:1",
        created_at=created_at,
        last_used_at=last_used_at,
        origin=origin,
        origin_conversation=None if origin == "public" else "slack:G1",
    )


def unit(rng: np.random.Generator, dimensions: int = 8) -> np.ndarray:
    vector = rng.normal(size=dimensions).astype(np.float32)
    return vector / np.linalg.norm(vector)


def indexed(records: list[MemoryRecord], vectors: dict[int, np.ndarray]) -> ScopeIndex:
    index = ScopeIndex()
    for seq, item in enumerate(records, start=1):
        index.add(seq, item, record_stems(item), vectors.get(seq))
    return index


def expected(
    records: list[MemoryRecord],
    vectors: dict[int, np.ndarray],
    query: str,
    query_vector: np.ndarray | None,
    limit: int,
    ranking: Ranking = RANKING,
) -> list[Ranked]:
    """`rank` over every record of the scope, with the cosines a store would hand it: plain, and
    centered by the definition (the mean of the scope's vectors taken from each vector and the query)."""
    cosines = centered = None
    if query_vector is not None:
        held = [(item.id, vectors[seq]) for seq, item in enumerate(records, start=1) if seq in vectors]
        cosines = {record_id: float((vector @ query_vector).astype(np.float64)) for record_id, vector in held}
        centered = {}
        if held:
            mean = np.mean([vector.astype(np.float64) for _, vector in held], axis=0)
            away = query_vector.astype(np.float64) - mean
            for record_id, vector in held:
                off = vector.astype(np.float64) - mean
                short = min(np.linalg.norm(off), np.linalg.norm(away)) < 1e-3  # the centroid itself
                centered[record_id] = (
                    0.0 if short else float(off @ away / np.linalg.norm(off) / np.linalg.norm(away))
                )
    stats = term_stats(records, stats_stems(ranking, query, records))
    return rank(records, query, limit, NOW, ranking, stats=stats, cosines=cosines, centered=centered)


def selected(
    index: ScopeIndex,
    query: str,
    query_vector: np.ndarray | None,
    limit: int,
    ranking: Ranking = RANKING,
) -> list[tuple[str, float]]:
    stems = query_stems(query)
    chosen = index.select(stems, frozenset(longest_terms(stems)), query_vector, NOW, ranking, limit)
    return [(c.record.id, c.relevance) for c in chosen]


@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=1, max_size=40),
    ages=st.lists(st.integers(min_value=0, max_value=30 * 86_400), min_size=40, max_size=40),
    query=st.lists(st.sampled_from([*WORDS, "the", "what", "unrelated"]), min_size=1, max_size=6),
    limit=st.integers(min_value=1, max_value=12),
    vectored=st.booleans(),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
@example(  # float32 rounding once put two relevances 3e-6 apart here
    texts=[["deploy"]] * 5, ages=[0] * 40, query=["deploy"], limit=1, vectored=True, seed=1
)
def test_select_chooses_and_orders_what_rank_would_over_the_whole_scope(
    texts: list[list[str]], ages: list[int], query: list[str], limit: int, vectored: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    records = [
        record(n + 1, " ".join(words), last_used_at=NOW - ages[n] if n % 3 else None)
        for n, words in enumerate(texts)
    ]
    # Some records have no vector (written before the embedder): those rank lexically.
    vectors = {seq: unit(rng) for seq in range(1, len(records) + 1) if vectored and seq % 4}
    query_vector = unit(rng) if vectored else None
    text = " ".join(query)

    found = selected(indexed(records, vectors), text, query_vector, limit)
    wanted = expected(records, vectors, text, query_vector, limit)
    every = {r.record.id: r for r in expected(records, vectors, text, query_vector, len(records))}

    # The index takes its cosines from float32 products and the reference from their definition in
    # float64, so they agree to rounding (~1e-6): the same records in the same order, except that two
    # whose scores are within rounding of each other may trade places.
    assert len(found) == len(wanted)
    for (record_id, relevance), reference in zip(found, wanted, strict=True):
        assert record_id in every
        assert relevance == pytest.approx(every[record_id].relevance, abs=ROUNDING)
        if record_id != reference.record.id:
            near = pytest.approx(merge_score(reference, NOW), abs=ROUNDING)
            assert merge_score(every[record_id], NOW) == near


@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=1, max_size=40),
    ages=st.lists(st.integers(min_value=0, max_value=30 * 86_400), min_size=40, max_size=40),
    query=st.lists(st.sampled_from([*WORDS, "the", "unrelated"]), min_size=1, max_size=4),
    limit=st.integers(min_value=1, max_value=12),
    top=st.integers(min_value=1, max_value=4),
    stems=st.integers(min_value=1, max_value=6),
    replaced=st.integers(min_value=0, max_value=40),
)
def test_with_feedback_select_chooses_and_orders_exactly_what_rank_would(
    texts: list[list[str]],
    ages: list[int],
    query: list[str],
    limit: int,
    top: int,
    stems: int,
    replaced: int,
) -> None:
    """Lexical scores are the same floats on both sides, so the feedback records and stems are too."""
    ranking = Ranking(feedback=Feedback(records=top, stems=stems, weight=0.3))
    records = [  # every fifth from a private channel: it may not vote in the feedback
        record(
            n + 1,
            " ".join(words),
            last_used_at=NOW - ages[n] if n % 3 else None,
            origin="private" if n % 5 == 4 else "public",
        )
        for n, words in enumerate(texts)
    ]
    index = indexed(records, {})
    if 1 <= replaced <= len(records):  # re-added: its slot is now last, its seq stays
        index.add(replaced, records[replaced - 1], record_stems(records[replaced - 1]), None)
    text = " ".join(query)
    found = selected(index, text, None, limit, ranking)
    wanted = expected(records, {}, text, None, limit, ranking)
    assert found == [(r.record.id, r.relevance) for r in wanted]


def test_feedback_breaks_ties_for_its_records_by_seq_even_after_a_record_is_re_added() -> None:
    ranking = Ranking(feedback=Feedback(records=1, stems=1, weight=0.5))
    records = [record(1, "deploy alpha"), record(2, "deploy beta"), record(3, "deploy gamma alpha")]
    index = indexed(records, {})
    index.add(1, records[0], record_stems(records[0]), None)  # its slot is now last, its seq first
    # All three tie on "deploy": record 1 (the lowest seq) gives the feedback stem, alpha.
    found = [record_id for record_id, _ in selected(index, "deploy", None, 3, ranking)]
    assert found == ["mem:org:acme:1", "mem:org:acme:3", "mem:org:acme:2"]
    assert found == [r.record.id for r in expected(records, {}, "deploy", None, 3, ranking)]


def test_removed_and_replaced_records_leave_the_selection_and_the_frequencies() -> None:
    records = [record(n, f"deploy item{n}" if n % 2 else f"billing item{n}") for n in range(1, 601)]
    index = indexed(records, {})
    for seq in range(1, 599, 2):  # every deploy record but the last: enough dead slots to compact
        index.remove(seq)
    index.add(2, record(2, "deploy replaced"), record_stems(record(2, "deploy replaced")), None)

    assert len(index) == 301
    assert index.term_stats(["deploy", "bill"]).frequencies == {"deploy": 2, "bill": 299}
    assert [c.seq for c in index.select(["deploy"], {"deploy"}, None, NOW, RANKING, 5)] == [2, 599]


def test_a_removed_record_leaves_no_stem_only_it_held_in_the_index() -> None:
    """A forgotten record's words leave the index at once (as its text and its vector do), not at the
    next compaction: a stem held by no live record is derived from the erased text alone."""
    index = indexed([record(1, "the vault code is quokka"), record(2, "deploy the vault")], {})
    assert [c.seq for c in index.select(["quokka"], {"quokka"}, None, NOW, RANKING, 5)] == [1]

    index.remove(1)

    held = {*index._postings, *index._posting_arrays, *index._frequencies}
    assert "quokka" not in held and "code" not in held
    assert "vault" in held  # still another record's
    assert index.select(["quokka"], {"quokka"}, None, NOW, RANKING, 5) == []


def test_an_unrelated_record_is_never_selected_even_with_room_to_spare() -> None:
    rng = np.random.default_rng(3)
    query_vector = unit(rng)
    far = -query_vector  # cosine −1: no shared stem and nowhere near in meaning
    index = indexed([record(1, "the cafe menu"), record(2, "deploy on fridays")], {1: far, 2: far})

    found = index.select(["deploy"], {"deploy"}, query_vector, NOW, RANKING, 10)

    assert [c.seq for c in found] == [2]


def test_an_expired_record_is_never_selected() -> None:
    index = indexed([record(1, "deploy old", created_at=NOW - 10_000), record(2, "deploy new")], {})

    found = index.select(["deploy"], {"deploy"}, None, NOW, RANKING, 10, created_after=NOW - 5_000)

    assert [c.seq for c in found] == [2]


def test_a_vector_of_another_length_counts_as_none() -> None:
    rng = np.random.default_rng(5)
    query_vector = unit(rng)
    index = indexed([record(1, "deploy a"), record(2, "deploy b")], {1: query_vector, 2: unit(rng, 4)})

    assert index.has_vector(1) and not index.has_vector(2)
    cosines = {c.seq: c.cosine for c in index.select(["deploy"], {"deploy"}, query_vector, NOW, RANKING, 5)}
    assert cosines[2] is None and cosines[1] is not None


def test_a_removed_vector_leaves_the_centroid() -> None:
    rng = np.random.default_rng(11)
    records = [record(n, f"deploy item{n}") for n in range(1, 7)]
    vectors = {seq: unit(rng) for seq in range(1, 7)}
    query_vector = unit(rng)
    index = indexed(records, vectors)
    index.remove(3)
    kept = [item for seq, item in enumerate(records, start=1) if seq != 3]
    fresh = ScopeIndex()
    for item in kept:
        seq = int(item.id.rsplit(":", 1)[1])
        fresh.add(seq, item, record_stems(item), vectors[seq])

    found = index.select(["deploy"], {"deploy"}, query_vector, NOW, RANKING, 10)
    again = fresh.select(["deploy"], {"deploy"}, query_vector, NOW, RANKING, 10)

    assert [c.seq for c in found] == [c.seq for c in again]
    assert [c.relevance for c in found] == pytest.approx([c.relevance for c in again])
