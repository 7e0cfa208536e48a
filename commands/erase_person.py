"""`memory forget --user <person>`: a data-subject request, one person erased everywhere we keep them.

The person is named in any form they are shown as (memory/rules/person.py resolves it, in the asking
admin's workspace); their user scope is erased, their entries in every other log take one random
pseudonym (the entries keep their shape, so an audit still counts them), and the terminal person's chat
threads are deleted. A name under which nothing at all is kept is a refusal, never "Erased 0".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from commands.registry import UsageError
from commands.render import code_span
from commands.render import store_failure as failure
from commands.transcripts import Transcripts
from memory.rules.person import draw_pseudonym
from memory.stores.contract import MemoryStore

log = structlog.get_logger("memory")

_TYPOGRAPHIC_DASHES = re.compile(r"^[—–]")  # clients turn `--` into an em or en dash


def parse_person_arg(args: Sequence[str]) -> str:
    """`--user <person>` or `--user=<person>`, nothing else. A Slack mention's label may hold spaces
    (`<@U0123|Bob Smith>`): its words are one value."""
    first = _TYPOGRAPHIC_DASHES.sub("--", args[0])
    _, has_value, value = first.partition("=")
    rest = list(args[1:])
    if not has_value:
        if not rest:
            raise UsageError("`--user` needs a person (e.g. `U0123`, `<@U0123>`, `cli:local`).")
        value = rest.pop(0)
    while value.startswith("<@") and not value.endswith(">") and rest:
        value = f"{value} {rest.pop(0)}"
    if rest:
        raise UsageError("`memory forget --user` takes exactly one person.")
    return value


@dataclass(frozen=True, slots=True)
class PersonErased:
    """What one person's erasure reached: records erased, log entries renamed, transcripts deleted.
    `problem`: the step that failed (the ones before it stand), else None."""

    records: int = 0
    renamed: int = 0
    transcripts: int = 0
    problem: str | None = None

    @property
    def nothing(self) -> bool:
        return self.problem is None and not (self.records or self.renamed or self.transcripts)


async def erase_person(store: MemoryStore, transcripts: Transcripts | None, person_key: str) -> PersonErased:
    """Records first (the words themselves), then the logs, then the transcripts; a failing step stops
    the rest and says which it was (the steps before it stand; running it again finishes the job)."""
    step = "records"
    records = renamed = deleted = 0
    try:
        records = await store.erase_scope(person_key, "user_request")
        step = "logs"
        renamed = await store.pseudonymize_person(person_key, draw_pseudonym())
        step = "transcripts"
        if transcripts is not None:
            deleted = await transcripts.erase(person_key)
    except Exception as error:
        log.warning("memory.forget_user_failed", step=step, error=type(error).__name__)
        reason = error.strerror if isinstance(error, OSError) and error.strerror else failure(error)
        return PersonErased(records, renamed, deleted, problem=f"the {_STEPS[step]}: {reason}")
    return PersonErased(records, renamed, deleted)


_STEPS = {
    "records": "records could not be erased",
    "logs": "logs could not be renamed",
    "transcripts": "chat transcripts could not be deleted",
}


def render_person_erased(person_key: str, erased: PersonErased) -> str:
    key = code_span(person_key)
    counts = f"{_count(erased.records, 'record')} of {key}"
    more = []
    if erased.renamed:
        more.append(f"{_count(erased.renamed, 'log entry', 'log entries')} now name a pseudonym instead")
    if erased.transcripts:
        more.append(f"{_count(erased.transcripts, 'chat transcript')} deleted")
    tail = f" ({'; '.join(more)})" if more else ""
    if erased.problem is not None:
        return f"⚠️ Erasing {key} stopped: {erased.problem}. So far erased {counts}{tail}; run it again."
    return f"🧹 Erased {counts}{tail}."


def render_nobody(person_key: str) -> str:
    hint = ""
    if person_key.startswith("user:slack:") and person_key.count(":") == 2:  # no team in it
        hint = " (With several workspaces, name the team too: `slack:T…:U…`.)"
    return (
        f"🚫 Nobody is known as {code_span(person_key)}: no records, log entries or transcripts are kept "
        f"under that name, so nothing was erased.{hint}"
    )


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
