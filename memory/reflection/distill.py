"""One reflection, step by step: what the extractor is shown, its one call, the parse, the origin
labels, the routing through the write gate, and at most one write per scope.

An extractor failure or a rejected reply writes nothing and resolves: the reply already landed and
a reflection may neither delay nor alter it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import structlog

from memory.reflection.labels import label_candidates, run_label
from memory.reflection.parse import ParsedReflection, parse_reflection
from memory.reflection.prompt import (
    REFLECTION_MAX_TOKENS,
    REFLECTION_SYSTEM,
    SHOWN_RECORDS_PER_SCOPE,
    Extract,
    ExtractionRequest,
    build_reflection_input,
)
from memory.reflection.routing import RoutedCandidate, route_candidates
from memory.reflection.run import ReflectionRun
from memory.rules.scope import is_shared, list_scope_keys, scope_kind
from memory.rules.visibility import Reader, may_show
from memory.rules.write_gate import WriteGate
from memory.stores.contract import MemoryStore
from memory.types import MemoryCandidate, MemoryRecord, SourceLink, WriteResult
from ops.tracing import span

log = structlog.get_logger("memory")

Outcome = Literal["written", "nothing_durable", "rejected", "extract_failed"]


class NotCuratingError(RuntimeError):
    """Review is on but the store cannot hold a record as pending: nothing is written there."""


@dataclass(frozen=True, slots=True)
class ReflectionOutcome:
    outcome: Outcome
    writes: tuple[tuple[str, WriteResult], ...] = ()
    reasons: Mapping[str, int] = field(default_factory=dict)
    routed: tuple[RoutedCandidate, ...] = ()


async def reflect(
    run: ReflectionRun,
    *,
    store: MemoryStore,
    extract: Extract,
    model: str,
    gate: WriteGate,
    review_shared: bool = False,
) -> ReflectionOutcome:
    """Exactly one extractor call, then at most one `store.write` per target scope.

    `review_shared` (`memory.review = "shared"`): what lands in an org, repo or channel scope waits
    there as pending (`write_pending`) until an admin approves it; a user scope is written as ever.
    An extractor failure or a rejected reply writes nothing and resolves; one structlog event per
    reflection with counts and reason tokens, never a fact's text. One `memory.reflection` span with
    the outcome and counts; the extractor call and each write are its children.
    """
    with span("memory.reflection", {"switchboard.run_id": run.run_id}) as reflection_span:
        outcome = await _reflect(
            run, store=store, extract=extract, model=model, gate=gate, review_shared=review_shared
        )
        reflection_span.set_attributes(
            {
                "memory.reflection.outcome": outcome.outcome,
                "memory.written_scopes": len(outcome.writes),
                "memory.denied": sum(1 for item in outcome.routed if item.scope_key is None),
            }
        )
        return outcome


async def _reflect(
    run: ReflectionRun,
    *,
    store: MemoryStore,
    extract: Extract,
    model: str,
    gate: WriteGate,
    review_shared: bool,
) -> ReflectionOutcome:
    scope_keys = list_scope_keys(run.scopes)
    retrieved, shown = await _shown_records(store, run, scope_keys)
    reply = await _ask_extractor(run, shown, extract, model)
    if reply is None:
        return ReflectionOutcome(outcome="extract_failed", reasons={"extract_failed": 1})
    parsed = parse_reflection(
        reply,
        (record.id for record in shown if review_shared or may_retire(record)),
        source_thread_key=run.thread_key,
        source_run_id=run.run_id,
        observed_at=run.observed_at,
    )
    if parsed.error is not None:
        log.warning(
            "memory.reflection",
            outcome="rejected",
            reason=parsed.error,
            run_id=run.run_id,
            thread_key=run.thread_key,
            shown=len(shown),
        )
        return ReflectionOutcome(outcome="rejected", reasons={parsed.error: 1})

    parsed = await label_candidates(parsed, run_label(run, shown), store, scope_keys, retrieved)
    routed = route_candidates(parsed, run.scopes, {record.id: record.scope_key for record in shown}, gate)
    await _link_sources(store, run, scope_keys)
    reasons: Counter[str] = Counter(item.reason for item in routed)
    reasons.update(f"dropped_{reason}" for reason in parsed.dropped)
    writes, failures = await _write_batches(store, scope_keys, routed, review_shared)
    reasons.update(failures)
    outcome: Outcome = "written" if writes else "nothing_durable"
    _log_outcome(run, outcome, len(shown), parsed, routed, writes, reasons, review_shared)
    return ReflectionOutcome(
        outcome=outcome, writes=tuple(writes), reasons=dict(reasons), routed=tuple(routed)
    )


async def _shown_records(
    store: MemoryStore, run: ReflectionRun, scope_keys: Sequence[str]
) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """Every record retrieved from the run's own scopes, and those of them the extractor may see."""
    shown_lists = await asyncio.gather(
        *(store.retrieve(key, run.query, SHOWN_RECORDS_PER_SCOPE) for key in scope_keys)
    )
    retrieved = [
        record
        for key, records in zip(scope_keys, shown_lists, strict=True)
        for record in records
        if record.scope_key == key
    ]
    # The extractor is a reader too: it sees only what this run's reply could show (the read rule).
    reader = run.reader or Reader("public")
    return retrieved, [record for record in retrieved if may_show(record, reader)]


