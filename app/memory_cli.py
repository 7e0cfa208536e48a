"""`switchboard memory …`: the terminal's memory commands (commands/cli.py), with the write policy.

The commands never import the bot, so the policy `memory remember` asks (app/policy.py) is lent to
them here, the one place a terminal's `switchboard memory` starts.
"""

from __future__ import annotations

from app.policy import write_gate
from commands.cli import main as memory_main


def main(argv: list[str]) -> int:
    return memory_main(argv, write_gate=write_gate)
