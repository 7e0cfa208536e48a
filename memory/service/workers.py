"""`memory-service --workers N`: N service processes on one port, under a supervising parent.

The parent binds one `SO_REUSEPORT` socket per worker and hands each worker its own as an inherited
descriptor (`--listen-fd`); it serves nothing itself. Why this shape:

- With `SO_REUSEPORT` the kernel spreads new connections over the workers by the connection's address
  hash. With one socket shared by every worker, whichever event loop wakes first takes the connection,
  and keep-alive clients (the bots', the bench's 64) pile onto one worker and stay there.
- The parent binds, so a port in use is one start-up error before any worker starts, and `--port 0`
  means one port for all. A worker restarted later gets a fresh socket in the same group.
- The parent closes its copy once a worker has started, so a dead worker's socket leaves the group at
  once and new connections go to the living (those already queued on it are reset).

Workers are spawned (`python -m …` with the same arguments), not forked: the Prometheus client picks its
multiprocess value store when it is first imported, so `PROMETHEUS_MULTIPROC_DIR` must be in the
environment before the worker starts. The parent makes that directory fresh for each run, private
(0700), and removes it at exit; `/metrics` on any worker reads every worker's files.

Supervision, as a well-kept process manager does it: each worker tells its parent once it serves (one
byte on an inherited pipe, `--ready-fd`). A worker that dies after that is logged (pid, exit status) and
always replaced, after a short backoff (`BACKOFF_FIRST` seconds, doubling with each death in the last
`BACKOFF_WINDOW` seconds, at most `BACKOFF_MAX`): however often something crashes a worker, the others
keep serving and the service never stops on its own. Only a first worker (one started with the service)
that dies before it served stops the service: every restart would fail the same way (a bad DSN, an
unusable data directory). The parent then exits with that worker's status when it is 2 (a refusal, with
its one line on stderr), else 1. A replacement that dies before it served met something that worked a
moment ago (PostgreSQL restarting, a full disk) while the others still serve: it is retried, after
`BACKOFF_FIRST` seconds doubling with each boot failure in a row, at most `BOOT_RETRY_MAX` (each try
starts a whole process, so a long outage is not met with one a second).
SIGTERM or SIGINT to the parent sends SIGTERM to every worker (a graceful stop: in-flight requests
finish, each store is closed) and waits for them; `STOP_TIMEOUT` seconds later a worker still alive is
killed. Workers run in their own session, so a terminal's ^C reaches only the parent, and on Linux each
worker asks the kernel for SIGTERM if the parent dies, so even a killed parent leaves no orphans.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from memory.types import MemoryStoreError
from ops.metrics import MULTIPROCESS_DIR_ENV, mark_worker_dead

log = structlog.get_logger("memory.service")

DEFAULT_WORKERS = 1
MAX_WORKERS = 64
STARTUP_REFUSED = 2  # a worker's exit status when its store or settings cannot start
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 1.0
BACKOFF_WINDOW = 10.0
BOOT_RETRY_MAX = 5.0
STOP_TIMEOUT = 30.0


def worker_count(value: str) -> int:
    """`--workers`: a whole number from 1 to MAX_WORKERS; anything else is one start-up error."""
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_WORKERS:
        raise MemoryStoreError(
            f"--workers: must be a whole number from 1 to {MAX_WORKERS} (default {DEFAULT_WORKERS}), "
            f"not {value!r}"
        )
    return count


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """`--workers N`, and the hidden flags a supervisor passes to each worker it spawns."""
    parser.add_argument(
        "--workers",
        default=str(DEFAULT_WORKERS),
        metavar="N",
        help=f"serve with N processes on one port (default {DEFAULT_WORKERS}; Linux: SO_REUSEPORT)",
    )
    parser.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--supervisor-pid", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)


def ready_notifier(args: argparse.Namespace) -> Callable[[], None] | None:
    """In a worker: what tells its supervisor it serves (one byte on the inherited pipe, then closed)."""
    fd = args.ready_fd
    if fd is None:
        return None

    def notify() -> None:
        with contextlib.suppress(OSError), os.fdopen(fd, "wb", buffering=0) as pipe:
            pipe.write(b"1")

    return notify


@dataclass(frozen=True)
class WorkerPlan:
    """What to run: `command` is a worker's argv without the hidden flags the supervisor appends."""

    command: tuple[str, ...]
    workers: int
    host: str
    port: int
    env: Mapping[str, str]


