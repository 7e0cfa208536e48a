"""Load on the memory service's /retrieve: 64 concurrent connections for 30 s from a second process.

The service runs as its own process (`python -m memory.service`, uvicorn over the SQLite store) on
127.0.0.1; this script seeds one scope with 500 records, then drives /retrieve from this process with
aiohttp (one connection per worker, keep-alive) and prints requests/s, latency percentiles and errors.

    .venv/bin/python bench/bench_service.py                     # the issue's run: 64 × 30 s, 500 records
    .venv/bin/python bench/bench_service.py --duration 5        # a quick look
    .venv/bin/python bench/bench_service.py --store constant    # the HTTP layer alone (no store work)
    .venv/bin/python bench/bench_service.py --store both        # sqlite then constant, and the ratio
    .venv/bin/python bench/bench_service.py --store both --workers 2   # each service: 2 processes, one port
    .venv/bin/python bench/bench_service.py --url http://127.0.0.1:8787   # an already running service

Everything is bounded: a per-request timeout, a fixed duration, the service stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from memory.service.workers import add_worker_arguments, worker_count

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-memory-token"
SCOPE = "org:bench"

TOPICS = [
    "deploy", "billing", "release", "oncall", "postgres", "migrations", "frontend", "staging", "review",
    "incident", "backups", "metrics", "alerts", "terraform", "kubernetes", "payments", "search", "cache",
    "queue", "tokens", "secrets", "ci", "flaky", "tests", "docs", "api", "latency", "budget", "pricing",
    "onboarding",
]  # fmt: skip
VERBS = ["uses", "needs", "runs", "prefers", "avoids", "owns", "breaks", "pins", "rotates", "tracks"]
QUERIES = [
    "how do we deploy the billing service",
    "who owns oncall for payments",
    "postgres migrations on staging",
    "why are the ci tests flaky",
    "terraform and kubernetes conventions",
    "where do the alerts and metrics go",
    "cache and queue latency budget",
    "rotate the api tokens and secrets",
]


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    cpu_seconds: float | None = None  # the service process's user + system time while measured

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process and its live children (a supervisor's workers; Linux /proc),
    or None where that cannot be read."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(process_cpu_seconds(int(child)) or 0.0 for child in children)


@contextmanager
def service_process(data_dir: Path, store: str, workers: int = 1) -> Iterator[tuple[str, int]]:
    """The memory service in its own process (`workers` processes on one port, under a supervisor) on
    a free loopback port; always stopped afterwards.

    `store="constant"` serves the same app over a store that answers every retrieve with the same
    records and stores nothing: the HTTP layer's own ceiling on this machine, for comparison.
    """
    port = free_port()
    env = {**os.environ, "MEMORY_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    if store == "constant":
        command = [sys.executable, __file__, "--serve-constant", str(port)]
    else:
        command = [
            sys.executable,
            "-m",
            "memory.service",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ]
    command += ["--workers", str(workers)]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,  # one log line per request: not what we are measuring
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve_constant(port: int, listener: socket.socket | None = None) -> None:
    """The baseline server: the real app, server stack and logging, over a store that does no work
    (on `listener`: a worker of several, as the service's own workers)."""
    from memory.service.app import create_app
    from memory.service.main import configure_logging, run_event_loop, serve_app, uvicorn_config
    from memory.stores.in_process import InProcessMemoryStore
    from memory.types import MemoryRecord
    from ops.http_guard import GuardLimits
    from ops.metrics import MULTIPROCESS_DIR_ENV, Metrics

    class ConstantStore(InProcessMemoryStore):
        async def retrieve(self, scope_key: str, query: str, limit: int) -> list[MemoryRecord]:
            return [
                MemoryRecord(
                    id=f"mem:{scope_key}:{n}",
                    scope_key=scope_key,
                    kind="fact",
                    text=str(record["text"]),
                    source_thread_key=f"slack:C1:{n}",
                    created_at=1_800_000_000.0,
                    keywords=tuple(record["keywords"]),  # type: ignore[arg-type]
                    last_used_at=1_800_000_100.0,
                    use_count=3,
                )
                for n, record in enumerate(seed_records(limit), start=1)
            ]

    configure_logging(with_pid=listener is not None)
    metrics = Metrics(multiprocess_dir=os.environ.get(MULTIPROCESS_DIR_ENV) if listener is not None else None)
    app = create_app(ConstantStore(cap=500), TOKEN, metrics=metrics)
    run_event_loop(serve_app(uvicorn_config(app, "127.0.0.1", port, GuardLimits(), metrics), listener))


def serve_constant_workers(args: argparse.Namespace) -> int:
    """`--serve-constant PORT [--workers N]`: one baseline server, or N under the service's supervisor."""
    from memory.service.main import run_event_loop
    from memory.service.workers import WorkerPlan, inherited_listener, supervise, worker_count

    listener = inherited_listener(args)
    workers = worker_count(args.workers)
    if workers > 1 and listener is None:
        command = (
            sys.executable,
            __file__,
            "--serve-constant",
            str(args.serve_constant),
            "--workers",
            str(workers),
        )
        return run_event_loop(
            supervise(WorkerPlan(command, workers, "127.0.0.1", args.serve_constant, os.environ))
        )
    serve_constant(args.serve_constant, listener)
    return 0


async def wait_healthy(session: aiohttp.ClientSession, url: str) -> None:
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    async with session.get(f"{url}/healthz") as reply:
                        if reply.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise RuntimeError(f"memory service at {url} did not become healthy") from None


def seed_records(count: int) -> list[dict[str, object]]:
    rng = random.Random(7)
    records: list[dict[str, object]] = []
    for n in range(count):
        a, b = rng.sample(TOPICS, 2)
        text = f"the {a} team {rng.choice(VERBS)} {b} for item {n}; see runbook {rng.randint(1, 99)}"
        records.append({"kind": "fact", "text": text, "sourceThreadKey": f"slack:C1:{n}", "keywords": [a, b]})
    return records


async def seed(session: aiohttp.ClientSession, url: str, count: int) -> None:
    records = seed_records(count)
    for start in range(0, count, 50):
        body = {"scopeKey": SCOPE, "records": records[start : start + 50], "cap": max(count, 500)}
        async with session.post(f"{url}/write", json=body) as reply:
            if reply.status != 200:
                raise RuntimeError(f"seeding failed: {reply.status} {await reply.text()}")
    async with session.post(f"{url}/list", json={"scopeKey": SCOPE, "limit": 1}) as reply:
        assert reply.status == 200


async def drive(
    url: str, token: str, connections: int, duration: float, warmup: float, limit: int, pid: int | None
) -> Results:
    """`connections` workers, each on its own keep-alive connection, POSTing /retrieve back to back."""
    results = Results()
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=5.0)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:
        loop = asyncio.get_running_loop()
        start = loop.time()
        measure_from = start + warmup
        stop = measure_from + duration

        async def worker(index: int) -> None:
            rng = random.Random(index)
            while True:
                now = loop.time()
                if now >= stop:
                    return
                body = {"scopeKey": SCOPE, "query": rng.choice(QUERIES), "limit": limit}
                sent = time.perf_counter()
                try:
                    async with session.post(f"{url}/retrieve", json=body) as reply:
                        payload = await reply.read()
                        ok = reply.status == 200 and b'"records"' in payload
                        kind = "ok" if ok else f"http {reply.status}"
                except (aiohttp.ClientError, TimeoutError) as exc:
                    kind = type(exc).__name__
                elapsed = time.perf_counter() - sent
                if now < measure_from:
                    continue
                if kind == "ok":
                    results.latencies.append(elapsed)
                else:
                    results.error(kind)

        async def meter() -> None:
            await asyncio.sleep(max(0.0, measure_from - loop.time()))
            before = process_cpu_seconds(pid)
            await asyncio.sleep(max(0.0, stop - loop.time()))
            after = process_cpu_seconds(pid)
            if before is not None and after is not None:
                results.cpu_seconds = after - before

        await asyncio.gather(meter(), *(worker(i) for i in range(connections)))
    return results


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


