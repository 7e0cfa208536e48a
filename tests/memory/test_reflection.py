"""The reflection pass: gate, extractor prompt and input, output validation, routing, write gate, tracking."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.agent.providers.base import ProviderError
from app.audience import conversation_reader
from app.incoming import HistoryTurn
from app.reflection_hook import provider_extractor
from memory.reflection import (
    MAX_REFLECTION_FACTS,
    REFLECT_MIN_TURNS,
    REFLECTION_MAX_TOKENS,
    REFLECTION_SYSTEM,
    TRANSCRIPT_TAIL_CHARS,
    ParsedReflection,
    ReflectionOutcome,
    ReflectionRun,
    ReflectionTracker,
    build_reflection_input,
    parse_reflection,
    reflect,
    schedule_reflection,
    should_reflect,
)
from memory.rules.scope import RequestScopes
from memory.rules.write_gate import MemoryScopeResource
from memory.types import MemoryCandidate
from tests.memory.records import record
from tests.memory.redact_corpus import SECRET_CASES
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

SLACK_TOKEN = "xoxb-1234567890-abcdefghijklmnop"


def parse(text: str, shown: tuple[str, ...] = ()) -> ParsedReflection:
    return parse_reflection(text, shown, source_thread_key=THREAD, source_run_id=RUN_ID)


def make_run(
    scopes: RequestScopes = SCOPES,
    origin: str | None = "public",
    *,
    query: str = "deploy the api service",
    history: tuple[HistoryTurn, ...] = (),
) -> ReflectionRun:
    """A run in its channel (the scopes' channel id), read by that channel's audience."""
    conversation = scopes.channel.partition(":")[2] if scopes.channel else None
    return ReflectionRun(
        thread_key=THREAD,
        scopes=scopes,
        query=query,
        request=query,
        answer="Deployed with make deploy.",
        history=history,
        run_id=RUN_ID,
        origin_visibility=origin,
        origin_conversation=conversation,
        reader=conversation_reader(origin, user_id="slack:UA", channel_id=conversation),
    )


async def run_reflect(
    reply: str | BaseException,
    *,
    scopes: RequestScopes = SCOPES,
    origin: str | None = "public",
    store: RecordingStore | None = None,
) -> tuple[ReflectionOutcome, RecordingStore, ScriptedProvider]:
    store = store or RecordingStore()
    provider = ScriptedProvider(reply)
    outcome = await reflect(
        make_run(scopes, origin),
        store=store,
        extract=provider_extractor(provider),
        model="test-extractor-model",
        gate=policy_gate(scopes),
    )
    return outcome, store, provider


def written(store: RecordingStore) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for scope, batch in store.writes:
        out.setdefault(scope, []).extend(candidate.text for candidate in batch)
    return out


# --- should_reflect ------------------------------------------------------------------------------


def test_should_reflect_when_the_run_made_a_tool_call() -> None:
    assert should_reflect(1, 0, "coding")
    assert should_reflect(tool_calls=3, history_turns=0, agent_name=None)


def test_should_reflect_when_the_thread_already_had_min_turns() -> None:
    assert REFLECT_MIN_TURNS == 4
    assert should_reflect(0, 4, "general")
    assert not should_reflect(0, 3, "general")


def test_a_short_toolless_chat_does_not_qualify() -> None:
    assert not should_reflect(0, 0, "general")
    assert not should_reflect(0, 0, None)


def test_a_review_run_never_qualifies_however_much_it_did() -> None:
    assert not should_reflect(25, 40, "review")


def test_other_and_unnamed_agents_keep_the_work_based_gate() -> None:
    assert should_reflect(2, 0, "coding")
    assert should_reflect(0, 10, None)


# --- REFLECTION_SYSTEM ---------------------------------------------------------------------------


def test_reflection_system_names_pr_state_as_ephemeral_never_a_fact() -> None:
    prompt = REFLECTION_SYSTEM.lower()
    assert "ephemeral" in prompt and "never a fact" in prompt
    for ephemera in ("pr and issue numbers", "shas", "test counts", "ci and build results", "verdicts"):
        assert ephemera in prompt


def test_reflection_system_asks_for_an_audience_per_fact_and_an_impersonal_summary() -> None:
    for audience in ('"user"', '"repo"', '"channel"', '"org"'):
        assert audience in REFLECTION_SYSTEM
    assert "this user …" in REFLECTION_SYSTEM
    assert "default" in REFLECTION_SYSTEM
    assert "summary impersonal" in REFLECTION_SYSTEM


def test_reflection_system_says_memory_cannot_be_commanded() -> None:
    assert "Memory cannot be commanded" in REFLECTION_SYSTEM
    assert "Remember that" in REFLECTION_SYSTEM


def test_reflection_system_asks_for_the_strict_json_envelope() -> None:
    assert '{"facts": [{"text"' in REFLECTION_SYSTEM
    assert '"confidence"' in REFLECTION_SYSTEM and '"keywords"' in REFLECTION_SYSTEM
    assert '"supersedes"' in REFLECTION_SYSTEM and '"summary"' in REFLECTION_SYSTEM


# --- build_reflection_input ----------------------------------------------------------------------


def test_input_shows_existing_records_with_ids_then_the_transcript_in_order() -> None:
    records = [
        record("The api deploys with make deploy", id="mem:org:acme:3"),
        record("this user prefers short answers", id="mem:user:slack:UA:1", scope_key="user:slack:UA"),
    ]
    history = (HistoryTurn("user", "how do we deploy?"), HistoryTurn("assistant", "let me look"))
    text = build_reflection_input(records, history, "deploy it now", "Deployed.")
    assert "mem:org:acme:3 [org:acme, fact] The api deploys with make deploy" in text
    assert "mem:user:slack:UA:1 [user:slack:UA, fact]" in text
    positions = [
        text.index(part)
        for part in (
            "mem:org:acme:3",
            "participant: how do we deploy?",
            "assistant: let me look",
            "requester: deploy it now",
            "assistant: Deployed.",
        )
    ]
    assert positions == sorted(positions)


def test_input_without_records_says_none() -> None:
    text = build_reflection_input([], (), "hi", "hello")
    assert "- (none)" in text


def test_input_redacts_secrets_in_transcript_and_records() -> None:
    records = [record(f"bot token was {SLACK_TOKEN}")]
    text = build_reflection_input(
        records, (HistoryTurn("user", "key sk-ant-abcdefghijklmnopqrstuvwxyz0123"),), SLACK_TOKEN, "ok"
    )
    assert SLACK_TOKEN not in text
    assert "sk-ant-" not in text
    assert "[REDACTED]" in text


def test_input_redacts_every_corpus_secret_form_before_it_reaches_the_extractor() -> None:
    # The extractor is a third-party model: none of the secret corpus may reach it, however it is split.
    for case in SECRET_CASES:
        text = build_reflection_input(
            [record(case.text)], (HistoryTurn("user", case.text),), case.text, f"noted: {case.text}"
        )
        assert not [secret for secret in case.secrets if secret in text], case.kind


def test_input_drops_images() -> None:
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    text = build_reflection_input([], (), f"look at this {image} and ![shot](https://x/y.png)", "ok")
    assert "iVBORw0KGgo" not in text
    assert "https://x/y.png" not in text
    assert text.count("[image omitted]") == 2


def test_input_is_tail_capped_keeping_the_end_of_the_transcript() -> None:
    history = tuple(HistoryTurn("user", f"turn {i} " + "x" * 500) for i in range(100))
    text = build_reflection_input([], history, "the final request", "the final decision")
    transcript = text.split("Transcript:\n", 1)[1]
    assert len(transcript) <= TRANSCRIPT_TAIL_CHARS + 100
    assert "turn 0 " not in transcript
    assert transcript.endswith("assistant: the final decision")
    assert "earlier transcript omitted" in transcript


def test_input_tail_cap_never_leaves_half_a_secret_behind() -> None:
    # The cut falls inside the token: the secret must be redacted before the transcript is cut.
    answer = "done"
    tail = f"\n\nrequester: req\n\nassistant: {answer}"
    secret = "xoxb-" + "9" * 40
    # The TRANSCRIPT_TAIL_CHARS cut drops "participant: head " and the token's first 10 characters.
    filler = "y" * (TRANSCRIPT_TAIL_CHARS + 10 - len(secret) - len(tail))
    history = (HistoryTurn("user", "head " + secret + filler),)
    text = build_reflection_input([], history, "req", answer)
    assert "9" * 20 not in text


# --- parse_reflection: envelope ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("sure! here are the facts", "not_json"),
        ("", "not_json"),
        ('["a", "b"]', "not_object"),
        ('"facts"', "not_object"),
        ('{"facts": "the api uses make"}', "facts_not_list"),
        ('{"summary": "no facts key"}', "facts_not_list"),
    ],
)
def test_envelope_errors_are_rejected_without_throwing(reply: str, error: str) -> None:
    parsed = parse(reply)
    assert parsed.error == error
    assert parsed.candidates == ()


def test_a_json_fence_is_tolerated() -> None:
    reply = "```json\n" + envelope(fact("The api deploys with make deploy")) + "\n```"
    parsed = parse(reply)
    assert parsed.error is None
    assert [f.candidate.text for f in parsed.facts] == ["The api deploys with make deploy"]


# --- parse_reflection: inside --------------------------------------------------------------------


def test_at_most_five_facts_survive() -> None:
    parsed = parse(envelope(*(fact(f"fact number {i}") for i in range(8))))
    assert MAX_REFLECTION_FACTS == 5
    assert [f.candidate.text for f in parsed.facts] == [f"fact number {i}" for i in range(5)]
    assert parsed.dropped.count("over_limit") == 3


@pytest.mark.parametrize("confidence", [None, "0.9", True, 0.59, 1.01, -1, float("nan"), float("inf")])
def test_confidence_gate_drops_missing_invalid_low_and_above_one(confidence: Any) -> None:
    raw = {"text": "a fact", "confidence": confidence}
    if confidence is None:
        del raw["confidence"]
    parsed = parse(json.dumps({"facts": [raw]}))
    assert parsed.error is None
    assert parsed.facts == ()
    assert parsed.dropped == ("confidence",)


def test_confidence_bounds_are_inclusive() -> None:
    parsed = parse(envelope(fact("low edge", confidence=0.6), fact("high edge", confidence=1)))
    assert [f.candidate.confidence for f in parsed.facts] == [0.6, 1.0]


@pytest.mark.parametrize("text", ["", "   ", None, 42, ["a"]])
def test_empty_or_non_string_text_is_dropped(text: Any) -> None:
    parsed = parse(json.dumps({"facts": [{"text": text, "confidence": 0.9}, "not an object"]}))
    assert parsed.facts == ()
    assert len(parsed.dropped) == 2


def test_keywords_are_normalized_lowercased_trimmed_deduped_and_capped() -> None:
    keywords = ["  Deploy ", "deploy", "CI", "", 7, *(f"k{i}" for i in range(20))]
    parsed = parse(envelope(fact("a fact", keywords=keywords)))
    got = parsed.facts[0].candidate.keywords
    assert got[:2] == ("deploy", "ci")
    assert len(got) == 10


@pytest.mark.parametrize("keywords", ["deploy, ci", {"a": 1}, [], ["", "  "]])
def test_keywords_that_are_not_a_usable_string_list_are_omitted(keywords: Any) -> None:
    parsed = parse(envelope(fact("a fact", keywords=keywords)))
    assert parsed.facts[0].candidate.keywords == ()


def test_supersedes_is_kept_only_when_it_names_a_shown_id() -> None:
    parsed = parse(
        envelope(
            fact("corrected", supersedes="mem:org:acme:1"),
            fact("invented", supersedes="mem:org:acme:99"),
            fact("not a string", supersedes=1),
        ),
        shown=("mem:org:acme:1",),
    )
    assert [f.candidate.supersedes for f in parsed.facts] == ["mem:org:acme:1", None, None]


def test_parse_redacts_secrets_in_fact_text_summary_and_keywords() -> None:
    parsed = parse(
        envelope(
            fact(f"the bot token is {SLACK_TOKEN}", keywords=["ghp_" + "A" * 36, "AKIAABCDEFGHIJKLMNOP"]),
            summary=f"set up the bot with {SLACK_TOKEN}",
        )
    )
    candidate = parsed.facts[0].candidate
    assert SLACK_TOKEN not in candidate.text and "[REDACTED]" in candidate.text
    assert parsed.summary is not None and SLACK_TOKEN not in parsed.summary.candidate.text
    assert all("ghp_" not in k and "akia" not in k for k in candidate.keywords)


def test_parse_stamps_provenance_and_kinds() -> None:
    parsed = parse(envelope(fact("a fact"), summary="the api was deployed"))
    fact_candidate = parsed.facts[0].candidate
    assert parsed.summary is not None
    summary = parsed.summary.candidate
    assert (fact_candidate.kind, summary.kind) == ("fact", "summary")
    for candidate in (fact_candidate, summary):
        assert candidate.source_thread_key == THREAD
        assert candidate.source_run_id == RUN_ID


@pytest.mark.parametrize("summary", ["", "   ", 3, None])
def test_an_empty_or_non_string_summary_is_omitted(summary: Any) -> None:
    parsed = parse(json.dumps({"facts": [], "summary": summary}))
    assert parsed.error is None
    assert parsed.summary is None


# --- parse_reflection: audience ------------------------------------------------------------------


def test_parse_tags_each_fact_with_its_audience_unknown_or_missing_is_org() -> None:
    parsed = parse(
        envelope(
            fact("u", "user"),
            fact("r", "repo"),
            fact("c", "channel"),
            fact("o", "org"),
            fact("x", "everyone"),
            fact("m"),
        )
    )
    # Five survive; the sixth (missing audience) is over the limit.
    assert [f.audience for f in parsed.facts] == ["user", "repo", "channel", "org", "org"]


@pytest.mark.parametrize(
    ("audiences", "expected"),
    [
        (("org", "channel", "repo", "user"), "user"),
        (("org", "channel", "repo"), "repo"),
        (("channel", "org"), "channel"),
        (("org", None), "org"),
        ((), "org"),
    ],
)
def test_summary_inherits_the_narrowest_audience_any_fact_carried(
    audiences: tuple[str | None, ...], expected: str
) -> None:
    parsed = parse(envelope(*(fact(f"fact {i}", a) for i, a in enumerate(audiences)), summary="s"))
    assert parsed.summary is not None and parsed.summary.audience == expected


def test_audience_tags_are_not_part_of_the_stored_candidate() -> None:
    parsed = parse(envelope(fact("this user likes tabs", "user")))
    assert isinstance(parsed.facts[0].candidate, MemoryCandidate)
    assert not hasattr(parsed.facts[0].candidate, "audience")


# --- reflect: one extractor call → store.write ---------------------------------------------------


async def test_reflect_makes_exactly_one_model_call_with_the_extractor_prompt_and_no_tools() -> None:
    _, _, provider = await run_reflect(envelope(fact("The api deploys with make deploy")))
    assert len(provider.requests) == 1
    request = provider.requests[0]
    assert request.model == "test-extractor-model"
    assert request.system == REFLECTION_SYSTEM
    assert request.tools == ()
    assert request.max_tokens == REFLECTION_MAX_TOKENS == 1024
    assert len(request.messages) == 1 and request.messages[0].role == "user"
    assert "requester: deploy the api service" in request.messages[0].text


async def test_reflect_shows_existing_records_of_every_scope_with_ids() -> None:
    store = RecordingStore()
    for scope in ("org:acme", "repo:acme/api", "channel:slack:C1", "user:slack:UA", "user:slack:UB"):
        await store.write(
            scope, [MemoryCandidate("fact", f"deploy notes for {scope}", "t0", origin="public")]
        )
    store.writes.clear()
    _, _, provider = await run_reflect(envelope(), store=store)
    shown = provider.requests[0].messages[0].text
    for scope in ("org:acme", "repo:acme/api", "channel:slack:C1", "user:slack:UA"):
        assert f"mem:{scope}:1 [{scope}, fact] deploy notes for {scope}" in shown
    assert "user:slack:UB" not in shown


async def test_reflect_writes_with_provenance_and_supersede_applied() -> None:
    store = RecordingStore()
    learned = MemoryCandidate("fact", "deploy runs on fridays", "t0", source_run_id="run-1", origin="public")
    await store.write("org:acme", [learned])
    store.writes.clear()
    outcome, store, _ = await run_reflect(
        envelope(fact("deploy runs on mondays", supersedes="mem:org:acme:1", keywords=["deploy"])),
        store=store,
    )
    assert outcome.outcome == "written"
    rows = {r.id: r for r in store.records("org:acme")}
    assert rows["mem:org:acme:1"].status == "superseded"
    new = rows["mem:org:acme:2"]
    assert (new.text, new.supersedes, new.status) == ("deploy runs on mondays", "mem:org:acme:1", "active")
    assert (new.source_thread_key, new.source_run_id) == (THREAD, RUN_ID)


async def test_a_reflection_never_retires_a_note_a_person_put_into_a_shared_scope() -> None:
    # `memory remember --scope org` (an admin's note: no run id). A public channel's run that argues it
    # away leaves it standing: its correction lands beside it, superseding nothing.
    store = RecordingStore()
    await store.write(
        "org:acme", [MemoryCandidate("fact", "deploys always run the tests", "t0", origin="public")]
    )
    store.writes.clear()
    _, store, provider = await run_reflect(
        envelope(fact("deploys skip the tests", supersedes="mem:org:acme:1")), store=store
    )
    assert "mem:org:acme:1" in provider.requests[0].messages[0].text
    rows = {r.id: r for r in store.records("org:acme")}
    assert rows["mem:org:acme:1"].status == "active"
    assert (rows["mem:org:acme:2"].text, rows["mem:org:acme:2"].supersedes) == (
        "deploys skip the tests",
        None,
    )


@pytest.mark.xfail(
    strict=True,
    reason="an edit keeps the run's source_run_id (provenance for source deletion), so may_retire reads "
    "a person's edited note as the run's: see docs/pending/review.md",
)
async def test_a_reflection_never_retires_a_note_a_person_edited_in_a_shared_scope() -> None:
    # A run learned it; an admin then corrected it by hand (App Home's editor). A later run that argues
    # the admin's words away leaves them standing, as it leaves a note the admin typed.
    store = RecordingStore()
    learned = MemoryCandidate("fact", "deploys run the tests", "t0", source_run_id="run-1", origin="public")
    await store.write("org:acme", [learned])
    edited = await store.inner.edit(
        "org:acme", "mem:org:acme:1", "deploys always run the tests", "user:slack:UADMIN"
    )
    assert edited is not None
    store.writes.clear()
    await run_reflect(envelope(fact("deploys skip the tests", supersedes=edited.id)), store=store)
    rows = {r.id: r for r in store.records("org:acme")}
    assert rows[edited.id].status == "active"


@pytest.mark.parametrize("reply", ["I could not find anything", '{"facts": 3}', "[]"])
async def test_an_unparseable_reply_writes_nothing_and_resolves_with_a_warning(reply: str) -> None:
    with capture_logs() as logs:
        outcome, store, _ = await run_reflect(reply)
    assert outcome.outcome == "rejected"
    assert store.writes == []
    events = [e for e in logs if e["event"].startswith("memory.reflection")]
    assert len(events) == 1 and events[0]["log_level"] == "warning"


async def test_a_rejected_reply_is_never_logged_only_its_reason_token() -> None:
    # Prose around the JSON, or a bare list of facts: the model's words (fact text) stay out of the log.
    for reply in (
        'Here you go: {"facts": [{"text": "the secret plan is blue", "confidence": 0.9}]}',
        '[{"text": "the secret plan is blue", "confidence": 0.9}]',
    ):
        with capture_logs() as logs:
            outcome, store, _ = await run_reflect(reply)
        assert outcome.outcome == "rejected" and store.writes == []
        (event,) = logs
        assert event["event"] == "memory.reflection" and event["reason"] in ("not_json", "not_object")
        assert "blue" not in repr(event) and "secret plan" not in repr(event)


async def test_a_provider_failure_writes_nothing_and_is_one_warning() -> None:
    with capture_logs() as logs:
        outcome, store, provider = await run_reflect(ProviderError("529 overloaded: secret detail"))
    assert outcome.outcome == "extract_failed"
    assert store.writes == []
    assert len(provider.requests) == 1
    assert [e["event"] for e in logs] == ["memory.reflection_failed"]
    assert logs[0]["log_level"] == "warning" and logs[0]["error"] == "ProviderError"
    assert "secret detail" not in repr(logs)


async def test_nothing_durable_means_no_write_at_all() -> None:
    outcome, store, _ = await run_reflect(envelope(fact("too unsure", confidence=0.3), summary="  "))
    assert outcome.outcome == "nothing_durable"
    assert store.writes == []


async def test_one_store_write_per_target_scope() -> None:
    _, store, _ = await run_reflect(
        envelope(
            fact("shared fact one"),
            fact("this user likes tabs", "user"),
            fact("shared fact two"),
            fact("this user uses vim", "user"),
        )
    )
    assert [scope for scope, _ in store.writes] == ["org:acme", "user:slack:UA"]


async def test_the_reflection_event_carries_counts_and_never_fact_text() -> None:
    with capture_logs() as logs:
        await run_reflect(envelope(fact("the api deploys with make deploy"), summary="deploy explained"))
    (event,) = [e for e in logs if e["event"] == "memory.reflection"]
    assert event["inserted"] == 2 and event["facts"] == 1 and event["summary"] is True
    assert "make deploy" not in repr(event) and "deploy explained" not in repr(event)


# --- reflect: user scope routing -----------------------------------------------------------------


async def test_user_facts_go_to_the_users_scope_and_org_facts_to_org() -> None:
    _, store, _ = await run_reflect(
        envelope(fact("the api deploys with make deploy", "org"), fact("this user prefers tabs", "user"))
    )
    assert written(store) == {
        "org:acme": ["the api deploys with make deploy"],
        "user:slack:UA": ["this user prefers tabs"],
    }


async def test_the_summary_follows_the_user_scope_when_any_fact_is_user() -> None:
    _, store, _ = await run_reflect(
        envelope(fact("shared fact"), fact("this user prefers tabs", "user"), summary="set up the editor")
    )
    assert "set up the editor" in written(store)["user:slack:UA"]
    assert "set up the editor" not in written(store)["org:acme"]


async def test_the_summary_stays_in_org_without_a_narrower_fact() -> None:
    _, store, _ = await run_reflect(envelope(fact("shared fact"), summary="explained deploys"))
    assert written(store) == {"org:acme": ["shared fact", "explained deploys"]}


async def test_without_a_user_scope_user_facts_fall_back_to_org() -> None:
    scopes = RequestScopes(org="org:acme")
    _, store, _ = await run_reflect(envelope(fact("this user prefers tabs", "user")), scopes=scopes)
    assert written(store) == {"org:acme": ["this user prefers tabs"]}


async def test_a_supersede_lands_in_the_superseded_records_scope_even_when_mislabeled() -> None:
    store = RecordingStore()
    by_hand = MemoryCandidate("fact", "this user runs the api deploy by hand", "t0", origin="public")
    await store.write("user:slack:UA", [by_hand])
    store.writes.clear()
    _, store, _ = await run_reflect(
        envelope(fact("this user deploys with make", "org", supersedes="mem:user:slack:UA:1")),
        store=store,
    )
    assert written(store) == {"user:slack:UA": ["this user deploys with make"]}
    assert store.records("user:slack:UA")[0].status == "superseded"


async def test_a_scope_the_request_did_not_name_is_never_written() -> None:
    other = RecordingStore()
    await other.write("user:slack:UB", [MemoryCandidate("fact", "deploy notes of B", "t0", origin="public")])
    other.writes.clear()
    # The extractor names B's record id: it was never shown, so the supersede is dropped.
    _, store, _ = await run_reflect(
        envelope(fact("this user deploys", "user", supersedes="mem:user:slack:UB:1")), store=other
    )
    assert set(written(store)) == {"user:slack:UA"}
    assert store.records("user:slack:UB")[0].status == "active"


# --- reflect: repo / channel routing -------------------------------------------------------------


async def test_repo_and_channel_facts_go_to_those_scopes_when_the_run_has_them() -> None:
    _, store, _ = await run_reflect(
        envelope(fact("the api uses ruff", "repo"), fact("this channel is for deploys", "channel"))
    )
    assert written(store) == {
        "repo:acme/api": ["the api uses ruff"],
        "channel:slack:C1": ["this channel is for deploys"],
    }


async def test_repo_and_channel_facts_fall_back_to_org_when_the_run_lacks_them() -> None:
    scopes = RequestScopes(org="org:acme", user="user:slack:UA")
    _, store, _ = await run_reflect(
        envelope(fact("the api uses ruff", "repo"), fact("this channel is for deploys", "channel")),
        scopes=scopes,
    )
    assert written(store) == {"org:acme": ["the api uses ruff", "this channel is for deploys"]}


@pytest.mark.parametrize(
    ("audiences", "scope"),
    [(("repo", "channel", "org"), "repo:acme/api"), (("channel", "org"), "channel:slack:C1")],
)
async def test_the_summary_inherits_repo_then_channel(audiences: tuple[str, ...], scope: str) -> None:
    _, store, _ = await run_reflect(
        envelope(*(fact(f"fact {a}", a) for a in audiences), summary="the summary")
    )
    assert "the summary" in written(store)[scope]


# --- reflect: the write gate ---------------------------------------------------------------------


async def test_dm_origin_org_fact_is_narrowed_to_the_users_scope_summary_included() -> None:
    _, store, _ = await run_reflect(
        envelope(fact("the api deploys with make deploy"), summary="deploys explained"), origin="dm"
    )
    assert written(store) == {"user:slack:UA": ["the api deploys with make deploy", "deploys explained"]}


async def test_mpim_counts_as_a_dm() -> None:
    _, store, _ = await run_reflect(envelope(fact("shared fact")), origin="mpim")
    assert written(store) == {"user:slack:UA": ["shared fact"]}


async def test_private_origin_org_fact_is_narrowed_to_the_channel() -> None:
    _, store, _ = await run_reflect(envelope(fact("shared fact"), summary="s"), origin="private")
    assert written(store) == {"channel:slack:C1": ["shared fact", "s"]}


@pytest.mark.parametrize("origin", [None, "something-new"])
async def test_unknown_origin_org_fact_is_narrowed_to_the_user_who_alone_may_read_it(
    origin: str | None,
) -> None:
    """An unknown origin is read as a DM (its owner alone): a channel scope has no owner to show it to."""
    _, store, _ = await run_reflect(envelope(fact("shared fact"), summary="s"), origin=origin)
    assert written(store) == {"user:slack:UA": ["shared fact", "s"]}


async def test_private_origin_without_a_channel_narrows_to_the_user() -> None:
    scopes = RequestScopes(org="org:acme", user="user:slack:UA")
    _, store, _ = await run_reflect(envelope(fact("shared fact")), scopes=scopes, origin="private")
    assert written(store) == {"user:slack:UA": ["shared fact"]}


async def test_a_dm_fact_is_never_written_to_a_channel_scope_even_without_a_user() -> None:
    """A DM has no shared scope: with no user scope to narrow to, its fact is dropped, not shared."""
    scopes = RequestScopes(org="org:acme", channel="channel:slack:C1")
    outcome, store, _ = await run_reflect(
        envelope(fact("shared fact"), fact("chan fact", "channel")), scopes=scopes, origin="dm"
    )
    assert store.writes == [] and outcome.outcome == "nothing_durable"


async def test_a_fact_that_can_be_written_nowhere_is_dropped_and_counted() -> None:
    scopes = RequestScopes(org="org:acme")
    with capture_logs() as logs:
        outcome, store, _ = await run_reflect(envelope(fact("shared fact")), scopes=scopes, origin="private")
    assert store.writes == []
    assert outcome.outcome == "nothing_durable"
    (event,) = [e for e in logs if e["event"] == "memory.reflection"]
    assert event["denied"] == 1
    assert event["reasons"] == {"denied_private_org_no_narrower_scope": 1}


@pytest.mark.parametrize("origin", ["dm", "private", None])
async def test_a_narrowed_write_never_lands_in_repo_or_org(origin: str | None) -> None:
    _, store, _ = await run_reflect(
        envelope(fact("org fact"), fact("repo fact", "repo"), summary="s"), origin=origin
    )
    assert not {"org:acme", "repo:acme/api"} & set(written(store))


@pytest.mark.parametrize("origin", ["public", "machine"])
async def test_public_and_machine_origins_keep_the_routing(origin: str) -> None:
    _, store, _ = await run_reflect(
        envelope(
            fact("org fact"),
            fact("repo fact", "repo"),
            fact("chan fact", "channel"),
            fact("this user fact", "user"),
        ),
        origin=origin,
    )
    assert written(store) == {
        "org:acme": ["org fact"],
        "repo:acme/api": ["repo fact"],
        "channel:slack:C1": ["chan fact"],
        "user:slack:UA": ["this user fact"],
    }


@pytest.mark.parametrize("origin", ["public", "private"])
async def test_user_and_channel_facts_are_never_widened(origin: str | None) -> None:
    _, store, _ = await run_reflect(
        envelope(fact("this user fact", "user"), fact("chan fact", "channel")), origin=origin
    )
    assert written(store) == {"channel:slack:C1": ["chan fact"], "user:slack:UA": ["this user fact"]}


@pytest.mark.parametrize("origin", ["dm", None])
async def test_a_channel_fact_of_an_owner_only_origin_goes_to_the_owner(origin: str | None) -> None:
    _, store, _ = await run_reflect(
        envelope(fact("this user fact", "user"), fact("chan fact", "channel")), origin=origin
    )
    assert written(store) == {"user:slack:UA": ["this user fact", "chan fact"]}


async def test_a_narrowed_correction_drops_its_supersedes() -> None:
    store = RecordingStore()
    await store.write(
        "org:acme", [MemoryCandidate("fact", "the api deploy runs on fridays", "t0", origin="public")]
    )
    store.writes.clear()
    _, store, provider = await run_reflect(
        envelope(fact("the api deploy runs on mondays", supersedes="mem:org:acme:1")),
        store=store,
        origin="dm",
    )
    assert "mem:org:acme:1" in provider.requests[0].messages[0].text
    ((scope, (candidate,)),) = store.writes
    assert scope == "user:slack:UA" and candidate.supersedes is None
    assert store.records("org:acme")[0].status == "active"


async def test_gate_denials_are_one_line_of_reason_tokens_never_fact_text() -> None:
    with capture_logs() as logs:
        await run_reflect(
            envelope(
                fact("the secret plan is blue"),
                fact("this user likes green", "user"),
                summary="talked colours",
            ),
            origin="dm",
        )
    events = [e for e in logs if e["event"].startswith("memory.")]
    assert len(events) == 1
    (event,) = events
    assert event["event"] == "memory.reflection" and event["log_level"] == "warning"
    # The summary inherits the user audience, so only the org fact needed narrowing.
    assert event["narrowed"] == 1
    assert event["reasons"] == {"granted": 2, "narrowed_dm_org_to_user": 1}
    assert "blue" not in repr(event) and "green" not in repr(event) and "colours" not in repr(event)


async def test_a_gate_narrowing_outside_the_runs_scopes_is_refused() -> None:
    class Rogue:
        allowed = True
        reason = "rogue"
        narrowed_to = "user:slack:UB"

    store = RecordingStore()
    provider = ScriptedProvider(envelope(fact("shared fact")))

    def gate(resource: MemoryScopeResource) -> Rogue:
        return Rogue()

    outcome = await reflect(
        make_run(), store=store, extract=provider_extractor(provider), model="m", gate=gate
    )
    assert store.writes == []
    assert outcome.reasons == {"narrowed_outside_run": 1}


async def test_the_gate_is_asked_with_the_routed_scope_and_the_origin() -> None:
    asked: list[MemoryScopeResource] = []
    base = policy_gate(SCOPES)

    def gate(resource: MemoryScopeResource) -> Any:
        asked.append(resource)
        return base(resource)

    provider = ScriptedProvider(envelope(fact("org fact"), fact("this user fact", "user")))
    await reflect(
        make_run(origin="dm"),
        store=RecordingStore(),
        extract=provider_extractor(provider),
        model="m",
        gate=gate,
    )
    assert asked == [
        MemoryScopeResource("org:acme", "org", "dm", origin_conversation="slack:C1"),
        MemoryScopeResource("user:slack:UA", "user", "dm", origin_conversation="slack:C1"),
    ]


# --- tracking, scheduling, drain -----------------------------------------------------------------


async def test_schedule_returns_at_once_and_pending_counts_until_the_reflection_settles() -> None:
    release = asyncio.Event()
    provider = ScriptedProvider(envelope(fact("shared fact")), gate=release)
    store = RecordingStore()
    tracker = ReflectionTracker()
    task = schedule_reflection(
        tracker,
        make_run(),
        store=store,
        extract=provider_extractor(provider),
        model="m",
        gate=policy_gate(SCOPES),
    )
    assert tracker.pending_reflection_count == 1
    await asyncio.sleep(0)
    assert store.writes == [] and not task.done()
    release.set()
    assert await tracker.drain(5) == 0
    assert tracker.pending_reflection_count == 0
    assert written(store) == {"org:acme": ["shared fact"]}


async def test_a_failing_reflection_is_one_warning_and_still_settles_the_count() -> None:
    class BrokenStore(RecordingStore):
        async def retrieve(self, scope_key: str, query: str, limit: int) -> list[Any]:
            raise RuntimeError("store down: do not log me")

    tracker = ReflectionTracker()
    provider = ScriptedProvider(envelope(fact("shared fact")))
    with capture_logs() as logs:
        task = schedule_reflection(
            tracker,
            make_run(),
            store=BrokenStore(),
            extract=provider_extractor(provider),
            model="m",
            gate=policy_gate(SCOPES),
        )
        assert await tracker.drain(5) == 0
    assert task.result() is None
    assert [(e["event"], e["log_level"]) for e in logs] == [("memory.reflection_failed", "warning")]
    assert "do not log me" not in repr(logs)
    assert provider.requests == []


async def test_drain_gives_up_at_the_deadline_and_reports_what_is_pending() -> None:
    never = asyncio.Event()
    tracker = ReflectionTracker()
    schedule_reflection(
        tracker,
        make_run(),
        store=RecordingStore(),
        extract=provider_extractor(ScriptedProvider(envelope(), gate=never)),
        model="m",
        gate=policy_gate(SCOPES),
    )
    assert await tracker.drain(0.05) == 1
    never.set()
    assert await tracker.drain(5) == 0


async def test_drain_waits_for_reflections_scheduled_while_draining() -> None:
    tracker = ReflectionTracker()
    store = RecordingStore()
    first_release = asyncio.Event()

    async def extract_then_schedule(request: Any) -> str:
        await first_release.wait()
        schedule_reflection(
            tracker,
            replace(make_run(), run_id="run-2"),
            store=store,
            extract=provider_extractor(ScriptedProvider(envelope(fact("second fact")))),
            model="m",
            gate=policy_gate(SCOPES),
        )
        return envelope(fact("first fact"))

    schedule_reflection(
        tracker,
        make_run(),
        store=store,
        extract=extract_then_schedule,
        model="m",
        gate=policy_gate(SCOPES),
    )
    first_release.set()
    assert await tracker.drain(5) == 0
    assert sorted(written(store)["org:acme"]) == ["first fact", "second fact"]


# --- origin labels: reflection cannot launder (issue 14) -------------------------------------------

DM_FACT = "this user is interviewing at another company"


async def store_with_a_dm_fact() -> RecordingStore:
    store = RecordingStore()
    learned = MemoryCandidate("fact", DM_FACT, "slack:D1:1.0", origin="dm", origin_conversation="slack:D1")
    await store.write("user:slack:UA", [learned])
    store.writes.clear()
    return store


async def test_every_candidate_inherits_the_runs_origin_label() -> None:
    _, store, _ = await run_reflect(
        envelope(fact("the api deploys with make ship"), fact("this user likes tabs", "user"), summary="s"),
        origin="private",
    )
    labels = {(c.text, c.origin, c.origin_conversation) for _, batch in store.writes for c in batch}
    assert labels == {
        ("the api deploys with make ship", "private", "slack:C1"),
        ("this user likes tabs", "private", "slack:C1"),
        ("s", "private", "slack:C1"),
    }


async def test_an_unstamped_run_labels_its_candidates_unknown() -> None:
    _, store, _ = await run_reflect(envelope(fact("this user likes tabs", "user")), origin=None)
    ((_, (candidate,)),) = store.writes
    assert candidate.origin == "unknown"


async def test_the_extractor_of_a_public_run_is_not_shown_the_users_dm_records() -> None:
    store = await store_with_a_dm_fact()
    provider = ScriptedProvider(envelope())
    await reflect(
        make_run(origin="public", query="is this user interviewing"),
        store=store,
        extract=provider_extractor(provider),
        model="m",
        gate=policy_gate(SCOPES),
    )
    assert "interviewing at another company" not in provider.requests[0].messages[0].text


async def test_the_extractor_of_the_users_dm_run_is_shown_them() -> None:
    store = await store_with_a_dm_fact()
    scopes = RequestScopes(org="org:acme", channel="channel:slack:D1", user="user:slack:UA")
    provider = ScriptedProvider(envelope())
    await reflect(
        make_run(scopes, origin="dm", query="is this user interviewing"),
        store=store,
        extract=provider_extractor(provider),
        model="m",
        gate=policy_gate(scopes),
    )
    assert DM_FACT in provider.requests[0].messages[0].text


@pytest.mark.parametrize("audience", ["org", "channel", "repo", None])
async def test_a_dm_fact_re_emitted_from_a_public_run_is_narrowed_to_the_user_never_widened(
    audience: str | None,
) -> None:
    store = await store_with_a_dm_fact()
    outcome, store, _ = await run_reflect(
        envelope(fact(DM_FACT.upper(), audience)), store=store, origin="public"
    )
    assert set(written(store)) <= {"user:slack:UA"}
    for scope in ("org:acme", "repo:acme/api", "channel:slack:C1"):
        assert store.records(scope) == []
    (kept,) = store.records("user:slack:UA")  # the restatement dedups into the DM record
    assert (kept.origin, kept.origin_conversation, kept.use_count) == ("dm", "slack:D1", 1)
    assert outcome.routed[0].scope_key == "user:slack:UA"


@pytest.mark.parametrize(
    "restated",
    [
        DM_FACT + "!",
        f"**{DM_FACT}!**",
        f"`{DM_FACT}`",
        f"_{DM_FACT}_.",
        "This user is interviewing — at another company!!",
        "  THIS   user is\ninterviewing at another\u200b company  ",
        "This user is *interviewing* at another company; ",
    ],
)
async def test_a_restatement_differing_only_in_punctuation_or_markup_takes_the_narrower_label(
    restated: str,
) -> None:
    """Issue 23: appending "!" to a DM record's text let the restatement into a public scope."""
    store = await store_with_a_dm_fact()
    outcome, store, _ = await run_reflect(envelope(fact(restated, "org")), store=store, origin="public")
    for scope in ("org:acme", "repo:acme/api", "channel:slack:C1"):
        assert store.records(scope) == []
    ((scope, (candidate,)),) = store.writes
    assert (scope, candidate.origin, candidate.origin_conversation) == ("user:slack:UA", "dm", "slack:D1")
    assert outcome.routed[0].reason == "narrowed_dm_org_to_user"


async def test_a_fact_that_only_shares_words_with_a_dm_record_keeps_the_runs_label() -> None:
    """The same words in another order, or one word changed, are not a restatement by bytes-after-
    normalization: a public fact about something else is not narrowed because it looks alike."""
    store = await store_with_a_dm_fact()
    _, store, _ = await run_reflect(
        envelope(fact("this user is interviewing at another company's office", "org")),
        store=store,
        origin="public",
    )
    assert [r.text for r in store.records("org:acme")] == [
        "this user is interviewing at another company's office"
    ]


async def test_a_private_channel_fact_re_emitted_in_a_public_channel_stays_out_of_its_scope() -> None:
    store = RecordingStore()
    learned = MemoryCandidate(
        "fact", "the merger closes in march", "slack:G1:1.0", origin="private", origin_conversation="slack:G1"
    )
    await store.write("user:slack:UA", [learned])
    store.writes.clear()
    _, store, _ = await run_reflect(envelope(fact("The merger closes in March", "channel")), store=store)
    assert store.records("channel:slack:C1") == [] and store.records("org:acme") == []
    (kept,) = store.records("user:slack:UA")
    assert (kept.origin, kept.origin_conversation) == ("private", "slack:G1")


async def test_a_restatement_found_only_by_the_lookup_is_narrowed_too() -> None:
    """The dm record shares no token with the run's query, so only the per-candidate lookup finds it."""
    store = await store_with_a_dm_fact()
    _, store, _ = await run_reflect(
        envelope(fact(DM_FACT, "org")), store=store
    )  # query: "deploy the api service"
    assert store.records("org:acme") == []


TERMINAL = RequestScopes(org="org:acme", user="user:slack:UA")  # a terminal chat: no channel, no repo


async def test_a_terminal_run_shown_a_dm_record_writes_its_paraphrase_like_a_dm() -> None:
    """REVIEW2 #4: `machine` reads like the owner's DM, so what it learns from one stays the owner's."""
    store = await store_with_a_dm_fact()
    provider = ScriptedProvider(envelope(fact("UA has a job interview elsewhere", "org")))
    await reflect(
        make_run(TERMINAL, origin="machine", query="is this user interviewing"),
        store=store,
        extract=provider_extractor(provider),
        model="m",
        gate=policy_gate(TERMINAL),
    )
    assert DM_FACT in provider.requests[0].messages[0].text  # shown it
    assert store.records("org:acme") == []
    written_here = [c for _, batch in store.writes for c in batch]
    assert [(c.text, c.origin) for c in written_here] == [("UA has a job interview elsewhere", "dm")]
    assert [scope for scope, _ in store.writes] == ["user:slack:UA"]


async def test_a_run_whose_memory_block_held_a_dm_record_writes_no_wider_than_it() -> None:
    """The memory block counts as shown too, even when the extractor's own lookup did not find it."""
    run = replace(make_run(TERMINAL, origin="machine"), shown_labels=(("dm", "slack:D1"),))
    store = RecordingStore()
    await reflect(
        run,
        store=store,
        extract=provider_extractor(ScriptedProvider(envelope(fact("the deploy is on fridays", "org")))),
        model="m",
        gate=policy_gate(TERMINAL),
    )
    assert store.records("org:acme") == []
    ((scope, (candidate,)),) = store.writes
    assert (scope, candidate.origin, candidate.origin_conversation) == ("user:slack:UA", "dm", "slack:D1")


class FailingListStore(RecordingStore):
    async def list(self, scope_key: str, limit: int, query: str | None = None) -> list[Any]:
        raise OSError("list is down")


async def test_a_failed_restatement_lookup_labels_the_candidate_unknown_and_narrows_it() -> None:
    with capture_logs() as logs:
        _, store, _ = await run_reflect(envelope(fact("some org fact")), store=FailingListStore())
    assert written(store) == {"user:slack:UA": ["some org fact"]}
    ((_, (candidate,)),) = store.writes
    assert candidate.origin == "unknown"
    assert any(e["event"] == "memory.reflection_lookup_failed" for e in logs)


async def test_a_supersede_cannot_name_a_record_the_extractor_was_not_shown() -> None:
    store = await store_with_a_dm_fact()
    reply = envelope(fact("this user stopped interviewing", "org", supersedes="mem:user:slack:UA:1"))
    _, store, _ = await run_reflect(reply, store=store)
    (dm,) = [r for r in store.records("user:slack:UA") if r.text == DM_FACT]
    assert dm.status == "active"


async def test_a_fact_from_one_private_channel_restated_in_another_keeps_its_first_channel() -> None:
    store = RecordingStore()
    learned = MemoryCandidate(
        "fact", "the merger closes in march", "slack:G1:1.0", origin="private", origin_conversation="slack:G1"
    )
    await store.write("user:slack:UA", [learned])
    store.writes.clear()
    g2 = RequestScopes(org="org:acme", channel="channel:slack:G2", user="user:slack:UA")
    _, store, _ = await run_reflect(
        envelope(fact("the merger closes in March", "channel")), scopes=g2, origin="private", store=store
    )
    assert store.records("channel:slack:G2") == []
    (kept,) = store.records("user:slack:UA")
    assert (kept.origin, kept.origin_conversation) == ("private", "slack:G1")
