"""The projected rows (memory/ranking/projection.py) and the shortlist the scope index reads them for: the
bound they give every cosine holds, and a read that scores only the shortlist chooses and orders exactly
what the full scan does — the same records, the same relevance floats, the same cosines."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.ranking.fusion import Feedback, Ranking, row_products
from memory.ranking.lexical import query_stems, record_stems
from memory.ranking.projection import Projection
from memory.ranking.scope_index import _READS_BEFORE_REBUILD, ScopeIndex, _Read
from memory.rules.engine import longest_terms
from tests.memory.ranking.test_scope_index import NOW, WORDS, record

DIMENSIONS = 32
FULL_SCAN = 10**9  # a scope index that never shortlists: the reference


def clustered(rng: np.random.Generator, count: int, noise: float) -> np.ndarray:
    """Unit vectors near a few directions, as a scope's records on a few topics are."""
    centers = rng.normal(size=(4, DIMENSIONS))
    rows = centers[rng.integers(0, 4, size=count)] + noise * rng.normal(size=(count, DIMENSIONS))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    count=st.integers(min_value=1, max_value=120),
    later=st.integers(min_value=0, max_value=20),
    noise=st.sampled_from([0.0, 0.05, 0.5, 3.0]),
)
def test_the_exact_cosine_lies_within_the_bound(seed: int, count: int, later: int, noise: float) -> None:
    rng = np.random.default_rng(seed)
    rows = clustered(rng, count + later, noise)
    matrix = np.zeros((count + later, DIMENSIONS), dtype=np.float32)
    matrix[:count] = rows[:count]
    projection = Projection.of(matrix, np.arange(count + later) < count, count + later)
    assert projection is not None
    for slot in range(count, count + later):  # made after the basis: projected on it as they come
        matrix[slot] = rows[slot]
        projection.put(slot, rows[slot])
    query = clustered(rng, 1, noise)[0]

    approximate, spread = projection.cosines(count + later, query)
    exact = row_products(matrix, query)

    assert np.all(np.abs(exact - approximate) <= spread)


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=1, max_size=120),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    query=st.lists(st.sampled_from([*WORDS, "unrelated"]), min_size=1, max_size=4),
    limit=st.integers(min_value=1, max_value=12),
    noise=st.sampled_from([0.0, 0.1, 0.5]),
    feedback=st.sampled_from([0.0, 0.3, 0.9]),
    removed=st.lists(st.integers(min_value=1, max_value=90), max_size=10),
    expired=st.booleans(),
)
def test_a_shortlisted_read_chooses_and_orders_exactly_what_the_full_scan_does(
    texts: list[list[str]],
    seed: int,
    query: list[str],
    limit: int,
    noise: float,
    feedback: float,
    removed: list[int],
    expired: bool,
) -> None:
    rng = np.random.default_rng(seed)
    ranking = Ranking(
        semantic_weight=0.4,
        semantic_threshold=0.6,
        feedback=Feedback(records=3, stems=4, weight=feedback) if feedback else Feedback(),
    )
    ages = rng.integers(0, 30 * 86_400, size=len(texts))
    records = [
        record(
            n + 1,
            " ".join(words),
            created_at=NOW - 40 * 86_400 + n,
            last_used_at=NOW - float(ages[n]) if n % 3 else None,
            origin="private" if n % 7 == 6 else "public",
        )
        for n, words in enumerate(texts)
    ]
    vectors = clustered(rng, len(records), noise)
    shortlisting, full = ScopeIndex(project_from=1), ScopeIndex(project_from=FULL_SCAN)
    for index in (shortlisting, full):
        for seq, item in enumerate(records, start=1):
            index.add(seq, item, record_stems(item), vectors[seq - 1] if seq % 5 else None)
        for seq in removed:  # forgotten: dead slots, their vectors zeroed
            index.remove(seq)
    near = vectors[int(seed % len(vectors))] + noise * rng.normal(size=DIMENSIONS).astype(np.float32)
    query_vector = near / np.linalg.norm(near)  # close to one record: cosines decide
    stems = query_stems(" ".join(query))
    terms = frozenset(longest_terms(stems))
    after = NOW - 40 * 86_400 + len(records) / 2 if expired else None

    found = shortlisting.select(stems, terms, query_vector, NOW, ranking, limit, after)
    wanted = full.select(stems, terms, query_vector, NOW, ranking, limit, after)

    assert found == wanted  # seqs, records, relevance floats and cosines, in order


def test_the_shortlist_is_a_small_part_of_a_scope_on_a_few_topics() -> None:
    """What the equality above exercises: a read that scores a few records, not the scope."""
    rng = np.random.default_rng(3)
    index = ScopeIndex(project_from=1)
    vectors = clustered(rng, 400, 0.05)
    for seq in range(1, 401):
        item = record(seq, f"deploy item{seq % 17}", last_used_at=NOW - seq * 600.0)
        index.add(seq, item, record_stems(item), vectors[seq - 1])
    stems = query_stems("deploy")
    size = 400
    lexical, matched = index._lexical(size, {"deploy": 1.0}, frozenset(stems))
    live = np.ones(size, dtype=np.bool_)
    read = _Read(lexical, matched, live, live, NOW, Ranking(), stems, None)

    shortlist = index._shortlist(read, vectors[7], 8)

    assert shortlist is not None
    assert 8 <= len(shortlist.rows) < size // 4


def projected(seed: int, count: int) -> tuple[ScopeIndex, np.ndarray]:
    """A scope of `count` records on a few topics, read once: its rows are projected."""
    vectors = clustered(np.random.default_rng(seed), count, 0.5)
    index = ScopeIndex(project_from=1)
    for seq in range(1, count + 1):
        item = record(seq, f"deploy item{seq}")
        index.add(seq, item, record_stems(item), vectors[seq - 1])
    index.select(query_stems("deploy"), {"deploy"}, vectors[0], NOW, Ranking(), 5)
    return index, vectors