async def _ask_extractor(
    run: ReflectionRun, shown: Sequence[MemoryRecord], extract: Extract, model: str
) -> str | None:
    """The extractor's reply, or None (with one warning) when the call failed."""
    # Redacting a whole transcript is CPU work of milliseconds: off the event loop.
    user_text = await asyncio.to_thread(
        partial(
            build_reflection_input,
            shown,
            run.history,
            run.request,
            run.answer,
            # A reply only the requester reads (their DM with the bot, their terminal): nobody else wrote
            # its earlier turns. Anywhere else any member of the channel may have.
            requester_alone=run.reader is not None and run.reader.audience == "self",
        )
    )
    request = ExtractionRequest(
        model=model,
        system=REFLECTION_SYSTEM,
        user_text=user_text,
        max_tokens=REFLECTION_MAX_TOKENS,
    )
    try:
        return await extract(request)
    except Exception as error:  # one warning; the reply already landed and is untouched
        log.warning(
            "memory.reflection_failed",
            stage="extract",
            error=type(error).__name__,
            run_id=run.run_id,
            thread_key=run.thread_key,
        )
        return None


async def _write_batches(
    store: MemoryStore, scope_keys: Sequence[str], routed: Sequence[RoutedCandidate], review_shared: bool
) -> tuple[list[tuple[str, WriteResult]], Counter[str]]:
    """One write per scope that kept a candidate, in the run's scope order; a failing write is
    counted by its error type and the other scopes still get their facts."""
    batches: dict[str, list[MemoryCandidate]] = {}
    for item in routed:
        if item.scope_key is not None:
            batches.setdefault(item.scope_key, []).append(item.candidate)
    writes: list[tuple[str, WriteResult]] = []
    failures: Counter[str] = Counter()
    for key in scope_keys:
        batch = batches.get(key)
        if not batch:
            continue
        try:
            writes.append((key, await _write(store, key, batch, held=review_shared and held_for_review(key))))
        except Exception as error:  # the other scopes still get their facts
            failures[f"write_failed_{type(error).__name__}"] += 1
    return writes, failures


def _log_outcome(
    run: ReflectionRun,
    outcome: Outcome,
    shown: int,
    parsed: ParsedReflection,
    routed: Sequence[RoutedCandidate],
    writes: Sequence[tuple[str, WriteResult]],
    reasons: Mapping[str, int],
    review_shared: bool,
) -> None:
    """One event per reflection, counts and reason tokens only; a warning when the gate narrowed or
    denied anything or a write failed, since either means a fact did not land where it asked to."""
    gated = sum(1 for item in routed if item.scope_key != item.routed_to)
    event = log.warning if gated or any(r.startswith("write_failed") for r in reasons) else log.info
    event(
        "memory.reflection",
        outcome=outcome,
        run_id=run.run_id,
        thread_key=run.thread_key,
        origin=run.origin_visibility,
        shown=shown,
        facts=len(parsed.facts),
        summary=parsed.summary is not None,
        dropped=len(parsed.dropped),
        narrowed=sum(1 for item in routed if item.scope_key not in (None, item.routed_to)),
        denied=sum(1 for item in routed if item.scope_key is None),
        scopes=[key for key, _ in writes],
        inserted=sum(result.inserted for _, result in writes),
        deduped=sum(result.deduped for _, result in writes),
        superseded=sum(result.superseded for _, result in writes),
        reasons=dict(sorted(reasons.items())),
        **({"pending_scopes": [key for key, _ in writes if held_for_review(key)]} if review_shared else {}),
    )


def may_retire(record: MemoryRecord) -> bool:
    """Whether a reflection's correction may supersede `record` without review: any record a run
    learned, but not one a person put into a shared scope (`memory remember`, the App Home's note: no
    run id), which only people curate — such a correction lands beside it (under review an admin
    approves it, superseding the note)."""
    return not is_shared(record.scope_key) or record.source_run_id is not None


def held_for_review(scope_key: str) -> bool:
    """Under review, what lands here waits for an admin: every shared scope; a person's own never."""
    return is_shared(scope_key)


async def _write(
    store: MemoryStore, scope_key: str, batch: Sequence[MemoryCandidate], *, held: bool
) -> WriteResult:
    """One scope's batch under a `memory.write` span with its counts; `held`: as pending records."""
    attributes: dict[str, str | int] = {
        "memory.scope_kind": scope_kind(scope_key),
        "memory.candidates": len(batch),
    }
    if held:
        attributes["memory.pending"] = 1
    with span("memory.write", attributes) as write_span:
        curating = store.curation() if held else None
        if not held:
            result = await store.write(scope_key, batch)
        elif curating is not None:
            result = await curating.write_pending(scope_key, batch)
        else:  # fail closed: never active in a shared scope without review (start-up refuses this store)
            raise NotCuratingError(f"{type(store).__name__} cannot hold records for review")
        write_span.set_attributes(
            {
                "memory.inserted": result.inserted,
                "memory.deduped": result.deduped,
                "memory.superseded": result.superseded,
                "memory.evicted": result.evicted,
            }
        )
        return result


async def _link_sources(store: MemoryStore, run: ReflectionRun, scope_keys: Sequence[str]) -> None:
    """Before any record lands: which messages this run was distilled from, for every scope it may
    write, so a deleted or edited source message finds the records."""
    if run.run_id is None or not run.source_messages:
        return
    try:
        await store.link_sources(SourceLink(run.run_id, tuple(scope_keys), run.source_messages))
    except Exception as error:  # the facts still land; only their tie to the source is missing
        log.warning("memory.link_sources_failed", run_id=run.run_id, error=type(error).__name__)