async def run(args: argparse.Namespace, token: str, store: str, pid: int | None = None) -> dict[str, object]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
        await wait_healthy(session, args.url)
        await seed(session, args.url, args.records)
        async with session.post(
            f"{args.url}/retrieve", json={"scopeKey": SCOPE, "query": QUERIES[0], "limit": args.limit}
        ) as reply:
            sample = len((await reply.json())["records"])
    results = await drive(args.url, token, args.connections, args.duration, args.warmup, args.limit, pid)
    latencies = sorted(results.latencies)
    errors = sum(results.errors.values())
    return {
        "date": time.strftime("%Y-%m-%d"),
        "store": store,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "connections": args.connections,
        "workers": args.workers,
        "duration_s": args.duration,
        "scope_records": args.records,
        "limit": args.limit,
        "records_per_reply": sample,
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / args.duration, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p95_ms": round(percentile(latencies, 0.95) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else None,
        "errors": errors,
        "error_kinds": results.errors,
        "load_average": round(os.getloadavg()[0], 2),
        "service_cpu_ms_per_request": (
            round(results.cpu_seconds * 1000 / len(latencies), 3)
            if results.cpu_seconds is not None and latencies
            else None
        ),
    }


def run_store(args: argparse.Namespace, store: str) -> dict[str, object]:
    """One store's run against a fresh service process (or the already running `--url`)."""
    if args.url:
        return asyncio.run(run(args, os.environ.get("MEMORY_TOKEN", ""), "external"))
    with (
        tempfile.TemporaryDirectory(prefix="bench-memory-") as data_dir,
        service_process(Path(data_dir), store, int(args.workers)) as (url, pid),
    ):
        return asyncio.run(run(argparse.Namespace(**{**vars(args), "url": url}), TOKEN, store, pid))


