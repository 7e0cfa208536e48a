"""`switchboard memory consolidate`: merge records that restate each other, already stored.

A write folds a restatement into the record it restates, but records stored before that rule — or
under an older key — can still say the same thing twice. This finds them scope by scope
(memory/rules/consolidate.py) and, without `--apply`, only prints what it would merge; with it, each
cluster is merged into its survivor (`merge(..., actor="machine")`), which `memory history` then shows.
Each scope is its own merge, so an interrupted run leaves every scope either merged or untouched, and
a rerun finds only what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import structlog

from commands.memory import _terminal_cell as terminal_cell
from commands.plain import plain_text
from commands.render import store_failure, unreadable_scopes_line
from memory.rules.consolidate import Cluster, clusters
from memory.rules.scope import validate_scope_key
from memory.rules.visibility import Reader, may_show
from memory.stores.contract import CuratingStore, MemoryStore
from memory.types import MemoryRecord

log = structlog.get_logger("memory")

CONSOLIDATE_USAGE = (
    "memory consolidate [--scope <scope key>|all] [--apply] — merge stored records that restate each "
    "other (without --apply: only print what would merge)"
)
EXCERPT_WIDTH = 60
_HELP = frozenset({"-h", "--help", "help"})
ACTOR = "machine"


@dataclass(frozen=True, slots=True)
class ConsolidateArgs:
    scope: str  # a scope key, or `all`
    apply: bool


class ConsolidateUsageError(ValueError):
    """The words do not make a consolidate command; the message names the word."""


def parse_consolidate_args(argv: Sequence[str]) -> ConsolidateArgs:
    """`[--scope <scope key>|all] [--apply]` in any order; the scope defaults to every scope."""
    scope, apply = "all", False
    words = iter(argv)
    for word in words:
        name, has_value, value = word.partition("=")
        if word == "--apply":
            apply = True
        elif name == "--scope":
            scope = value if has_value else next(words, "")
            if not scope:
                raise ConsolidateUsageError("--scope needs a scope key (org:acme, repo:owner/name, …) or all")
            if scope != "all":
                try:
                    validate_scope_key(scope)
                except ValueError as error:
                    raise ConsolidateUsageError(f"--scope: {error}") from None
        else:
            raise ConsolidateUsageError(f"unexpected {word!r}")
    return ConsolidateArgs(scope=scope, apply=apply)


async def run_consolidate(
    store: MemoryStore, argv: Sequence[str], *, reader: Reader, out: TextIO, err: TextIO
) -> int:
    """0 when every scope asked was consolidated (or shown), 1 on a refusal, a store failure or a scope
    the store cannot read (`--scope all`), 2 on misuse. Record text is shown only where `reader` may
    see it (the read rule)."""
    if any(word in _HELP for word in argv):
        print(f"usage: {CONSOLIDATE_USAGE}", file=out)
        return 0
    try:
        args = parse_consolidate_args(argv)
    except ConsolidateUsageError as error:
        print(f"switchboard memory consolidate: {error}\nusage: {CONSOLIDATE_USAGE}", file=err)
        return 2
    curating = store.curation()
    if curating is None:
        print(
            "switchboard memory consolidate: the configured store cannot merge records "
            "(it keeps no curation history)",
            file=err,
        )
        return 1
    progress = _Progress()
    try:
        scope_keys = await _scopes(store, args.scope)
        if scope_keys is None:
            print(
                "switchboard memory consolidate: this store cannot list its scopes; "
                "name one with --scope <scope key>",
                file=err,
            )
            return 1
        found = [cluster for key in scope_keys for cluster in clusters(await curating.active_records(key))]
        for cluster in found:
            _print_cluster(cluster, reader, out)
        if args.apply:
            await _merge(curating, found, progress)
    except Exception as error:  # a store failure is one line, never a traceback
        log.warning("memory.consolidate_failed", merged=progress.merged, error=type(error).__name__)
        done = f" after merging {progress.merged} record(s)" if progress.merged else ""
        print(f"⚠️ switchboard memory consolidate: {plain_text(store_failure(error))}{done}", file=err)
        return 1
    duplicates = sum(len(cluster.duplicates) for cluster in found)
    log.info(
        "memory.consolidate",
        scopes=len(scope_keys),
        clusters=len(found),
        duplicates=duplicates,
        merged=progress.merged,
        applied=args.apply,
    )
    print(_summary(found, duplicates, progress.merged, len(scope_keys), applied=args.apply), file=out)
    return await _skipped(store, args.scope, err)


async def _scopes(store: MemoryStore, scope: str) -> list[str] | None:
    if scope != "all":
        return [scope]
    maintenance = store.maintenance()
    if maintenance is None:
        return None
    return sorted(await maintenance.scope_keys())


async def _skipped(store: MemoryStore, scope: str, err: TextIO) -> int:
    """1, said on `err`, when `--scope all` passed over scopes the store cannot read; else 0."""
    maintenance = store.maintenance()
    if scope != "all" or maintenance is None:
        return 0
    try:
        skipped = unreadable_scopes_line("consolidate", await maintenance.unreadable_scopes())
    except Exception as error:  # a store failure is one line, never a traceback
        print(f"⚠️ switchboard memory consolidate: {plain_text(store_failure(error))}", file=err)
        return 1
    if skipped is None:
        return 0
    print(skipped, file=err)
    return 1


@dataclass
class _Progress:
    merged: int = 0


async def _merge(store: CuratingStore, found: Sequence[Cluster], progress: _Progress) -> None:
    for cluster in found:
        scope_key, survivor_id = cluster.scope_key, cluster.survivor.id
        progress.merged += await store.merge(scope_key, survivor_id, cluster.duplicate_ids, actor=ACTOR)


def _print_cluster(cluster: Cluster, reader: Reader, out: TextIO) -> None:
    survivor = cluster.survivor
    print(
        f"{cluster.scope_key}: keep {survivor.id} (used {survivor.use_count}) {_excerpt(survivor, reader)}",
        file=out,
    )
    for duplicate in cluster.duplicates:
        print(f"  merge {duplicate.id} (used {duplicate.use_count}) {_excerpt(duplicate, reader)}", file=out)


def _excerpt(record: MemoryRecord, reader: Reader) -> str:
    if not may_show(record, reader):
        return "(text not shown here: learned in a DM or a private conversation)"
    return f'"{terminal_cell(record.text, EXCERPT_WIDTH)}"'


def _summary(found: Sequence[Cluster], duplicates: int, merged: int, scopes: int, *, applied: bool) -> str:
    where = f"{scopes} scope{'' if scopes == 1 else 's'}"
    if not found:
        return f"nothing to merge in {where}"
    groups = f"{len(found)} cluster{'' if len(found) == 1 else 's'}"
    if applied:
        return f"merged {merged} record(s) into their survivors: {groups} in {where}"
    return (
        f"would merge {duplicates} record(s) into their survivors: {groups} in {where} (--apply merges them)"
    )
