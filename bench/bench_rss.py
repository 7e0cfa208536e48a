"""The bot's resident memory with each embedder loaded: what `memory.embedder` costs a process.

    .venv/bin/python bench/bench_rss.py                      # none and minilm (the default)
    .venv/bin/python bench/bench_rss.py --embedders none,wordllama,minilm
    .venv/bin/python bench/bench_rss.py --long-batch 32     # the encoder alone, one batch of long texts

Each figure comes from a fresh interpreter that imports the bot (the Slack surface, the agent, the
memory core), builds the memory store the way start-up does (`build_memory_store`, SQLite), writes 500
records and answers 50 four-scope reads, then reports its peak RSS (`ru_maxrss`) and current VmRSS.
`--long-batch N`: a fresh interpreter loads the default encoder, embeds one short text, then N texts at
the model's 256-token cap in one call (a reindex batch, or a write's long candidates): its peak RSS
before and after that call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, json, resource, sys
import app.slack.transports.serve, app.agent  # the bot's own modules, as `switchboard serve` imports them
from config.settings import load_settings
from memory.stores.build import build_memory_store
from memory.types import MemoryCandidate
from memory.rules.visibility import Reader
from tests.memory.reads import memory_context_block

async def main():
    settings = load_settings()
    store = build_memory_store(settings)
    words = "deploy release billing cluster api team friday staging review docs oncall".split()
    for start in range(0, 500, 50):
        batch = [MemoryCandidate(kind="fact", text=f"{words[n % 11]} note {n} about {words[(n * 7) % 11]}",
                                 source_thread_key="t", origin="public") for n in range(start, start + 50)]
        await store.write("org:acme", batch)
    for n in range(50):
        await memory_context_block(store, f"what about the {words[n % 11]} {words[(n * 3) % 11]}?",
                                   reader=Reader("public", "slack:U1", "slack:C1"), organization="acme",
                                   user_id="slack:U1", channel_id="slack:C1", repo="acme/api")
    await store.aclose()
    vm = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"max_rss_mb": peak, "vm_rss_mb": int(vm) / 1024}))

asyncio.run(main())
"""

LONG_BATCH_CHILD = r"""
import json, resource, sys
from memory.ranking.encoder import MiniLM
model = MiniLM.load(threads=1)
text = ("The deploy pipeline runs the integration suite against a staging database before promoting the "
        "build; if any migration fails the release is held and the on-call engineer is paged. ") * 8
model.encode(["warm up"])
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak()
model.encode([f"{text} {n}" for n in range(int(sys.argv[1]))])
print(json.dumps({"before_mb": before, "max_rss_mb": peak()}))
"""


def long_batch(count: int, python: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [python, "-c", LONG_BATCH_CHILD, str(count)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(embedder: str, python: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")},
            "PYTHONPATH": str(ROOT),
            "SWITCHBOARD_MEMORY__ENABLED": "true",
            "SWITCHBOARD_ORGANIZATION": "acme",
            "SWITCHBOARD_DATA_DIR": tmp,
            "SWITCHBOARD_MEMORY__EMBEDDER": embedder,
            "HF_HUB_OFFLINE": "1",
        }
        done = subprocess.run(
            [python, "-c", CHILD], env=env, cwd=tmp, capture_output=True, text=True, check=True, timeout=600
        )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedders", default="none,minilm")
    parser.add_argument("--python", default=sys.executable, help="the interpreter (a venv with the extra)")
    parser.add_argument("--long-batch", type=int, default=0, metavar="N", help="N texts of 256 tokens")
    args = parser.parse_args(argv)
    if args.long_batch:
        figures = long_batch(args.long_batch, args.python)
        print(
            f"{args.long_batch} long texts: peak RSS {figures['before_mb']:.0f} MB before, "
            f"{figures['max_rss_mb']:.0f} MB after"
        )
        return 0
    print("| memory.embedder | peak RSS MB | RSS at the end MB |")
    print("| --- | ---: | ---: |")
    for name in [n for n in args.embedders.split(",") if n]:
        figures = measure(name, args.python)
        print(f"| {name} | {figures['max_rss_mb']:.0f} | {figures['vm_rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