def summary(report: dict[str, object]) -> str:
    return (
        f"[{report['store']}] {report['requests_per_s']} requests/s over {report['duration_s']} s, "
        f"{report['connections']} connections, {report['workers']} service worker(s), "
        f"{report['scope_records']} records in the scope "
        f"({report['records_per_reply']} per reply); "
        f"p50 {report['p50_ms']} ms, p95 {report['p95_ms']} ms, p99 {report['p99_ms']} ms, "
        f"max {report['max_ms']} ms; errors {report['errors']}; "
        f"service CPU {report['service_cpu_ms_per_request']} ms/request; load {report['load_average']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="an already running service (token from MEMORY_TOKEN); else start one")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds (default 30)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first (default 2)")
    parser.add_argument("--records", type=int, default=500, help="records in the scope (default 500)")
    parser.add_argument("--limit", type=int, default=8, help="retrieve limit (default 8, the bot's)")
    parser.add_argument(
        "--store",
        choices=["sqlite", "constant", "both"],
        default="sqlite",
        help="sqlite: the real service (default); constant: the HTTP layer alone, a store that does no "
        "work; both: sqlite then constant in one run, with the ratio",
    )
    add_worker_arguments(parser)  # --workers N: each service started with N processes on one port
    parser.add_argument("--serve-constant", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_constant:
        return serve_constant_workers(args)
    args.workers = worker_count(args.workers)
    stores = ["sqlite", "constant"] if args.store == "both" else [args.store]
    reports = [run_store(args, store) for store in stores]
    for report in reports:
        print(summary(report))
        print(json.dumps(report))
    if len(reports) == 2:
        ratio = float(reports[0]["requests_per_s"]) / max(float(reports[1]["requests_per_s"]), 1e-9)  # type: ignore[arg-type]
        print(f"sqlite / constant in the same run: {ratio:.2f}")
    return 0 if all(report["errors"] == 0 for report in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
