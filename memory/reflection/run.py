"""What a finished run hands to its reflection: identity, origin, the transcript."""

from __future__ import annotations

from dataclasses import dataclass

from memory.reflection.prompt import Turn
from memory.rules.scope import RequestScopes
from memory.rules.visibility import Reader
from memory.types import Origin


@dataclass(frozen=True, slots=True)
class ReflectionRun:
    """What a finished run hands to its reflection: identity, origin, and the transcript."""

    thread_key: str
    scopes: RequestScopes
    query: str
    request: str
    answer: str
    history: tuple[Turn, ...] = ()
    run_id: str | None = None
    origin_visibility: str | None = None
    # The run's conversation (its channel id): the origin conversation of everything it learns.
    origin_conversation: str | None = None
    # Who may see what the extractor is shown (the run's own reply audience); None shows only what a
    # public reply may.
    reader: Reader | None = None
    source_messages: tuple[str, ...] = ()
    # The origin labels of the memory block the run's answer was written from: what it learns is no
    # wider than what it was shown (with the extractor's records).
    shown_labels: tuple[tuple[Origin, str | None], ...] = ()
    # When the conversation happened (epoch seconds: the message's time, else the run's): every
    # record it learns is dated so. None: the store takes the write's time.
    observed_at: float | None = None