async def supervise(plan: WorkerPlan) -> int:
    """Run `plan.workers` workers until a signal; the exit status for the parent."""
    try:
        return await _Supervisor(plan).run()
    except OSError as error:  # the port is taken, the host is not ours
        raise listen_refused(plan.host, plan.port, error) from None


def inherited_listener(args: argparse.Namespace) -> socket.socket | None:
    """In a worker: the socket its supervisor bound (its server listens on it), after asking to die with
    the supervisor."""
    if args.listen_fd is None:
        return None
    if args.supervisor_pid is not None:
        _die_with_parent(args.supervisor_pid)
    return socket.socket(fileno=args.listen_fd)


def _die_with_parent(supervisor_pid: int) -> None:
    """SIGTERM to this process when its parent dies (Linux); gone already → stop now."""
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != supervisor_pid:  # the parent died before the request above took effect
        raise SystemExit(1)


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound in the `SO_REUSEPORT` group of (host, port), not yet listening: its worker's
    server listens once it serves, so the kernel hands a starting (or restarting) worker no connection
    it cannot answer yet — they go to the workers already serving."""
    return _bound(host, port, reuse_port=True)


def bind_single(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) as a single server binds it (its server listens on it).
    Raises OSError (EADDRINUSE) when anything already listens there — another service's
    `SO_REUSEPORT` group included."""
    return _bound(host, port, reuse_port=False)


def ensure_port_free(host: str, port: int) -> None:
    """Raise OSError (EADDRINUSE) when anything already listens on (host, port) — another service's
    `SO_REUSEPORT` group included, which a socket of our own group would silently join."""
    if port != 0:
        bind_single(host, port).close()


def listen_refused(host: str, port: int, error: OSError) -> MemoryStoreError:
    """The one start-up line for a port that cannot be had, naming the flag."""
    return MemoryStoreError(f"--port {port}: cannot listen on {host}:{port}: {error.strerror or error}")


