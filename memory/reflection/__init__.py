"""The write path: after the reply, distill a finished run into a few durable records."""

from memory.reflection.distill import (
    MAX_REFLECTION_FACTS,
    REFLECT_MIN_TURNS,
    REFLECTION_MAX_TOKENS,
    REFLECTION_SYSTEM,
    TRANSCRIPT_TAIL_CHARS,
    Extract,
    ExtractionRequest,
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

__all__ = [
    "MAX_REFLECTION_FACTS",
    "REFLECTION_MAX_TOKENS",
    "REFLECTION_SYSTEM",
    "REFLECT_MIN_TURNS",
    "TRANSCRIPT_TAIL_CHARS",
    "Extract",
    "ExtractionRequest",
    "ParsedReflection",
    "ReflectionOutcome",
    "ReflectionRun",
    "ReflectionTracker",
    "build_reflection_input",
    "parse_reflection",
    "reflect",
    "schedule_reflection",
    "should_reflect",
]
