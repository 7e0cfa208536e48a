"""The work gate: which finished runs are worth one extractor call."""

from __future__ import annotations

REFLECT_MIN_TURNS = 4
NO_REFLECT_AGENTS: frozenset[str] = frozenset({"review"})


def should_reflect(tool_calls: int, history_turns: int, agent_name: str | None = None) -> bool:
    """≥ 1 tool call or ≥ REFLECT_MIN_TURNS prior turns, and never an agent in NO_REFLECT_AGENTS.

    A chat that did no work and was short learned nothing durable, and a call per reply would cost
    more than it finds. A review's findings already land on the PR and describe one PR at one moment:
    distilling them would flood the shared scopes with per-PR ephemera.
    """
    if agent_name is not None and agent_name in NO_REFLECT_AGENTS:
        return False
    return tool_calls >= 1 or history_turns >= REFLECT_MIN_TURNS
