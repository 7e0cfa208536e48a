#!/usr/bin/env bash
# Every check the project has: lint, types (strict for memory/), sizes, import contracts, the whole test suite.
# Each stage is named as it starts (with how long it usually takes) and timed when it ends. The tests
# run on every core (pytest-xdist): a dot per test and the count done at each line's end, then the
# slowest tests and pytest's closing "N passed" line. Arguments go to pytest (`-n 0`: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
stage_started=$SECONDS
stage() {
  echo "   (took $((SECONDS - stage_started)) s)"
  stage_started=$SECONDS
  echo "== $*"
}
echo "== ruff (a few seconds)"
.venv/bin/ruff check .
stage "mypy (about 30 s; seconds once cached)"
.venv/bin/mypy
stage "sizes (modules ≤ 600 lines, classes ≤ 300, functions ≤ 80)"
.venv/bin/python scripts/check_sizes.py
stage "import contracts (about 10 s)"
.venv/bin/lint-imports --no-cache
stage "postgres (a server on 127.0.0.1:5432, started if it is down)"
bash scripts/ensure_postgres.sh
stage "pytest, the tests that need the PostgreSQL server to themselves (one process, seconds)"
# They read the server's transaction horizon, which any other open transaction moves: never beside others.
serial=0
.venv/bin/python -m pytest -p no:xdist -m serial "$@" || serial=$?
[ "$serial" -eq 0 ] || [ "$serial" -eq 5 ] || exit "$serial"  # 5: the arguments selected none of them
stage "pytest on $(nproc) cores (about 4 minutes on 2 idle cores)"
.venv/bin/python -m pytest -n auto -m "not serial" -o console_output_style=count --durations=15 "$@"
echo "   (took $((SECONDS - stage_started)) s)"
