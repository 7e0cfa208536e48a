"""`switchboard memory …` refuses an unusable memory store at start-up with exit 2, as every mode does."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.cli import main


def test_a_data_directory_that_is_a_file_is_refused_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SWITCHBOARD_ORGANIZATION", "acme")
    monkeypatch.setenv("SWITCHBOARD_MEMORY__ENABLED", "true")
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(blocker))
    assert main(["list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(blocker) in err
