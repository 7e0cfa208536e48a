"""Connection handling: the DSN checked and described without its password, the server verified and
the schema applied before the pool starts, and dead connections replaced together."""

from __future__ import annotations

import asyncio
import contextlib
import select
from collections.abc import Callable
from typing import Any, Final

import psycopg
import structlog
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from memory.stores.postgres.failures import error_kind, first_line, out_of_reach
from memory.stores.postgres.rows import Connection
from memory.stores.postgres.schema import apply_schema, configure
from memory.types import MemoryStoreError, MemoryUnavailable

log = structlog.get_logger("memory")

# Where the bot and the service take the DSN from: every start-up error names both.
DSN_SETTING: Final = "DATABASE_URL / --database-url"

DEFAULT_APPLICATION_NAME: Final = "switchboard-memory"


def dsn_params(dsn: str) -> dict[str, str]:
    """A DSN's parameters; a malformed DSN is refused naming the setting.

    The parser's own message is not repeated: it quotes the DSN, password included.
    """
    if not dsn.strip():
        raise ValueError(f"{DSN_SETTING} is empty; expected postgresql://user:password@host:port/dbname")
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise ValueError(
            f"{DSN_SETTING} is not a valid PostgreSQL connection string;"
            " expected postgresql://user:password@host:port/dbname or key=value pairs"
        ) from None
    return {key: str(value) for key, value in params.items() if value is not None}


def describe(params: dict[str, str]) -> str:
    """host:port/dbname — never the password."""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or '?'}"


def autovacuum_on(setting: str) -> bool:
    """`SHOW autovacuum`'s answer read as PostgreSQL reads a boolean setting."""
    return setting.strip().lower() in {"on", "true", "yes", "1"}


class ServerPool:
    """The store's connection pool, opened once (by `open` or the first operation that needs it).

    `open` verifies the server and applies the schema on one connection first, so an unreachable or
    unusable server is one clear line naming the DSN setting; a failed open is retried by the next call.
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        timeout: float,
        reconnect_timeout: float,
        application_name: str | None,
        connection_class: type[Connection],
        on_open: Callable[[], None],
    ) -> None:
        """`on_open` is called once the pool has opened (the store logs it)."""
        if not 1 <= min_size <= max_size:
            raise ValueError(f"pool sizes must satisfy 1 <= min_size <= max_size, got {min_size}, {max_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        params = dsn_params(dsn)  # ValueError naming the setting when malformed
        self.where = describe(params)
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._connection_class = connection_class
        # Explicit, else the DSN's own, else ours: what pg_stat_activity shows for this pool.
        self.application_name = application_name or params.get("application_name") or DEFAULT_APPLICATION_NAME
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening = asyncio.Lock()
        self._open_attempts = 0
        self._open_error: MemoryStoreError | None = None
        self._purge: asyncio.Task[None] | None = None
        self._closed = False
        self._on_open = on_open

    async def open(self) -> None:
        """Verify the server, apply the schema, start the pool; idempotent.

        Raises `MemoryStoreError` naming DATABASE_URL / --database-url when the server cannot be used.
        """
        finished_before = self._open_attempts  # attempts finished before this caller queued
        async with self._opening:
            if self._closed:
                raise MemoryStoreError("the PostgreSQL memory store is closed")
            if self._pool is not None:
                return
            if self._open_attempts != finished_before and self._open_error is not None:
                # Another caller tried while this one queued, and failed: one dial, not one per caller.
                raise self._open_error
            try:
                self._pool = await self._open_pool()
                self._open_error = None
            except MemoryStoreError as error:
                self._open_error = error
                raise
            finally:
                self._open_attempts += 1
            self._on_open()

    async def close(self) -> None:
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if self._purge is not None:
            self._purge.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._purge
        if pool is not None:
            await pool.close()

    async def ready(self) -> AsyncConnectionPool[Connection]:
        """The open pool, opening it on first use (a failed open is retried by the next call)."""
        pool = self._pool
        if pool is None:
            await self.open()
            pool = self._pool
            assert pool is not None
        return pool

    async def _open_pool(self) -> AsyncConnectionPool[Connection]:
        connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": self.application_name,
            "connect_timeout": max(2, round(self._timeout)),
        }
        try:
            conn = await self._connection_class.connect(self._dsn, **connect_kwargs)
        except psycopg.Error as error:
            raise self._unusable("cannot connect to", error) from None
        try:
            await apply_schema(conn)
            await self._warn_without_statistics(conn)
        except psycopg.Error as error:
            raise self._unusable("cannot prepare the memory schema in", error) from None
        finally:
            await conn.close()
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self._dsn,
            kwargs=connect_kwargs,
            connection_class=self._connection_class,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            configure=configure,
            # A connection whose backend died (server restart, terminated backend) fails this check
            # and is replaced, instead of failing the caller's statement.
            check=self._check_connection,
            timeout=self._timeout,
            # Reconnection backs off exponentially (1 s, 2 s, 4 s …) and gives up after this long; the
            # next request then dials at once. Short, so a returning server is used within seconds.
            reconnect_timeout=self._reconnect_timeout,
            name=self.application_name,
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as error:
            await pool.close()
            raise self._unusable("cannot connect to", error) from None
        return pool

    async def _warn_without_statistics(self, conn: Connection) -> None:
        """The planner reads the dedup lookup and the catch-up off the right index only with statistics,
        which autovacuum keeps: without it a write at 10,000 records per scope scans the whole scope."""
        cursor = await conn.execute("SHOW autovacuum")
        row = await cursor.fetchone()
        if row is not None and not autovacuum_on(str(row[0])):
            log.warning(
                "memory.store.autovacuum_off",
                store="postgres",
                where=self.where,
                message="autovacuum is off on this server: run ANALYZE after bulk loads, or writes slow down",
            )

    async def _check_connection(self, conn: Connection) -> None:
        """The pool's check before handing a connection out; one dead connection means the server
        restarted or dropped us, so every idle one is checked and replaced at once. Otherwise the pool
        would meet them one by one, backing off 1 s, 2 s, 4 s … between them."""
        if quiet_and_idle(conn):
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            if self._pool is not None and self._purge is None:
                self._purge = asyncio.create_task(self._purge_dead(self._pool))
            raise

    async def _purge_dead(self, pool: AsyncConnectionPool[Connection]) -> None:
        try:
            await pool.check()
        except psycopg.Error as error:
            log.warning("memory.store.pool_check_failed", store="postgres", error=error_kind(error))
        finally:
            self._purge = None

    def _unusable(self, what: str, error: psycopg.Error) -> MemoryStoreError:
        """A server out of reach is `MemoryUnavailable`; a statement of the schema's that failed on a
        server that answered (a timeout, a permission) is a fault like any other statement's."""
        message = f"{what} PostgreSQL at {self.where} ({DSN_SETTING}): {first_line(error)}"
        return MemoryUnavailable(message) if out_of_reach(error) else MemoryStoreError(message)


def quiet_and_idle(conn: Connection) -> bool:
    """Whether a pooled connection may be handed out without a round trip to check it.

    An idle connection's server says nothing until asked, except when it goes away: a restart, a
    terminated backend or a dropped link first writes its FATAL message or closes the socket, which
    makes the socket readable. So a socket with nothing to read needs no check; any other state gets
    the pool's round trip, which is otherwise paid on every read."""
    if conn.closed or conn.broken or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        socket = conn.pgconn.socket
    except psycopg.OperationalError:
        return False
    poller = select.poll()
    poller.register(socket, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)
