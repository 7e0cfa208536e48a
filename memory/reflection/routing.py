"""Audience routing and the write gate: which of the run's scopes each candidate may land in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from memory.reflection.parse import FactAudience, ParsedReflection
from memory.rules.scope import RequestScopes, list_scope_keys, scope_kind
from memory.rules.write_gate import MemoryScopeResource, WriteGate
from memory.types import MemoryCandidate


@dataclass(frozen=True, slots=True)
class RoutedCandidate:
    """Where one candidate lands after audience routing and the gate (None: dropped)."""

    candidate: MemoryCandidate
    routed_to: str
    scope_key: str | None
    reason: str


def route_candidates(
    parsed: ParsedReflection,
    scopes: RequestScopes,
    shown_scopes: Mapping[str, str],
    gate: WriteGate,
) -> list[RoutedCandidate]:
    """Audience → the run's scope (else org); a supersede follows its record; then the gate,
    asked with the candidate's own origin label (the run's, or the narrower one of a record it restates).

    The gate may narrow, never widen; a narrowed correction loses its `supersedes` (the record it
    would retire lives where this origin may not write, so it stands). A scope the run does not have
    is never written, whatever the gate says.
    """
    run_keys = frozenset(list_scope_keys(scopes))
    routed: list[RoutedCandidate] = []
    for tagged in parsed.candidates:
        candidate = tagged.candidate
        target = _audience_scope(tagged.audience, scopes)
        if candidate.supersedes is not None:
            target = shown_scopes.get(candidate.supersedes, target)
        resource = MemoryScopeResource(
            target, scope_kind(target), candidate.origin, origin_conversation=candidate.origin_conversation
        )
        decision = gate(resource)
        if not decision.allowed:
            routed.append(RoutedCandidate(candidate, target, None, decision.reason))
            continue
        final = decision.narrowed_to or target
        if final not in run_keys:
            routed.append(RoutedCandidate(candidate, target, None, "narrowed_outside_run"))
            continue
        if final != target:
            candidate = replace(candidate, supersedes=None)
        routed.append(RoutedCandidate(candidate, target, final, decision.reason))
    return routed


def _audience_scope(audience: FactAudience, scopes: RequestScopes) -> str:
    wanted = {"user": scopes.user, "repo": scopes.repo, "channel": scopes.channel}.get(audience)
    return wanted or scopes.org
