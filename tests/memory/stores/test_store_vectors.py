"""Vectors over a store's life: records written before the embedder, lazily on use, `reindex`.

Run for the two durable stores (SQLite and PostgreSQL), each reopened over the same data with another
embedder, as an operator would after switching `memory.embedder` on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import pytest
from structlog.testing import capture_logs

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import Ranking
from memory.stores.build import note_foreign_vectors
from memory.stores.postgres.store import PostgresMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.embedders import ConceptEmbedder
from tests.memory.postgres_support import store_schema, unique_application_name
from tests.memory.store_contract import ORG, FakeClock, fact, ids, rid

NEAR = Ranking(semantic_threshold=0.6)
OTHER = "channel:slack:C9"
Durable = SqliteMemoryStore | PostgresMemoryStore


class Reopen(Protocol):
    def __call__(self, embedder: Embedder | None) -> Durable: ...


@pytest.fixture(params=["sqlite", "postgres"])
async def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Reopen]:
    """Stores over one and the same data: a SQLite directory or a PostgreSQL schema."""
    made: list[Durable] = []
    with contextlib.ExitStack() as stack:
        dsn = stack.enter_context(store_schema()).dsn if request.param == "postgres" else ""

        def factory(embedder: Embedder | None) -> Durable:
            store: Durable
            if request.param == "sqlite":
                store = SqliteMemoryStore(
                    tmp_path / "memory", clock=FakeClock(), ranking=NEAR, embedder=embedder
                )
            else:
                store = PostgresMemoryStore(
                    dsn,
                    clock=FakeClock(),
                    ranking=NEAR,
                    embedder=embedder,
                    application_name=unique_application_name(),
                )
            made.append(store)
            return store

        try:
            yield factory
        finally:
            for store in made:
                await store.aclose()


async def test_older_records_rank_lexically_until_reindex_gives_them_vectors(reopen: Reopen) -> None:
    before = reopen(None)
    await before.write(ORG, [fact("we ship fridays"), fact("lunch menu pasta"), fact("rollout notes")])
    await before.aclose()

    store = reopen(ConceptEmbedder())
    assert await store.retrieve(ORG, "release", 5) == []  # no vectors yet, no shared stem
    seen: list[tuple[str, int, int]] = []
    assert await store.reindex(ORG, batch=2, progress=lambda *step: seen.append(step)) == 3
    assert seen == [(ORG, 2, 3), (ORG, 3, 3)]
    assert sorted(ids(await store.retrieve(ORG, "release", 5))) == [rid(ORG, 1), rid(ORG, 3)]
    assert await store.reindex(ORG) == 0  # a rerun finds nothing left to do
    assert await store.scope_keys() == [ORG]


async def test_a_candidate_without_a_vector_gets_one_when_it_is_used(reopen: Reopen) -> None:
    before = reopen(None)
    await before.write(ORG, [fact("deploy notes"), fact("deploy lunch"), fact("other things")])
    await before.aclose()

    embedder = ConceptEmbedder()
    store = reopen(embedder)
    assert len(await store.retrieve(ORG, "deploy", 5)) == 2
    assert embedder.calls[-1] == 2  # the two candidates, embedded once, on use
    assert await store.reindex(ORG) == 1  # only the record no query met is left


async def test_an_interrupted_reindex_resumes_where_it_stopped(reopen: Reopen) -> None:
    before = reopen(None)
    await before.write(ORG, [fact(f"note {n}") for n in range(5)])
    await before.aclose()

    store = reopen(ConceptEmbedder())

    def interrupt(scope_key: str, done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await store.reindex(ORG, batch=2, progress=interrupt)
    assert await store.reindex(ORG, batch=2) == 3  # the first batch stayed committed


async def test_vectors_of_another_model_count_as_missing(reopen: Reopen) -> None:
    first = reopen(ConceptEmbedder(name="model-a"))
    await first.write(ORG, [fact("we ship fridays"), fact("lunch menu pasta")])
    assert await first.reindex(ORG) == 0  # written with vectors
    await first.aclose()
    assert await reopen(ConceptEmbedder(name="model-b")).reindex(ORG) == 2


async def test_start_up_says_in_one_warning_how_many_records_another_embedder_made(reopen: Reopen) -> None:
    first = reopen(ConceptEmbedder(name="model-a"))
    await first.write(ORG, [fact("we ship fridays"), fact("lunch menu pasta")])
    await first.write(OTHER, [fact("rollout notes")])
    assert await note_foreign_vectors(first) == 0  # its own vectors: nothing to say
    await first.aclose()

    store = reopen(ConceptEmbedder(name="model-b"))
    with capture_logs() as logs:
        assert await note_foreign_vectors(store) == 3
    [warning] = [entry for entry in logs if entry["event"] == "memory.reindex_needed"]
    assert warning["records"] == 3 and "switchboard memory reindex" in warning["message"]
    await store.reindex(ORG)
    await store.reindex(OTHER)
    with capture_logs() as logs:
        assert await note_foreign_vectors(store) == 0
    assert logs == []