def test_a_removed_record_leaves_no_copy_of_its_vector_in_the_index() -> None:
    index, vectors = projected(8, 40)
    held = index._projection
    assert held is not None
    slot = index._slot[12]

    index.remove(12)

    assert index._matrix is not None
    assert not np.any(np.all(index._matrix == vectors[11], axis=1))
    assert not held._rows[slot].any() and held._residuals[slot] == 0.0
    found = index.select(query_stems("deploy"), {"deploy"}, vectors[11], NOW, Ranking(), 40)
    assert 12 not in [c.seq for c in found]


def off_on_its_own(seed: int) -> tuple[ScopeIndex, np.ndarray, np.ndarray]:
    """60 records on two topics and, as seq 61, one on a topic of its own (`away`, which then spans a
    direction of the basis no other record does), read once: the basis is made from all of them."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(2, DIMENSIONS))
    rows = topics[rng.integers(0, 2, size=60)] + 0.01 * rng.normal(size=(60, DIMENSIONS))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    away = rng.normal(size=DIMENSIONS)
    away -= topics.T @ np.linalg.lstsq(topics.T, away, rcond=None)[0]
    away /= np.linalg.norm(away)
    index = ScopeIndex(project_from=1)
    for seq, vector in enumerate([*rows, away], start=1):
        item = record(seq, f"deploy item{seq}")
        index.add(seq, item, record_stems(item), vector.astype(np.float32))
    index.select(query_stems("deploy"), {"deploy"}, rows[0].astype(np.float32), NOW, Ranking(), 5)
    return index, rows.astype(np.float32), away


def test_a_removed_record_leaves_no_trace_of_its_vector_in_the_basis() -> None:
    index, rows, away = off_on_its_own(1)
    before = index._projection
    assert before is not None and float(np.max(np.abs(before._basis.T @ away))) > 0.5

    index.remove(61)
    index.select(query_stems("deploy"), {"deploy"}, rows[0], NOW, Ranking(), 5)

    held = index._projection
    assert held is None or float(np.max(np.abs(held._basis.T @ away))) < 0.5
    assert not before._basis.any() and not before._rows.any()  # the dropped one is zeroed, not let go


def test_the_basis_is_made_again_from_the_live_vectors_only_after_reads_on_the_full_pass() -> None:
    index, rows, away = off_on_its_own(2)
    full = ScopeIndex(project_from=FULL_SCAN)
    for seq in index.seqs():
        item = index.record(seq)
        assert item is not None and index._matrix is not None
        full.add(seq, item, record_stems(item), index._matrix[index._slot[seq]].copy())
    index.remove(61)
    full.remove(61)
    stems = query_stems("deploy")

    for read in range(_READS_BEFORE_REBUILD + 1):  # made again by the read after those
        assert index._projection is None
        query = rows[read % len(rows)]
        assert index.select(stems, {"deploy"}, query, NOW, Ranking(), 5) == full.select(
            stems, {"deploy"}, query, NOW, Ranking(), 5
        )

    held = index._projection
    assert held is not None and float(np.max(np.abs(held._basis.T @ away))) < 0.5


def test_a_removal_outside_the_sample_keeps_the_basis() -> None:
    index, _ = projected(10, 2048)  # from twice the sample, every other vector is sampled
    held = index._projection
    assert held is not None
    seq = next(seq for seq, slot in index._slot.items() if not held.made_from(slot))
    slot = index._slot[seq]

    index.remove(seq)

    assert index._projection is held and held._basis.any()
    assert not held._rows[slot].any() and held._residuals[slot] == 0.0


def test_a_compaction_drops_the_projection_of_the_removed_records() -> None:
    index, vectors = projected(9, 600)
    assert index._projection is not None
    for seq in range(1, 301):  # enough dead slots to rebuild from the live ones only
        index.remove(seq)

    assert index._projection is None and index._matrix is not None
    assert len(index._matrix) < 600 and not np.any(np.all(index._matrix[:, None] == vectors[:300], axis=2))
    found = index.select(query_stems("deploy"), {"deploy"}, vectors[0], NOW, Ranking(), 300)
    assert min(c.seq for c in found) > 300


def test_a_record_the_feedback_lifts_from_under_the_shortlist_is_still_found() -> None:
    """The list is cut by first-pass scores; the feedback query can lift a record from under that cut."""
    rng = np.random.default_rng(4)
    query_vector = clustered(rng, 1, 0.0)[0]
    far = clustered(rng, 200, 0.3)
    ranking = Ranking(semantic_weight=0.4, semantic_threshold=0.6, feedback=Feedback(1, 1, 0.9))
    shortlisting, full = ScopeIndex(project_from=1), ScopeIndex(project_from=FULL_SCAN)
    rows = [(record(1, "deploy billing", last_used_at=NOW), query_vector)]
    day_ago = NOW - 86_400.0
    rows += [(record(seq, f"deploy item{seq}", last_used_at=day_ago), far[seq]) for seq in range(2, 200)]
    rows += [(record(200, "billing cluster", last_used_at=day_ago), query_vector)]
    for index in (shortlisting, full):
        for item, vector in rows:
            index.add(int(item.id.rsplit(":", 1)[1]), item, record_stems(item), vector)
    stems = query_stems("deploy")

    found = shortlisting.select(stems, frozenset(stems), query_vector, NOW, ranking, 3)

    assert 200 in [c.seq for c in found]  # not in the first pass's top 3: the feedback lifted it
    assert found == full.select(stems, frozenset(stems), query_vector, NOW, ranking, 3)
