"""A scope's document frequencies (`memory_term_df`): read for the ranking, taken down when rows leave
the active set, and the scope's vector generation kept beside them (`GENERATION_TERM`)."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Sequence

from psycopg.rows import TupleRow

from memory.ranking.lexical import TermStats
from memory.ranking.vectors import (
    GENERATION_TERM,
)
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _NEXT_GENERATION, _SELECT_TERM_DF, _UNCOUNT_TERMS


async def term_stats(conn: Connection, scope_key: str, stems: Sequence[str]) -> tuple[TermStats, int]:
    """The scope's document frequencies for the stems, and its vector generation: one statement."""
    cursor = await conn.execute(_SELECT_TERM_DF, (scope_key, ["", GENERATION_TERM, *stems]))
    found = {str(term): int(df) for term, df in await cursor.fetchall()}
    generation = found.pop(GENERATION_TERM, 0)
    return TermStats(documents=found.pop("", 0), frequencies=found), generation


async def more_term_stats(
    conn: Connection, scope_key: str, stats: TermStats, stems: Sequence[str]
) -> TermStats:
    """`stats` with the frequencies of those of `stems` it lacks: one statement, none if it lacks none."""
    missing = [stem for stem in stems if stem not in stats.frequencies]
    if not missing:
        return stats
    cursor = await conn.execute(_SELECT_TERM_DF, (scope_key, missing))
    found = {**stats.frequencies, **{str(term): int(df) for term, df in await cursor.fetchall()}}
    return TermStats(documents=stats.documents, frequencies=found)


async def uncount(conn: Connection, scope_key: str, retired: Sequence[TupleRow]) -> None:
    """Take retired rows' stems (and the rows themselves) out of the scope's document frequencies."""
    counts: Counter[str] = Counter()
    for (stems,) in retired:
        if stems is not None:  # a row never stemmed was never counted
            counts.update(["", *stems])
    by_amount: dict[int, builtins.list[str]] = {}
    for term, amount in counts.items():
        by_amount.setdefault(amount, []).append(term)
    for amount, terms in sorted(by_amount.items()):  # one statement per distinct amount (mostly just 1)
        await conn.execute(_UNCOUNT_TERMS, (amount, scope_key, terms))
    if retired:
        await conn.execute(_NEXT_GENERATION, (scope_key, GENERATION_TERM))
