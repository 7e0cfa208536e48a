#!/usr/bin/env bash
# Set up once, then run the bot: `switchboard serve` by default, or any switchboard command given.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$#" -eq 0 ]; then
  set -- serve
fi
exec .venv/bin/switchboard "$@"
