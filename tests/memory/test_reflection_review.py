"""Reflection under review (`memory.review = "shared"`): shared scopes get pending records, a person's
own scope is written as ever, and with review off nothing changes."""

from __future__ import annotations

from structlog.testing import capture_logs

from app.audience import conversation_reader
from app.reflection_hook import provider_extractor
from memory.reflection import ReflectionOutcome, ReflectionRun, reflect
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.types import MemoryCandidate
from tests.memory.reflection_fakes import (
    RUN_ID,
    SCOPES,
    THREAD,
    RecordingStore,
    ScriptedProvider,
    envelope,
    fact,
    policy_gate,
)

ORG_FACT = "The api service deploys with make deploy"
USER_FACT = "this person wants answers as bullet lists"
CHANNEL_FACT = "this channel triages incidents before noon"
REPO_FACT = "the api repo tags releases as v-numbers"
REPLY = envelope(
    fact(ORG_FACT),
    fact(USER_FACT, audience="user"),
    fact(CHANNEL_FACT, audience="channel"),
    fact(REPO_FACT, audience="repo"),
)


def public_run() -> ReflectionRun:
    return ReflectionRun(
        thread_key=THREAD,
        scopes=SCOPES,
        query="deploy the api service",
        request="deploy the api service",
        answer="Deployed with make deploy.",
        run_id=RUN_ID,
        origin_visibility="public",
        origin_conversation="slack:C1",
        reader=conversation_reader("public", user_id="slack:UA", channel_id="slack:C1"),
    )


async def run(store: MemoryStore, *, review: bool, reply: str = REPLY) -> ReflectionOutcome:
    return await reflect(
        public_run(),
        store=store,
        extract=provider_extractor(ScriptedProvider(reply)),
        model="test-extractor-model",
        gate=policy_gate(SCOPES),
        review_shared=review,
    )


async def test_under_review_org_repo_and_channel_facts_wait_and_the_persons_own_is_written() -> None:
    store = InProcessMemoryStore()
    with capture_logs() as logs:
        outcome = await run(store, review=True)

    assert outcome.outcome == "written"
    for scope, text in ((SCOPES.org, ORG_FACT), (SCOPES.channel, CHANNEL_FACT), (SCOPES.repo, REPO_FACT)):
        assert scope is not None
        [waiting] = await store.pending(scope, 10)
        assert (waiting.text, waiting.status, waiting.source_run_id) == (text, "pending", RUN_ID)
        assert await store.list(scope, 10) == []
    assert [r.text for r in await store.list(SCOPES.user or "", 10)] == [USER_FACT]
    [event] = [e for e in logs if e["event"] == "memory.reflection"]
    assert set(event["pending_scopes"]) == {SCOPES.org, SCOPES.channel, SCOPES.repo}
    assert ORG_FACT not in str(logs)


async def test_with_review_off_every_fact_is_active_and_nothing_waits() -> None:
    store = InProcessMemoryStore()
    with capture_logs() as logs:
        await run(store, review=False)
    for scope in (SCOPES.org, SCOPES.channel, SCOPES.repo, SCOPES.user):
        assert scope is not None
        assert await store.pending(scope, 10) == []
        assert len(await store.list(scope, 10)) == 1
    [event] = [e for e in logs if e["event"] == "memory.reflection"]
    assert "pending_scopes" not in event


async def test_a_store_that_cannot_hold_records_for_review_gets_no_shared_write_at_all() -> None:
    store = RecordingStore()  # the MemoryStore seam only: no review queue
    outcome = await run(store, review=True)
    assert [scope for scope, _ in store.writes] == [SCOPES.user]
    assert store.records(SCOPES.org) == []
    assert outcome.reasons["write_failed_NotCuratingError"] == 3


async def test_a_restated_fact_under_review_folds_into_the_active_record() -> None:
    store = InProcessMemoryStore()
    await run(store, review=False, reply=envelope(fact(ORG_FACT)))
    await run(store, review=True, reply=envelope(fact(ORG_FACT + ".")))
    assert await store.pending(SCOPES.org, 10) == []
    [record] = await store.list(SCOPES.org, 10)
    assert record.text == ORG_FACT


async def test_under_review_a_correction_of_a_persons_note_waits_to_supersede_it() -> None:
    # An admin decides: approving the correction is a person's act, so it may retire the note.
    store = InProcessMemoryStore()
    await store.write(
        SCOPES.org, [MemoryCandidate("fact", "deploys always run the tests", "t0", origin="public")]
    )
    await run(store, review=True, reply=envelope(fact("deploys skip the tests", supersedes="mem:org:acme:1")))
    [waiting] = await store.pending(SCOPES.org, 10)
    assert (waiting.text, waiting.supersedes) == ("deploys skip the tests", "mem:org:acme:1")
