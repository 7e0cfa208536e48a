"""What a viewer's page may hold beyond its records: the review queue (admins, under review) and the
record an editor is prefilled with — over a real curating store."""

from __future__ import annotations

from commands.browse import MemoryBrowser, ReviewQueue
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate, Origin

ADMIN = "slack:UADMIN"
ORG = "org:acme"


def fact(text: str, origin: Origin = "public", where: str = "C1") -> MemoryCandidate:
    return MemoryCandidate(
        "fact", text, f"slack:{where}:1.0", origin=origin, origin_conversation=f"slack:{where}"
    )


def browser(store: InProcessMemoryStore, *, review: bool = True) -> MemoryBrowser:
    return MemoryBrowser(
        store=store, memory_enabled=True, organization="acme", admins=[f"user:{ADMIN}"], review=review
    )


async def test_the_queue_keeps_what_was_learned_privately_out_and_counts_it() -> None:
    store = InProcessMemoryStore()
    await store.write_pending(ORG, [fact("Public plan")])
    await store.write_pending(ORG, [fact("Private plan", origin="private", where="G1")])

    queue = await browser(store).waiting(ADMIN, None)

    assert queue is not None
    assert ([r.text for r in queue.records], queue.hidden, queue.more) == (["Public plan"], 1, False)


async def test_only_an_admin_under_review_gets_a_queue() -> None:
    store = InProcessMemoryStore()
    await store.write_pending(ORG, [fact("Public plan")])

    assert await browser(store).waiting("slack:U1", None) is None
    assert await browser(store, review=False).waiting(ADMIN, None) is None
    assert isinstance(await browser(store).waiting(ADMIN, "slack:C1"), ReviewQueue)


async def test_an_admin_may_open_a_waiting_record_in_the_editor_and_nobody_else() -> None:
    store = InProcessMemoryStore()
    await store.write_pending(ORG, [fact("Public plan")])
    [waiting] = await store.pending(ORG, 10)

    found = await browser(store).editable(ADMIN, waiting.id)
    refused = await browser(store).editable("slack:U1", waiting.id)

    assert not isinstance(found, str) and found.text == "Public plan"
    assert isinstance(refused, str) and refused.startswith("🚫 Only admins can edit")


async def test_a_shared_record_learned_privately_is_not_opened_in_the_editor_here() -> None:
    store = InProcessMemoryStore()
    await store.write("channel:slack:C1", [fact("The private plan", origin="private", where="G9")])
    [record] = await store.list("channel:slack:C1", 10)

    found = await browser(store).editable(ADMIN, record.id)

    assert isinstance(found, str) and "learned in a private conversation" in found


async def test_an_old_version_is_no_longer_editable() -> None:
    store = InProcessMemoryStore()
    await store.write("user:slack:U1", [fact("First words", origin="dm", where="D1")])
    [old] = await store.list("user:slack:U1", 10)
    await store.edit("user:slack:U1", old.id, "Second words", "user:slack:U1")

    found = await browser(store).editable("slack:U1", old.id)

    assert isinstance(found, str) and f"no record {old.id}" in found
