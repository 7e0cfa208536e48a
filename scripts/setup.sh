#!/usr/bin/env bash
# Create .venv and install the project with its dev tools; again only when pyproject.toml changed.
# Says each step as it starts and how long it usually takes, and shows pip's own lines (each package
# as it is collected, then the install), so a first run is never a silent minute or two.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
step() { echo "setup: $*" >&2; }
# pip, its output on stderr less what only repeats that a package is already there and notes about
# unused index locations; its own exit code.
pip_install() {
  set +e
  .venv/bin/python -m pip install "$@" 2>&1 \
    | grep --line-buffered -vE '^WARNING: Location .* is ignored|^Requirement already satisfied' >&2
  local status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    step "pip failed (exit $status): see its messages above"
    exit "$status"
  fi
}
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PYTHON" --version 2>&1) (a few seconds)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.switchboard-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  started=$SECONDS
  step "upgrading pip (about 10 s)"
  pip_install --quiet --upgrade pip
  step "installing switchboard and its dev tools into .venv (about 2 minutes the first time, seconds after)"
  pip_install -e ".[dev]"
  echo "$want" > "$stamp"
  step "ready in $((SECONDS - started)) s"
fi
