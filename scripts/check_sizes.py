"""Rooms a reader can hold: no module, class or function of ours past its size limit.

Counts physical lines of source (a module's whole file; a class or function from its `def`/`class` line
to its last line, decorators excluded), in the packages named on the command line (default: the project's
own). Prints one line per room over its limit and exits 1 when there is any, so `scripts/check.sh` — and
with it CI — fails the moment one grows past.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("app", "memory", "commands", "config", "ops")
MODULE_LINES = 600
CLASS_LINES = 300
FUNCTION_LINES = 80


@dataclass(frozen=True)
class Oversize:
    path: Path
    line: int
    what: str
    lines: int
    limit: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} is {self.lines} lines (limit {self.limit})"


def oversized(path: Path) -> Iterator[Oversize]:
    source = path.read_text(encoding="utf-8")
    total = len(source.splitlines())
    if total > MODULE_LINES:
        yield Oversize(path, 1, "module", total, MODULE_LINES)
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.ClassDef):
            kind, limit = "class", CLASS_LINES
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind, limit = "function", FUNCTION_LINES
        else:
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > limit:
            yield Oversize(path, node.lineno, f"{kind} {node.name}", length, limit)


def sources(root: Path, packages: Sequence[str]) -> Iterator[Path]:
    for package in packages:
        yield from sorted((root / package).rglob("*.py"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("packages", nargs="*", default=PACKAGES)
    args = parser.parse_args(argv)
    found = [item for path in sources(args.root, args.packages) for item in oversized(path)]
    for item in found:
        print(str(item).removeprefix(f"{args.root}/"))
    if found:
        print(
            f"{len(found)} room(s) over the limits (modules {MODULE_LINES}, classes {CLASS_LINES}, "
            f"functions {FUNCTION_LINES} lines): split them",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
