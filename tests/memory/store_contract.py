"""The store contract: one set of behaviours every MemoryStore must show, so stores cannot drift apart.

Not collected on its own (the module name does not start with `test_`). A test module joins it by
subclassing `StoreContract` in a `Test…` class and providing a `make_store` fixture that returns a
`StoreFactory` — a callable `(*, cap, clock, ranking, embedder) -> MemoryStore` whose stores the
fixture closes at teardown. tests/memory/test_store_contract.py parametrizes that fixture over every
store; a later backend adds itself there (or in its own module with its own fixture).

Every test goes through the protocol only (retrieve, write, list, forget): what a caller can observe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol, cast

import pytest
from structlog.testing import capture_logs

from memory.ranking.embedder import Embedder
from memory.ranking.fusion import DEFAULT_RANKING, SPEC, Feedback, Ranking, rank, stats_stems
from memory.ranking.lexical import term_stats
from memory.rules.retention import NO_RETENTION, Retention
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.types import (
    DEFAULT_SCOPE_CAP,
    MAX_LIMIT,
    MAX_TEXT_CHARS,
    AuditQuery,
    MemoryCandidate,
    MemoryRecord,
    Origin,
    ReadAudit,
    SourceLink,
    WriteResult,
)
from tests.memory.embedders import ConceptEmbedder
from tests.memory.rules.restate_corpus import NEAR_MISSES

START = 1_800_000_000.0
DAY = 86_400.0
ORG = "org:acme"
OTHER = "user:slack:U0OTHER"
# Malformed scope keys every store refuses, naming the rule. A lone surrogate (a terminal argument's
# undecodable byte) is no text a file name or a database can hold: refused, never one backend's crash.
BAD_SCOPE_KEYS = ["", "org:acme corp", "org:acme\x00", "org:acme\udcff"]


class FakeClock:
    """A clock the test moves by hand; every store reads time only through it."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class CapWriter(Protocol):
    """Stores also take a per-batch cap (the memory service forwards the caller's `cap`)."""

    async def write(
        self, scope_key: str, candidates: list[MemoryCandidate], *, cap: int | None = None
    ) -> WriteResult: ...


class StoreFactory(Protocol):
    def __call__(
        self,
        *,
        cap: int = DEFAULT_SCOPE_CAP,
        clock: Callable[[], float] = ...,
        ranking: Ranking = ...,
        embedder: Embedder | None = None,
        retention: Retention = NO_RETENTION,
    ) -> MemoryStore: ...


def fact(
    text: str,
    *,
    keywords: tuple[str, ...] = (),
    supersedes: str | None = None,
    origin: Origin = "unknown",
    origin_conversation: str | None = None,
    run: str = "run-1",
) -> MemoryCandidate:
    return MemoryCandidate(
        kind="fact",
        text=text,
        source_thread_key="slack:C1:1700000000.000100",
        keywords=keywords,
        source_run_id=run,
        confidence=0.9,
        supersedes=supersedes,
        origin=origin,
        origin_conversation=origin_conversation,
    )


def ids(records: list[MemoryRecord]) -> list[str]:
    return [record.id for record in records]


def rid(scope: str, seq: int) -> str:
    return f"mem:{scope}:{seq}"


async def everything(store: MemoryStore, scope: str = ORG) -> dict[str, MemoryRecord]:
    """Every active record of a scope by id, read through list (which never bumps usage)."""
    return {record.id: record for record in await store.list(scope, 50)}


