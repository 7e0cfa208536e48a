#!/usr/bin/env bash
# Every check the project has: lint, types (strict for memory/), sizes, import contracts, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy"
.venv/bin/mypy
echo "== sizes (modules ≤ 600 lines, classes ≤ 300, functions ≤ 80)"
.venv/bin/python scripts/check_sizes.py
echo "== import contracts"
.venv/bin/lint-imports --no-cache
echo "== postgres"
bash scripts/ensure_postgres.sh
echo "== pytest"
.venv/bin/python -m pytest "$@"
