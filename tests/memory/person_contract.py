"""A person's erasure reaches the logs that name them: the same in every store that keeps logs.

Joined to the curation contract (tests/memory/curation_contract.py), so it runs over the in-process,
SQLite, PostgreSQL and memory-service stores. Through the protocols only: what a caller can observe.
"""

from __future__ import annotations

import pytest

from memory.rules.person import draw_pseudonym
from memory.stores.contract import PseudonymizingStore
from memory.types import AuditQuery, CurationEntry, MemoryStoreError, ReadAudit
from tests.memory.store_contract import ORG, START, StoreFactory, fact, rid

BOB = "user:slack:T1:UBOB"
BOB_ID = "slack:T1:UBOB"
ALICE = "user:slack:T1:UALICE"
CHANNEL = "channel:slack:T1:C1"


def read(run: str, asker: str, scopes: tuple[str, ...], records: tuple[tuple[str, int], ...]) -> ReadAudit:
    return ReadAudit(run, f"slack:T1:C1:{run}", asker, scopes, records, START)


class PersonErasureContract:
    """`pseudonymize_person`: the person's mentions take one pseudonym; every other entry stays."""

    async def test_a_persons_entries_in_other_scopes_logs_take_one_pseudonym_and_keep_their_shape(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        assert isinstance(store, PseudonymizingStore)
        await store.write_pending(ORG, [fact("deploys freeze on fridays"), fact("the wiki moved")])  # type: ignore[attr-defined]
        await store.approve(ORG, rid(ORG, 1), BOB)  # type: ignore[attr-defined]
        await store.approve(ORG, rid(ORG, 2), ALICE)  # type: ignore[attr-defined]
        await store.write(BOB, [fact("prefers tabs")])
        bobs_read = read("run-b", BOB_ID, (ORG, BOB), ((rid(ORG, 1), 1), (rid(BOB, 1), 2)))
        alices_read = read("run-a", "slack:T1:UALICE", (ORG,), ((rid(ORG, 1), 1),))
        for entry in (bobs_read, alices_read):
            await store.record_read(entry)

        await store.erase_scope(BOB, "user_request")
        pseudonym = draw_pseudonym()
        assert await store.pseudonymize_person(BOB, pseudonym) == 2  # one curation entry, one read

        [approved] = await store.curation_log(ORG, rid(ORG, 1), 10)  # type: ignore[attr-defined]
        assert (approved.record_id, approved.scope_key, approved.action, approved.actor) == (
            rid(ORG, 1),
            ORG,
            "approved",
            f"user:{pseudonym}",
        )
        [untouched] = await store.curation_log(ORG, rid(ORG, 2), 10)  # type: ignore[attr-defined]
        assert untouched.actor == ALICE
        assert await store.read_audit(AuditQuery(user_id=BOB_ID)) == []
        assert await store.read_audit(AuditQuery(user_id=pseudonym)) == [
            read(
                "run-b",
                pseudonym,
                (ORG, f"user:{pseudonym}"),
                ((rid(ORG, 1), 1), (f"mem:user:{pseudonym}:1", 2)),
            )
        ]
        assert await store.read_audit(AuditQuery(run_id="run-a")) == [alices_read]
        assert await store.read_audit(AuditQuery(record_id=rid(BOB, 1))) == []

    async def test_the_persons_own_scope_lives_on_under_the_pseudonym_their_audit_names(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        assert isinstance(store, PseudonymizingStore)
        await store.write(BOB, [fact("prefers tabs over spaces")])
        await store.edit(BOB, rid(BOB, 1), "prefers tabs over spaces, width four", BOB)  # type: ignore[attr-defined]
        await store.record_read(read("run-b", BOB_ID, (BOB,), ((rid(BOB, 2), 1),)))
        await store.erase_scope(BOB, "user_request")
        pseudonym = draw_pseudonym()
        key = f"user:{pseudonym}"

        assert await store.pseudonymize_person(BOB, pseudonym) == 2  # the edit's entry, the read

        [audited] = await store.read_audit(AuditQuery(user_id=pseudonym))
        versions = await store.history(key, audited.records[0][0])  # type: ignore[attr-defined]
        assert [(v.id, v.scope_key, v.text, v.supersedes) for v in versions] == [
            (rid(key, 1), key, None, None),
            (rid(key, 2), key, None, rid(key, 1)),
        ]
        assert [(e.record_id, e.scope_key, e.actor, e.related_id) for e in versions[0].entries] == [
            (rid(key, 1), key, key, rid(key, 2))
        ]
        assert await store.history(BOB, rid(BOB, 1)) == []  # type: ignore[attr-defined]

    async def test_every_entry_of_the_person_takes_the_same_pseudonym_so_counts_survive(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        assert isinstance(store, PseudonymizingStore)
        await store.write(ORG, [fact("deploys freeze on fridays")])
        await store.write(CHANNEL, [fact("standup is at ten")])
        for scope in (ORG, CHANNEL):
            await store.record_curation(CurationEntry(rid(scope, 1), scope, "forgotten", BOB, START))  # type: ignore[attr-defined]
        for run in ("run-1", "run-2", "run-3"):
            await store.record_read(read(run, BOB_ID, (ORG,), ((rid(ORG, 1), 1),)))
        pseudonym = draw_pseudonym()

        assert await store.pseudonymize_person(BOB, pseudonym) == 5
        assert len(await store.read_audit(AuditQuery(user_id=pseudonym))) == 3
        for scope in (ORG, CHANNEL):
            [entry] = await store.curation_log(scope, rid(scope, 1), 10)  # type: ignore[attr-defined]
            assert entry.actor == f"user:{pseudonym}"
        assert await store.pseudonymize_person(BOB, draw_pseudonym()) == 0  # nobody left to rename

    async def test_the_threads_that_were_the_persons_alone_take_the_pseudonym_and_a_channels_stays(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        assert isinstance(store, PseudonymizingStore)
        threads = {
            "dm": "slack:T1:D0BOB:1700000000.000100",
            "channel": "slack:T1:C1:1700000000.000200",
        }
        for run, thread in threads.items():
            await store.record_read(ReadAudit(run, thread, BOB_ID, (ORG,), (), START))
        await store.record_read(
            ReadAudit("terminal", "cli:bob-salary-review", "cli:local", (ORG,), (), START)
        )
        await store.record_read(
            ReadAudit("alice", "slack:T1:D0ALICE:1700000000.000300", "slack:T1:UALICE", (ORG,), (), START)
        )
        bob, terminal = draw_pseudonym(), draw_pseudonym()

        await store.pseudonymize_person(BOB, bob)
        await store.pseudonymize_person("user:cli:local", terminal)

        shown = {
            run: entry.thread_key
            for run in ("dm", "channel", "terminal", "alice")
            for entry in await store.read_audit(AuditQuery(run_id=run))
        }
        assert shown == {
            "dm": bob,
            "channel": threads["channel"],
            "terminal": terminal,
            "alice": "slack:T1:D0ALICE:1700000000.000300",
        }

    async def test_a_key_that_is_no_persons_or_a_bad_pseudonym_is_refused(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        assert isinstance(store, PseudonymizingStore)
        for key, pseudonym in ((ORG, draw_pseudonym()), (BOB, "erased:bob"), (BOB, BOB_ID)):
            with pytest.raises((ValueError, MemoryStoreError)):
                await store.pseudonymize_person(key, pseudonym)
