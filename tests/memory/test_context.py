import asyncio
from collections.abc import Sequence

import pytest
from structlog.testing import capture_logs

from memory.context import read_memory
from memory.ranking.fusion import SPEC
from memory.rules.visibility import Reader
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, Ranked, WriteResult
from tests.memory import records
from tests.memory.reads import memory_context_block
from tests.memory.records import NOW

# Most tests here are about scopes, ranking and the budget, in a public channel's reply: their records
# were learned in public. The read rule's own tests are at the end.
READER = Reader("public", "slack:UA", "slack:C1")


def fact(text: str) -> MemoryCandidate:
    return records.fact(text, origin="public", origin_conversation="slack:C1")


SUFFIX = " (may be outdated — verify before acting; dates are UTC, today is Friday 2027-01-15):"


class RecordingStore(NullMemoryStore):
    """A real in-process store that notes every scope it was asked to retrieve."""

    def __init__(self, inner: InProcessMemoryStore) -> None:
        self.inner = inner
        self.retrieved: list[str] = []
        self.hops: list[list[str]] = []  # the scopes of each retrieve_many call

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        self.retrieved.append(scope_key)
        return await self.inner.retrieve(scope_key, query, limit)

    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        self.hops.append(list(scope_keys))
        self.retrieved.extend(scope_keys)
        return await self.inner.retrieve_many(scope_keys, query, limit)

    async def write(
        self, scope_key: str, candidates: Sequence[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult:
        return await self.inner.write(scope_key, candidates)

    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[MemoryRecord]:
        return await self.inner.list(scope_key, limit, query)

    async def forget(self, scope_key: str, record_id: str) -> bool:
        return await self.inner.forget(scope_key, record_id)

    async def aclose(self) -> None:
        return None


class BrokenStore(RecordingStore):
    async def retrieve_many(
        self, scope_keys: Sequence[str], query: str, limit: int
    ) -> dict[str, list[Ranked]]:
        self.hops.append(list(scope_keys))
        raise OSError("disk on fire")


async def seeded() -> RecordingStore:
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("org:acme", [fact("deploys go out on tuesdays")])
    await store.write("user:slack:UA", [fact("this user prefers deploys in the morning")])
    await store.write("user:slack:UB", [fact("this user deploys from a laptop")])
    await store.write("channel:slack:C1", [fact("this channel coordinates deploys")])
    await store.write("channel:slack:C2", [fact("the other channel deploys too")])
    await store.write("repo:o/r", [fact("deploys of o/r run make release")])
    return RecordingStore(store)


async def test_block_leads_with_the_prefix_and_one_bullet_per_record() -> None:
    store = await seeded()
    block = await memory_context_block(
        store, "when do deploys go out", reader=READER, organization="acme", clock=lambda: NOW
    )
    assert block is not None
    assert block.splitlines() == [
        "Background memory for org:acme" + SUFFIX,
        "<background_memory>",
        "- 2027-01-15: deploys go out on tuesdays (source: slack:C1:1.0)",
        "</background_memory>",
    ]


async def test_nothing_matched_returns_none() -> None:
    store = await seeded()
    assert (
        await memory_context_block(
            store, "quarterly budget", reader=READER, organization="acme", user_id="slack:UA"
        )
        is None
    )


async def test_user_scope_reads_org_and_own_records_never_another_users() -> None:
    store = await seeded()
    block = await memory_context_block(
        store, "deploys", reader=READER, organization="acme", user_id="slack:UA", clock=lambda: NOW
    )
    assert block is not None
    assert block.splitlines()[0] == "Background memory for org:acme + user:slack:UA" + SUFFIX
    assert "prefers deploys in the morning" in block
    assert "laptop" not in block
    assert sorted(store.retrieved) == ["org:acme", "user:slack:UA"]


async def test_limit_and_budget_apply_to_the_merged_pool_ranked_across_scopes() -> None:
    store = InProcessMemoryStore(clock=lambda: NOW, ranking=SPEC)  # the spec's fractions, no per-scope IDF
    await store.write("org:acme", [fact("deploy"), fact("deploy train")])
    await store.write("user:slack:UA", [fact("deploy train schedule"), fact("deploy schedule")])
    read = await read_memory(
        store, "deploy train schedule", reader=READER, organization="acme", user_id="slack:UA", limit=2
    )
    assert [r.text for r in read.records] == ["deploy train schedule", "deploy train"]


async def test_ties_keep_org_first() -> None:
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("user:slack:UA", [fact("deploy user")])
    await store.write("org:acme", [fact("deploy org")])
    read = await read_memory(store, "deploy", reader=READER, organization="acme", user_id="slack:UA")
    assert [r.scope_key for r in read.records] == ["org:acme", "user:slack:UA"]


async def test_repo_and_channel_scopes_join_the_pool_and_the_prefix_names_all_four() -> None:
    store = await seeded()
    block = await memory_context_block(
        store,
        "deploys",
        reader=READER,
        organization="acme",
        user_id="slack:UA",
        channel_id="slack:C1",
        repo="o/r",
        clock=lambda: NOW,
    )
    assert block is not None
    assert block.splitlines()[0] == (
        "Background memory for org:acme + repo:o/r + channel:slack:C1 + user:slack:UA" + SUFFIX
    )
    assert "make release" in block and "coordinates deploys" in block
    assert "other channel" not in block
    assert "channel:slack:C2" not in store.retrieved


async def test_the_repo_may_arrive_late_and_org_channel_user_are_fetched_first() -> None:
    store = await seeded()
    gate = asyncio.Event()

    async def resolve_repo() -> str | None:
        await gate.wait()
        return "o/r"

    read = asyncio.create_task(
        read_memory(
            store,
            "deploys",
            reader=READER,
            organization="acme",
            user_id="slack:UA",
            channel_id="slack:C1",
            repo=resolve_repo(),
        )
    )
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(store.retrieved) == ["channel:slack:C1", "org:acme", "user:slack:UA"]
    gate.set()
    result = await read
    assert store.retrieved[-1] == "repo:o/r"
    assert result.scopes.repo == "repo:o/r"
    assert result.block is not None and "make release" in result.block


async def test_a_repo_that_resolves_to_nothing_or_fails_means_no_repo_scope() -> None:
    store = await seeded()

    async def nothing() -> str | None:
        return None

    async def broken() -> str | None:
        raise RuntimeError("github down")

    for source in (nothing(), broken()):
        block = await memory_context_block(
            store,
            "deploys",
            reader=READER,
            organization="acme",
            channel_id="slack:C1",
            repo=source,
            clock=lambda: NOW,
        )
        assert block is not None
        assert block.splitlines()[0] == "Background memory for org:acme + channel:slack:C1" + SUFFIX
    assert "repo:o/r" not in store.retrieved


async def test_a_failing_store_reads_as_no_block_with_one_warning() -> None:
    broken = BrokenStore((await seeded()).inner)
    with capture_logs() as logs:
        block = await memory_context_block(
            broken, "deploys", reader=READER, organization="acme", user_id="slack:UA"
        )
    assert block is None
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["memory.retrieve_failed"]


async def test_org_channel_and_user_are_read_in_one_hop() -> None:
    store = await seeded()
    result = await read_memory(
        store, "deploys", reader=READER, organization="acme", user_id="slack:UA", channel_id="slack:C1"
    )
    assert store.hops == [["org:acme", "channel:slack:C1", "user:slack:UA"]]
    assert [r.scope_key for r in result.records] == ["org:acme", "channel:slack:C1", "user:slack:UA"]


async def test_a_known_repo_joins_the_same_single_hop() -> None:
    store = await seeded()
    await read_memory(
        store,
        "deploys",
        reader=READER,
        organization="acme",
        user_id="slack:UA",
        channel_id="slack:C1",
        repo="o/r",
    )
    assert store.hops == [["org:acme", "repo:o/r", "channel:slack:C1", "user:slack:UA"]]


async def test_the_pool_is_merged_by_each_stores_stemmed_relevance() -> None:
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("org:acme", [fact("the team meets on mondays")])
    await store.write("user:slack:UA", [fact("this user deployed the billing service")])
    read = await read_memory(
        store, "who deploys billing for the team?", reader=READER, organization="acme", user_id="slack:UA"
    )
    # The user's record holds two of three stems ("deploy" only as a stem); the org's one.
    assert [r.scope_key for r in read.records] == ["user:slack:UA", "org:acme"]


async def test_one_token_budget_covers_the_whole_request_not_each_scope() -> None:
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("org:acme", [fact("deploy " + "org " * 60)])
    await store.write("user:slack:UA", [fact("deploy " + "mine " * 60)])
    # each bullet with the frame fits 120 tokens (≈ 114 and ≈ 129 with its date); the two together do not
    read = await read_memory(
        store, "deploy", reader=READER, organization="acme", user_id="slack:UA", max_tokens=120
    )
    assert [r.scope_key for r in read.records] == ["org:acme"]
    assert read.block is not None and len(read.block.splitlines()) == 4
    both = await read_memory(
        store, "deploy", reader=READER, organization="acme", user_id="slack:UA", max_tokens=240
    )
    assert [r.scope_key for r in both.records] == ["org:acme", "user:slack:UA"]


async def test_a_cancelled_read_leaves_no_retrieve_running() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    class SlowStore(RecordingStore):
        async def retrieve_many(
            self, scope_keys: Sequence[str], query: str, limit: int
        ) -> dict[str, list[Ranked]]:
            started.set()
            await asyncio.sleep(3600)
            finished.extend(scope_keys)
            return {}

    store = SlowStore(InProcessMemoryStore())
    read = asyncio.create_task(
        read_memory(store, "deploys", reader=READER, organization="acme", user_id="slack:UA")
    )
    await started.wait()
    read.cancel()
    with pytest.raises(asyncio.CancelledError):
        await read
    for _ in range(3):
        await asyncio.sleep(0)
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert pending == [] and finished == []


# -- the read rule (memory/visibility.py) -----------------------------------------------------------


async def dm_and_public_store() -> InProcessMemoryStore:
    store = InProcessMemoryStore(clock=lambda: NOW)
    dm = records.fact("this user deploys on fridays", origin="dm", origin_conversation="slack:D1")
    await store.write("user:slack:UA", [dm])
    await store.write("org:acme", [fact("deploys need a green build")])
    return store


async def test_a_dm_learned_record_never_enters_a_public_replys_block() -> None:
    store = await dm_and_public_store()
    read = await read_memory(store, "deploys", reader=READER, organization="acme", user_id="slack:UA")
    assert [r.text for r in read.records] == ["deploys need a green build"]
    assert read.block is not None and "fridays" not in read.block


async def test_the_same_record_is_in_the_owners_dm_block() -> None:
    store = await dm_and_public_store()
    in_dm = Reader("self", "slack:UA", "slack:D1")
    read = await read_memory(store, "deploys", reader=in_dm, organization="acme", user_id="slack:UA")
    assert sorted(r.text for r in read.records) == [
        "deploys need a green build",
        "this user deploys on fridays",
    ]


async def test_a_refused_record_takes_no_slot_of_the_limit() -> None:
    """Filtered before ranking: a limit of 1 still yields the one record the reader may see."""
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("user:slack:UA", [records.fact("deploys deploys friday", origin="unknown")])
    await store.write("org:acme", [fact("deploys go out")])
    read = await read_memory(
        store, "deploys friday", reader=READER, organization="acme", user_id="slack:UA", limit=1
    )
    assert [r.text for r in read.records] == ["deploys go out"]


async def test_a_private_channel_record_stays_in_that_channel() -> None:
    store = InProcessMemoryStore(clock=lambda: NOW)
    private = records.fact(
        "this channel ships the secret project", origin="private", origin_conversation="slack:G1"
    )
    await store.write("user:slack:UA", [private])
    there = Reader("private", "slack:UA", "slack:G1")
    elsewhere = Reader("private", "slack:UA", "slack:G2")
    found = await read_memory(store, "secret project", reader=there, organization="acme", user_id="slack:UA")
    assert len(found.records) == 1
    away = await read_memory(
        store, "secret project", reader=elsewhere, organization="acme", user_id="slack:UA"
    )
    assert away.records == () and away.block is None


async def test_one_escape_heavy_record_cannot_push_the_block_over_its_budget() -> None:
    # "<" renders as "&lt;": 4,000 of them would be a 16,000-character block against a 3,200 budget.
    store = InProcessMemoryStore(clock=lambda: NOW)
    await store.write("org:acme", [fact("deploy " + "<" * 3_990), fact("deploy on tuesdays")])
    read = await read_memory(
        store,
        "deploy",
        reader=READER,
        organization="acme",
        user_id="UA",
        channel_id="C1",
        max_tokens=800,
        clock=lambda: NOW,
    )
    assert read.block is not None
    assert len(read.block) <= 800 * 4
    assert "…" in read.block and read.block.endswith("</background_memory>")
