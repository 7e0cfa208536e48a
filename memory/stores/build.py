"""Store selection at startup: which MemoryStore this process uses, decided once.

Memory off → the null store. `memory.store` names a backend explicitly. Otherwise a service URL with its
bearer token present → the memory service; a service URL without the token is refused (one line naming
the variable): a quiet local store per host would split one team's memory; nothing configured → the
embedded SQLite store under the data directory, which must be writable now (a file in its place, a
missing permission or a full disk is one line at start-up, not a failed write later). The per-scope cap
is validated here once and handed to whichever store is built; unset, the memory service's own default
applies.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast
from urllib.parse import urlsplit, urlunsplit

import structlog

from memory.ranking.embedder import Embedder, EmbedderUnavailable, load_embedder, tuned_feedback, tuned_weight
from memory.ranking.fusion import RANKING_MODES, Ranking, RankingMode
from memory.rules.engine import is_valid_cap
from memory.rules.retention import DEFAULT_AUDIT_DAYS, Retention
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.types import DEFAULT_COMPACT_AFTER_SECONDS, DEFAULT_SCOPE_CAP, MAX_SCOPE_CAP

log = structlog.get_logger("memory.build")

DEFAULT_TOKEN_ENV = "MEMORY_TOKEN"
DEFAULT_TIMEOUT = 5.0
CAP_KEY = "memory.max_records_per_scope"
DATABASE_URL_ENV = "DATABASE_URL"
STORE_NAMES = ("sqlite", "in_process", "postgres")
PROBE_BYTES = 4096


class MemorySettings(Protocol):
    """The `memory` section this module reads (config.settings provides it; tests pass any object)."""

    @property
    def enabled(self) -> bool: ...
    @property
    def store(self) -> str | None: ...
    @property
    def service_url(self) -> str | None: ...
    @property
    def token_env(self) -> str | None: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def max_records_per_scope(self) -> object: ...
    @property
    def ranking(self) -> str: ...
    @property
    def embedder(self) -> str: ...
    @property
    def semantic_weight(self) -> float | None: ...
    @property
    def semantic_threshold(self) -> float: ...


class Settings(Protocol):
    @property
    def memory(self) -> MemorySettings: ...
    @property
    def data_dir(self) -> str | os.PathLike[str]: ...


class MemoryConfigError(ValueError):
    """The memory settings name something this build cannot provide; the message names the key."""


@dataclass(frozen=True, slots=True)
class ScopeCap:
    """The validated cap, and whether the operator set one (the service's own default applies if not)."""

    value: int
    configured: bool


def validate_scope_cap(raw: object) -> ScopeCap:
    """`memory.max_records_per_scope`: an integer 1–10000; anything else warns and the default applies."""
    if raw is None:
        return ScopeCap(DEFAULT_SCOPE_CAP, configured=False)
    if not is_valid_cap(raw):
        log.warning(
            "memory.config_warning",
            key=CAP_KEY,
            value=repr(raw)[:50],
            allowed=f"an integer from 1 to {MAX_SCOPE_CAP}",
            using_default=DEFAULT_SCOPE_CAP,
            message=f"{CAP_KEY} must be an integer from 1 to {MAX_SCOPE_CAP}; "
            f"using the default {DEFAULT_SCOPE_CAP}",
        )
        return ScopeCap(DEFAULT_SCOPE_CAP, configured=True)
    return ScopeCap(raw, configured=True)


def retention_from(settings: object) -> Retention:
    """`memory.ttl_days`, `memory.audit_retention_days` and every `channels.<id>.memory_ttl_days`
    (for that channel's scope). Settings objects without them (older test doubles) keep everything."""
    memory = getattr(settings, "memory", None)
    channels = getattr(settings, "channels", None) or {}
    own = {
        f"channel:{channel_id}": float(days)
        for channel_id, channel in channels.items()
        if (days := getattr(channel, "memory_ttl_days", None)) is not None
    }
    ttl = getattr(memory, "ttl_days", None)
    audit = getattr(memory, "audit_retention_days", None) or DEFAULT_AUDIT_DAYS
    return Retention(
        ttl_days=None if ttl is None else float(ttl), scope_ttl_days=own, audit_days=float(audit)
    )


def memory_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Where the embedded store keeps its per-scope databases (shared with `memory-service`)."""
    return Path(data_dir) / "memory"


async def open_memory_store(store: MemoryStore) -> None:
    """Verify the store at start-up (a database that answers), so a bad DSN or an unreachable server is
    one clear line now rather than a failure on the first message. Raises MemoryStoreError."""
    await store.open()


async def note_foreign_vectors(store: MemoryStore) -> int:
    """One warning at start-up when records carry vectors of another embedder than the configured one
    (a changed `memory.embedder`): they rank lexically, or are re-embedded as reads meet them, until
    `switchboard memory reindex` redoes them all. A store that cannot say is no refused start."""
    maintenance = store.maintenance()
    if maintenance is None:
        return 0
    try:
        found = await maintenance.foreign_vectors()
    except Exception as error:
        log.warning("memory.foreign_vectors_unknown", error=type(error).__name__)
        return 0
    if found:
        log.warning(
            "memory.reindex_needed",
            records=found,
            message=f"{found} record(s) hold vectors of another embedder: "
            "run `switchboard memory reindex` to re-embed them",
        )
    return found


def build_memory_store(settings: Settings, env: Mapping[str, str] | None = None) -> MemoryStore:
    """The one store this process shares between every channel; called once at startup."""
    env = os.environ if env is None else env
    memory = settings.memory
    if not memory.enabled:
        log.info("memory.store_selected", store="null")
        return NullMemoryStore()
    cap = validate_scope_cap(memory.max_records_per_scope)
    retention = retention_from(settings)
    choice = memory.store

    if choice is not None and memory.service_url:
        log.warning(
            "memory.config_warning",
            key="memory.service_url",
            message=f"memory.store = {choice!r} is set explicitly, so memory.service_url is not used",
        )
    if choice == "in_process":
        log.warning(
            "memory.config_warning",
            key="memory.store",
            message="memory.store = 'in_process' keeps records in this process only: "
            "every restart loses them",
        )
        log.info("memory.store_selected", store="in_process", cap=cap.value)
        embedder = build_embedder(memory)
        return InProcessMemoryStore(
            cap=cap.value, ranking=build_ranking(memory, embedder), embedder=embedder, retention=retention
        )
    if choice == "postgres":
        embedder = build_embedder(memory)
        compact_after = getattr(memory, "compact_after_seconds", None)  # older test doubles lack it
        return _postgres_store(env, cap, build_ranking(memory, embedder), embedder, retention, compact_after)
    if choice not in (None, "sqlite"):
        raise MemoryConfigError(f"memory.store = {choice!r}: allowed values are {', '.join(STORE_NAMES)}")

    if choice is None and memory.service_url:
        token_env = memory.token_env or DEFAULT_TOKEN_ENV
        token = env.get(token_env, "")
        if not token:
            raise MemoryConfigError(missing_token_message(token_env))
        return _http_store(memory.service_url, token, memory.timeout, cap)
    embedder = build_embedder(memory)
    return _sqlite_store(settings.data_dir, cap, build_ranking(memory, embedder), embedder, retention)


def missing_token_message(token_env: str) -> str:
    """memory.service_url without its bearer token: refused, never a quiet store of this host's own."""
    return (
        f"memory.service_url is set but {token_env} is empty or unset: export the memory service's "
        "token, or remove memory.service_url to keep memory in this host's SQLite store"
    )


def data_dir_problem(path: Path) -> str | None:
    """Why a store cannot write under `path` (made if missing), or None when it can.

    A small file is written, synced and removed, so a file in the way, a missing permission, a
    read-only or a full disk are found now — at start-up and by the memory service's /readyz —
    instead of as every write failing later behind a healthy-looking process.
    """
    blocker = next((part for part in (path, *path.parents) if part.exists() and not part.is_dir()), None)
    if blocker is not None:
        return f"{blocker} is a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=path)
    except OSError as error:
        return f"cannot write in {path}: {error.strerror or error}"
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(bytes(PROBE_BYTES))
            file.flush()
            os.fsync(file.fileno())
    except OSError as error:
        return f"cannot write in {path}: {error.strerror or error}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return None


def build_ranking(memory: MemorySettings, embedder: Embedder | None = None) -> Ranking:
    """`memory.ranking`: `v2` (the default) or `spec`; anything else is one error naming the key.
    The fusion weight is `memory.semantic_weight`, else the embedder's tuned one; the feedback is the
    embedder's tuned one."""
    mode = memory.ranking
    if mode not in RANKING_MODES:
        raise MemoryConfigError(
            f"memory.ranking = {mode!r}: allowed values are {', '.join(RANKING_MODES)} (default v2)"
        )
    try:
        return Ranking(
            mode=cast(RankingMode, mode),
            semantic_weight=tuned_weight(embedder)
            if memory.semantic_weight is None
            else memory.semantic_weight,
            semantic_threshold=memory.semantic_threshold,
            feedback=tuned_feedback(embedder),
        )
    except ValueError as error:
        raise MemoryConfigError(f"memory: {error}") from None


def build_embedder(memory: MemorySettings) -> Embedder | None:
    """`memory.embedder`, loaded once for the store this process builds (the memory service's store
    embeds for its callers: a bot behind it loads no model). A missing extra is one error naming it."""
    try:
        embedder = load_embedder(memory.embedder)
    except EmbedderUnavailable as error:
        raise MemoryConfigError(str(error)) from None
    log.info(
        "memory.embedder_loaded", embedder=memory.embedder, model=None if embedder is None else embedder.name
    )
    return embedder


def _http_store(url: str, token: str, timeout: float | None, cap: ScopeCap) -> MemoryStore:
    from memory.stores.http import HttpMemoryStore

    log.info(
        "memory.store_selected",
        store="http",
        url=_without_userinfo(url),
        cap=cap.value if cap.configured else None,
    )
    return HttpMemoryStore(
        url,
        token,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        cap=cap.value if cap.configured else None,  # unset → the service's own default (500)
    )


def _without_userinfo(url: str) -> str:
    """The URL fit for a log line: any `user:password@` part dropped."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _sqlite_store(
    data_dir: str | os.PathLike[str],
    cap: ScopeCap,
    ranking: Ranking,
    embedder: Embedder | None,
    retention: Retention,
) -> MemoryStore:
    from memory.stores.sqlite.store import SqliteMemoryStore

    path = memory_dir(data_dir)
    problem = data_dir_problem(path)
    if problem is not None:
        raise MemoryConfigError(
            f"data_dir = {str(data_dir)!r}: the memory store cannot write there: {problem}"
        )
    log.info("memory.store_selected", store="sqlite", path=str(path), cap=cap.value, ranking=ranking.mode)
    return SqliteMemoryStore(path, cap=cap.value, ranking=ranking, embedder=embedder, retention=retention)


def _postgres_store(
    env: Mapping[str, str],
    cap: ScopeCap,
    ranking: Ranking,
    embedder: Embedder | None,
    retention: Retention,
    compact_after_seconds: float | None,
) -> MemoryStore:
    """The PostgreSQL backend, DSN from DATABASE_URL. Built unopened (this function is synchronous):
    start-up awaits `open_memory_store` to verify the server."""
    from memory.stores.postgres.store import PostgresMemoryStore

    dsn = env.get(DATABASE_URL_ENV, "").strip()
    if not dsn:
        raise MemoryConfigError(
            f"memory.store = 'postgres' needs {DATABASE_URL_ENV} "
            "(postgresql://user:password@host:port/dbname); it is unset or empty"
        )
    try:
        store = PostgresMemoryStore(
            dsn,
            cap=cap.value,
            ranking=ranking,
            embedder=embedder,
            retention=retention,
            compact_after_seconds=(
                DEFAULT_COMPACT_AFTER_SECONDS
                if compact_after_seconds is None
                else float(compact_after_seconds)
            ),
        )
    except ValueError as error:
        raise MemoryConfigError(str(error)) from None
    log.info("memory.store_selected", store="postgres", where=store.where, cap=cap.value)
    return store
