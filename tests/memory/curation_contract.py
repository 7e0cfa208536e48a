"""The curation contract: the review queue, edits with history, merges and the curation log, the same
in every `CuratingStore`.

Not collected on its own. A test module joins it by subclassing `CurationContract` in a `Test…` class
with a `make_store` fixture returning a `StoreFactory` (as for tests/memory/store_contract.py) whose
stores are also `CuratingStore`s; tests/memory/stores/test_curation_contract.py parametrizes it over
the stores. Every test goes through the protocols only: what a caller can observe.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol, cast

import pytest

from memory.ranking.fusion import SPEC
from memory.rules.curation import pending_target_id
from memory.rules.retention import Retention
from memory.stores.contract import CuratingStore, MemoryStore
from memory.types import CurationEntry, MemoryCandidate, SourceLink, WriteResult
from tests.memory.embedders import ConceptEmbedder
from tests.memory.person_contract import PersonErasureContract
from tests.memory.store_contract import (
    DAY,
    ORG,
    OTHER,
    START,
    FakeClock,
    StoreFactory,
    fact,
    ids,
    rid,
)

ADMIN = "user:slack:UADMIN"
CHANNEL = "channel:slack:C1"
USER = "user:slack:UA"


class Curating(MemoryStore, CuratingStore, Protocol):
    """A store of both seams."""


def curating(factory: StoreFactory, **options: object) -> Curating:
    return cast(Curating, factory(**options))  # type: ignore[arg-type]


def actions(entries: list[CurationEntry]) -> list[tuple[str, str, str, str | None]]:
    return [(e.record_id, e.action, e.actor, e.related_id) for e in entries]


async def pending_ids(store: Curating, scope: str = ORG) -> list[str]:
    return ids(await store.pending(scope, 50))


class ReviewContract:
    """Pending records: invisible until approved, erased when rejected or expired."""

    async def test_a_pending_record_is_absent_from_retrieve_list_and_fetch(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        assert await store.write_pending(ORG, [fact("deploys freeze on fridays")]) == WriteResult(inserted=1)
        assert await store.retrieve(ORG, "deploys fridays", 5) == []
        assert await store.retrieve_many([ORG], "deploys fridays", 5) == {}
        assert await store.list(ORG, 10) == []
        assert await store.list(ORG, 10, "deploys") == []
        assert await store.fetch(ORG, [rid(ORG, 1)]) == []
        assert await store.active_records(ORG) == []

    async def test_a_pending_record_is_absent_from_the_lexical_prefilter_too(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store, ranking=SPEC)
        await store.write(ORG, [fact("deploys go through make ship")])
        await store.write_pending(ORG, [fact("deploys freeze on fridays")])
        assert ids(await store.retrieve(ORG, "deploys fridays", 5)) == [rid(ORG, 1)]

    async def test_review_scopes_are_the_shared_scopes_the_store_holds_never_a_persons_own(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        assert await store.review_scopes() == []
        await store.write_pending(ORG, [fact("deploys freeze on fridays")])
        await store.write_pending(CHANNEL, [fact("standup moved to ten")])
        await store.write(USER, [fact("prefers tabs")])
        assert await store.review_scopes() == sorted([ORG, CHANNEL])

    async def test_pending_lists_a_scopes_pending_records_newest_first(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("an active rule")])
        await store.write_pending(ORG, [fact("first pending"), fact("second pending")])
        await store.write_pending(CHANNEL, [fact("channel pending")])
        listed = await store.pending(ORG, 10)
        assert ids(listed) == [rid(ORG, 3), rid(ORG, 2)]
        assert {r.status for r in listed} == {"pending"}
        assert (listed[1].text, listed[1].source_run_id) == ("first pending", "run-1")
        assert ids(await store.pending(ORG, 1)) == [rid(ORG, 3)]
        assert ids(await store.pending(CHANNEL, 10)) == [rid(CHANNEL, 1)]
        assert await store.pending(OTHER, 10) == []

    async def test_approve_makes_a_pending_record_active_and_retrievable(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write_pending(ORG, [fact("deploys freeze on fridays")])
        approved = await store.approve(ORG, rid(ORG, 1), ADMIN)
        assert approved is not None
        assert (approved.id, approved.status, approved.text) == (
            rid(ORG, 1),
            "active",
            "deploys freeze on fridays",
        )
        assert ids(await store.retrieve(ORG, "deploys fridays", 5)) == [rid(ORG, 1)]
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 1)]
        assert ids(await store.fetch(ORG, [rid(ORG, 1)])) == [rid(ORG, 1)]
        assert await store.pending(ORG, 10) == []
        assert await store.approve(ORG, rid(ORG, 1), ADMIN) is None  # not pending any more

    async def test_an_approved_record_is_found_by_meaning_through_its_new_vector(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store, embedder=ConceptEmbedder())
        await store.write(ORG, [fact("lunch menu pasta")])
        await store.write_pending(ORG, [fact("rollout notes")])
        assert await store.retrieve(ORG, "when is the release?", 5) == []
        await store.approve(ORG, rid(ORG, 2), ADMIN)
        assert ids(await store.retrieve(ORG, "when is the release?", 5)) == [rid(ORG, 2)]

    async def test_approve_refuses_what_is_not_pending_here(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("an active rule")])
        await store.write_pending(ORG, [fact("a pending rule")])
        assert await store.approve(ORG, rid(ORG, 1), ADMIN) is None
        assert await store.approve(ORG, rid(ORG, 9), ADMIN) is None
        assert await store.approve(CHANNEL, rid(ORG, 2), ADMIN) is None
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 2)]

    async def test_approve_supersedes_the_record_the_candidate_corrected(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploys go out on mondays")])
        pending = await store.write_pending(ORG, [fact("deploys go out on tuesdays", supersedes=rid(ORG, 1))])
        assert pending == WriteResult(inserted=1)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 1)]  # the correction waits, so does its effect
        approved = await store.approve(ORG, rid(ORG, 2), ADMIN)
        assert approved is not None and approved.supersedes == rid(ORG, 1)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        history = await store.history(ORG, rid(ORG, 2))
        assert [(v.id, v.status) for v in history] == [(rid(ORG, 1), "superseded"), (rid(ORG, 2), "active")]
        assert actions(list(history[0].entries)) == [(rid(ORG, 1), "superseded", "run:run-1", rid(ORG, 2))]
        assert actions(list(history[1].entries)) == [(rid(ORG, 2), "approved", ADMIN, None)]

    async def test_approve_folds_into_an_active_record_with_the_same_meaning(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write_pending(ORG, [fact("Deploys freeze on Fridays!")])
        await store.write(ORG, [fact("deploys freeze on fridays")])  # learned again where no review waits
        survivor = await store.approve(ORG, rid(ORG, 1), ADMIN)
        assert survivor is not None
        assert (survivor.id, survivor.use_count) == (rid(ORG, 2), 1)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert await store.pending(ORG, 10) == []
        [gone] = await store.history(ORG, rid(ORG, 1))
        assert (gone.text, gone.erased_reason) == (None, "merged")

    async def test_approve_evicts_over_the_cap_as_a_write_would(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = curating(make_store, cap=2, clock=clock)
        await store.write(ORG, [fact("oldest rule"), fact("newer rule")])
        await store.write_pending(ORG, [fact("pending rule")])
        clock.advance(10)
        await store.approve(ORG, rid(ORG, 3), ADMIN)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 3), rid(ORG, 2)]

    async def test_an_approval_at_the_cap_never_evicts_the_record_it_let_in(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, cap=2, clock=clock)
        await store.write_pending(ORG, [fact("waited a week")])
        clock.advance(7 * DAY)
        await store.write(ORG, [fact("rule one"), fact("rule two")])
        clock.advance(60)
        approved = await store.approve(ORG, rid(ORG, 1), ADMIN)
        assert approved is not None and approved.last_used_at == START + 7 * DAY + 60
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 3), rid(ORG, 1)]

    async def test_a_calls_cap_bounds_the_queue_and_the_approvals_eviction(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("the bot runs on fridays")])
        texts = ("deploys go through make ship", "rollbacks take a ticket", "oncall rotates weekly")
        result = await store.write_pending(ORG, [fact(t) for t in texts], cap=2)
        assert result.evicted == 1
        assert await pending_ids(store) == [rid(ORG, 4), rid(ORG, 3)]
        await store.approve(ORG, rid(ORG, 4), ADMIN, cap=1)
        assert ids(await store.active_records(ORG)) == [rid(ORG, 4)]

    async def test_pending_records_do_not_count_against_the_active_cap(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store, cap=2)
        await store.write(ORG, [fact("rule one"), fact("rule two")])
        await store.write_pending(ORG, [fact("pending one"), fact("pending two")])
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2), rid(ORG, 1)]
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 4), rid(ORG, 3)]

    async def test_reject_erases_a_pending_record(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write_pending(ORG, [fact("the vault code is quokka")])
        assert await store.reject(ORG, rid(ORG, 1), ADMIN) is True
        assert await store.pending(ORG, 10) == []
        assert await store.fetch(ORG, [rid(ORG, 1)]) == []
        [version] = await store.history(ORG, rid(ORG, 1))
        assert (version.text, version.erased_reason) == (None, "rejected")
        assert actions(list(version.entries)) == [(rid(ORG, 1), "rejected", ADMIN, None)]
        assert await store.reject(ORG, rid(ORG, 1), ADMIN) is False
        assert await store.approve(ORG, rid(ORG, 1), ADMIN) is None
        # nothing of it is left to fold into
        assert await store.write_pending(ORG, [fact("the vault code is quokka")]) == WriteResult(inserted=1)

    async def test_reject_refuses_an_active_record(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("an active rule")])
        assert await store.reject(ORG, rid(ORG, 1), ADMIN) is False
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 1)]

    async def test_a_restatement_of_a_pending_record_folds_into_it(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write_pending(ORG, [fact("deploys freeze on fridays")])
        clock.advance(60)
        again = await store.write_pending(ORG, [fact("**Deploys freeze on Fridays.**", run="run-2")])
        assert again == WriteResult(deduped=1)
        [waiting] = await store.pending(ORG, 10)
        assert (waiting.id, waiting.use_count, waiting.text) == (rid(ORG, 1), 1, "deploys freeze on fridays")
        log = await store.curation_log(ORG, rid(ORG, 1), 10)
        assert actions(log) == [(rid(ORG, 1), "folded", "run:run-2", None)]

    async def test_a_pending_restatement_of_an_active_record_folds_into_it(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploys freeze on fridays")])
        assert await store.write_pending(ORG, [fact("Deploys freeze on fridays")]) == WriteResult(deduped=1)
        assert await store.pending(ORG, 10) == []
        [active] = await store.list(ORG, 10)
        assert (active.id, active.use_count) == (rid(ORG, 1), 1)

    async def test_pending_records_beyond_the_cap_expire_oldest_first(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = curating(make_store, cap=2, clock=clock)
        await store.write_pending(ORG, [fact("pending one")])
        clock.advance(1)
        await store.write_pending(ORG, [fact("pending two")])
        clock.advance(1)
        await store.write_pending(ORG, [fact("pending three")])
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 3), rid(ORG, 2)]
        [expired] = await store.history(ORG, rid(ORG, 1))
        assert (expired.text, expired.erased_reason) == (None, "expired")
        assert actions(list(expired.entries)) == [(rid(ORG, 1), "expired", "system", None)]

    async def test_expire_pending_erases_what_waited_too_long_in_every_scope(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write_pending(ORG, [fact("old org pending")])
        await store.write_pending(CHANNEL, [fact("old channel pending")])
        await store.write(ORG, [fact("an old active rule")])
        clock.advance(15 * DAY)
        await store.write_pending(ORG, [fact("fresh pending")])

        assert await store.expire_pending(clock() - 14 * DAY) == 2
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 3)]
        assert await store.pending(CHANNEL, 10) == []
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        [version] = await store.history(CHANNEL, rid(CHANNEL, 1))
        assert (version.text, version.erased_reason) == (None, "expired")
        assert actions(list(version.entries)) == [(rid(CHANNEL, 1), "expired", "system", None)]
        assert await store.expire_pending(clock() - 14 * DAY) == 0

    async def test_erasing_a_scope_erases_its_pending_records(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write_pending(CHANNEL, [fact("channel pending")])
        assert await store.erase_scope(CHANNEL, "channel_deleted") == 1
        assert await store.pending(CHANNEL, 10) == []
        assert await store.approve(CHANNEL, rid(CHANNEL, 1), ADMIN) is None

    async def test_erasing_a_runs_sources_erases_its_pending_records(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.link_sources(SourceLink("run-7", (ORG,), ("slack:C1:1.000100",)))
        await store.write_pending(ORG, [fact("deploys freeze on fridays", run="run-7")])
        assert await store.erase_sources(["slack:C1:1.000100"], "source_deleted") == 1
        assert await store.pending(ORG, 10) == []
        [version] = await store.history(ORG, rid(ORG, 1))
        assert (version.text, version.erased_reason) == (None, "source_deleted")

    async def test_a_pending_record_past_its_scopes_retention_is_not_listed(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock, retention=Retention(ttl_days=7))
        await store.write_pending(ORG, [fact("an old pending rule")])
        clock.advance(8 * DAY)
        await store.write_pending(ORG, [fact("a fresh pending rule")])
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 2)]
        assert await store.approve(ORG, rid(ORG, 1), ADMIN) is None  # erased by the scope's write


class EditContract:
    """Edits make versions; a history shows them; forgetting erases them all."""

    async def test_edit_supersedes_the_record_with_a_new_version_keeping_provenance(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        original = replace(
            fact("deploys go out on mondays", origin="public", origin_conversation="slack:C1"),
            observed_at=START - DAY,
        )
        await store.write(ORG, [original])
        clock.advance(60)
        edited = await store.edit(ORG, rid(ORG, 1), "deploys go out on tuesdays", ADMIN)
        assert edited is not None
        assert (edited.id, edited.status, edited.supersedes) == (rid(ORG, 2), "active", rid(ORG, 1))
        assert (edited.text, edited.created_at) == ("deploys go out on tuesdays", START + 60)
        assert (edited.kind, edited.origin, edited.origin_conversation) == ("fact", "public", "slack:C1")
        assert (edited.source_thread_key, edited.source_run_id) == (original.source_thread_key, "run-1")
        assert edited.observed_at == START - DAY
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert ids(await store.retrieve(ORG, "deploys tuesdays", 5)) == [rid(ORG, 2)]
        assert await store.retrieve(ORG, "mondays", 5) == []

    async def test_an_edit_typed_in_a_dm_keeps_the_new_version_as_from_that_dm(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(
            USER, [fact("deploys go out on mondays", origin="public", origin_conversation="slack:C1")]
        )
        edited = await store.edit(
            USER, rid(USER, 1), "mondays, and my diagnosis", "u", typed_in=("dm", "slack:D1")
        )
        assert edited is not None and (edited.origin, edited.origin_conversation) == ("dm", "slack:D1")
        [stored] = await store.fetch(USER, [rid(USER, 2)])
        assert (stored.origin, stored.origin_conversation) == ("dm", "slack:D1")  # what a read sees

    async def test_an_edit_typed_wider_than_the_record_keeps_its_narrower_origin(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(
            CHANNEL, [fact("the runbook is in the wiki", origin="private", origin_conversation="slack:C1")]
        )
        edited = await store.edit(
            CHANNEL, rid(CHANNEL, 1), "the runbook is in git", ADMIN, typed_in=("public", "slack:C9")
        )
        assert edited is not None and (edited.origin, edited.origin_conversation) == ("private", "slack:C1")

    async def test_a_pending_edit_typed_in_a_private_channel_waits_as_from_that_channel(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write_pending(CHANNEL, [fact("deploys freeze on frydays", origin="public")])
        edited = await store.edit(
            CHANNEL, rid(CHANNEL, 1), "deploys freeze on fridays", ADMIN, typed_in=("private", "slack:C1")
        )
        assert edited is not None and edited.status == "pending"
        [waiting] = await store.pending(CHANNEL, 10)
        assert (waiting.id, waiting.origin, waiting.origin_conversation) == (
            rid(CHANNEL, 2),
            "private",
            "slack:C1",
        )
        approved = await store.approve(CHANNEL, rid(CHANNEL, 2), ADMIN)
        assert approved is not None and (approved.origin, approved.origin_conversation) == (
            "private",
            "slack:C1",
        )

    async def test_an_edit_is_redacted_and_refused_what_a_write_refuses(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploy with the bot")])
        token = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
        edited = await store.edit(ORG, rid(ORG, 1), f"deploy with {token}", ADMIN)
        assert edited is not None and token not in edited.text
        with pytest.raises(ValueError, match="text"):
            await store.edit(ORG, rid(ORG, 2), "   ", ADMIN)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]

    async def test_edit_refuses_an_unknown_foreign_or_retired_record(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("rule one")])
        await store.edit(ORG, rid(ORG, 1), "rule one, edited", ADMIN)
        assert await store.edit(ORG, rid(ORG, 1), "again", ADMIN) is None  # superseded
        assert await store.edit(ORG, rid(ORG, 9), "again", ADMIN) is None
        assert await store.edit(CHANNEL, rid(ORG, 2), "again", ADMIN) is None

    async def test_an_expired_record_is_not_edited_back_into_a_live_one(
        self, make_store: StoreFactory
    ) -> None:
        """An edit's new version is created now: made from an expired, not yet erased record, it
        would bring it back for a whole new ttl."""
        clock = FakeClock()
        store = curating(make_store, clock=clock, retention=Retention(ttl_days=7))
        await store.write(ORG, [fact("the vault code is quokka")])
        clock.advance(8 * DAY)  # expired, and no write has erased it yet

        assert await store.edit(ORG, rid(ORG, 1), "the vault code is wombat", ADMIN) is None
        assert await store.list(ORG, 10) == []

    async def test_history_shows_every_version_oldest_first_from_any_of_them(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write(ORG, [fact("deploys go out on mondays")])
        clock.advance(10)
        await store.edit(ORG, rid(ORG, 1), "deploys go out on tuesdays", ADMIN)
        clock.advance(10)
        await store.edit(ORG, rid(ORG, 2), "deploys go out on wednesdays", OTHER)
        history = await store.history(ORG, rid(ORG, 3))
        assert [(v.id, v.status, v.text, v.created_at) for v in history] == [
            (rid(ORG, 1), "superseded", "deploys go out on mondays", START),
            (rid(ORG, 2), "superseded", "deploys go out on tuesdays", START + 10),
            (rid(ORG, 3), "active", "deploys go out on wednesdays", START + 20),
        ]
        assert [actions(list(v.entries)) for v in history] == [
            [(rid(ORG, 1), "edited", ADMIN, rid(ORG, 2))],
            [(rid(ORG, 2), "edited", OTHER, rid(ORG, 3))],
            [],
        ]
        assert {v.source_run_id for v in history} == {"run-1"}
        assert await store.history(ORG, rid(ORG, 1)) == history
        assert await store.history(ORG, rid(ORG, 9)) == []
        assert await store.history(CHANNEL, rid(ORG, 1)) == []

    async def test_an_edit_of_a_pending_record_waits_too(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write_pending(ORG, [fact("deploys freeze on frydays")])
        edited = await store.edit(ORG, rid(ORG, 1), "deploys freeze on fridays", ADMIN)
        assert edited is not None and edited.status == "pending"
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 2)]
        assert await store.list(ORG, 10) == []
        assert await store.approve(ORG, rid(ORG, 1), ADMIN) is None  # the old version is retired
        await store.approve(ORG, rid(ORG, 2), ADMIN)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]

    async def test_an_edited_pending_version_keeps_no_text_and_a_reject_leaves_none_of_the_chain(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write_pending(ORG, [fact("zebrapend alpha deploy freeze")])
        await store.edit(ORG, rid(ORG, 1), "zebrapend beta deploy freeze", ADMIN)
        [first, second] = await store.history(ORG, rid(ORG, 2))
        assert (first.id, first.text, first.erased_reason) == (rid(ORG, 1), None, "edited")
        assert second.text == "zebrapend beta deploy freeze"
        assert await store.reject(ORG, rid(ORG, 2), ADMIN) is True
        assert [v.text for v in await store.history(ORG, rid(ORG, 1))] == [None, None]

    async def test_an_edited_pending_correction_still_supersedes_its_target(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploys go out on mondays")])
        await store.write_pending(ORG, [fact("deploys go out on tusedays", supersedes=rid(ORG, 1))])
        await store.edit(ORG, rid(ORG, 2), "deploys go out on tuesdays", ADMIN)
        assert [v.id for v in await store.history(ORG, rid(ORG, 1))] == [
            rid(ORG, 1)
        ]  # nothing replaced it yet
        await store.approve(ORG, rid(ORG, 3), ADMIN)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 3)]
        history = await store.history(ORG, rid(ORG, 1))
        assert [(v.id, v.status) for v in history] == [
            (rid(ORG, 1), "superseded"),
            (rid(ORG, 2), "superseded"),
            (rid(ORG, 3), "active"),
        ]

    async def test_a_pending_corrections_history_names_the_record_it_would_supersede_even_once_edited(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploys go out on mondays")])
        await store.write_pending(ORG, [fact("deploys go out on tusedays", supersedes=rid(ORG, 1))])
        assert pending_target_id(await store.history(ORG, rid(ORG, 2))) == rid(ORG, 1)
        await store.edit(ORG, rid(ORG, 2), "deploys go out on tuesdays", ADMIN)
        history = await store.history(ORG, rid(ORG, 3))
        assert [v.supersedes for v in history] == [rid(ORG, 1), rid(ORG, 2)]
        assert pending_target_id(history) == rid(ORG, 1)
        await store.write_pending(ORG, [fact("an unrelated pending rule")])
        assert pending_target_id(await store.history(ORG, rid(ORG, 4))) is None

    async def test_forget_erases_the_text_of_every_version(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("the vault code is quokka"), fact("an unrelated rule")])
        await store.edit(ORG, rid(ORG, 1), "the vault code is wombat", ADMIN)
        assert await store.forget(ORG, rid(ORG, 3)) is True
        history = await store.history(ORG, rid(ORG, 3))
        assert [(v.id, v.text, v.erased_reason) for v in history] == [
            (rid(ORG, 1), None, "forgotten"),
            (rid(ORG, 3), None, "forgotten"),
        ]
        assert await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 3)]) == []
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert await store.retrieve(ORG, "vault quokka wombat", 5) == []

    async def test_a_reflected_correction_is_in_the_history_as_superseded(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("deploys go out on mondays")])
        await store.write(ORG, [fact("deploys go out on tuesdays", supersedes=rid(ORG, 1), run="run-2")])
        history = await store.history(ORG, rid(ORG, 1))
        assert [v.id for v in history] == [rid(ORG, 1), rid(ORG, 2)]
        assert actions(list(history[0].entries)) == [(rid(ORG, 1), "superseded", "run:run-2", rid(ORG, 2))]

    async def test_a_fold_on_write_is_in_the_log_as_folded(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        unrun = MemoryCandidate(kind="fact", text="Deploys freeze on fridays", source_thread_key="machine:1")
        await store.write(ORG, [fact("deploys freeze on fridays")])
        await store.write(ORG, [fact("deploys freeze on fridays", run="run-2"), unrun])
        assert actions(await store.curation_log(ORG, rid(ORG, 1), 10)) == [
            (rid(ORG, 1), "folded", "reflection", None),
            (rid(ORG, 1), "folded", "run:run-2", None),
        ]


class MergeAndLogContract:
    """Consolidation's reads and merges; the curation log."""

    async def test_active_records_are_every_active_record_oldest_first_never_bumped(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("rule one"), fact("rule two"), fact("rule three")])
        await store.forget(ORG, rid(ORG, 2))
        await store.write_pending(ORG, [fact("pending rule")])
        found = await store.active_records(ORG)
        assert ids(found) == [rid(ORG, 1), rid(ORG, 3)]
        assert {r.use_count for r in found} == {0}
        assert {r.use_count for r in await store.active_records(ORG)} == {0}
        assert await store.active_records(OTHER) == []

    async def test_merge_adds_the_use_counts_and_erases_the_duplicates(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write(ORG, [fact("deploys freeze on fridays")])
        await store.write(ORG, [replace(fact("no deploys on sprint fridays"), observed_at=START + 5)])
        await store.write(ORG, [fact("fridays: deploy freeze")])
        clock.advance(10)
        await store.retrieve(ORG, "sprint", 1)  # record 2 used once, at START + 10
        clock.advance(10)
        await store.retrieve(ORG, "fridays freeze deploy", 5)  # each used, record 1 and 3 at START + 20
        assert await store.merge(ORG, rid(ORG, 1), [rid(ORG, 2), rid(ORG, 3)], ADMIN) == 2

        [survivor] = await store.active_records(ORG)
        assert (survivor.id, survivor.use_count, survivor.last_used_at) == (rid(ORG, 1), 4, START + 20)
        assert survivor.observed_at == START + 5
        assert await store.fetch(ORG, [rid(ORG, 2), rid(ORG, 3)]) == []
        [merged] = await store.history(ORG, rid(ORG, 2))
        assert (merged.text, merged.erased_reason) == (None, "merged")
        assert actions(list(merged.entries)) == [(rid(ORG, 2), "merged", ADMIN, rid(ORG, 1))]
        assert {e.record_id for e in await store.curation_log(ORG, rid(ORG, 1), 10)} == {
            rid(ORG, 2),
            rid(ORG, 3),
        }

    async def test_merge_erases_the_older_versions_of_a_duplicate_too(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("zebra original wording of the freeze")])
        await store.write(ORG, [fact("deploys freeze on fridays")])
        await store.edit(ORG, rid(ORG, 1), "deploys freeze on fridays!", ADMIN)
        assert await store.merge(ORG, rid(ORG, 2), [rid(ORG, 3)], ADMIN) == 1
        history = await store.history(ORG, rid(ORG, 1))
        assert [(v.id, v.text) for v in history] == [(rid(ORG, 1), None), (rid(ORG, 3), None)]

    async def test_two_approved_corrections_of_one_record_are_two_chains_to_forget_and_merge(
        self, make_store: StoreFactory
    ) -> None:
        """Both corrections point at the record they replaced: each one's chain is its own versions
        (and that record), never the other correction, which is live. So forgetting one leaves the
        other, and merging one into the other keeps the survivor."""
        store = curating(make_store)
        await store.write(ORG, [fact("deploys go out on mondays")])
        await store.write_pending(ORG, [fact("deploys go out on tuesdays", supersedes=rid(ORG, 1))])
        await store.write_pending(ORG, [fact("deploys go out on tuesday", supersedes=rid(ORG, 1))])
        assert await store.approve(ORG, rid(ORG, 2), ADMIN) is not None
        assert await store.approve(ORG, rid(ORG, 3), ADMIN) is not None
        assert [v.id for v in await store.history(ORG, rid(ORG, 3))] == [rid(ORG, 1), rid(ORG, 3)]

        assert await store.merge(ORG, rid(ORG, 2), [rid(ORG, 3)], ADMIN) == 1

        assert [(r.id, r.text) for r in await store.list(ORG, 10)] == [
            (rid(ORG, 2), "deploys go out on tuesdays")
        ]

    async def test_merge_folds_only_active_duplicates_into_an_active_survivor(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        await store.write(ORG, [fact("rule one"), fact("rule two"), fact("rule three")])
        await store.write_pending(ORG, [fact("pending rule")])
        await store.forget(ORG, rid(ORG, 3))
        assert await store.merge(ORG, rid(ORG, 3), [rid(ORG, 1)], ADMIN) == 0  # the survivor is gone
        assert (
            await store.merge(ORG, rid(ORG, 1), [rid(ORG, 1), rid(ORG, 3), rid(ORG, 4), rid(ORG, 9)], ADMIN)
            == 0
        )
        assert await store.merge(CHANNEL, rid(ORG, 1), [rid(ORG, 2)], ADMIN) == 0
        assert ids(await store.active_records(ORG)) == [rid(ORG, 1), rid(ORG, 2)]
        assert ids(await store.pending(ORG, 10)) == [rid(ORG, 4)]

    async def test_an_edit_and_a_merge_log_the_same_entries_in_the_same_order_in_every_store(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write(
            ORG, [fact("deploys freeze on fridays"), fact("no deploys on fridays"), fact("fridays freeze")]
        )
        await store.write_pending(ORG, [fact("the runbook is in the wiki")])
        clock.advance(10)
        await store.edit(ORG, rid(ORG, 4), "the runbook is in git", ADMIN)
        await store.edit(ORG, rid(ORG, 3), "fridays: no deploys", ADMIN)
        clock.advance(10)
        # Asked out of order and twice: merged once each, logged in the order asked, in one time.
        assert await store.merge(ORG, rid(ORG, 1), [rid(ORG, 6), rid(ORG, 2), rid(ORG, 6)], OTHER) == 2

        assert actions(await store.curation_log(ORG, rid(ORG, 1), 10)) == [
            (rid(ORG, 2), "merged", OTHER, rid(ORG, 1)),
            (rid(ORG, 6), "merged", OTHER, rid(ORG, 1)),
        ]
        assert actions(await store.curation_log(ORG, rid(ORG, 6), 10)) == [
            (rid(ORG, 6), "merged", OTHER, rid(ORG, 1)),
            (rid(ORG, 3), "edited", ADMIN, rid(ORG, 6)),
        ]
        merged = await store.history(ORG, rid(ORG, 6))
        assert [(v.id, v.status, v.text, v.erased_reason) for v in merged] == [
            (rid(ORG, 3), "superseded", None, "merged"),
            (rid(ORG, 6), "forgotten", None, "merged"),
        ]
        assert [actions(list(v.entries)) for v in merged] == [
            [(rid(ORG, 3), "edited", ADMIN, rid(ORG, 6))],
            [(rid(ORG, 6), "merged", OTHER, rid(ORG, 1))],
        ]
        waiting = await store.history(ORG, rid(ORG, 5))
        assert [(v.id, v.status, v.text, v.erased_reason) for v in waiting] == [
            (rid(ORG, 4), "superseded", None, "edited"),
            (rid(ORG, 5), "pending", "the runbook is in git", None),
        ]
        assert [actions(list(v.entries)) for v in waiting] == [
            [(rid(ORG, 4), "edited", ADMIN, rid(ORG, 5))],
            [],
        ]
        assert [(r.id, r.use_count) for r in await store.active_records(ORG)] == [(rid(ORG, 1), 0)]

    async def test_the_curation_log_is_newest_first_with_the_entries_naming_the_record_as_related(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock)
        await store.write_pending(ORG, [fact("deploys go out on mondays")])
        clock.advance(10)
        await store.approve(ORG, rid(ORG, 1), ADMIN)
        clock.advance(10)
        await store.edit(ORG, rid(ORG, 1), "deploys go out on tuesdays", OTHER)
        clock.advance(10)
        await store.record_curation(CurationEntry(rid(ORG, 2), ORG, "forgotten", OTHER, clock()))

        log = await store.curation_log(ORG, rid(ORG, 1), 10)
        assert [(e.action, e.at) for e in log] == [("edited", START + 20), ("approved", START + 10)]
        assert actions(await store.curation_log(ORG, rid(ORG, 2), 10)) == [
            (rid(ORG, 2), "forgotten", OTHER, None),
            (rid(ORG, 1), "edited", OTHER, rid(ORG, 2)),
        ]
        assert len(await store.curation_log(ORG, rid(ORG, 1), 1)) == 1
        assert await store.curation_log(CHANNEL, rid(ORG, 1), 10) == []

    async def test_record_curation_appends_what_the_commands_did(self, make_store: StoreFactory) -> None:
        store = curating(make_store)
        await store.write(OTHER, [fact("prefers tabs")])
        remembered = CurationEntry(rid(OTHER, 1), OTHER, "remembered", OTHER, START)
        await store.record_curation(remembered)
        assert await store.curation_log(OTHER, rid(OTHER, 1), 10) == [remembered]
        assert (await store.history(OTHER, rid(OTHER, 1)))[0].entries == (remembered,)

    async def test_record_curation_refuses_a_bad_entry_naming_the_field(
        self, make_store: StoreFactory
    ) -> None:
        store = curating(make_store)
        with pytest.raises(ValueError, match="action"):
            await store.record_curation(CurationEntry(rid(ORG, 1), ORG, "liked", ADMIN, START))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="actor"):
            await store.record_curation(CurationEntry(rid(ORG, 1), ORG, "remembered", "", START))
        with pytest.raises(ValueError, match="scope key"):
            await store.record_curation(CurationEntry(rid(ORG, 1), "org: acme", "remembered", ADMIN, START))
        with pytest.raises(ValueError, match="record_id"):
            await store.record_curation(CurationEntry(rid(ORG, 1), CHANNEL, "remembered", ADMIN, START))
        assert await store.curation_log(ORG, rid(ORG, 1), 10) == []

    async def test_the_curation_log_keeps_its_entries_for_the_audit_retention(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = curating(make_store, clock=clock, retention=Retention(audit_days=30))
        await store.write_pending(ORG, [fact("rule one"), fact("rule two")])
        await store.approve(ORG, rid(ORG, 1), ADMIN)
        clock.advance(31 * DAY)
        assert await store.curation_log(ORG, rid(ORG, 1), 10) == []
        await store.approve(ORG, rid(ORG, 2), ADMIN)
        assert actions(await store.curation_log(ORG, rid(ORG, 2), 10)) == [
            (rid(ORG, 2), "approved", ADMIN, None)
        ]
        assert (await store.history(ORG, rid(ORG, 1)))[0].entries == ()


class CurationContract(ReviewContract, EditContract, MergeAndLogContract, PersonErasureContract):
    """Mix into a `Test…` class that provides `make_store`: every curation behaviour."""
