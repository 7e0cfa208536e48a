"""One exit code per kind of failure, the same for every command (`serve`, `chat`, `memory …`,
`memory-service`), so a script or a supervisor can tell them apart.

    0    done
    1    it ran and did not do what was asked: a refusal (not an admin, no such record), an answer
         that failed, work still in flight at a stop, a Slack token revoked while serving
    2    it cannot run: a usage error, a configuration error, or a resource it cannot use — a port
         in use, a data directory it cannot write, a store or Slack it cannot reach or that refuses
         the token — said in one line before any work starts
    130  interrupted (Ctrl-C) while starting
    141  its reader went away (`switchboard --help | head -3`), as a Unix tool killed by SIGPIPE
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_UNUSABLE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def problem_lines(prog: str, *problems: str) -> str:
    """What stops a command, one problem a line, each line naming the command (`switchboard serve:
    …`): a line per problem reads at a glance where one long line joined by "and" does not."""
    lines = [line for problem in problems for line in problem.splitlines() if line.strip()]
    return "\n".join(f"{prog}: {line}" for line in lines)
