"""One embedding per read, one per written candidate: counted on the real model's forward passes.

The store is the default one (SQLite) with the default embedder's real model; the model's `encode`
records what each forward pass was given (tests/memory/embedders.py), so a second pass for the same
question, however it came about, is seen.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory.context import MemoryRead, RepoSource, read_memory
from memory.ranking.encoder import MiniLM
from memory.rules.visibility import Reader
from memory.stores.sqlite.store import SqliteMemoryStore
from tests.memory import records
from tests.memory.embedders import CountingMiniLM
from tests.memory.records import NOW

READER = Reader("public", "slack:UA", "slack:C1")
QUESTION = "when do we ship the billing service?"
SCOPES = {
    "org:acme": "releases of the billing service go out on tuesdays",
    "repo:o/r": "o/r deploys with make release",
    "channel:slack:C1": "this channel coordinates the billing rollout",
    "user:slack:UA": "this user prefers to ship in the morning",
}


async def seeded(tmp_path: Path, model: CountingMiniLM) -> SqliteMemoryStore:
    store = SqliteMemoryStore(tmp_path / "memory", clock=lambda: NOW, embedder=model.embedder())
    for scope, text in SCOPES.items():
        await store.write(scope, [records.fact(text, origin="public", origin_conversation="slack:C1")])
    model.calls.clear()
    return store


def passes_for(model: CountingMiniLM, text: str) -> int:
    return sum(texts.count(text) for texts in model.calls)


async def four_scope_read(tmp_path: Path, model: CountingMiniLM, repo: RepoSource) -> MemoryRead:
    """Org, repo, channel and user of one request, read as a run reads them."""
    store = await seeded(tmp_path, model)
    try:
        return await read_memory(
            store, QUESTION, reader=READER, organization="acme", user_id="slack:UA",
            channel_id="slack:C1", repo=repo, clock=lambda: NOW,
        )  # fmt: skip
    finally:
        await store.aclose()


async def test_a_four_scope_read_embeds_the_question_once(tmp_path: Path, minilm: MiniLM) -> None:
    model = CountingMiniLM(minilm)
    read = await four_scope_read(tmp_path, model, "o/r")
    assert read.block is not None and "tuesdays" in read.block
    assert model.calls == [[QUESTION]]


async def test_a_repo_resolved_during_the_read_still_embeds_the_question_once(
    tmp_path: Path, minilm: MiniLM
) -> None:
    """The repo's hop starts while the other scopes' hop is still embedding: both ask at once."""
    model = CountingMiniLM(minilm)

    async def resolve_repo() -> str:
        await asyncio.sleep(0)
        return "o/r"

    read = await four_scope_read(tmp_path, model, resolve_repo())
    assert read.scopes.repo == "repo:o/r"
    assert passes_for(model, QUESTION) == 1


async def test_a_write_embeds_each_candidate_once_and_a_read_embeds_none_of_them_again(
    tmp_path: Path, minilm: MiniLM
) -> None:
    model = CountingMiniLM(minilm)
    store = SqliteMemoryStore(tmp_path / "memory", clock=lambda: NOW, embedder=model.embedder())
    texts = ["billing ships on tuesdays", "the billing rollout needs a feature flag", "lunch is at noon"]
    try:
        await store.write("org:acme", [records.fact(text) for text in texts])
        await store.retrieve("org:acme", QUESTION, 10)
    finally:
        await store.aclose()
    assert model.calls == [texts, [QUESTION]]
