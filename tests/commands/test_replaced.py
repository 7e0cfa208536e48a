"""A pending correction names the active record it would supersede: `memory pending` lists it beside the
waiting record, `memory approve` says it is now superseded — its text only where the reader may see it."""

from __future__ import annotations

from collections.abc import Sequence

from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate, MemoryRecord, MemoryStoreError, Origin, RecordVersion
from tests.commands.test_curate import ADMIN, ORG, ask, slack

OLD = "Deploys go out on Mondays"
NEW = "Deploys go out on Tuesdays"


def fact(
    text: str, origin: Origin = "public", where: str = "slack:C1", supersedes: str | None = None
) -> MemoryCandidate:
    return MemoryCandidate(
        "fact",
        text,
        "slack:C1:1700000000.000100",
        origin=origin,
        origin_conversation=where,
        supersedes=supersedes,
    )


async def correction(
    store: InProcessMemoryStore, origin: Origin = "public", where: str = "slack:C1"
) -> tuple[str, str]:
    """An active org record and a reflected correction of it waiting for review: (active id, pending id)."""
    await store.write(ORG, [fact(OLD, origin, where)])
    [active] = await store.list(ORG, 10)
    await store.write_pending(ORG, [fact(NEW, supersedes=active.id)])
    [waiting] = await store.pending(ORG, 10)
    return active.id, waiting.id


async def test_pending_names_the_record_a_correction_would_supersede_with_its_text() -> None:
    store = InProcessMemoryStore()
    active, waiting = await correction(store)
    reply = await ask(store, "memory pending org")
    lines = reply.text.splitlines()
    at = next(n for n, line in enumerate(lines) if f"`{waiting}`" in line)
    assert lines[at + 1] == f"  - would supersede `{active}` · `{OLD}`", reply.text


async def test_pending_names_what_an_edited_correction_would_supersede() -> None:
    store = InProcessMemoryStore()
    active, waiting = await correction(store)
    edited = await ask(store, f"memory edit {waiting} -- Deploys go out on Tuesdays at noon")
    assert edited.ok, edited.text
    reply = await ask(store, "memory pending org")
    assert f"would supersede `{active}` · `{OLD}`" in reply.text, reply.text


async def test_pending_names_but_does_not_show_a_superseded_record_learned_where_the_reader_cannot_see() -> (
    None
):
    store = InProcessMemoryStore()
    active, _ = await correction(store, origin="private", where="slack:G1")
    reply = await ask(store, "memory pending org", slack(ADMIN, "C1", "public"))
    assert f"would supersede `{active}` · text not shown here" in reply.text, reply.text
    assert OLD not in reply.text


async def test_a_pending_record_that_corrects_nothing_names_nothing() -> None:
    store = InProcessMemoryStore()
    await store.write_pending(ORG, [fact(NEW)])
    reply = await ask(store, "memory pending org")
    assert "would supersede" not in reply.text


async def test_the_approve_receipt_says_which_record_is_now_superseded() -> None:
    store = InProcessMemoryStore()
    active, waiting = await correction(store)
    reply = await ask(store, f"memory approve {waiting}")
    assert reply.ok and reply.text == (
        f"✅ Approved `{waiting}`: active in `{ORG}` now.\n"
        f"It supersedes `{active}` (`{OLD}`), which is now superseded (`memory history`)."
    )
    [retired] = await store.fetch(ORG, [active])
    assert retired.status == "superseded"


async def test_the_approve_receipt_names_a_superseded_record_it_may_not_show_without_its_text() -> None:
    store = InProcessMemoryStore()
    active, waiting = await correction(store, origin="private", where="slack:G1")
    reply = await ask(store, f"memory approve {waiting}", slack(ADMIN, "C1", "public"))
    assert f"It supersedes `{active}` (text not shown here" in reply.text, reply.text
    assert OLD not in reply.text


class UnreadableChains(InProcessMemoryStore):
    """A store whose histories and fetches fail (as a memory service that is down answers them)."""

    async def history(self, scope_key: str, record_id: str) -> list[RecordVersion]:
        raise MemoryStoreError("memory service /records/history: 503", status=503)

    async def fetch(self, scope_key: str, record_ids: Sequence[str]) -> list[MemoryRecord]:
        raise MemoryStoreError("memory service /fetch: 503", status=503)


async def test_an_approval_whose_superseded_record_cannot_be_read_is_a_warning_and_changes_nothing() -> None:
    store = UnreadableChains()
    _, waiting = await correction(store)
    reply = await ask(store, f"memory approve {waiting}")
    assert not reply.ok and reply.text.startswith(f"⚠️ Couldn't approve `{waiting}`"), reply.text
    assert [r.id for r in await store.pending(ORG, 10)] == [waiting]


async def test_a_queue_whose_superseded_records_cannot_be_read_is_a_warning_not_a_silent_list() -> None:
    store = UnreadableChains()
    await correction(store)
    reply = await ask(store, "memory pending org")
    assert not reply.ok and reply.text.startswith("⚠️ Couldn't read what the waiting records replace"), (
        reply.text
    )
