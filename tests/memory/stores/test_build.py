"""Store selection at startup (§20, §29).

Spec rows: "Startup selection: disabled → none; worker + bearer → WorkerMemoryStore; custom tokenEnv; no
worker or missing bearer → in-process + a warning naming the restart loss / env var" (here the fallback is
the embedded SQLite store, per the issue), "Startup wiring: memory.maxRecordsPerScope reaches the
in-process fallback store (a write past it evicts)", "An out-of-range / non-integer maxRecordsPerScope (0,
negative, fractional, >10000, NaN) warns naming the key and the default, and the default cap governs",
"NullMemoryStore … is the store when disabled".
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from config.settings import load_settings
from memory.stores.build import MemoryConfigError, build_memory_store, open_memory_store, validate_scope_cap
from memory.stores.contract import MemoryStore
from memory.stores.http import HttpMemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.null import NullMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import MemoryCandidate, MemoryStoreError
from tests.memory.service_support import free_port

SCOPE = "org:acme"


@dataclass(frozen=True)
class Memory:
    enabled: bool = True
    store: str | None = None
    service_url: str | None = None
    token_env: str | None = "MEMORY_TOKEN"
    timeout: float | None = 5.0
    max_records_per_scope: Any = None
    ranking: str = "v2"
    embedder: str = "none"
    semantic_weight: float | None = None
    semantic_threshold: float = 0.7


@dataclass(frozen=True)
class FakeSettings:
    data_dir: Path
    memory: Memory = field(default_factory=Memory)


@pytest.fixture
async def built() -> AsyncIterator[list[MemoryStore]]:
    """Stores built by a test, closed afterwards (the SQLite one owns a worker thread)."""
    stores: list[MemoryStore] = []
    yield stores
    for store in stores:
        await store.aclose()


def build(
    stores: list[MemoryStore], settings: FakeSettings, env: dict[str, str] | None = None
) -> MemoryStore:
    store = build_memory_store(settings, env={} if env is None else env)
    stores.append(store)
    return store


def warnings(logs: Sequence[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["log_level"] == "warning"]


async def fill(store: MemoryStore, count: int) -> int:
    """Write `count` distinct facts in batches; return how many were evicted in total."""
    evicted = 0
    for start in range(0, count, 50):
        batch = [
            MemoryCandidate("fact", f"fact number {n}", "t") for n in range(start, min(count, start + 50))
        ]
        evicted += (await store.write(SCOPE, batch)).evicted
    return evicted


async def test_memory_disabled_selects_the_null_store(tmp_path: Path, built: list[MemoryStore]) -> None:
    settings = FakeSettings(tmp_path, Memory(enabled=False, service_url="http://m:8787"))
    with capture_logs() as logs:
        store = build(built, settings, {"MEMORY_TOKEN": "t"})
    assert isinstance(store, NullMemoryStore)
    assert warnings(logs) == []
    assert not (tmp_path / "memory").exists()


async def test_service_url_with_its_token_selects_the_http_store(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787", timeout=2.5))
    with capture_logs() as logs:
        store = build(built, settings, {"MEMORY_TOKEN": "s3cret"})
    assert isinstance(store, HttpMemoryStore)
    assert (store.base_url, store.timeout, store.cap) == ("http://memory:8787", 2.5, None)
    assert warnings(logs) == []
    (selected,) = [e for e in logs if e["event"] == "memory.store_selected"]
    assert selected["store"] == "http"
    assert "s3cret" not in repr(logs)


async def test_the_selection_log_never_carries_credentials_in_the_url(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    settings = FakeSettings(tmp_path, Memory(service_url="https://bot:pa55word@memory.internal:8787/base"))
    with capture_logs() as logs:
        build(built, settings, {"MEMORY_TOKEN": "t"})
    (selected,) = [e for e in logs if e["event"] == "memory.store_selected"]
    assert selected["url"] == "https://memory.internal:8787/base"
    assert "pa55word" not in repr(logs)


async def test_a_custom_token_env_is_the_one_that_counts(tmp_path: Path, built: list[MemoryStore]) -> None:
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787", token_env="TEAM_MEMORY_TOKEN"))
    assert isinstance(build(built, settings, {"TEAM_MEMORY_TOKEN": "x"}), HttpMemoryStore)
    with pytest.raises(MemoryConfigError, match="TEAM_MEMORY_TOKEN is empty or unset"):
        build(built, settings, {"MEMORY_TOKEN": "not the configured variable"})


@pytest.mark.parametrize("env", [{}, {"MEMORY_TOKEN": ""}], ids=["unset", "empty"])
async def test_service_url_without_its_token_is_refused_naming_the_variable_never_a_local_store(
    tmp_path: Path, built: list[MemoryStore], env: dict[str, str]
) -> None:
    # A quiet SQLite store per host would split one team's memory: several bots, several memories.
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787"))
    with pytest.raises(MemoryConfigError) as refused:
        build(built, settings, env)
    message = str(refused.value)
    assert "\n" not in message
    assert "memory.service_url" in message and "MEMORY_TOKEN is empty or unset" in message
    assert not (tmp_path / "memory").exists()


@pytest.mark.parametrize("where", ["data_dir", "memory"], ids=["data-dir-is-a-file", "memory-is-a-file"])
async def test_a_data_dir_the_store_cannot_write_in_is_refused_naming_it(
    tmp_path: Path, built: list[MemoryStore], where: str
) -> None:
    data_dir = tmp_path / "data"
    blocker = data_dir if where == "data_dir" else data_dir / "memory"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where a directory belongs")
    with pytest.raises(MemoryConfigError) as refused:
        build(built, FakeSettings(data_dir))
    assert str(refused.value) == (
        f"data_dir = {str(data_dir)!r}: the memory store cannot write there: "
        f"{blocker} is a file, not a directory"
    )


def test_a_full_data_dir_is_refused_at_build_time(tmp_path: Path) -> None:
    from tests.memory.service.test_service_refusals import fill, tmpfs

    with tmpfs("256k") as disk:
        fill(disk)
        with pytest.raises(MemoryConfigError, match="No space left on device"):
            build_memory_store(FakeSettings(disk), env={})


async def test_nothing_configured_selects_sqlite_under_the_data_dir_and_it_persists(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    settings = FakeSettings(tmp_path / "data")
    with capture_logs() as logs:
        store = build(built, settings)
    assert isinstance(store, SqliteMemoryStore)
    assert warnings(logs) == []
    await store.write(SCOPE, [MemoryCandidate("fact", "memory survives restarts", "t")])
    again = build(built, settings)
    assert [r.text for r in await again.list(SCOPE, 5)] == ["memory survives restarts"]
    assert any((tmp_path / "data" / "memory").iterdir())


async def test_explicit_sqlite_store_selects_sqlite(tmp_path: Path, built: list[MemoryStore]) -> None:
    assert isinstance(build(built, FakeSettings(tmp_path, Memory(store="sqlite"))), SqliteMemoryStore)


async def test_the_in_process_store_setting_selects_it_with_a_restart_loss_warning(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    with capture_logs() as logs:
        store = build(built, FakeSettings(tmp_path, Memory(store="in_process")))
    assert isinstance(store, InProcessMemoryStore)
    (warning,) = warnings(logs)
    assert warning["key"] == "memory.store"
    assert "restart" in warning["message"]


async def test_an_explicit_store_wins_over_a_service_url_with_a_warning(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    settings = FakeSettings(tmp_path, Memory(store="sqlite", service_url="http://memory:8787"))
    with capture_logs() as logs:
        store = build(built, settings, {"MEMORY_TOKEN": "t"})
    assert isinstance(store, SqliteMemoryStore)
    (warning,) = warnings(logs)
    assert warning["key"] == "memory.service_url"


async def test_an_unknown_store_name_is_a_config_error_naming_the_key(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    with pytest.raises(MemoryConfigError, match=r"memory\.store"):
        build(built, FakeSettings(tmp_path, Memory(store="redis")))


# --- the per-scope cap -------------------------------------------------------------------------------------


async def test_max_records_per_scope_reaches_the_in_process_store(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    store = build(built, FakeSettings(tmp_path, Memory(store="in_process", max_records_per_scope=3)))
    assert await fill(store, 4) == 1
    assert len(await store.list(SCOPE, 50)) == 3


async def test_max_records_per_scope_reaches_the_sqlite_store(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    store = build(built, FakeSettings(tmp_path, Memory(max_records_per_scope=3)))
    assert isinstance(store, SqliteMemoryStore)
    assert store.cap == 3
    assert await fill(store, 4) == 1


async def test_max_records_per_scope_is_sent_by_the_http_store(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787", max_records_per_scope=250))
    store = build(built, settings, {"MEMORY_TOKEN": "t"})
    assert isinstance(store, HttpMemoryStore)
    assert store.cap == 250


@pytest.mark.parametrize("bad", [0, -1, 2.5, 10_001, float("nan"), "500", True], ids=repr)
async def test_a_bad_max_records_per_scope_warns_naming_the_key_and_the_default_governs(
    tmp_path: Path, built: list[MemoryStore], bad: Any
) -> None:
    with capture_logs() as logs:
        store = build(built, FakeSettings(tmp_path, Memory(store="in_process", max_records_per_scope=bad)))
    cap_warnings = [w for w in warnings(logs) if w.get("key") == "memory.max_records_per_scope"]
    (warning,) = cap_warnings
    assert "memory.max_records_per_scope" in warning["message"]
    assert "500" in warning["message"]
    assert warning["using_default"] == 500
    assert await fill(store, 500) == 0
    extra = await store.write(SCOPE, [MemoryCandidate("fact", "the five hundred and first", "t")])
    assert extra.evicted == 1


async def test_a_bad_cap_sends_the_default_to_the_service(tmp_path: Path, built: list[MemoryStore]) -> None:
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787", max_records_per_scope=0))
    with capture_logs():
        store = build(built, settings, {"MEMORY_TOKEN": "t"})
    assert isinstance(store, HttpMemoryStore)
    assert store.cap == 500


def test_cap_validation_accepts_the_full_range() -> None:
    assert validate_scope_cap(1).value == 1
    assert validate_scope_cap(10_000).value == 10_000
    assert validate_scope_cap(None).configured is False


@pytest.mark.parametrize(("configured", "sent"), [("42", 42), (None, None)], ids=["set", "unset"])
async def test_real_settings_drive_the_selection_and_an_unset_cap_is_not_sent(
    tmp_path: Path, built: list[MemoryStore], configured: str | None, sent: int | None
) -> None:
    # Unset, the service applies its own default: a bot that sent 500 on every write would override it.
    env = {
        "SWITCHBOARD_ORGANIZATION": "acme",
        "SWITCHBOARD_MEMORY__ENABLED": "true",
        "SWITCHBOARD_MEMORY__SERVICE_URL": "http://memory:8787",
        "SWITCHBOARD_DATA_DIR": str(tmp_path),
        "MEMORY_TOKEN": "t",
    }
    if configured is not None:
        env["SWITCHBOARD_MEMORY__MAX_RECORDS_PER_SCOPE"] = configured
    config = tmp_path / "switchboard.toml"
    config.write_text("")
    settings = load_settings(env=env, config_path=config)
    store = build_memory_store(settings, env=env)
    built.append(store)
    assert isinstance(store, HttpMemoryStore)
    assert store.cap == sent  # with no cap, no `cap` on a write (tests/memory/stores/test_http_store.py)


# --- the start-up check ------------------------------------------------------------------------------------


async def test_open_memory_store_turns_an_unreachable_database_into_one_line_naming_the_setting(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    dsn = f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/test"
    store = build(built, FakeSettings(tmp_path, Memory(store="postgres")), {"DATABASE_URL": dsn})
    with pytest.raises(MemoryStoreError, match="DATABASE_URL") as refused:
        await open_memory_store(store)
    assert "\n" not in str(refused.value) and "s3cret" not in str(refused.value)


async def test_open_memory_store_is_a_no_op_for_stores_without_a_server(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    for memory in (Memory(enabled=False), Memory(store="in_process"), Memory()):
        with capture_logs():
            store = build(built, FakeSettings(tmp_path, memory))
        await open_memory_store(store)  # nothing to verify: must not raise


# --- the ranking (issue 15) ------------------------------------------------------------------------


@pytest.mark.parametrize("store_name", [None, "in_process"])
async def test_the_stemmed_ranking_is_the_default_and_spec_keeps_whole_tokens(
    tmp_path: Path, built: list[MemoryStore], store_name: str | None
) -> None:
    default = build(built, FakeSettings(tmp_path / "v2", Memory(store=store_name)))
    spec = build(built, FakeSettings(tmp_path / "spec", Memory(store=store_name, ranking="spec")))
    for store in (default, spec):
        await store.write(
            SCOPE, [MemoryCandidate(kind="fact", text="we deployed friday", source_thread_key="t")]
        )
    assert [r.text for r in await default.retrieve(SCOPE, "deploys", 5)] == ["we deployed friday"]
    assert await spec.retrieve(SCOPE, "deploys", 5) == []


def test_an_unknown_ranking_is_one_error_naming_the_key_and_the_default(tmp_path: Path) -> None:
    with pytest.raises(MemoryConfigError, match=r"memory.ranking = 'bm25'.*v2, spec.*default v2"):
        build_memory_store(FakeSettings(tmp_path, Memory(ranking="bm25")), env={})


# --- the embedder (issue 15) -----------------------------------------------------------------------


async def test_the_configured_embedder_is_wired_into_the_store_it_builds(
    tmp_path: Path, built: list[MemoryStore]
) -> None:
    store = build(built, FakeSettings(tmp_path, Memory(embedder="minilm")))
    assert isinstance(store, SqliteMemoryStore)
    assert store.embedder is not None and store.embedder.name == "all-minilm-l6-v2-int8"
    assert isinstance(build(built, FakeSettings(tmp_path / "off", Memory())), SqliteMemoryStore)


def test_minilm_is_the_default_embedder_of_the_settings(tmp_path: Path) -> None:
    settings = load_settings(env={}, config_path=None)
    assert (settings.memory.embedder, settings.memory.ranking) == ("minilm", "v2")


async def test_a_bot_behind_the_memory_service_loads_no_embedder(
    tmp_path: Path, built: list[MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # it would fail to load: it is never asked to
    monkeypatch.setattr("memory.ranking.embedder._LOADED", {})
    settings = FakeSettings(tmp_path, Memory(service_url="http://memory:8787", embedder="minilm"))
    assert isinstance(build(built, settings, env={"MEMORY_TOKEN": "t"}), HttpMemoryStore)


def test_a_missing_embedder_extra_is_one_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # as if the extra were not installed
    monkeypatch.setattr("memory.ranking.embedder._LOADED", {})
    with pytest.raises(MemoryConfigError, match=r"switchboard\[light\]"):
        build_memory_store(FakeSettings(tmp_path, Memory(embedder="wordllama")), env={})
