from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import WriteResult
from tests.memory.records import DAY, NOW, fact


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_null_store_retrieves_nothing_and_writes_nothing() -> None:
    store = NullMemoryStore()
    assert isinstance(store, MemoryStore)
    assert await store.write("org:acme", [fact("x")]) == WriteResult()
    assert await store.retrieve("org:acme", "x", 8) == []


async def test_null_store_list_returns_empty_and_forget_false() -> None:
    store = NullMemoryStore()
    assert await store.list("org:acme", 20) == []
    assert await store.forget("org:acme", "mem:org:acme:1") is False


async def test_in_memory_write_inserts_active_namespaced_records() -> None:
    store = InProcessMemoryStore(clock=Clock())
    result = await store.write("org:acme", [fact("We deploy on Tuesdays"), fact("CI runs on main")])
    assert result == WriteResult(inserted=2)
    records = store.records("org:acme")
    assert [r.id for r in records] == ["mem:org:acme:1", "mem:org:acme:2"]
    assert all(r.status == "active" and r.scope_key == "org:acme" for r in records)


async def test_in_memory_write_dedups_identical_text_case_and_whitespace_insensitive() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("We deploy on Tuesdays")])
    result = await store.write("org:acme", [fact("  we DEPLOY   on tuesdays ")])
    assert result == WriteResult(deduped=1)
    [only] = store.records("org:acme")
    assert only.use_count == 1


async def test_in_memory_a_later_candidate_dedups_against_the_same_batch() -> None:
    store = InProcessMemoryStore(clock=Clock())
    assert await store.write("org:acme", [fact("x"), fact("X")]) == WriteResult(inserted=1, deduped=1)


async def test_in_memory_supersede_flips_the_named_record_and_inserts_with_the_pointer() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("deploys on tuesdays")])
    result = await store.write("org:acme", [fact("deploys on thursdays", supersedes="mem:org:acme:1")])
    assert result == WriteResult(inserted=1, superseded=1)
    old, new = store.records("org:acme")
    assert old.status == "superseded" and old.text == "deploys on tuesdays"
    assert new.status == "active" and new.supersedes == "mem:org:acme:1"


async def test_in_memory_unknown_or_foreign_supersede_id_supersedes_nothing() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("user:slack:U1", [fact("mine")])
    result = await store.write("org:acme", [fact("other", supersedes="mem:user:slack:U1:1")])
    assert result == WriteResult(inserted=1)
    assert store.records("user:slack:U1")[0].status == "active"


async def test_in_memory_a_targeted_supersede_is_not_swallowed_by_a_collision() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("deploys on tuesdays"), fact("deploys on thursdays")])
    result = await store.write("org:acme", [fact("deploys on thursdays", supersedes="mem:org:acme:1")])
    assert result == WriteResult(inserted=1, superseded=1)
    assert [r.status for r in store.records("org:acme")] == ["superseded", "active", "active"]


async def test_in_memory_superseded_records_never_match_retrieval_nor_dedup() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("deploys on tuesdays")])
    await store.write("org:acme", [fact("release on thursdays", supersedes="mem:org:acme:1")])
    assert [r.id for r in await store.retrieve("org:acme", "tuesdays", 8)] == []
    assert await store.write("org:acme", [fact("deploys on tuesdays")]) == WriteResult(inserted=1)


async def test_in_memory_retrieve_is_scope_partitioned_gated_ranked_and_limited() -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    await store.write("org:acme", [fact("deploy train"), fact("deploy train schedule"), fact("lunch")])
    await store.write("user:slack:U1", [fact("deploy train schedule personal")])
    found = await store.retrieve("org:acme", "deploy train schedule", 1)
    assert [r.id for r in found] == ["mem:org:acme:2"]
    assert await store.retrieve("org:acme", "nothing matches", 8) == []


async def test_in_memory_retrieve_bumps_last_used_and_use_count_on_returned_rows_only() -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    await store.write("org:acme", [fact("deploy train"), fact("lunch menu")])
    clock.now += DAY
    [hit] = await store.retrieve("org:acme", "deploy", 8)
    assert (hit.use_count, hit.last_used_at) == (1, clock.now)
    stored = {r.id: r for r in store.records("org:acme")}
    assert stored["mem:org:acme:1"].use_count == 1
    assert stored["mem:org:acme:2"].use_count == 0 and stored["mem:org:acme:2"].last_used_at is None


