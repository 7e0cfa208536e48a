"""Speed and reach of memory/rules/redact.py, and the comparison with Yelp's detect-secrets that chose
the engine.

    .venv/bin/python bench/bench_redact.py                     # our redaction only
    .venv/bin/python bench/bench_redact.py --detect-secrets    # also detect-secrets' scan_line
                                                               # (pip install detect-secrets==1.5.0 first;
                                                               # it is no dependency of the project)

Both run on the corpora of tests/memory/redact_corpus.py, line by line, the way redaction is used (one
record text or one transcript at a time). For detect-secrets a secret form counts as caught when some
line reports anything, and as covered when the reported values contain every secret part of it (what
a redaction step would need: detect-secrets reports a plugin's first capture group and no offsets, so
for many shapes only a prefix); a benign sentence counts as flagged when anything is reported.
Then the generalization figures: the vendor corpus of tests/memory/rules/vendor_corpus.py (written
from vendors' documented token formats, never tuned on) and the real engineering lines of
tests/memory/rules/data/benign_lines.txt (a line counts as altered when redaction changed it beyond
normalization). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.rules.redact import normalize_untrusted, redact_secrets
from tests.memory.redact_corpus import BENIGN, SECRET_CASES, SecretCase
from tests.memory.rules.vendor_corpus import VENDOR_CASES

BENIGN_LINES = (
    (Path(__file__).resolve().parent.parent / "tests/memory/rules/data/benign_lines.txt")
    .read_text(encoding="utf-8")
    .splitlines()
)


def _per_call_us(function: Callable[[str], object], texts: Sequence[str], rounds: int) -> tuple[float, float]:
    """p50 and p95 microseconds of one call, over `rounds` passes of every text."""
    samples: list[float] = []
    for _ in range(rounds):
        for text in texts:
            start = time.perf_counter()
            function(text)
            samples.append((time.perf_counter() - start) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def _transcript() -> str:
    """A 24,000-character transcript (the extractor's tail cap) of corpus lines, some secrets in it."""
    lines = [*BENIGN, *(case.text for case in SECRET_CASES[::5])]
    text = ""
    while len(text) < 24_000:
        text += "\n\n".join(lines)
    return text[:24_000]


def _joiner_runs() -> list[tuple[int, float]]:
    """Milliseconds (p50 of 5) to redact "deploy notes 😀" + n zero-width joiners + "😀" (review 1,
    finding 1: quadratic before joiners were decided once per run)."""
    rows: list[tuple[int, float]] = []
    for n in (1_000, 8_000, 20_000, 100_000):
        text = "deploy notes \U0001f600" + "\u200d" * n + "\U0001f600"
        p50, _ = _per_call_us(redact_secrets, [text], 5)
        rows.append((n, p50 / 1000))
    return rows


def _ours() -> dict[str, str]:
    escaped = sum(any(s in redact_secrets(c.text) for s in c.secrets) for c in SECRET_CASES)
    altered = sum(redact_secrets(text) != text for text in BENIGN)
    p50, p95 = _per_call_us(redact_secrets, [*BENIGN, *(c.text for c in SECRET_CASES)], 20)
    long_p50, long_p95 = _per_call_us(redact_secrets, [_transcript()], 20)
    return {
        "caught": f"{len(SECRET_CASES) - escaped} / {len(SECRET_CASES)}",
        "covered": f"{len(SECRET_CASES) - escaped} / {len(SECRET_CASES)}",
        "flagged": f"{altered} / {len(BENIGN)}",
        "line": f"{p50:.1f} / {p95:.1f}",
        "transcript": f"{long_p50 / 1000:.2f} / {long_p95 / 1000:.2f}",
    }


ENTROPY_PLUGINS = ("Base64HighEntropyString", "HexHighEntropyString")


def _detect_secrets(entropy: bool) -> dict[str, str]:
    """detect-secrets' ad-hoc line scan, every default plugin (or all but the two entropy ones)."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings, transient_settings

    with default_settings() as settings:
        names = [name for name in settings.plugins if entropy or name not in ENTROPY_PLUGINS]
    config = {"plugins_used": [{"name": name} for name in names]}

    def found(text: str) -> list[str]:
        values: list[str] = []
        with transient_settings(config):
            for line in text.splitlines() or [text]:
                values.extend(s.secret_value or "" for s in scan_line(line))
        return values

    def covered(case: SecretCase) -> bool:
        values = found(case.text)
        return all(any(part in v for v in values if v) for part in case.secrets)

    missed = [case.kind for case in SECRET_CASES if not found(case.text)]
    uncovered = sum(not covered(case) for case in SECRET_CASES)
    flagged = [text for text in BENIGN if found(text)]
    p50, p95 = _per_call_us(found, [*BENIGN, *(c.text for c in SECRET_CASES)], 2)
    long_p50, long_p95 = _per_call_us(found, [_transcript()], 1)
    label = "all plugins" if entropy else "no entropy plugins"
    print(f"detect-secrets ({label}) missed:", "; ".join(missed), file=sys.stderr)
    print(f"detect-secrets ({label}) flagged:", " | ".join(flagged[:40]), file=sys.stderr)
    return {
        "caught": f"{len(SECRET_CASES) - len(missed)} / {len(SECRET_CASES)}",
        "covered": f"{len(SECRET_CASES) - uncovered} / {len(SECRET_CASES)}",
        "flagged": f"{len(flagged)} / {len(BENIGN)}",
        "line": f"{p50:.1f} / {p95:.1f}",
        "transcript": f"{long_p50 / 1000:.2f} / {long_p95 / 1000:.2f}",
    }


def _generalization() -> dict[str, str]:
    escaped = [c for c in VENDOR_CASES if any(s in redact_secrets(c.text) for s in c.secrets)]
    altered = sum(redact_secrets(line) != normalize_untrusted(line) for line in BENIGN_LINES)
    print("vendor forms escaped:", "; ".join(f"{c.vendor}: {c.kind}" for c in escaped), file=sys.stderr)
    p50, p95 = _per_call_us(redact_secrets, BENIGN_LINES, 3)
    return {
        "vendor": f"{len(VENDOR_CASES) - len(escaped)} / {len(VENDOR_CASES)}",
        "vendors": str(len({c.vendor for c in VENDOR_CASES})),
        "lines": f"{altered} / {len(BENIGN_LINES)}",
        "line": f"{p50:.1f} / {p95:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--detect-secrets", action="store_true", help="also measure detect-secrets' scan_line"
    )
    args = parser.parse_args()
    rows = {"memory/rules/redact.py": _ours()}
    if args.detect_secrets:
        rows["detect-secrets 1.5.0 scan_line, default plugins"] = _detect_secrets(entropy=True)
        rows["detect-secrets 1.5.0 scan_line, without the entropy plugins"] = _detect_secrets(entropy=False)
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print(
        "| engine | secret forms caught | secret forms covered | benign sentences flagged "
        "| per line p50 / p95 µs | 24k transcript p50 / p95 ms |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, row in rows.items():
        cells = (row["caught"], row["covered"], row["flagged"], row["line"], row["transcript"])
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    general = _generalization()
    print("| vendor forms caught (vendors) | real engineering lines altered | per real line p50 / p95 µs |")
    print("| ---: | ---: | ---: |")
    print(f"| {general['vendor']} ({general['vendors']}) | {general['lines']} | {general['line']} |")
    print()
    print("| zero-width joiners in a run | redact_secrets p50 ms |")
    print("| ---: | ---: |")
    for n, ms in _joiner_runs():
        print(f"| {n:,} | {ms:.2f} |")


if __name__ == "__main__":
    main()
