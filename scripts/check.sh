#!/usr/bin/env bash
# Every check the project has: lint, types (strict for memory/), the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy"
.venv/bin/mypy
echo "== import contracts"
.venv/bin/lint-imports --no-cache
echo "== postgres"
bash scripts/ensure_postgres.sh
echo "== pytest"
.venv/bin/python -m pytest "$@"
