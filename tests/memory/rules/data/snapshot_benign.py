"""Writes benign_lines.txt: real engineering text nobody wrote for the redaction tests, one line each.

Run by hand from the repository root when the snapshot should be refreshed (the test reads only the
file, so it is hermetic):

    .venv/bin/python tests/memory/rules/data/snapshot_benign.py

Sources: the README and BENCHMARKS.md, this repository's commit messages, the description text of
installed packages' METADATA, and LoCoMo dialogue turns. Lines shorter than 12 characters and
duplicates are dropped; nothing else is edited or filtered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
OUT = Path(__file__).with_name("benign_lines.txt")
PACKAGES = (
    "httpx", "anthropic", "openai", "slack_bolt", "slack_sdk", "starlette", "uvicorn", "structlog",
    "hypothesis", "pytest", "ruff", "anyio", "pydantic", "psycopg",
)  # fmt: skip
LOCOMO = Path("/work/shared/bench/locomo/locomo_dev.jsonl")
LOCOMO_TURNS = 900


def _metadata_description(package: str) -> list[str]:
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    dist = next(site.glob(f"{package}-*.dist-info"))
    text = (dist / "METADATA").read_text(encoding="utf-8")
    _, _, body = text.partition("\n\n")
    return body.splitlines()


def _locomo() -> list[str]:
    lines: list[str] = []
    for row in LOCOMO.read_text(encoding="utf-8").splitlines():
        for session in json.loads(row)["sessions"]:
            lines.extend(turn["text"] for turn in session["turns"])
    return lines[:LOCOMO_TURNS]


def main() -> None:
    git_log = subprocess.run(
        ["git", "log", "--format=%B"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    sources = [
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines(),
        (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines(),
        git_log,
        *(_metadata_description(package) for package in PACKAGES),
        _locomo(),
    ]
    seen: set[str] = set()
    out: list[str] = []
    for source in sources:
        for line in source:
            line = line.rstrip()
            if len(line.strip()) >= 12 and line not in seen:
                seen.add(line)
                out.append(line)
    OUT.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(out)} lines -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
