"""A scope's document frequencies (`memory_term_df`): taken down when rows leave the active set (the
term '' counts the scope's active rows). Kept in the transaction of every change; the schema's
rebuild (schema.py) recounts them from the rows."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Sequence

from psycopg.rows import TupleRow

from memory.stores.postgres.rows import Connection
from memory.stores.postgres.sql import _UNCOUNT_TERMS


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
