"""What a PostgreSQL failure means, read from its SQLSTATE: the server out of reach, a conflict worth
one more try, or a fault to raise.

psycopg raises `OperationalError` (and its SQLSTATE subclasses) for very different things: a lost
connection, but also a statement timeout, a deadlock, a serialization failure, a full disk. Only the
first is "the server is out of reach" (`MemoryUnavailable`, which makes a retrieve advisory: it then
reads as no memory). Every other failure is a `MemoryStoreError` naming what failed, so it is seen and
fixed rather than read as "nothing remembered".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import psycopg
import structlog
from psycopg_pool import PoolClosed

from memory.types import MemoryStoreError, MemoryUnavailable

log = structlog.get_logger("memory")

T = TypeVar("T")

# The server going away or not taking connections: admin_shutdown, crash_shutdown, cannot_connect_now.
# With every connection_exception (class 08), what "out of reach" means by SQLSTATE.
_SHUTTING_DOWN: Final = frozenset({"57P01", "57P02", "57P03"})
_CONNECTION_CLASS: Final = "08"

# A transaction the server rolled back because it met another one: run once more, it may pass.
CONFLICTS: Final = {"40P01": "deadlock", "40001": "serialization failure"}

# What the message says a failure was, where its own text may not (it is the server's, in its locale).
_NAMED: Final = {
    **CONFLICTS,
    "57014": "statement timeout or cancel",
    "55P03": "lock timeout",
    "53100": "disk full",
    "53200": "out of memory",
}


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def error_kind(error: BaseException) -> str:
    return type(error).__name__


def out_of_reach(error: psycopg.Error) -> bool:
    """Whether the server could not be reached or went away, rather than a statement failing on it.

    An error without a SQLSTATE was raised by the client, not the server: a connection lost or never
    made, or no pooled connection within the pool's timeout (`PoolTimeout`). A closed pool is the
    store closed: a fault, not an outage."""
    state = error.sqlstate
    if state is None:
        return isinstance(error, psycopg.OperationalError) and not isinstance(error, PoolClosed)
    return state.startswith(_CONNECTION_CLASS) or state in _SHUTTING_DOWN


def unavailable(error: psycopg.Error) -> MemoryUnavailable:
    return MemoryUnavailable(f"PostgreSQL memory unavailable: {first_line(error)}")


def failure(action: str, scope_key: str, error: psycopg.Error) -> MemoryStoreError:
    """The error a failed operation raises (a `MemoryUnavailable` when the server is out of reach),
    logged once as `memory.<action>_failed` with its SQLSTATE."""
    log.warning(
        f"memory.{action}_failed",
        store="postgres",
        scope_key=scope_key,
        error=error_kind(error),
        sqlstate=error.sqlstate,
    )
    if out_of_reach(error):
        return unavailable(error)
    named = _NAMED.get(error.sqlstate or "")
    what = f"{named} ({error.sqlstate}): " if named else ""
    return MemoryStoreError(f"PostgreSQL memory {action} failed: {what}{first_line(error)}")


def conflict(error: psycopg.Error) -> bool:
    return error.sqlstate in CONFLICTS


async def once_more_on_conflict(action: str, work: Callable[[], Awaitable[T]]) -> T:
    """`work` again, once, when the server rolled it back for meeting another transaction (a deadlock,
    a serialization failure). Only for work that is one transaction, or idempotent: the rolled-back
    try left nothing behind, so the second does what the first would have. A second conflict raises."""
    try:
        return await work()
    except psycopg.Error as error:
        if not conflict(error):
            raise
        log.info(f"memory.{action}_retried", store="postgres", sqlstate=error.sqlstate)
    return await work()
