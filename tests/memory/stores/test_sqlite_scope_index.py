"""The SQLite store's scope index against the database it mirrors: what another writer changes — another
process, a process of an earlier release that stamps nothing, an erasure in the middle of an embed — is
never served from the index, and never written back into an erased row."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory.ranking.embedder import Matrix
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory.embedders import ConceptEmbedder
from tests.memory.store_contract import ORG, FakeClock, fact, ids, rid


class ForgetDuringEmbed(ConceptEmbedder):
    """A real model's `embed` takes milliseconds: another process's forget lands meanwhile."""

    def __init__(self, other: SqliteMemoryStore, record_id: str) -> None:
        super().__init__()
        self._other = other
        self._record_id = record_id
        self.armed = True

    def embed(self, texts: Sequence[str]) -> Matrix:
        if self.armed and texts:
            self.armed = False
            done: list[bool] = []
            worker = threading.Thread(
                target=lambda: done.append(asyncio.run(self._other.forget(ORG, self._record_id)))
            )
            worker.start()
            worker.join()
            assert done == [True]
        return super().embed(texts)


def row(path: Path, seq: int) -> tuple[str, bytes | None, str]:
    with sqlite3.connect(path) as connection:
        status, embedding, text = connection.execute(
            "SELECT status, embedding, text FROM records WHERE seq = ?", (seq,)
        ).fetchone()
    return str(status), embedding, str(text)


async def written_without_vectors(data_dir: Path, texts: list[str]) -> None:
    before = SqliteMemoryStore(data_dir, clock=FakeClock())  # no embedder: rows older than the model
    await before.write(ORG, [fact(text) for text in texts])
    await before.aclose()


async def test_a_lazily_made_vector_never_lands_in_a_row_erased_meanwhile(tmp_path: Path) -> None:
    await written_without_vectors(tmp_path / "memory", ["deploy the vault code 4711", "deploy on fridays"])
    theirs = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    ours = SqliteMemoryStore(
        tmp_path / "memory", clock=FakeClock(), embedder=ForgetDuringEmbed(theirs, rid(ORG, 1))
    )
    try:
        found = await ours.retrieve(ORG, "deploy", 5)  # embeds both; theirs forgets #1 meanwhile

        assert ids(found) == [rid(ORG, 2)]
        status, embedding, text = row(ours.database_path(ORG), 1)
        assert (status, text, embedding) == ("forgotten", "", None)
        assert row(ours.database_path(ORG), 2)[1] is not None
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_reindex_never_writes_a_vector_into_a_row_erased_meanwhile(tmp_path: Path) -> None:
    await written_without_vectors(tmp_path / "memory", ["deploy the vault code 4711", "deploy on fridays"])
    theirs = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    ours = SqliteMemoryStore(
        tmp_path / "memory", clock=FakeClock(), embedder=ForgetDuringEmbed(theirs, rid(ORG, 1))
    )
    try:
        await ours.reindex(ORG)

        assert row(ours.database_path(ORG), 1)[:2] == ("forgotten", None)
        assert row(ours.database_path(ORG), 2)[1] is not None
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_a_writer_that_stamps_nothing_still_cannot_leave_a_forgotten_record_in_the_index(
    tmp_path: Path,
) -> None:
    # What a process of the previous release does during a rolling upgrade: it changes rows without
    # `_stamp` (no change generation, `changed` scrubbed to 0), and inserts rows with `changed` 0.
    ours = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    try:
        await ours.write(ORG, [fact("the vault code is 4711"), fact("deploy on fridays")])
        assert ids(await ours.retrieve(ORG, "vault code", 5)) == [rid(ORG, 1)]
        with sqlite3.connect(ours.database_path(ORG), isolation_level=None) as connection:
            connection.execute(
                "UPDATE records SET status = 'forgotten', text = '', norm = '', changed = 0 WHERE seq = 1"
            )
            connection.execute(
                "INSERT INTO records (seq, id, scope_key, kind, text, norm, source_thread_key, created_at) "
                "VALUES (3, ?, ?, 'fact', 'the vault moved', 'the vault moved', 'slack:C1:1', 1.0)",
                (rid(ORG, 3), ORG),
            )

        assert ids(await ours.retrieve(ORG, "vault code", 5)) == [rid(ORG, 3)]
    finally:
        await ours.aclose()


async def test_records_without_vectors_rank_as_rank_would_once_they_have_them(tmp_path: Path) -> None:
    await written_without_vectors(tmp_path / "memory", ["deploy alpha", "deploy beta", "deploy gamma"])
    ours = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(), embedder=ConceptEmbedder())
    try:
        assert ids(await ours.retrieve(ORG, "deploy", 1)) == [rid(ORG, 1)]  # equal scores: write order
        assert ids(await ours.retrieve(ORG, "deploy", 3)) == [rid(ORG, 1), rid(ORG, 2), rid(ORG, 3)]
    finally:
        await ours.aclose()


async def test_an_erasure_leaves_no_text_in_the_scope_index(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock())
    try:
        await store.write(ORG, [fact("the vault code is 4711"), fact("deploy on fridays")])
        assert ids(await store.retrieve(ORG, "vault", 5)) == [rid(ORG, 1)]
        assert await store.forget(ORG, rid(ORG, 1))
        held = [store._indexes[ORG].index.record(seq) for seq in store._indexes[ORG].index.seqs()]
        assert [r.text for r in held if r is not None] == ["deploy on fridays"]

        assert await store.erase_scope(ORG, "channel_deleted") == 1

        held = [store._indexes[ORG].index.record(seq) for seq in store._indexes[ORG].index.seqs()]
        assert held == []
    finally:
        await store.aclose()


async def test_a_forgotten_record_leaves_no_copy_of_its_vector_in_the_scope_index(tmp_path: Path) -> None:
    embedder = ConceptEmbedder()
    store = SqliteMemoryStore(tmp_path / "memory", clock=FakeClock(), embedder=embedder)
    try:
        await store.write(ORG, [fact("the vault code is 4711"), fact("deploy on fridays")])
        assert ids(await store.retrieve(ORG, "vault", 5)) == [rid(ORG, 1)]
        vector = embedder.embed(["the vault code is 4711"])[0]
        matrix = store._indexes[ORG].index._matrix
        assert matrix is not None and np.any(np.all(matrix == vector, axis=1))

        assert await store.forget(ORG, rid(ORG, 1))
        assert ids(await store.retrieve(ORG, "deploy", 5)) == [rid(ORG, 2)]  # the index caught up

        matrix = store._indexes[ORG].index._matrix
        assert matrix is not None and not np.any(np.all(matrix == vector, axis=1))
    finally:
        await store.aclose()
