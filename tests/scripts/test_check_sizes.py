"""The size check that scripts/check.sh runs: a room past its limit fails the check, and ours are within."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_sizes.py"


def run_check(root: Path, *packages: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *packages],
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def function_of(lines: int, name: str = "f", indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
    return f"{indent}def {name}() -> None:\n{body}"


def test_rooms_within_their_limits_pass(tmp_path: Path) -> None:
    write(tmp_path, "pkg/ok.py", function_of(80))
    result = run_check(tmp_path, "pkg")
    assert (result.returncode, result.stdout) == (0, "")


def test_a_function_past_80_lines_fails_and_is_named(tmp_path: Path) -> None:
    write(tmp_path, "pkg/sub/long.py", function_of(81, "too_long"))
    result = run_check(tmp_path, "pkg")
    assert result.returncode == 1
    assert result.stdout == "pkg/sub/long.py:1: function too_long is 81 lines (limit 80)\n"


def test_a_class_past_300_lines_fails(tmp_path: Path) -> None:
    methods = "".join(function_of(60, f"m{i}", indent="    ") for i in range(5))
    write(tmp_path, "pkg/big.py", "class Big:\n" + methods)
    result = run_check(tmp_path, "pkg")
    assert result.returncode == 1
    assert "pkg/big.py:1: class Big is 301 lines (limit 300)" in result.stdout


def test_a_module_past_600_lines_fails(tmp_path: Path) -> None:
    write(tmp_path, "pkg/wide.py", "".join(function_of(50, f"f{i}") for i in range(13)))
    result = run_check(tmp_path, "pkg")
    assert result.returncode == 1
    assert result.stdout.startswith("pkg/wide.py:1: module is 650 lines (limit 600)")


def test_the_project_keeps_every_limit() -> None:
    result = run_check(ROOT)
    assert result.returncode == 0, result.stdout
