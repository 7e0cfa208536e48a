"""The memory service's start and stop lines tell the truth: the start line names the store it serves
(PostgreSQL has no data directory), and a service that never started never says it stopped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.memory.postgres_support import temp_schema
from tests.memory.service_support import memory_service_process


def _events(log_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]


def test_the_start_line_of_a_postgresql_service_names_postgres_and_no_data_directory(tmp_path: Path) -> None:
    log_path = tmp_path / "service.log"
    with (
        temp_schema("sbsvcline") as schema,
        memory_service_process(
            tmp_path, args=("--embedder", "none", "--database-url", schema.dsn), log_path=log_path
        ),
    ):
        pass

    [started] = [e for e in _events(log_path) if e["event"] == "memory.service_started"]
    assert started["store"] == "postgres"
    assert "path" not in started
    assert [e["event"] for e in _events(log_path)].count("memory.service_stopped") == 1


def test_the_start_line_of_a_sqlite_service_names_its_directory(tmp_path: Path) -> None:
    log_path = tmp_path / "service.log"
    with memory_service_process(tmp_path, args=("--embedder", "none"), log_path=log_path):
        pass

    [started] = [e for e in _events(log_path) if e["event"] == "memory.service_started"]
    assert (started["store"], started["path"]) == ("sqlite", str(tmp_path / "memory"))
