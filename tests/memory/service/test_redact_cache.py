"""The outgoing records' redaction cache: the same answer as `redact_record`, never a stale, foreign or
erased record's text, bounded; and the service drops what a forget, a write or an erasure touched."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from memory.rules.redact import REDACTED, redact_record
from memory.service.app import create_app
from memory.service.redact_cache import ENTRY_OVERHEAD, RedactionCache
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryRecord
from tests.memory.records import record
from tests.memory.service_support import AUTH, TOKEN, asgi_client, fact

SCOPE = "org:acme"
SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"


async def test_a_hit_is_the_same_redaction_as_redact_record_every_time() -> None:
    cache = RedactionCache()
    stored = record(f"deploy with {SECRET}", keywords=(SECRET, "deploy"))
    first = await cache.redact([stored])
    second = await cache.redact([stored])
    assert first == second == [redact_record(stored)]
    assert second[0].text == f"deploy with {REDACTED}"
    assert second[0].keywords == (REDACTED, "deploy")
    assert len(cache) == 1


async def test_only_the_redaction_comes_from_the_cache_the_rest_from_the_record() -> None:
    cache = RedactionCache()
    await cache.redact([record("plain text", last_used_at=1.0)])
    again = await cache.redact([record("plain text", last_used_at=2.0, status="superseded")])
    assert (again[0].last_used_at, again[0].status) == (2.0, "superseded")


async def test_a_changed_text_or_keyword_under_the_same_id_is_redacted_afresh() -> None:
    cache = RedactionCache()
    await cache.redact([record("deploy notes", keywords=("deploy",))])
    changed = await cache.redact([record(f"deploy {SECRET}", keywords=("deploy",))])
    assert changed[0].text == f"deploy {REDACTED}"
    rekeyed = await cache.redact([record(f"deploy {SECRET}", keywords=(SECRET,))])
    assert rekeyed[0].keywords == (REDACTED,)


async def test_scopes_never_share_an_entry() -> None:
    cache = RedactionCache()
    mine = record(f"mine {SECRET}", id="mem:1", scope_key="org:acme")
    theirs = record("theirs", id="mem:1", scope_key="user:T1:U1")
    out = await cache.redact([mine, theirs])
    assert [r.text for r in out] == [f"mine {REDACTED}", "theirs"]
    assert len(cache) == 2
    cache.forget_scope("org:acme")
    assert len(cache) == 1
    assert [r.text for r in await cache.redact([theirs])] == ["theirs"]


async def test_forget_and_clear_drop_entries() -> None:
    cache = RedactionCache()
    await cache.redact([record("one", id="mem:1"), record("two", id="mem:2")])
    cache.forget(SCOPE, "mem:1")
    assert len(cache) == 1
    cache.clear()
    assert (len(cache), cache.chars) == (0, 0)


async def test_a_redaction_begun_before_a_drop_is_not_stored_after_it() -> None:
    cache = RedactionCache()
    task = asyncio.create_task(cache.redact([record("being forgotten")]))
    await asyncio.sleep(0)  # the task is now waiting on its worker thread
    cache.forget_scope(SCOPE)
    assert [r.text for r in await task] == ["being forgotten"]
    assert len(cache) == 0


async def test_it_is_bounded_by_characters_dropping_the_least_recently_used() -> None:
    text = "x" * 100
    cost = ENTRY_OVERHEAD + len(text)
    cache = RedactionCache(max_chars=3 * cost)
    for n in range(10):
        await cache.redact([record(text, id=f"mem:{n}")])
        await cache.redact([record(text, id="mem:0")])  # kept warm
    assert len(cache) == 3
    assert cache.chars <= 3 * cost
    cache.forget(SCOPE, "mem:0")
    assert len(cache) == 2  # mem:0 was still there: the LRU dropped colder ones


def test_a_cache_holds_something() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        RedactionCache(max_chars=0)


# --- through the service ---------------------------------------------------------------------------


async def test_the_service_drops_a_forgotten_record_and_a_written_or_erased_scope() -> None:
    cache = RedactionCache()
    app = create_app(InProcessMemoryStore(cap=500), TOKEN, redaction=cache)
    async with asgi_client(app, AUTH) as client:
        await client.post("/write", json={"scopeKey": SCOPE, "records": [fact("deploy with make ship")]})
        found = await client.post("/retrieve", json={"scopeKey": SCOPE, "query": "deploy", "limit": 5})
        record_id = found.json()["records"][0]["id"]
        assert len(cache) == 1
        await client.post("/forget", json={"scopeKey": SCOPE, "id": record_id})
        assert len(cache) == 0

        await client.post("/write", json={"scopeKey": SCOPE, "records": [fact("release on fridays")]})
        await client.post("/list", json={"scopeKey": SCOPE, "limit": 5})
        assert len(cache) == 1
        await client.post("/write", json={"scopeKey": SCOPE, "records": [fact("billing owns invoices")]})
        assert len(cache) == 0  # a write may evict: the scope starts over

        await client.post("/list", json={"scopeKey": SCOPE, "limit": 5})
        assert len(cache) == 2
        await client.post("/erase-scope", json={"scopeKey": SCOPE, "reason": "user_request"})
        assert len(cache) == 0


async def test_the_service_redacts_a_row_changed_under_a_cached_id(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory", cap=500)
    try:
        app = create_app(store, TOKEN)
        async with asgi_client(app, AUTH) as client:
            await client.post("/write", json={"scopeKey": SCOPE, "records": [fact("deploy notes")]})
            query = {"scopeKey": SCOPE, "query": "deploy", "limit": 5}
            assert (await client.post("/retrieve", json=query)).json()["records"][0]["text"] == "deploy notes"
            with sqlite3.connect(store.database_path(SCOPE)) as raw:  # a row written by an older build,
                raw.execute("UPDATE changes SET generation = generation + 1")  # stamped as every change is
                raw.execute(
                    "UPDATE records SET text = ?, changed = (SELECT generation FROM changes) WHERE seq = 1",
                    (f"deploy {SECRET}",),
                )
            for path, body in (("/retrieve", query), ("/list", {"scopeKey": SCOPE, "limit": 5})):
                for _ in range(2):  # the first answer fills the cache, the second is served from it
                    reply = await client.post(path, json=body)
                    assert SECRET not in reply.text
                    assert reply.json()["records"][0]["text"] == f"deploy {REDACTED}"
    finally:
        await store.aclose()


class _SlowReplyStore(InProcessMemoryStore):
    """A store whose retrieve reads at once but answers late (a PostgreSQL round trip): a forget can
    commit and finish between the read and the reply."""

    def __init__(self) -> None:
        super().__init__(cap=500)
        self.read = asyncio.Event()
        self.release = asyncio.Event()

    async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
        found = await super().retrieve(scope_key, query, limit)
        self.read.set()
        await self.release.wait()
        return found


async def test_a_retrieve_that_read_before_a_forget_leaves_no_forgotten_text_in_the_cache() -> None:
    cache = RedactionCache()
    store = _SlowReplyStore()
    app = create_app(store, TOKEN, redaction=cache)
    async with asgi_client(app, AUTH) as client:
        await client.post("/write", json={"scopeKey": SCOPE, "records": [fact("deploy with make ship")]})
        [stored] = await store.list(SCOPE, 5, None)
        reading = asyncio.ensure_future(
            client.post("/retrieve", json={"scopeKey": SCOPE, "query": "deploy", "limit": 5})
        )
        await store.read.wait()  # the retrieve has read the record
        forgot = await client.post("/forget", json={"scopeKey": SCOPE, "id": stored.id})
        assert forgot.json()["forgotten"] is True
        store.release.set()
        answered = await reading

    assert [r["id"] for r in answered.json()["records"]] == [stored.id]  # what it read, as of its read
    assert len(cache) == 0  # but the forgotten text is not remembered after the forget
