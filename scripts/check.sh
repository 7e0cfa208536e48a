#!/usr/bin/env bash
# Every check the project has: lint, types (strict for memory/), sizes, import contracts, the whole test suite.
# Each stage is named as it starts (with how long it usually takes) and timed when it ends. mypy and the
# import contracts need neither the server nor the tests, and the tests leave the cores idle while they
# wait on PostgreSQL and on the processes they start: so those two run beside the tests, their output
# kept and shown, with their result, after pytest's. The tests run on every core (pytest-xdist): a dot per
# test and the count done at each line's end, then the slowest tests and pytest's closing "N passed"
# line. A table of every stage's result and time ends the run; it fails if any stage failed. Arguments go
# to pytest (`-n 0`: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where PYTHONDONTWRITEBYTECODE is set (some shells and CI images set it) no process keeps the bytecode
# it compiles: each test worker compiled the whole project, and rewrote every test module's asserts,
# again (seconds of CPU a process), as did each process a test starts with its own environment. Kept in
# the __pycache__ folders git ignores, it is compiled once, by the serial stage's collection, for every
# process after it.
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
results=()
failed=0
stage_name=""
stage_started=$SECONDS
# One line per finished stage for the closing table: name, result, seconds.
record() {
  results+=("$(printf '%-34s %-7s %4d s' "$1" "$2" "$3")")
  [ "$2" = passed ] || failed=1
}
begin() {
  stage_name=$1
  stage_started=$SECONDS
  echo "== $1 ($2)"
}
end() {  # the exit code of the stage's command
  local took=$((SECONDS - stage_started))
  if [ "$1" -eq 0 ]; then
    echo "   (passed, took $took s)"
    record "$stage_name" passed "$took"
  else
    echo "   (FAILED with exit $1, took $took s)"
    record "$stage_name" FAILED "$took"
  fi
}
# A stage started in the background: its output goes to a file until `finish` shows it.
start_beside() {
  local name=$1
  shift
  echo "== $name: started beside the tests; its output and result follow pytest's"
  ( started=$SECONDS; status=0; "$@" >"$logs/$name.out" 2>&1 || status=$?
    echo "$status $((SECONDS - started))" >"$logs/$name.status" ) &
}
finish() {
  local name=$1 status took
  wait
  read -r status took <"$logs/$name.status"
  echo "== $name (ran beside the tests)"
  sed 's/^/   /' "$logs/$name.out"
  if [ "$status" -eq 0 ]; then echo "   (passed, took $took s)"; else echo "   (FAILED with exit $status, took $took s)"; fi
  record "$name" "$([ "$status" -eq 0 ] && echo passed || echo FAILED)" "$took"
}
run() {  # a foreground stage: name, how long it usually takes, the command
  local name=$1 usually=$2 status=0
  shift 2
  begin "$name" "$usually"
  "$@" || status=$?
  end "$status"
}

run ruff "a few seconds" .venv/bin/ruff check .
run sizes "modules ≤ 600 lines, classes ≤ 300, functions ≤ 80; a second" .venv/bin/python scripts/check_sizes.py
# A CI checkout is new each time, so mypy's cache (some 7,000 modules, the SDKs' included) would only be
# written, never read: a fifth of mypy's CPU. Elsewhere it is kept, and a second run takes a second.
mypy_cache=()
[ -z "${CI:-}" ] || mypy_cache=(--cache-dir /dev/null)
start_beside mypy .venv/bin/mypy "${mypy_cache[@]}"
start_beside "import contracts" .venv/bin/lint-imports --no-cache
run postgres "a server on 127.0.0.1:5432, started if it is down; seconds" bash scripts/ensure_postgres.sh
if [ "$failed" -ne 0 ]; then
  echo "== stopping before the tests: a stage above failed"
else
  # They read the server's transaction horizon, which any other open transaction moves: never beside others.
  begin "pytest, serial" "the tests that need the PostgreSQL server to themselves; one process, seconds"
  status=0
  .venv/bin/python -m pytest -p no:xdist -m serial "$@" || status=$?
  [ "$status" -ne 5 ] || status=0  # 5: the arguments selected none of them
  end "$status"
  # Two workers a core: the tests spend half their time waiting on PostgreSQL and on the processes they
  # start, so one worker a core leaves the cores half idle.
  workers=$(($(nproc) * 2))
  begin "pytest, the rest" "$workers workers on $(nproc) cores; about 4 minutes 30 s on 2 idle cores, far longer on a busy machine"
  status=0
  .venv/bin/python -m pytest -n "$workers" -m "not serial" -o console_output_style=count --durations=15 "$@" \
    || status=$?
  end "$status"
fi
finish mypy
finish "import contracts"
echo "== results"
printf '   %s\n' "${results[@]}"
exit "$failed"
