"""How the curating commands answer: the review queue and a record's history, in the Markdown every
chat surface renders (a terminal gets it as plain text from the registry). Record text is data: one
code span for people, an `<untrusted>` wrapper for machine readers, as `memory list` quotes it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from commands.render import UNTRUSTED_NOTE, code_span, quoted_text
from commands.replaced import Replaced
from memory.rules.visibility import Reader, may_show
from memory.types import CurationEntry, MemoryRecord, RecordVersion

NOT_CURATING = (
    "This memory store keeps no review queue or history (it cannot curate): "
    "use the sqlite, postgres or in_process store, or a memory service that can."
)
HIDDEN = "text not shown here: learned where this conversation cannot see"
_ORIGINS = {
    "public": "a public channel",
    "private": "a private channel",
    "mpim": "a group DM",
    "external": "a channel shared with another organization",
    "dm": "a DM",
    "machine": "a terminal",
    "unknown": "a conversation I could not place",
}
_ACTIONS = {
    "remembered": "remembered by",
    "approved": "approved by",
    "rejected": "rejected by",
    "expired": "expired (unreviewed), by",
    "edited": "edited by",
    "superseded": "superseded by",
    "folded": "restated, by",
    "merged": "merged by",
    "forgotten": "forgotten by",
}


@dataclass(frozen=True, slots=True)
class PendingSection:
    """One shared scope's queue: what this reader may see, how many they may not, whether more wait."""

    scope_key: str
    records: tuple[MemoryRecord, ...]
    withheld: int
    full: bool
    replaces: Mapping[str, Replaced] = field(default_factory=dict)  # by pending id


def version_visible(record: MemoryRecord | None, reader: Reader, *, admin: bool) -> bool:
    """Whether a version's text may be shown: the read rule on its row; a pending one only to admins."""
    if record is None:
        return False
    return may_show(record, reader) and (record.status != "pending" or admin)


def render_pending(sections: Sequence[PendingSection], limit: int, *, machine: bool) -> str:
    blocks: list[str] = []
    if machine and any(section.records for section in sections):
        blocks.append(UNTRUSTED_NOTE)
    for section in sections:
        lines = [f"**Waiting for review** {code_span(section.scope_key)}"]
        if not section.records:
            lines.append("nothing this conversation may see" if section.withheld else "nothing waits")
        for record in section.records:
            lines.append(_pending_line(record, machine=machine))
            if record.id in section.replaces:
                lines.append(_replaces_line(section.replaces[record.id], machine=machine))
        if section.withheld:
            lines.append(
                f"({section.withheld} more learned where this conversation cannot see: "
                "review them in the conversation they were learned in.)"
            )
        if section.full:
            lines.append(f"(showing the newest {limit}; raise `--limit` up to 50.)")
        blocks.append("\n".join(lines))
    if any(section.records for section in sections):
        blocks.append(
            "Approve with `memory approve <id>`, discard with `memory reject <id>`, "
            "correct with `memory edit <id> <text>`."
        )
    return "\n\n".join(blocks)


def _pending_line(record: MemoryRecord, *, machine: bool) -> str:
    where = _ORIGINS.get(record.origin, "a conversation")
    conversation = f" {code_span(record.origin_conversation)}" if record.origin_conversation else ""
    return (
        f"- {code_span(record.id)} · {_day(record.created_at)} · {quoted_text(record.text, machine=machine)}"
        f" · learned in {where}{conversation} · source {code_span(record.source_thread_key)}"
    )


def _replaces_line(replaced: Replaced, *, machine: bool) -> str:
    """What approving it retires: an admin never approves a change to a record they were not shown."""
    text = HIDDEN if replaced.record is None else quoted_text(replaced.record.text, machine=machine)
    return f"  - would supersede {code_span(replaced.id)} · {text}"


def render_history(
    target: str, versions: Sequence[RecordVersion], visible: Collection[str], *, machine: bool
) -> str:
    """Every version, oldest first: id, date, status, who wrote it, its text (or why not), and each
    curation entry naming it — why it changed."""
    count = len(versions)
    lines = [f"**History** of {code_span(target)} — {count} version{'' if count == 1 else 's'}, oldest first"]
    if machine and visible:
        lines.insert(0, UNTRUSTED_NOTE)
    for version in versions:
        if version.id in visible and version.text is not None:
            text = quoted_text(version.text, machine=machine)
        elif version.text is None:
            text = f"(erased: {version.erased_reason or 'gone'})"
        else:
            text = f"({HIDDEN})"
        lines.append(
            f"- {code_span(version.id)} · {_day(version.created_at)} · {version.status}"
            f" · written by {code_span(_author(version, versions))} · {text}"
        )
        lines.extend(f"  - {_entry_line(entry)}" for entry in version.entries)
    return "\n".join(lines)


def _author(version: RecordVersion, versions: Sequence[RecordVersion]) -> str:
    """Who wrote this version: the person whose edit made it, else whoever remembered it, else its run."""
    for other in versions:
        for entry in other.entries:
            if entry.related_id == version.id and entry.action in ("edited", "superseded"):
                return entry.actor
    for entry in version.entries:
        if entry.action == "remembered":
            return entry.actor
    return f"run:{version.source_run_id}" if version.source_run_id else "unknown"


def _entry_line(entry: CurationEntry, *, named: bool = False) -> str:
    """`when · [id] edited by who → new id`: `named` puts the record's id in (a log of several)."""
    record = f"{code_span(entry.record_id)} " if named else ""
    related = f" → {code_span(entry.related_id)}" if entry.related_id else ""
    action = _ACTIONS.get(entry.action, entry.action)
    return f"{_when(entry.at)} · {record}{action} {code_span(entry.actor)}{related}"


def render_curation_log(entries: Sequence[CurationEntry]) -> str:
    """`memory audit --record`'s second half: who approved, edited, rejected or forgot the record."""
    lines = ["**Curation** — newest first"]
    if not entries:
        lines.append("no curation recorded")
    lines.extend(f"- {_entry_line(entry, named=True)}" for entry in entries)
    return "\n".join(lines)


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d")


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