def _bound(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


@dataclass(frozen=True)
class _Worker:
    process: asyncio.subprocess.Process
    booted: asyncio.Future[bool]  # True once it said it serves; False when its pipe closed first
    replacement: bool  # started in place of a worker that died, not with the service


class _Supervisor:
    def __init__(self, plan: WorkerPlan) -> None:
        self._plan = plan
        self._port = plan.port
        self._workers: dict[int, _Worker] = {}  # pid → worker
        self._restarts: set[asyncio.Future[Any]] = set()
        self._deaths: list[float] = []
        self._boot_failures = 0  # replacements in a row that died before they served

    async def run(self) -> int:
        if not hasattr(socket, "SO_REUSEPORT"):
            raise MemoryStoreError("--workers: needs SO_REUSEPORT (Linux); run one process per port instead")
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with tempfile.TemporaryDirectory(prefix="switchboard-metrics-") as metrics_dir:
            env = {**self._plan.env, MULTIPROCESS_DIR_ENV: metrics_dir}
            try:
                return await self._supervise(env, metrics_dir, stop)
            finally:
                for restart in self._restarts:
                    restart.cancel()
                await self._stop_all(metrics_dir)

    async def _supervise(self, env: Mapping[str, str], metrics_dir: str, stop: asyncio.Event) -> int:
        ensure_port_free(self._plan.host, self._port)
        listeners = [bind_listener(self._plan.host, self._port)]
        self._port = listeners[0].getsockname()[1]  # --port 0: the kernel's choice, for every worker
        listeners += [bind_listener(self._plan.host, self._port) for _ in range(self._plan.workers - 1)]
        for listener in listeners:
            await self._spawn(listener, env, replacement=False)
        log.info(
            "memory.service_workers_started",
            host=self._plan.host,
            port=self._port,
            workers=len(self._workers),
            worker_pids=sorted(self._workers),
        )
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while True:
                waits: dict[asyncio.Future[Any], int] = {
                    asyncio.ensure_future(worker.process.wait()): pid for pid, worker in self._workers.items()
                }
                pending: set[asyncio.Future[Any]] = {stopping, *waits, *self._restarts}
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for waiting in waits:
                    waiting.cancel()
                if stopping in done:
                    return 0
                for restarted in done & self._restarts:
                    self._restarts.discard(restarted)
                    restarted.result()  # a spawn that failed (the system is out of processes) stops here
                for finished in done & waits.keys():
                    status = await self._reap(waits[finished], env, metrics_dir)
                    if status is not None:
                        return status
        finally:
            stopping.cancel()

    async def _reap(self, pid: int, env: Mapping[str, str], metrics_dir: str) -> int | None:
        """A worker exited: schedule its replacement (None), or the service's exit status when it never
        served (its restarts would fail the same way)."""
        worker = self._workers.pop(pid)
        status = await worker.process.wait()
        booted = await worker.booted  # the pipe closes with the process: this never waits long
        mark_worker_dead(pid, metrics_dir)
        if not booted and not worker.replacement:
            log.error("memory.service_worker_exited", worker_pid=pid, exit_status=status, action="stop")
            return STARTUP_REFUSED if status == STARTUP_REFUSED else 1
        if booted:
            delay, action = self._backoff(), "restart"
        else:
            self._boot_failures += 1
            delay, action = self._boot_retry(), "retry"
        log.warning(
            "memory.service_worker_exited",
            worker_pid=pid,
            exit_status=status,
            action=action,
            restart_in_s=delay,
            boot_failures=self._boot_failures,
        )
        self._restarts.add(asyncio.ensure_future(self._restart(delay, env)))
        return None

    def _backoff(self) -> float:
        """Seconds before the next restart: short, doubling with each recent death, capped."""
        now = time.monotonic()
        self._deaths = [at for at in self._deaths if now - at < BACKOFF_WINDOW] + [now]
        return float(min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (len(self._deaths) - 1)))

    def _boot_retry(self) -> float:
        """Seconds before another replacement after `_boot_failures` in a row: doubling, capped."""
        return float(min(BOOT_RETRY_MAX, BACKOFF_FIRST * 2 ** (self._boot_failures - 1)))

    async def _restart(self, delay: float, env: Mapping[str, str]) -> None:
        await asyncio.sleep(delay)
        await self._spawn(bind_listener(self._plan.host, self._port), env, replacement=True)

    def _served(self, booted: asyncio.Future[bool]) -> None:
        if not booted.cancelled() and booted.exception() is None and booted.result():
            self._boot_failures = 0

    async def _spawn(self, listener: socket.socket, env: Mapping[str, str], *, replacement: bool) -> None:
        read_end, write_end = os.pipe()
        try:
            with listener:  # the worker holds its own copy; the parent's is closed (see the module doc)
                fd = listener.fileno()
                process = await asyncio.create_subprocess_exec(
                    *self._plan.command,
                    *("--listen-fd", str(fd), "--ready-fd", str(write_end)),
                    *("--supervisor-pid", str(os.getpid())),
                    env=dict(env),
                    pass_fds=(fd, write_end),
                    start_new_session=True,
                )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the worker's copy alone: the pipe reads end-of-file when it dies
        booted = asyncio.ensure_future(_booted(read_end, process.pid))
        booted.add_done_callback(self._served)
        self._workers[process.pid] = _Worker(process, booted, replacement)
        log.info("memory.service_worker_started", worker_pid=process.pid, port=self._port)

    async def _stop_all(self, metrics_dir: str) -> None:
        """SIGTERM to every worker, wait, SIGKILL what is left after STOP_TIMEOUT."""
        workers = {pid: worker.process for pid, worker in self._workers.items()}
        for worker in workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.terminate()
        if workers:
            _, late = await asyncio.wait(
                [asyncio.ensure_future(worker.wait()) for worker in workers.values()],
                timeout=STOP_TIMEOUT,
            )
            for late_wait in late:
                late_wait.cancel()
        for pid, worker in workers.items():
            if worker.returncode is None:
                log.warning("memory.service_worker_killed", worker_pid=pid, after_s=STOP_TIMEOUT)
                with contextlib.suppress(ProcessLookupError):
                    worker.kill()
                await worker.wait()
            mark_worker_dead(pid, metrics_dir)
        for each in self._workers.values():
            each.booted.cancel()
        self._workers.clear()
        log.info("memory.service_workers_stopped")


async def _booted(read_fd: int, pid: int) -> bool:
    """Whether the worker wrote its one byte before its end of the pipe closed; logs the moment."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        served = bool(await reader.read(1))
    finally:
        transport.close()
    if served:
        log.info("memory.service_worker_ready", worker_pid=pid)
    return served