async def test_in_memory_list_is_active_newest_first_limited_per_scope_without_usage_bump() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact(f"fact {i}") for i in range(1, 6)])
    await store.write("user:slack:U1", [fact("mine")])
    await store.forget("org:acme", "mem:org:acme:5")
    listed = await store.list("org:acme", 3)
    assert [r.id for r in listed] == ["mem:org:acme:4", "mem:org:acme:3", "mem:org:acme:2"]
    assert all(r.use_count == 0 and r.last_used_at is None for r in store.records("org:acme"))


async def test_in_memory_list_with_a_query_keeps_whole_token_hits_newest_first_limit_after_filter() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write(
        "org:acme",
        [fact("deploy train"), fact("lunch"), fact("other", keywords=("deploy",)), fact("deployment notes")],
    )
    listed = await store.list("org:acme", 5, query="deploy")
    assert [r.id for r in listed] == ["mem:org:acme:3", "mem:org:acme:1"]
    assert [r.id for r in await store.list("org:acme", 1, query="deploy")] == ["mem:org:acme:3"]
    assert await store.list("org:acme", 5, query="depl") == []
    assert await store.list("org:acme", 5, query="!!") == []


async def test_in_memory_forget_flips_to_forgotten_and_keeps_the_row() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("secret plan")])
    assert await store.forget("org:acme", "mem:org:acme:1") is True
    assert store.records("org:acme")[0].status == "forgotten"
    assert await store.forget("org:acme", "mem:org:acme:1") is False


async def test_in_memory_forget_is_false_for_unknown_foreign_or_non_active_ids() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("x")])
    await store.write("user:slack:U1", [fact("y")])
    assert await store.forget("org:acme", "mem:org:acme:9") is False
    assert await store.forget("org:acme", "mem:user:slack:U1:1") is False
    assert store.records("user:slack:U1")[0].status == "active"


async def test_in_memory_forgotten_records_are_neither_retrieved_nor_dedup_targets() -> None:
    store = InProcessMemoryStore(clock=Clock())
    await store.write("org:acme", [fact("secret plan")])
    await store.forget("org:acme", "mem:org:acme:1")
    assert await store.retrieve("org:acme", "secret", 8) == []
    assert await store.write("org:acme", [fact("secret plan")]) == WriteResult(inserted=1)


async def test_in_memory_over_cap_write_evicts_lru_down_to_the_cap_within_the_batch() -> None:
    clock = Clock()
    store = InProcessMemoryStore(cap=3, clock=clock)
    await store.write("org:acme", [fact("one"), fact("two"), fact("three")])
    clock.now += DAY
    await store.retrieve("org:acme", "one", 8)  # one is now the most recently used
    clock.now += DAY
    result = await store.write("org:acme", [fact("four"), fact("five")])
    assert result == WriteResult(inserted=2, evicted=2)
    status = {r.text: r.status for r in store.records("org:acme")}
    assert status == {
        "one": "active",
        "two": "evicted",
        "three": "evicted",
        "four": "active",
        "five": "active",
    }


async def test_in_memory_evicted_rows_are_hidden_from_retrieve_list_and_dedup() -> None:
    clock = Clock()
    store = InProcessMemoryStore(cap=1, clock=clock)
    await store.write("org:acme", [fact("old deploy fact")])
    clock.now += 1
    await store.write("org:acme", [fact("new deploy fact")])
    assert [r.text for r in await store.retrieve("org:acme", "deploy", 8)] == ["new deploy fact"]
    assert [r.text for r in await store.list("org:acme", 8)] == ["new deploy fact"]
    assert [r.status for r in store.records("org:acme")] == ["evicted", "active"]
    clock.now += 1
    assert (await store.write("org:acme", [fact("old deploy fact")])).inserted == 1


async def test_in_memory_superseded_and_forgotten_rows_do_not_consume_the_cap() -> None:
    store = InProcessMemoryStore(cap=2, clock=Clock())
    await store.write("org:acme", [fact("a"), fact("b")])
    await store.forget("org:acme", "mem:org:acme:1")
    await store.write("org:acme", [fact("c", supersedes="mem:org:acme:2")])
    result = await store.write("org:acme", [fact("d")])
    assert result.evicted == 0


async def test_in_memory_without_a_cap_never_evicts() -> None:
    store = InProcessMemoryStore(clock=Clock())
    result = await store.write("org:acme", [fact(f"fact {i}") for i in range(600)])
    assert result == WriteResult(inserted=600)