class CoreContract:
    """The spec's behaviours (§8–§29); `StoreContract` (the end of this module) adds provenance."""

    # -- write → retrieve -------------------------------------------------------------------------

    async def test_write_then_retrieve_round_trips_records_with_scoped_ids(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        summary = MemoryCandidate(
            kind="summary",
            text="The team ships the API with make deploy",
            source_thread_key="slack:C1:1700000000.000200",
            keywords=("Deploy", "api"),
            source_run_id="run-2",
            confidence=None,
        )
        result = await store.write(ORG, [fact("Staging lives in eu-west-1"), summary])
        assert result == WriteResult(inserted=2)

        clock.advance(60)
        found = await store.retrieve(ORG, "how do we deploy?", 5)

        assert ids(found) == [rid(ORG, 2)]
        record = found[0]
        assert record.scope_key == ORG
        assert record.kind == "summary"
        assert record.text == "The team ships the API with make deploy"
        assert record.keywords == ("Deploy", "api")
        assert record.source_thread_key == "slack:C1:1700000000.000200"
        assert record.source_run_id == "run-2"
        assert record.confidence is None
        assert record.created_at == START
        assert record.status == "active"
        assert record.supersedes is None
        # the returned rows carry their bump
        assert (record.last_used_at, record.use_count) == (START + 60, 1)
        first = (await everything(store))[rid(ORG, 1)]
        assert (first.confidence, first.source_run_id, first.kind) == (0.9, "run-1", "fact")

    async def test_retrieve_bumps_usage_only_on_the_returned_records(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        await store.write(ORG, [fact("deploy alpha"), fact("deploy beta"), fact("deploy gamma beta")])
        clock.advance(10)

        found = await store.retrieve(ORG, "deploy beta", 1)
        assert ids(found) == [rid(ORG, 2)]  # ties with 3 on score: the earlier record wins
        rows = await everything(store)
        assert {key for key, row in rows.items() if row.use_count} == {rid(ORG, 2)}
        assert {key for key, row in rows.items() if row.last_used_at is not None} == {rid(ORG, 2)}
        assert rows[rid(ORG, 2)].last_used_at == START + 10

        clock.advance(10)
        again = await store.retrieve(ORG, "deploy beta", 1)
        assert again[0].use_count == 2

    async def test_retrieve_is_whole_token_not_substring(self, make_store: StoreFactory) -> None:
        store = make_store()
        # "redeployment" stems to "redeploy": neither its token nor its stem is "deploy" (whole tokens in
        # both rankings; a one-letter token never matches inside a word either).
        await store.write(ORG, [fact("redeployment notes for the api"), fact("a b c")])
        assert await store.retrieve(ORG, "deploy", 5) == []
        assert await store.retrieve(ORG, "ment", 5) == []
        assert await store.retrieve(ORG, "r", 5) == []
        assert ids(await store.retrieve(ORG, "redeployment", 5)) == [rid(ORG, 1)]

    async def test_retrieve_matches_keywords_as_well_as_text(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("run the release script", keywords=("Shipping",))])
        assert ids(await store.retrieve(ORG, "shipping", 5)) == [rid(ORG, 1)]

    async def test_a_direct_write_of_a_secret_stores_it_redacted(self, make_store: StoreFactory) -> None:
        # Every store redacts in its own write path, whoever calls it: reflection, the service, a script.
        token = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
        split = "xoxb-2223334445-\u200b5556667778889-AbCdEfGhIjKlMnOpQrStUvWx"
        store = make_store()
        await store.write(
            ORG,
            [
                fact(f"deploy with {token}", keywords=(token, "deploy")),
                fact(f"deploy bot {split}"),
                fact("deploy password: hunter2"),
            ],
        )
        rows = await everything(store)
        stored = repr(rows) + repr(await store.retrieve(ORG, "deploy", 5))
        for secret in (token, "AbCdEfGhIjKlMnOpQrStUvWx", "hunter2", "\u200b"):
            assert secret not in stored
        assert rows[rid(ORG, 1)].text == "deploy with [REDACTED]"
        assert rows[rid(ORG, 1)].keywords == ("[REDACTED]", "deploy")
        assert rows[rid(ORG, 3)].text == "deploy password: [REDACTED]"

    async def test_a_query_without_tokens_retrieves_nothing(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploy the api")])
        for query in ("", "   ", "?!", "—…"):
            assert await store.retrieve(ORG, query, 5) == []

    async def test_retrieve_ranks_by_keyword_match_then_recency_and_limits(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        await store.write(ORG, [fact("deploy api staging")])  # full match, old
        clock.advance(3 * DAY)
        await store.write(ORG, [fact("deploy only"), fact("deploy again")])  # half match, fresh
        clock.advance(DAY)

        found = await store.retrieve(ORG, "deploy staging", 2)

        assert ids(found)[0] == rid(ORG, 1)
        assert len(found) == 2

    async def test_equal_scores_rank_in_write_order(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("zeta deploy"), fact("deploy zeta zeta zeta"), fact("deploy")])
        found = await store.retrieve(ORG, "deploy", 3)
        assert ids(found) == [rid(ORG, 1), rid(ORG, 2), rid(ORG, 3)]

    async def test_scopes_are_isolated(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploy the api")])
        await store.write(OTHER, [fact("deploy the worker")])

        assert ids(await store.retrieve(ORG, "deploy", 5)) == [rid(ORG, 1)]
        assert ids(await store.retrieve(OTHER, "deploy", 5)) == [rid(OTHER, 1)]
        assert await store.retrieve("org:elsewhere", "deploy", 5) == []
        assert await store.list("org:elsewhere", 5) == []

    async def test_a_record_sharing_only_stopwords_with_the_query_is_not_retrieved(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("the deploy goes to the staging cluster"), fact("what is on the menu")])
        assert ids(await store.retrieve(ORG, "what is the deploy plan", 5)) == [rid(ORG, 1)]
        assert await store.retrieve(ORG, "what is it", 5) == []
        assert await store.list(ORG, 5, query="what is it") == []

    async def test_stopwords_take_no_prefilter_slot_from_a_real_token(self, make_store: StoreFactory) -> None:
        # 24 distinct 5-letter tokens fill the prefilter exactly; the long stopwords before them
        # ("because", "through", "should") must not push the last of them out of it.
        words = [f"wd{chr(97 + n // 26)}{chr(97 + n % 26)}x" for n in range(24)]
        store = make_store()
        await store.write(ORG, [fact(f"only {words[-1]} here")])
        query = "because through should " + " ".join(words)
        assert ids(await store.retrieve(ORG, query, 5)) == [rid(ORG, 1)]
        assert ids(await store.list(ORG, 5, query)) == [rid(ORG, 1)]

    async def test_fts_syntax_in_queries_is_inert(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(
            ORG,
            [fact("deploy the api"), fact("redeployment near the office"), fact("text or keywords column")],
        )
        expectations = {
            '"deploy': [1],
            'deploy"': [1],
            "deploy*": [1],
            "*": [],
            "NEAR(deploy api)": [1, 2],
            "NEAR": [2],
            "deploy OR": [1],  # "or" is a stopword: it selects nothing, as syntax or as a word
            "deploy OR keywords": [1, 3],
            "AND NOT": [],
            "-deploy": [1],
            "text:deploy": [1, 3],
            "col:": [],
            "^deploy": [1],
            "(api": [1],
            "{text keywords}: api": [1, 3],
            '""': [],
        }
        for query, expected in expectations.items():
            found = await store.retrieve(ORG, query, 10)
            assert sorted(ids(found)) == [rid(ORG, n) for n in expected], query
            listed = await store.list(ORG, 10, query)
            assert sorted(ids(listed)) == [rid(ORG, n) for n in expected], query

    async def test_non_ascii_text_is_stored_and_found_by_its_ascii_tokens(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        text = "Le déploiement à Zürich passe par make deploy — 日本語 ok"
        await store.write(ORG, [fact(text), fact("the cafe menu")])

        found = await store.retrieve(ORG, "make deploy", 5)
        assert [record.text for record in found] == [text]
        assert ids(await store.list(ORG, 5, "rich")) == [rid(ORG, 1)]
        # accented queries never error; they match only through their own ASCII tokens
        assert await store.retrieve(ORG, "日本語 éàü", 5) == []
        assert await store.retrieve(ORG, "café", 5) == []  # "caf" is not "cafe": a miss
        assert await store.list(ORG, 5, "ñandú") == []

    # -- dedup / supersede ------------------------------------------------------------------------

    async def test_dedup_is_case_and_whitespace_insensitive_and_bumps_use_count(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("Deploy with make deploy")])

        result = await store.write(ORG, [fact("  deploy   WITH make\tdeploy ")])

        assert result == WriteResult(deduped=1)
        rows = await everything(store)
        assert list(rows) == [rid(ORG, 1)]
        assert rows[rid(ORG, 1)].use_count == 1
        assert rows[rid(ORG, 1)].text == "Deploy with make deploy"

    async def test_restatements_fold_into_one_active_record_that_they_confirm(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        first = "Deploys go through make ship from the main branch."
        await store.write(ORG, [replace(fact(first, origin="public"), observed_at=START - 9 * DAY)])
        assert ids(await store.retrieve(ORG, "make ship", 5)) == [rid(ORG, 1)]  # used once; indexed
        clock.advance(DAY)
        lowered = replace(fact("deploys go through make ship from the main branch"), observed_at=START - DAY)
        assert await store.write(ORG, [lowered]) == WriteResult(deduped=1)
        last = clock.advance(DAY)
        marked = replace(
            fact("Deploys go through `make ship` from the main branch!"), observed_at=START - 30 * DAY
        )
        assert await store.write(ORG, [marked]) == WriteResult(deduped=1)

        (kept,) = await store.list(ORG, 50)
        assert (kept.id, kept.text, kept.origin) == (rid(ORG, 1), first, "public")
        assert (kept.use_count, kept.last_used_at) == (3, last)
        assert kept.observed_at == START - DAY  # the latest telling dates it; an older one never does
        assert await store.fetch(ORG, [rid(ORG, 1)]) == [kept]
        (found,) = await store.retrieve(ORG, "make ship", 5)  # the index built earlier sees the new date
        assert (found.id, found.observed_at) == (rid(ORG, 1), START - DAY)

    async def test_near_miss_pairs_in_one_scope_stay_two_records(self, make_store: StoreFactory) -> None:
        store = make_store()
        texts = list(dict.fromkeys(text for pair in NEAR_MISSES for text in pair))  # each text once
        # Every text inserted, none folded: each pair is two records.
        assert await store.write(ORG, [fact(text) for text in texts]) == WriteResult(inserted=len(texts))
        for pair in NEAR_MISSES:
            found = await store.fetch(ORG, [rid(ORG, texts.index(text) + 1) for text in pair])
            assert [record.text for record in found] == list(pair)

    async def test_a_batch_dedups_against_its_own_earlier_insert(self, make_store: StoreFactory) -> None:
        store = make_store()
        result = await store.write(ORG, [fact("use pnpm"), fact("Use  PNPM")])
        assert result == WriteResult(inserted=1, deduped=1)
        assert (await everything(store))[rid(ORG, 1)].use_count == 1

    async def test_supersede_retires_the_target_and_inserts_with_the_pointer(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("staging is in us-east-1")])

        result = await store.write(ORG, [fact("staging is in eu-west-1", supersedes=rid(ORG, 1))])

        assert result == WriteResult(inserted=1, superseded=1)
        rows = await everything(store)
        assert list(rows) == [rid(ORG, 2)]
        assert rows[rid(ORG, 2)].supersedes == rid(ORG, 1)
        assert ids(await store.retrieve(ORG, "staging", 5)) == [rid(ORG, 2)]

    async def test_an_unknown_or_foreign_supersede_id_retires_nothing(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("keep me")])
        await store.write(OTHER, [fact("foreign record")])

        unknown = await store.write(ORG, [fact("new one", supersedes=rid(ORG, 99))])
        foreign = await store.write(ORG, [fact("another one", supersedes=rid(OTHER, 1))])

        assert unknown == WriteResult(inserted=1)
        assert foreign == WriteResult(inserted=1)
        assert sorted(await everything(store)) == [rid(ORG, 1), rid(ORG, 2), rid(ORG, 3)]
        assert ids(await store.list(OTHER, 5)) == [rid(OTHER, 1)]
        assert (await everything(store))[rid(ORG, 3)].supersedes is None

    async def test_restating_the_supersede_target_is_a_dedup_no_op(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("Staging is in eu-west-1")])

        result = await store.write(ORG, [fact("staging is in EU-WEST-1", supersedes=rid(ORG, 1))])

        assert result == WriteResult(deduped=1)
        rows = await everything(store)
        assert list(rows) == [rid(ORG, 1)]
        assert rows[rid(ORG, 1)].use_count == 1

    async def test_a_collision_with_an_unrelated_record_does_not_swallow_the_supersede(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploys go through the release train"), fact("staging is eu-west-1")])

        result = await store.write(
            ORG, [fact("Deploys go through the release train", supersedes=rid(ORG, 2))]
        )

        assert result == WriteResult(inserted=1, superseded=1)
        assert sorted(await everything(store)) == [rid(ORG, 1), rid(ORG, 3)]

    async def test_a_collision_does_not_swallow_a_correction_with_an_unresolvable_id(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("use pnpm")])

        result = await store.write(ORG, [fact("use pnpm", supersedes=rid(ORG, 42))])

        assert result == WriteResult(inserted=1)
        assert sorted(await everything(store)) == [rid(ORG, 1), rid(ORG, 2)]

    async def test_an_empty_supersedes_dedups_against_the_active_set(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("use pnpm")])

        result = await store.write(ORG, [fact("USE pnpm", supersedes="")])

        assert result == WriteResult(deduped=1)
        assert list(await everything(store)) == [rid(ORG, 1)]

    async def test_dedup_against_duplicate_norm_actives_bumps_the_earliest(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("use pnpm"), fact("use npm")])
        # the collision guard leaves two actives with the same text
        await store.write(ORG, [fact("use pnpm", supersedes=rid(ORG, 2))])

        result = await store.write(ORG, [fact("Use PNPM")])

        assert result == WriteResult(deduped=1)
        rows = await everything(store)
        assert (rows[rid(ORG, 1)].use_count, rows[rid(ORG, 3)].use_count) == (1, 0)

    async def test_superseded_records_are_neither_retrieved_nor_dedup_targets(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("staging is us-east-1")])
        await store.write(ORG, [fact("staging moved to eu-west-1", supersedes=rid(ORG, 1))])

        assert ids(await store.retrieve(ORG, "east", 5)) == []
        result = await store.write(ORG, [fact("staging is us-east-1")])

        assert result == WriteResult(inserted=1)
        assert sorted(await everything(store)) == [rid(ORG, 2), rid(ORG, 3)]

    async def test_an_empty_batch_writes_nothing(self, make_store: StoreFactory) -> None:
        store = make_store()
        assert await store.write(ORG, []) == WriteResult()
        assert await store.list(ORG, 5) == []

    async def test_a_bad_candidate_refuses_the_whole_batch_naming_the_field(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        bad_kind = MemoryCandidate(kind="opinion", text="x", source_thread_key="t")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"candidates\[1\]\.kind"):
            await store.write(ORG, [fact("fine"), bad_kind])
        with pytest.raises(ValueError, match=r"candidates\[1\]\.text"):
            await store.write(ORG, [fact("fine"), fact("nul \x00 inside")])
        with pytest.raises(ValueError, match=r"candidates\[0\]\.keywords\[1\]"):
            await store.write(ORG, [fact("fine", keywords=("ok", "\udfff"))])
        assert await store.list(ORG, 5) == []

    async def test_a_direct_write_is_refused_what_the_wire_would_refuse(
        self, make_store: StoreFactory
    ) -> None:
        """The wire's caps hold for every store, so a direct write cannot store what the service refuses."""
        store = make_store()
        refused: list[tuple[MemoryCandidate, str]] = [
            (fact("x" * (MAX_TEXT_CHARS + 1)), r"candidates\[0\]\.text .*4000"),
            (fact("   "), r"candidates\[0\]\.text must be a non-empty"),
            (fact("fine", keywords=("k" * 65,)), r"candidates\[0\]\.keywords\[0\]"),
            (fact("fine", keywords=tuple(f"k{n}" for n in range(21))), r"candidates\[0\]\.keywords must"),
            (fact("fine", keywords=("",)), r"candidates\[0\]\.keywords\[0\]"),
            (fact("fine", origin="everyone"), r"candidates\[0\]\.origin must be one of"),  # type: ignore[arg-type]
            (
                fact("fine", origin="dm", origin_conversation="D" * 201),
                r"candidates\[0\]\.origin_conversation",
            ),
            (fact("fine", origin="dm", origin_conversation="D\x00"), r"candidates\[0\]\.origin_conversation"),
            (fact("fine", supersedes="m" * 201), r"candidates\[0\]\.supersedes"),
            (replace(fact("fine"), confidence=1.5), r"candidates\[0\]\.confidence"),
            (replace(fact("fine"), source_thread_key=""), r"candidates\[0\]\.source_thread_key"),
        ]
        for candidate, message in refused:
            with pytest.raises(ValueError, match=message):
                await store.write(ORG, [candidate])
        assert await store.list(ORG, 5) == []
        longest = "y" * MAX_TEXT_CHARS
        assert await store.write(ORG, [fact(longest, keywords=("k" * 64,))]) == WriteResult(inserted=1)
        assert [record.text for record in await store.list(ORG, 5)] == [longest]

    # -- the origin label -------------------------------------------------------------------------

    async def test_the_origin_label_is_stored_and_returned_by_every_read(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        scope = "user:slack:U0A"
        await store.write(
            scope,
            [
                fact("prefers tabs over spaces", origin="dm", origin_conversation="slack:D0A"),
                fact("deploys from the release branch", origin="private", origin_conversation="slack:G01"),
                fact("uses the shared staging cluster", origin="public", origin_conversation="slack:C01"),
                fact("runs the chat in a terminal", origin="machine"),
                fact("reviews the partner's launch plan", origin="external", origin_conversation="slack:C07"),
            ],
        )
        listed = {
            record.text: (record.origin, record.origin_conversation) for record in await store.list(scope, 10)
        }
        assert listed == {
            "prefers tabs over spaces": ("dm", "slack:D0A"),
            "deploys from the release branch": ("private", "slack:G01"),
            "uses the shared staging cluster": ("public", "slack:C01"),
            "runs the chat in a terminal": ("machine", None),
            "reviews the partner's launch plan": ("external", "slack:C07"),
        }
        (found,) = await store.retrieve(scope, "tabs", 5)
        assert (found.origin, found.origin_conversation) == ("dm", "slack:D0A")

    async def test_a_candidate_without_an_origin_is_stored_as_unknown(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("no label on this one")])
        (record,) = await store.list(ORG, 5)
        assert (record.origin, record.origin_conversation) == ("unknown", None)

    async def test_a_dedup_keeps_the_first_records_origin(self, make_store: StoreFactory) -> None:
        """Restating a fact from a wider origin bumps the record; it never relabels it wider."""
        store = make_store()
        scope = "user:slack:U0A"
        await store.write(scope, [fact("prefers tabs", origin="dm", origin_conversation="slack:D0A")])
        assert await store.write(scope, [fact("Prefers  tabs", origin="public")]) == WriteResult(deduped=1)
        (record,) = await store.list(scope, 5)
        assert (record.origin, record.origin_conversation) == ("dm", "slack:D0A")

    # -- list / forget ----------------------------------------------------------------------------

    async def test_list_is_newest_first_limited_and_never_bumps_usage(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("one"), fact("two"), fact("three")])
        await store.write(ORG, [fact("four")])

        listed = await store.list(ORG, 3)

        assert ids(listed) == [rid(ORG, 4), rid(ORG, 3), rid(ORG, 2)]
        assert all(r.use_count == 0 and r.last_used_at is None for r in await store.list(ORG, 10))
        assert await store.list(ORG, 0) == []

    async def test_list_query_filters_whole_tokens_then_limits(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(
            ORG,
            [
                fact("deploy the api"),
                fact("unrelated"),
                fact("notes", keywords=("Deploy",)),
                fact("deployment runbook"),
                fact("deploy the worker"),
            ],
        )

        assert ids(await store.list(ORG, 10, "deploy")) == [rid(ORG, 5), rid(ORG, 3), rid(ORG, 1)]
        assert ids(await store.list(ORG, 2, "how to DEPLOY?")) == [rid(ORG, 5), rid(ORG, 3)]
        assert await store.list(ORG, 10, "deplo") == []
        assert await store.list(ORG, 10, "  !! ") == []
        assert all(r.use_count == 0 for r in await store.list(ORG, 10))

    async def test_forget_soft_deletes_one_active_record(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("use pnpm"), fact("deploy on fridays")])

        assert await store.forget(ORG, rid(ORG, 1)) is True
        assert await store.forget(ORG, rid(ORG, 1)) is False

        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert await store.retrieve(ORG, "pnpm", 5) == []
        assert await store.list(ORG, 10, "pnpm") == []
        restated = await store.write(ORG, [fact("use pnpm")])
        assert restated == WriteResult(inserted=1)
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 3), rid(ORG, 2)]

    async def test_forget_refuses_unknown_foreign_and_erased_ids(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("old"), fact("other")])
        await store.write(OTHER, [fact("theirs")])
        assert await store.forget(ORG, rid(ORG, 1)) is True

        assert await store.forget(ORG, rid(ORG, 1)) is False  # erased already
        assert await store.forget(ORG, rid(ORG, 77)) is False
        assert await store.forget(ORG, rid(OTHER, 1)) is False
        assert await store.forget(ORG, "not-an-id") is False
        assert ids(await store.list(OTHER, 5)) == [rid(OTHER, 1)]

    # -- the per-scope cap ------------------------------------------------------------------------

    async def test_an_over_cap_write_evicts_the_least_recently_used_within_the_batch(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(cap=3, clock=clock)
        for text in ("alpha", "bravo", "charlie"):
            await store.write(ORG, [fact(text)])
            clock.advance(1)
        await store.retrieve(ORG, "alpha", 1)  # alpha is now the most recently used
        clock.advance(1)

        result = await store.write(ORG, [fact("delta"), fact("echo")])

        assert result == WriteResult(inserted=2, evicted=2)
        assert sorted(await everything(store)) == [rid(ORG, 1), rid(ORG, 4), rid(ORG, 5)]
        assert await store.retrieve(ORG, "bravo charlie", 5) == []
        assert await store.list(ORG, 10, "bravo") == []
        # an evicted record is no dedup target: restating it inserts a fresh record
        again = await store.write(ORG, [fact("Bravo")])
        assert again == WriteResult(inserted=1, evicted=1)
        assert rid(ORG, 6) in await everything(store)

    async def test_nothing_is_evicted_at_the_cap(self, make_store: StoreFactory) -> None:
        store = make_store(cap=3)
        assert await store.write(ORG, [fact("a1"), fact("a2"), fact("a3")]) == WriteResult(inserted=3)
        assert len(await everything(store)) == 3

    async def test_eviction_ties_on_last_use_go_to_the_older_record(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = make_store(cap=1, clock=clock)
        await store.write(ORG, [fact("first")])
        clock.advance(10)
        await store.retrieve(ORG, "first", 1)  # last used now: ties with the next record's creation

        result = await store.write(ORG, [fact("second")])

        assert result == WriteResult(inserted=1, evicted=1)
        assert list(await everything(store)) == [rid(ORG, 2)]

    async def test_superseded_and_forgotten_records_do_not_count_against_the_cap(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(cap=2)
        await store.write(ORG, [fact("one"), fact("two")])
        assert await store.forget(ORG, rid(ORG, 1)) is True
        assert await store.write(ORG, [fact("three")]) == WriteResult(inserted=1)
        result = await store.write(ORG, [fact("four", supersedes=rid(ORG, 2))])
        assert result == WriteResult(inserted=1, superseded=1)
        assert sorted(await everything(store)) == [rid(ORG, 3), rid(ORG, 4)]

    async def test_a_per_batch_cap_overrides_the_store_cap(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = make_store(cap=10, clock=clock)
        await store.write(ORG, [fact(f"record {n}") for n in range(4)])
        clock.advance(1)
        capped = cast(CapWriter, store)

        result = await capped.write(ORG, [fact("one more")], cap=2)

        assert result == WriteResult(inserted=1, evicted=3)
        assert sorted(await everything(store)) == [rid(ORG, 4), rid(ORG, 5)]

    # -- concurrency ------------------------------------------------------------------------------

    async def test_twenty_concurrent_batches_to_one_scope_all_land_with_unique_ids(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        batches = [[fact(f"batch {n} first"), fact(f"batch {n} second")] for n in range(20)]

        results = await asyncio.gather(*(store.write(ORG, batch) for batch in batches))

        assert all(result == WriteResult(inserted=2) for result in results)
        listed = await store.list(ORG, 50)
        assert len(listed) == 40
        assert sorted(ids(listed)) == sorted(rid(ORG, n) for n in range(1, 41))

    async def test_a_retrieve_during_a_write_sees_the_state_before_or_after_it(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        for round_ in range(6):
            token = f"round{round_}"
            batch = [fact(f"{token} item {n}") for n in range(30)]
            write = store.write(ORG, batch)
            read = store.retrieve(ORG, token, 50)
            pair = (write, read) if round_ % 2 else (read, write)
            outcome = await asyncio.gather(*pair)
            seen = outcome[1] if round_ % 2 else outcome[0]
            assert isinstance(seen, list)
            assert len(seen) in (0, 30), f"saw a half-applied batch: {len(seen)} of 30"
            assert len(await store.retrieve(ORG, token, 50)) == 30

    # -- ranking v2 (issue 15): stems, IDF within the scope, the spec ranking kept ----------------

    async def test_a_stem_meets_its_inflections(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact("we deployed the api on friday"), fact("the billing cluster")])
        assert ids(await store.retrieve(ORG, "who deploys things?", 5)) == [rid(ORG, 1)]
        assert ids(await store.retrieve(ORG, "deployment", 5)) == [rid(ORG, 1)]

    async def test_the_spec_ranking_matches_whole_tokens_without_stems(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(ranking=SPEC)
        await store.write(ORG, [fact("we deployed the api on friday"), fact("deploys run nightly")])
        assert ids(await store.retrieve(ORG, "deploys", 5)) == [rid(ORG, 2)]
        assert await store.retrieve(ORG, "deployment", 5) == []

    async def test_a_rare_term_in_the_scope_outweighs_a_common_one(self, make_store: StoreFactory) -> None:
        store = make_store()
        common = [fact(f"the team met on day {n}") for n in range(8)]
        await store.write(ORG, [*common, fact("kubernetes upgrade is scheduled")])
        found = await store.retrieve(ORG, "team kubernetes", 3)
        assert ids(found)[0] == rid(ORG, 9)  # holds the rare term; every other record only "team"

    async def test_document_frequencies_follow_supersede_and_forget(self, make_store: StoreFactory) -> None:
        store = make_store(clock=FakeClock())
        await store.write(
            ORG,
            [fact("alpha one"), fact("alpha two"), fact("alpha three"), fact("beta four"), fact("beta five")],
        )
        assert ids(await store.retrieve(ORG, "alpha beta", 1)) == [rid(ORG, 4)]  # beta is the rarer
        await store.write(ORG, [fact("delta replaces two", supersedes=rid(ORG, 2))])
        assert await store.forget(ORG, rid(ORG, 1))
        assert ids(await store.retrieve(ORG, "alpha beta", 1)) == [rid(ORG, 3)]  # now alpha is

    @pytest.mark.parametrize("mode", ["v2", "spec", "feedback"])
    async def test_the_prefilter_agrees_with_the_engine_over_the_whole_scope(
        self, make_store: StoreFactory, mode: str
    ) -> None:
        # `feedback`: v2 with pseudo-relevance feedback, whose stems weigh their IDF in the scope too.
        feedback = Feedback(records=3, stems=5, weight=0.3)
        ranking = Ranking(feedback=feedback) if mode == "feedback" else Ranking(mode=mode)  # type: ignore[arg-type]
        # A still clock (recency is equal) and a cap the writes go over (eviction uncounts too).
        store = make_store(ranking=ranking, clock=FakeClock(), cap=36)
        words = ["deploy", "deploys", "deployed", "billing", "bills", "cluster", "clusters", "api", "apis"]
        texts = [" ".join(words[(n * k) % len(words)] for k in (1, 2, 5)) + f" item{n}" for n in range(40)]
        # Mostly public (they vote in the feedback), every fourth from a private channel (it may not).
        await store.write(
            ORG,
            [
                fact(text, origin="private", origin_conversation="slack:G1")
                if n % 4 == 3
                else fact(text, origin="public")
                for n, text in enumerate(texts)
            ],
        )
        await store.write(ORG, [fact("billing moved", supersedes=rid(ORG, 13), origin="public")])
        assert await store.forget(ORG, rid(ORG, 15))
        active = sorted((await everything(store)).values(), key=lambda r: int(r.id.rsplit(":", 1)[1]))
        for query in ("deploying the apis", "bill cluster", "who deployed billing?", "item7 api", "clusters"):
            stats = term_stats(active, stats_stems(ranking, query, active))
            expected = rank(active, query, 10, START, ranking, stats=stats)
            found = await store.retrieve(ORG, query, 10)
            assert ids(found) == [item.record.id for item in expected], query

    @pytest.mark.parametrize("embedded", [False, True])
    async def test_a_scope_past_the_candidate_pool_ranks_as_the_engine_over_every_record(
        self, make_store: StoreFactory, embedded: bool
    ) -> None:
        # Four times the 50-candidate pool, nearly all matching each query: a store that ranks only a
        # prefiltered pool of them (by its own text rank) would return other records than the engine.
        clock = FakeClock()
        embedder = ConceptEmbedder() if embedded else None
        store = make_store(clock=clock, embedder=embedder)
        engine = InProcessMemoryStore(clock=clock, embedder=embedder)
        words = ["deploy", "release", "billing", "cluster", "api", "lunch", "ship", "rollout", "notes"]
        texts = [
            " ".join(words[(n * k + k) % len(words)] for k in range(1, 2 + n % 4)) + f" item{n}"
            for n in range(200)
        ]
        for start in range(0, len(texts), 50):
            clock.advance(DAY)
            for target in (store, engine):
                await target.write(ORG, [fact(text) for text in texts[start : start + 50]])
        for query in ("deploy the release", "billing cluster api", "ship notes", "lunch rollout deploy"):
            clock.advance(3600)
            expected = await engine.retrieve(ORG, query, 10)  # bumps usage there as the store does
            assert len(expected) == 10
            assert ids(await store.retrieve(ORG, query, 10)) == ids(expected), query

    # -- the semantic signal (issue 15): the store's embedder, fused with the lexical score ---------

    async def test_a_record_close_in_meaning_enters_without_a_shared_stem(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(ranking=Ranking(semantic_threshold=0.6), embedder=ConceptEmbedder())
        await store.write(ORG, [fact("we ship fridays"), fact("lunch menu pasta"), fact("rollout notes")])
        found = await store.retrieve(ORG, "when is the release?", 5)
        # "rollout notes" and "we ship fridays" share no stem with "release" but its concept.
        assert sorted(ids(found)) == [rid(ORG, 1), rid(ORG, 3)]

    async def test_an_unrelated_record_never_fills_the_block(self, make_store: StoreFactory) -> None:
        store = make_store(embedder=ConceptEmbedder())
        await store.write(
            ORG, [fact("lunch menu pasta"), fact("we ship fridays"), fact("kubernetes upgrade")]
        )
        assert ids(await store.retrieve(ORG, "k8s cluster", 10)) == [rid(ORG, 3)]
        assert await store.retrieve(ORG, "astronomy telescope", 10) == []

    async def test_the_cosine_reorders_lexical_matches(self, make_store: StoreFactory) -> None:
        ranking = Ranking(semantic_weight=0.6)
        lexical, fused = make_store(ranking=ranking), make_store(ranking=ranking, embedder=ConceptEmbedder())
        for store in (lexical, fused):
            await store.write(ORG, [fact("notes about lunch menu pasta"), fact("notes about the release")])
        assert ids(await lexical.retrieve(ORG, "notes ship", 2)) == [rid(ORG, 1), rid(ORG, 2)]
        assert ids(await fused.retrieve(ORG, "notes ship", 2)) == [rid(ORG, 2), rid(ORG, 1)]

    async def test_the_spec_ranking_uses_no_vectors(self, make_store: StoreFactory) -> None:
        store = make_store(ranking=SPEC, embedder=ConceptEmbedder())
        await store.write(ORG, [fact("we ship fridays")])
        assert await store.retrieve(ORG, "release", 5) == []

    # -- the four-scope read in one hop (issue 15) ---------------------------------------------------

    async def test_retrieve_many_ranks_each_scope_as_its_own_retrieve_would(
        self, make_store: StoreFactory
    ) -> None:
        scopes = [ORG, "repo:acme/api", "channel:slack:C1", OTHER]
        one, many = make_store(clock=FakeClock()), make_store(clock=FakeClock())
        for store in (one, many):
            for n, scope in enumerate(scopes):
                await store.write(
                    scope, [fact(f"deploy notes {n}"), fact(f"deploy billing {n}"), fact("unrelated")]
                )
        expected = {scope: ids(await one.retrieve(scope, "deploy billing", 1)) for scope in scopes}
        found = await many.retrieve_many([*scopes, "user:slack:UEMPTY"], "deploy billing", 1)
        assert {scope: [r.record.id for r in ranked] for scope, ranked in found.items()} == expected
        assert all(0 < r.relevance <= 1 for ranked in found.values() for r in ranked)
        listed = await everything(many, "repo:acme/api")
        assert listed[rid("repo:acme/api", 2)].use_count == 1  # bumped like a retrieve bumps
        assert listed[rid("repo:acme/api", 1)].use_count == 0

    async def test_retrieve_many_embeds_the_query_once_for_every_scope(
        self, make_store: StoreFactory
    ) -> None:
        embedder = ConceptEmbedder()
        store = make_store(embedder=embedder)
        scopes = [ORG, "channel:slack:C1", OTHER]
        for scope in scopes:
            await store.write(scope, [fact("we ship fridays")])
        embedder.calls.clear()
        found = await store.retrieve_many(scopes, "ship", 5)
        assert sorted(found) == sorted(scopes)
        assert embedder.calls == [1]  # one query, one embedding (the records have theirs already)

    async def test_retrieve_many_with_no_query_terms_or_no_scopes_reads_nothing(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploy the api")])
        assert await store.retrieve_many([ORG], "the of and", 5) == {}
        assert await store.retrieve_many([], "deploy", 5) == {}


class ProvenanceContract:
    """Erasure, run sources, retention and the read audit (issue 17): through the protocol only."""

    async def test_forget_erases_the_record_so_fetch_and_dedup_no_longer_see_its_text(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("the vault code is quokka"), fact("deploy on fridays")])
        assert ids(await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)])) == [rid(ORG, 1), rid(ORG, 2)]

        assert await store.forget(ORG, rid(ORG, 1)) is True

        assert ids(await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)])) == [rid(ORG, 2)]
        assert await store.retrieve(ORG, "quokka vault", 5) == []
        assert await store.write(ORG, [fact("the vault code is quokka")]) == WriteResult(inserted=1)

    async def test_an_evicted_record_can_still_be_forgotten_with_every_older_version(
        self, make_store: StoreFactory
    ) -> None:
        """Eviction only retires a record: its text stays, and *Why?* still shows it by id. The person
        who sees it there can erase it, as they can an active one (its corrected versions with it)."""
        store = make_store(clock=FakeClock(), cap=1)
        await store.write(ORG, [fact("the vault code is quokka")])
        await store.write(ORG, [fact("the vault code is wombat", supersedes=rid(ORG, 1))])
        await store.write(ORG, [fact("deploy on fridays")])  # over the cap: the correction is evicted
        assert ids(await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)])) == [rid(ORG, 1), rid(ORG, 2)]

        assert await store.forget(ORG, rid(ORG, 2)) is True

        assert await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)]) == []
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 3)]

    async def test_a_corrected_record_whose_correction_was_erased_can_still_be_forgotten(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        message = "slack:C1:1700000000.000700"
        await store.link_sources(SourceLink("run-7", (ORG,), (message,)))
        await store.write(ORG, [fact("the vault code is quokka")])
        await store.write(ORG, [fact("the vault code is wombat", supersedes=rid(ORG, 1), run="run-7")])
        assert await store.erase_sources([message], "source_deleted") == 1  # the correction only
        assert ids(await store.fetch(ORG, [rid(ORG, 1)])) == [rid(ORG, 1)]  # still shown by id

        assert await store.forget(ORG, rid(ORG, 1)) is True
        assert await store.fetch(ORG, [rid(ORG, 1)]) == []

    async def test_forgetting_an_older_version_forgets_the_record_its_current_version_too(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("the vault code is quokka")])
        await store.write(ORG, [fact("the vault code is wombat", supersedes=rid(ORG, 1))])

        assert await store.forget(ORG, rid(ORG, 1)) is True

        assert await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)]) == []
        assert await store.list(ORG, 10) == []
        assert await store.forget(ORG, rid(ORG, 2)) is False

    async def test_fetch_reads_only_its_own_scope_and_never_bumps_usage(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploy alpha")])
        await store.write(OTHER, [fact("deploy beta")])
        assert await store.fetch(ORG, [rid(OTHER, 1)]) == []
        [record] = await store.fetch(ORG, [rid(ORG, 1), "mem:org:acme:99"])
        assert (record.text, record.use_count, record.last_used_at) == ("deploy alpha", 0, None)
        assert await store.fetch(ORG, []) == []

    async def test_erase_scope_erases_every_record_once_and_counts_them(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        await store.write(OTHER, [fact("prefers tabs"), fact("lives in lisbon")])
        await store.write(OTHER, [fact("prefers spaces", supersedes=rid(OTHER, 1))])
        await store.write(ORG, [fact("prefers tabs")])

        assert await store.erase_scope(OTHER, "user_request") == 3  # superseded rows hold text too
        assert await store.erase_scope(OTHER, "user_request") == 0
        assert await store.list(OTHER, 10) == []
        assert await store.fetch(OTHER, [rid(OTHER, n) for n in (1, 2, 3)]) == []
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 1)]
        assert await store.erase_scope("user:slack:U0NOBODY", "user_request") == 0

    async def test_erase_sources_erases_the_linked_runs_records_in_every_linked_scope_once(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        channel = "channel:slack:C1"
        await store.link_sources(
            SourceLink("run-7", (ORG, channel), ("slack:C1:1.000100", "slack:C1:1.000200"))
        )
        await store.write(
            ORG, [fact("deploys freeze on fridays", run="run-7"), fact("unrelated", run="run-8")]
        )
        await store.write(channel, [fact("this channel is for deploys", run="run-7")])

        assert await store.erase_sources(["slack:C1:1.000200"], "source_deleted") == 2
        assert await store.erase_sources(["slack:C1:1.000200"], "source_deleted") == 0  # redelivered
        assert await store.erase_sources(["slack:C1:9.000000"], "source_deleted") == 0

        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert await store.list(channel, 10) == []
        assert await store.retrieve(ORG, "deploys fridays freeze", 5) == []

    async def test_an_expired_record_is_never_read_and_is_erased_by_the_scopes_next_write(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock, retention=Retention(ttl_days=7))
        await store.write(ORG, [fact("old deploy rule")])
        clock.advance(3 * DAY)
        await store.write(ORG, [fact("new deploy rule")])
        clock.advance(5 * DAY)  # the first is 8 days old, the second 5

        assert ids(await store.retrieve(ORG, "deploy rule", 5)) == [rid(ORG, 2)]
        assert ids(await store.list(ORG, 10)) == [rid(ORG, 2)]
        assert ids(await store.list(ORG, 10, "deploy")) == [rid(ORG, 2)]

        await store.write(ORG, [fact("another rule")])
        assert await store.fetch(ORG, [rid(ORG, 1)]) == []
        assert await store.write(ORG, [fact("old deploy rule")]) == WriteResult(inserted=1)

    async def test_an_expired_record_is_not_fetched_by_id_before_it_is_erased(
        self, make_store: StoreFactory
    ) -> None:
        """*Why?*, the editor and the review reads fetch by id: an expired record is never returned
        by a read there either, though no write has erased it yet."""
        clock = FakeClock()
        store = make_store(clock=clock, retention=Retention(ttl_days=7))
        await store.write(ORG, [fact("the vault code is quokka")])
        clock.advance(3 * DAY)
        await store.write(ORG, [fact("deploy on fridays")])
        clock.advance(5 * DAY)  # the first is 8 days old: expired, and no write has erased it

        assert ids(await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)])) == [rid(ORG, 2)]

    async def test_a_scope_holding_an_expired_record_ranks_alike_in_every_store(
        self, make_store: StoreFactory
    ) -> None:
        """Until its erasure an expired record is never returned, but every store counts it in the
        scope's term statistics the same way (the durable stores' indexes hold every active row, as
        their centroid does): so each store gives the others the same relevance."""
        clock = FakeClock()
        store = make_store(clock=clock, retention=Retention(ttl_days=7))
        await store.write(ORG, [fact("deploy alpha"), fact("deploy beta"), fact("deploy gamma")])
        clock.advance(3 * DAY)
        await store.write(ORG, [fact("deploy billing now"), fact("billing monthly")])
        active = list((await everything(store)).values())
        clock.advance(5 * DAY)  # the first three are 8 days old: expired, not yet erased
        fresh = [record for record in active if record.created_at >= clock() - 7 * DAY]
        query = "deploy billing"
        stats = term_stats(active, stats_stems(DEFAULT_RANKING, query, fresh))
        expected = rank(fresh, query, 5, clock(), DEFAULT_RANKING, stats=stats)

        found = (await store.retrieve_many([ORG], query, 5))[ORG]

        assert ids([r.record for r in found]) == ids([r.record for r in expected])
        assert [r.relevance for r in found] == pytest.approx([r.relevance for r in expected])

    async def test_erase_expired_sweeps_every_scope_with_its_own_ttl(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        channel = "channel:slack:C1"
        store = make_store(clock=clock, retention=Retention(ttl_days=30, scope_ttl_days={channel: 2}))
        await store.write(ORG, [fact("org rule")])
        await store.write(channel, [fact("channel rule")])
        await store.write(OTHER, [fact("user rule")])
        clock.advance(3 * DAY)

        assert await store.erase_expired() == 1
        assert await store.fetch(channel, [rid(channel, 1)]) == []
        assert ids(await store.fetch(ORG, [rid(ORG, 1)])) == [rid(ORG, 1)]
        clock.advance(28 * DAY)
        assert await store.erase_expired() == 2
        assert await store.erase_expired() == 0

    async def test_the_read_audit_answers_by_record_run_user_and_thread_newest_first(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        first = ReadAudit(
            "run-a", "slack:C1:1.0", "slack:U1", (ORG, OTHER), ((rid(ORG, 1), 1), (rid(ORG, 2), 2)), START
        )
        second = ReadAudit("run-b", "slack:C1:1.0", "slack:U2", (ORG,), ((rid(ORG, 2), 1),), START + 10)
        empty = ReadAudit("run-c", "slack:C2:2.0", None, (ORG,), (), START + 20)
        for entry in (first, second, empty):
            await store.record_read(entry)

        assert await store.read_audit(AuditQuery(run_id="run-a")) == [first]
        assert await store.read_audit(AuditQuery(record_id=rid(ORG, 2))) == [second, first]
        assert await store.read_audit(AuditQuery(record_id=rid(ORG, 1))) == [first]
        assert await store.read_audit(AuditQuery(user_id="slack:U2")) == [second]
        assert await store.read_audit(AuditQuery(thread_key="slack:C1:1.0", limit=1)) == [second]
        assert await store.read_audit(AuditQuery(run_id="run-c")) == [empty]
        assert await store.read_audit(AuditQuery(run_id="run-zzz")) == []

    async def test_the_read_audit_keeps_its_rows_only_for_its_retention(
        self, make_store: StoreFactory
    ) -> None:
        clock = FakeClock()
        store = make_store(clock=clock, retention=Retention(audit_days=30))
        await store.record_read(ReadAudit("run-old", "t", "slack:U1", (ORG,), ((rid(ORG, 1), 1),), clock()))
        clock.advance(31 * DAY)
        assert await store.read_audit(AuditQuery(run_id="run-old")) == []
        await store.record_read(ReadAudit("run-new", "t", "slack:U1", (ORG,), ((rid(ORG, 1), 1),), clock()))
        assert [e.run_id for e in await store.read_audit(AuditQuery(record_id=rid(ORG, 1)))] == ["run-new"]


class DatesContract:
    """When each record's conversation happened: kept by every store, and a time phrase in the query
    biases the ranking toward it (the clock is START, a Friday: 2027-01-15 08:00 UTC)."""

    async def test_observed_at_round_trips_through_every_read(self, make_store: StoreFactory) -> None:
        clock = FakeClock()
        store = make_store(clock=clock)
        dated = replace(fact("deploy with make"), observed_at=START - 9 * DAY)
        await store.write(ORG, [dated, fact("deploy from main")])
        clock.advance(60)
        by_id = {r.id: r for r in await store.retrieve(ORG, "deploy", 5)}
        listed = {r.id: r for r in await store.list(ORG, 5)}
        fetched = {r.id: r for r in await store.fetch(ORG, [rid(ORG, 1), rid(ORG, 2)])}
        for found in (by_id, listed, fetched):
            assert found[rid(ORG, 1)].observed_at == START - 9 * DAY
            # a candidate without a time was observed when it was written
            assert found[rid(ORG, 2)].observed_at == found[rid(ORG, 2)].created_at == START
        many = await store.retrieve_many([ORG], "deploy", 5)
        assert {r.record.id: r.record.observed_at for r in many[ORG]} == {
            rid(ORG, 1): START - 9 * DAY,
            rid(ORG, 2): START,
        }

    async def test_a_time_phrase_ranks_the_records_observed_in_its_window_first(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(clock=FakeClock())
        await store.write(
            ORG,
            [
                replace(fact("deploy note alpha"), observed_at=START - 40 * DAY),  # in December
                replace(fact("deploy note beta"), observed_at=START - 8 * DAY),  # last week (Thu)
                replace(fact("deploy note gamma"), observed_at=START - DAY),  # yesterday
            ],
        )
        alpha, beta, gamma = rid(ORG, 1), rid(ORG, 2), rid(ORG, 3)
        assert ids(await store.retrieve(ORG, "deploy note", 5)) == [alpha, beta, gamma]  # write order
        assert ids(await store.retrieve(ORG, "deploy note yesterday", 5))[0] == gamma
        assert ids(await store.retrieve(ORG, "deploy note last week", 5))[0] == beta
        assert ids(await store.retrieve(ORG, "deploy note in December", 5))[0] == alpha
        # the phrase reorders what the query matches; it admits nothing by itself
        assert ids(await store.retrieve(ORG, "what happened yesterday", 5)) == []


class FrontContract:
    """What the store front (memory/stores/front.py) does the same way over every backend: the
    arguments it refuses, the limits it keeps and the events it logs."""

    @pytest.mark.parametrize("bad", BAD_SCOPE_KEYS)
    async def test_a_malformed_scope_key_is_refused_by_every_read_and_erasure(
        self, make_store: StoreFactory, bad: str
    ) -> None:
        store = make_store()
        await store.write(ORG, [fact("deploy on fridays")])
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.retrieve(bad, "deploy", 5),
            lambda: store.retrieve_many([ORG, bad], "deploy", 5),
            lambda: store.list(bad, 5),
            lambda: store.fetch(bad, [rid(ORG, 1)]),
            lambda: store.forget(bad, rid(ORG, 1)),
            lambda: store.erase_scope(bad, "user_request"),
            lambda: store.link_sources(SourceLink(run_id="run-1", scope_keys=(bad,), messages=("m",))),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="scope key"):
                await call()
        assert ids(await store.list(ORG, 5)) == [rid(ORG, 1)]  # nothing was touched

    async def test_reads_return_at_most_max_limit_records(self, make_store: StoreFactory) -> None:
        store = make_store()
        await store.write(ORG, [fact(f"deploy note {n} kept") for n in range(MAX_LIMIT + 5)])
        assert len(await store.list(ORG, 1000)) == MAX_LIMIT
        assert len(await store.list(ORG, 1000, "deploy")) == MAX_LIMIT
        assert len(await store.retrieve(ORG, "deploy note", 1000)) == MAX_LIMIT
        assert await store.list(ORG, -1) == []

    async def test_every_erasure_logs_one_store_event_with_ids_and_counts(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store()
        message = "slack:C1:1700000000.000100"
        await store.link_sources(SourceLink(run_id="run-1", scope_keys=(ORG,), messages=(message,)))
        await store.write(ORG, [fact("deploy on fridays"), fact("the cafe menu"), fact("billing is monthly")])
        await store.write(ORG, [fact("standup at ten", run="run-2")])
        with capture_logs() as logs:
            assert await store.forget(ORG, rid(ORG, 1))
            assert not await store.forget(ORG, rid(OTHER, 1))  # another scope's id: nothing here
            assert await store.erase_sources([message, message], "source_deleted") == 2
            assert await store.erase_scope(ORG, "user_request") == 1
        named = ("memory.store.forget", "memory.store.sources_erased", "memory.store.erased")
        # The store under test's own events: a memory service run in this process logs its store's too.
        mine = getattr(store, "_log_fields", {}).get("store")
        events = [
            (e["event"], {k: v for k, v in e.items() if k not in ("event", "log_level", "store")})
            for e in logs
            if e["event"] in named and e.get("store") == mine
        ]
        assert events == [
            ("memory.store.forget", {"scope_key": ORG, "id": rid(ORG, 1), "forgotten": True}),
            ("memory.store.forget", {"scope_key": ORG, "id": rid(OTHER, 1), "forgotten": False}),
            ("memory.store.sources_erased", {"messages": 1, "reason": "source_deleted", "erased": 2}),
            ("memory.store.erased", {"scope_key": ORG, "reason": "user_request", "erased": 1}),
        ]
        assert not [e for e in logs if e["event"] == "memory.forget"]  # the command's audit event, not ours


class StoreContract(CoreContract, ProvenanceContract, DatesContract, FrontContract):
    """Mix into a `Test…` class that provides `make_store` (a StoreFactory): every behaviour."""
