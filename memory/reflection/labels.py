"""Origin labels: where what a run learned came from, so the write gate can keep it from landing wider.

A candidate is labelled no wider than its run, than anything the run was shown, and than any record it
restates: a fact learned in a DM or a private channel cannot be laundered wider by re-emitting it
from a public run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import structlog

from memory.reflection.parse import ParsedReflection
from memory.reflection.run import ReflectionRun
from memory.rules.restate import meaning_key
from memory.rules.visibility import narrower, origin_from_visibility
from memory.stores.contract import MemoryStore
from memory.types import MAX_LIMIT, MemoryCandidate, MemoryRecord, Origin

log = structlog.get_logger("memory")

Label = tuple[Origin, str | None]


def run_label(run: ReflectionRun, shown: Sequence[MemoryRecord]) -> Label:
    """The run's origin label, no wider than the narrowest origin of what it was shown (the extractor's
    records and its memory block): a run that read a dm record writes like a DM, whatever its surface
    (a terminal chat is `machine`, but a paraphrase of the owner's DM fact is not)."""
    label: Label = (origin_from_visibility(run.origin_visibility), run.origin_conversation)
    for seen in (*((record.origin, record.origin_conversation) for record in shown), *run.shown_labels):
        label = narrower(label, seen)
    return label


async def label_candidates(
    parsed: ParsedReflection,
    own: Label,
    store: MemoryStore,
    scope_keys: Sequence[str],
    retrieved: Sequence[MemoryRecord],
) -> ParsedReflection:
    """Every candidate inherits the run's origin label (`run_label`) — or the narrower label of a
    record of the run's scopes it restates (the same `meaning_key`: case, punctuation, markup and
    spacing aside), so a fact learned in a DM or a private channel cannot be laundered wider by
    re-emitting it, restyled, from a public run. The gate then narrows by it."""
    if not parsed.candidates:
        return parsed
    labels = await asyncio.gather(
        *(
            _restated_label(tagged.candidate, own, store, scope_keys, retrieved)
            for tagged in parsed.candidates
        )
    )
    relabelled = [
        replace(tagged, candidate=replace(tagged.candidate, origin=label[0], origin_conversation=label[1]))
        for tagged, label in zip(parsed.candidates, labels, strict=True)
    ]
    facts = tuple(relabelled[: len(parsed.facts)])
    summary = relabelled[len(parsed.facts)] if parsed.summary is not None else None
    return replace(parsed, facts=facts, summary=summary)


async def _restated_label(
    candidate: MemoryCandidate,
    own: Label,
    store: MemoryStore,
    scope_keys: Sequence[str],
    retrieved: Sequence[MemoryRecord],
) -> Label:
    """The narrowest label among the run's and every record's it restates (a record's on a tie); a lookup
    that fails cannot rule a restatement out, so the candidate is labelled `unknown` (read as dm)."""
    key = meaning_key(candidate.text)
    try:
        listed = await asyncio.gather(
            *(store.list(key, MAX_LIMIT, query=candidate.text) for key in scope_keys)
        )
    except Exception as error:
        log.warning("memory.reflection_lookup_failed", error=type(error).__name__)
        return ("unknown", None)
    label = own
    for record in (*retrieved, *(record for page in listed for record in page)):
        if meaning_key(record.text) == key:
            # On a tie the record's label wins: a fact from private channel G1 restated in private G2
            # stays G1's, never becomes G2's.
            label = narrower((record.origin, record.origin_conversation), label)
    return label
