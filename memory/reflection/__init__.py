"""The write path: after the reply, distill a finished run into a few durable records, in one tracked
background task that can neither delay nor alter the reply. Its modules, in the order a reflection
uses them: `gate` (whether a run qualifies), `prompt` (what the extractor is asked and shown, and the
call's shape), `run` (what a finished run hands over), `parse` (the reply, validated and redacted),
`labels` (the origin label each candidate carries), `routing` (audience → scope, then the write gate),
`distill` (one reflection, step by step) and `tracking` (fire and forget, drained on shutdown). They
import the rules, the seam (`memory.types`) and `ops.tracing`, never a store, the service or the bot:
the model call is an `Extract` callable and the policy a `WriteGate`, both passed in by the app.
"""

from memory.reflection.distill import Outcome, ReflectionOutcome, reflect
from memory.reflection.gate import NO_REFLECT_AGENTS, REFLECT_MIN_TURNS, should_reflect
from memory.reflection.parse import (
    MAX_PROPOSED_KEYWORDS,
    MAX_REFLECTION_FACTS,
    MIN_REFLECTION_CONFIDENCE,
    FactAudience,
    ParsedReflection,
    ReflectionFact,
    parse_reflection,
)
from memory.reflection.prompt import (
    REFLECTION_MAX_TOKENS,
    REFLECTION_SYSTEM,
    SHOWN_RECORDS_PER_SCOPE,
    TRANSCRIPT_TAIL_CHARS,
    Extract,
    ExtractionRequest,
    Turn,
    build_reflection_input,
    drop_images,
)
from memory.reflection.routing import RoutedCandidate, route_candidates
from memory.reflection.run import ReflectionRun
from memory.reflection.tracking import ReflectionTracker, schedule_reflection

__all__ = [
    "MAX_PROPOSED_KEYWORDS",
    "MAX_REFLECTION_FACTS",
    "MIN_REFLECTION_CONFIDENCE",
    "NO_REFLECT_AGENTS",
    "REFLECTION_MAX_TOKENS",
    "REFLECTION_SYSTEM",
    "REFLECT_MIN_TURNS",
    "SHOWN_RECORDS_PER_SCOPE",
    "TRANSCRIPT_TAIL_CHARS",
    "Extract",
    "ExtractionRequest",
    "FactAudience",
    "Outcome",
    "ParsedReflection",
    "ReflectionFact",
    "ReflectionOutcome",
    "ReflectionRun",
    "ReflectionTracker",
    "RoutedCandidate",
    "Turn",
    "build_reflection_input",
    "drop_images",
    "parse_reflection",
    "reflect",
    "route_candidates",
    "schedule_reflection",
    "should_reflect",
]
