"""The SQLite store makes a read's missing vectors with the scope's lock released: a model's `embed`
takes milliseconds to seconds, and a write or list of the same scope must not wait for it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

from memory.ranking.embedder import Matrix
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.embedders import ConceptEmbedder
from tests.memory.store_contract import ORG, FakeClock, fact, ids, rid

WAIT_SECONDS = 10.0


class HeldEmbedder(ConceptEmbedder):
    """`embed` of the records' texts waits until the test lets it go (a slow model, made visible)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Matrix:
        if "deploy notes" in texts:  # the stored records' texts, not the query
            self.entered.set()
            if not self.release.wait(WAIT_SECONDS):
                raise TimeoutError("the test never released the embedder")
        return super().embed(texts)


async def test_a_read_embeds_missing_vectors_while_the_scope_stays_free(tmp_path: Path) -> None:
    before = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    await before.write(ORG, [fact("deploy notes"), fact("deploy lunch")])  # no embedder: no vectors
    await before.aclose()

    embedder = HeldEmbedder()
    store = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(), embedder=embedder)
    try:
        reading = asyncio.create_task(store.retrieve(ORG, "deploy", 5))
        assert await asyncio.to_thread(embedder.entered.wait, WAIT_SECONDS)
        # The read is embedding its candidates now; the scope's lock is free meanwhile.
        listed = await asyncio.wait_for(store.list(ORG, 10), timeout=WAIT_SECONDS / 2)
        assert ids(listed) == [rid(ORG, 2), rid(ORG, 1)]
        embedder.release.set()
        assert sorted(ids([record for record in await reading])) == [rid(ORG, 1), rid(ORG, 2)]
        assert embedder.calls[-1] == 2  # both candidates, in one call
        assert await store.reindex(ORG) == 0  # and their vectors were stored
    finally:
        embedder.release.set()
        await store.aclose()
