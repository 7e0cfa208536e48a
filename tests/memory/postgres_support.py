"""The PostgreSQL test server, a private schema per test, and a TCP forwarder that can lose the server.

Tests never share tables: each gets its own schema (reached through `search_path` in the DSN), dropped
afterwards, so parallel runs and other helpers on the same server never collide. An unreachable server
FAILS the test with a line saying how to start it — PostgreSQL tests are never skipped.

Each pytest-xdist worker works in a database of its own (`worker_database`), made when it starts and
dropped when it ends. The store takes its schema lock and its scopes' locks per database, so workers in one
database would queue behind each other's schema changes (a new schema's 32 partitions take a second or
two); and a new database's catalogue holds none of the dead rows that earlier runs leave behind on a
server without autovacuum, which slow every later schema change. The tests' sessions commit without
waiting for the disk (`synchronous_commit=off`): nothing here survives a server crash on purpose, and
the many small commits otherwise wait on a flush each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory.stores.postgres.sql import _COLUMNS, _RECORDS
from tests.memory.service_support import free_port

CONFIGURED_DSN = os.environ.get("SWITCHBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_HOST = "127.0.0.1"
PG_PORT = 5432
SESSION_OPTIONS = "-csynchronous_commit=off"
# Set by pytest-xdist in its workers (before any test module is imported): the worker and the run.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8]
_CONFIGURED_DB = str(conninfo_to_dict(CONFIGURED_DSN).get("dbname") or "test")
# Another run's worker database: named `<database>_w_<worker>_<run>`.
_WORKER_PREFIX = f"{_CONFIGURED_DB}_w_"
WORKER_DB = f"{_WORKER_PREFIX}{_WORKER}_{_RUN}" if _WORKER and _RUN else None


def with_options(dsn: str, *options: str) -> str:
    """The DSN with these server options added to its own."""
    own = str(conninfo_to_dict(dsn).get("options") or "")
    return make_conninfo(dsn, options=" ".join(filter(None, (own, *options))))


BASE_DSN = with_options(
    make_conninfo(CONFIGURED_DSN, dbname=WORKER_DB) if WORKER_DB else CONFIGURED_DSN, SESSION_OPTIONS
)


@dataclass(frozen=True, slots=True)
class TempSchema:
    name: str
    dsn: str  # BASE_DSN with search_path set to this schema


def admin_connect() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(BASE_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"PostgreSQL is not reachable at {BASE_DSN} ({error}); run scripts/ensure_postgres.sh",
            pytrace=False,
        )


def schema_dsn(schema: str, base: str = BASE_DSN, **params: str | int) -> str:
    return with_options(make_conninfo(base, **params), f"-csearch_path={schema}")


@contextlib.contextmanager
def worker_database() -> Iterator[None]:
    """This xdist worker's own database for the session: made afresh, kept open by one idle connection
    (so another run's clean-up leaves it alone), dropped at the end; any database an earlier, killed run
    left (no one connected) goes first. Outside a worker, the configured database, left with no schema
    of ours. Never fails: an unreachable server fails the PostgreSQL tests themselves, with their line."""
    if WORKER_DB is None:
        try:
            yield
        finally:
            _drop_emptied()
        return
    lease: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        with psycopg.connect(CONFIGURED_DSN, autocommit=True, connect_timeout=5) as conn:
            _drop_abandoned(conn)
            _create(conn, WORKER_DB)
        lease = psycopg.connect(BASE_DSN, autocommit=True, connect_timeout=5)
    except psycopg.Error:
        pass
    try:
        yield
    finally:
        if lease is not None:
            lease.close()
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(WORKER_DB))
            with contextlib.suppress(psycopg.Error), psycopg.connect(CONFIGURED_DSN, autocommit=True) as conn:
                conn.execute(drop)


def _create(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    """CREATE DATABASE, which PostgreSQL refuses while anyone else is connected to its template (another
    run's clean-up, a person's psql): tried again for a few seconds."""
    for attempt in range(20):
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return
        except psycopg.errors.ObjectInUse:
            if attempt == 19:
                raise
            time.sleep(0.25)


def _drop_emptied() -> None:
    """The schemas `store_schema` kept for another test, at the session's end (outside a worker database,
    which goes whole)."""
    if not _EMPTIED:
        return
    with contextlib.suppress(psycopg.Error), psycopg.connect(BASE_DSN, autocommit=True) as conn:
        while _EMPTIED:
            _drop_schema(conn, _EMPTIED.pop()[0])


def _drop_abandoned(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    abandoned = conn.execute(
        "SELECT datname FROM pg_database AS d WHERE starts_with(datname, %s)"
        " AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.datid = d.oid)",
        (_WORKER_PREFIX,),
    ).fetchall()
    for (name,) in abandoned:
        with contextlib.suppress(psycopg.Error):  # someone connected meanwhile: not abandoned
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(str(name))))


@contextlib.contextmanager
def temp_schema(prefix: str = "sbtest") -> Iterator[TempSchema]:
    name = _new_schema(prefix)
    try:
        yield TempSchema(name, schema_dsn(name))
    finally:
        with admin_connect() as conn:
            _drop_schema(conn, name)


def _new_schema(prefix: str) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with admin_connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return name


def _drop_schema(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


# The schemas this process has emptied for `store_schema`, each with how often it has served; and the
# catalogue of the first one a store made, which any other must match to be used again.
_EMPTIED: list[tuple[str, int]] = []
_STORE_CATALOGUE: list[str] = []
# Emptying leaves dead rows (no vacuum): a schema serves this many tests, then is dropped.
_MOST_USES = 20

# What a store made in a schema: its relations, columns, constraints, functions and triggers, each with
# its definition, without the schema's own name.
_CATALOGUE = """
    SELECT md5(string_agg(replace(item, %(schema)s || '.', ''), ' | ' ORDER BY item)) FROM (
        SELECT c.relname || ' ' || c.relkind::text || ' ' || COALESCE(pg_get_indexdef(c.oid), '') AS item
        FROM pg_class AS c WHERE c.relnamespace = %(schema)s::regnamespace
        UNION ALL
        SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
            || ' ' || a.attnotnull::text || ' ' || COALESCE(pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = %(schema)s::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = %(schema)s::regnamespace
        UNION ALL
        SELECT proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = %(schema)s::regnamespace
        UNION ALL
        SELECT t.tgname || ' ' || t.tgfoid::regprocedure::text FROM pg_trigger AS t
        JOIN pg_class AS c ON c.oid = t.tgrelid WHERE c.relnamespace = %(schema)s::regnamespace
    ) AS made
"""
_TABLES = """
    SELECT relname, relkind FROM pg_class WHERE relnamespace = %(schema)s::regnamespace
    AND relkind IN ('r', 'p', 'S') AND NOT relispartition
"""


@contextlib.contextmanager
def store_schema() -> Iterator[TempSchema]:
    """A schema for a store that must start empty, where nothing but the store touches the tables: the
    first time a new one, like `temp_schema`; later one an earlier test's store made, its rows deleted
    and its sequences restarted. An open on it then only reads the catalogue, where a new schema's
    32 partitions cost the server a second or so. Given back only while its catalogue is exactly what a
    store made (else dropped), so a test that changed the schema never hands the change on."""
    name, uses = _EMPTIED.pop() if _EMPTIED else (_new_schema("sbtest"), 0)
    try:
        yield TempSchema(name, schema_dsn(name))
    finally:
        with admin_connect() as conn:
            if uses + 1 < _MOST_USES and _as_a_store_made_it(conn, name):
                _empty(conn, name)
                _EMPTIED.append((name, uses + 1))
            else:
                _drop_schema(conn, name)


def _as_a_store_made_it(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> bool:
    tables = conn.execute(_TABLES, {"schema": schema}).fetchall()
    if not any(name == "memory_records" for name, _ in tables):
        return False  # no store opened on it
    found = str(one_value(conn, _CATALOGUE, {"schema": schema}))
    if not _STORE_CATALOGUE:
        _STORE_CATALOGUE.append(found)
    return found == _STORE_CATALOGUE[0]


def _empty(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    with conn.transaction():
        # No trigger fires: a deleted record would leave its tombstone, and the next store's ids go on.
        conn.execute("SET LOCAL session_replication_role = replica")
        for name, kind in conn.execute(_TABLES, {"schema": schema}).fetchall():
            relation = sql.Identifier(schema, str(name))
            if kind == "S":
                conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(relation))
            else:
                conn.execute(sql.SQL("DELETE FROM {}").format(relation))


def unreachable_dsn(password: str = "sekret") -> str:
    """A DSN of a port nothing listens on (a server that is down), with a password that must never
    be shown."""
    return f"postgresql://postgres:{password}@127.0.0.1:{free_port()}/test?connect_timeout=2"


def unique_application_name(prefix: str = "sbtest") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def terminate_backends(application_name: str) -> int:
    """Kill every server backend of one pool (what a server restart does to it); how many died."""
    async with await psycopg.AsyncConnection.connect(BASE_DSN, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (application_name,),
        )
        row = await cursor.fetchone()
        killed = int(row[0]) if row else 0
        # A restart is over before anyone asks again: wait until the backends have gone, having sent
        # their clients the FATAL message.
        for _ in range(200):
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application_name,)
            )
            left = await cursor.fetchone()
            if not left or not left[0]:
                break
            await asyncio.sleep(0.01)
        return killed


class TcpForwarder:
    """127.0.0.1:<port> → the PostgreSQL server; `stop()` is the server vanishing, `start()` its return.

    Stopping closes the listener (new connections are refused) and drops every open connection, as a
    crashed or unreachable server would; restarting listens on the same port again. `silence()` is a
    link lost without a word: the connections stay open, and nothing goes through them either way.
    """

    def __init__(self, target_host: str = PG_HOST, target_port: int = PG_PORT) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._silent = False
        self.port = 0

    def silence(self) -> None:
        self._silent = True

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def dsn(self, schema: str) -> str:
        return schema_dsn(schema, host="127.0.0.1", port=self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                if self._silent:
                    continue
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.transport.abort()
            self._writers.discard(sink)


async def schema_rows(schema: TempSchema, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """One statement in the test's schema, outside any store (autocommit): its rows, if it returns any."""
    async with await psycopg.AsyncConnection.connect(schema.dsn, autocommit=True) as conn:
        cursor = await conn.execute(query.encode(), params)
        return await cursor.fetchall() if cursor.description else []


# The records as the store reads them: an active record's usage from its usage row, any other's
# from its own columns. Use as `SELECT id, use_count FROM {STORED_RECORDS} WHERE …`.
STORED_RECORDS = f"(SELECT {_COLUMNS} FROM {_RECORDS}) AS stored"


# Every relation of a schema as the server keeps it on disk: its tables, their indexes, their TOAST
# tables and the TOAST tables' indexes.
# A partition and its indexes are named as the table or index they are part of.
_RELATIONS = """
    SELECT COALESCE(root.relname, c.relname), pg_relation_filepath(c.oid) FROM pg_class AS c
    LEFT JOIN pg_class AS root ON root.oid = pg_partition_root(c.oid)
    WHERE c.relnamespace = %(schema)s::regnamespace
       OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = %(schema)s::regnamespace)
       OR c.oid IN (
           SELECT i.indexrelid FROM pg_index AS i JOIN pg_class AS t ON t.reltoastrelid = i.indrelid
           WHERE t.relnamespace = %(schema)s::regnamespace
       )
"""


def relation_files(schema: str) -> dict[str, list[Path]]:
    """Each relation of the schema and its files (every fork and segment), after a CHECKPOINT: what
    anyone who can read the server's data directory reads. The tests run on the server's machine."""
    with admin_connect() as conn:
        conn.execute("CHECKPOINT")
        data = Path(str(one_value(conn, "SHOW data_directory")))
        found: dict[str, list[Path]] = {}
        # A relation's files are `<node>`, `<node>.<segment>` and `<node>_<fork>`: each directory is
        # listed once, not once a relation (the database's directory holds every schema's files).
        forks: dict[Path, dict[str, list[Path]]] = {}
        for name, path in conn.execute(_RELATIONS, {"schema": schema}).fetchall():
            if path is None:
                continue
            base = data / str(path)
            if base.parent not in forks:
                forks[base.parent] = _files_by_node(base.parent)
            found.setdefault(str(name), []).extend([base, *forks[base.parent].get(base.name, [])])
    return found


def _files_by_node(directory: Path) -> dict[str, list[Path]]:
    """A directory's relation files but the main ones, by the node they belong to."""
    by_node: dict[str, list[Path]] = {}
    for entry in os.scandir(directory):
        node, separator, _ = entry.name.replace("_", ".", 1).partition(".")
        if separator:
            by_node.setdefault(node, []).append(directory / entry.name)
    return by_node


def relations_holding(schema: str, word: str) -> set[str]:
    """The relations of the schema whose files hold the word (any case)."""
    needle = word.lower().encode()
    return {
        name
        for name, files in relation_files(schema).items()
        if any(file.is_file() and needle in file.read_bytes().lower() for file in files)
    }


def one_value(
    conn: psycopg.Connection[tuple[object, ...]], query: str, params: dict[str, str] | None = None
) -> object:
    row = conn.execute(query.encode(), params).fetchone()
    assert row is not None
    return row[0]
