"""`memory-service --workers N`: several real service processes on one port, under a supervisor.

Which worker answered is read from the service's own log lines (each worker's lines carry its pid),
never from an endpoint; `/metrics` is scraped with METRICS_TOKEN.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memory.ranking.encoder import intra_op_threads
from memory.service.main import main
from memory.service.workers import bind_listener, ensure_port_free
from tests.memory.service_support import AUTH, RunningService, memory_service_process

SCOPE = "org:workers"
METRICS_TOKEN = "workers-metrics-token"
WORKER_ARGS = ("--workers", "2", "--embedder", "none")


def worker_pids(parent: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def wait_workers(service: RunningService, count: int) -> list[int]:
    assert wait_until(lambda: len(worker_pids(service.process.pid)) == count)
    return worker_pids(service.process.pid)


def request_pids(log_path: Path, route: str) -> list[int]:
    """The pid of each `memory.service.request` line for `route`, in the order written."""
    pids = []
    for line in log_path.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "memory.service.request" and event.get("route") == route:
            pids.append(int(event["pid"]))
    return pids


def ready_pids(log_path: Path) -> list[int]:
    """The workers the supervisor has heard say they serve, in the order they said it."""
    events = [json.loads(line) for line in log_path.read_text().splitlines()]
    return [int(e["worker_pid"]) for e in events if e.get("event") == "memory.service_worker_ready"]


def post(service: RunningService, path: str, body: dict[str, object]) -> httpx.Response:
    """On a fresh connection (so the kernel picks a worker afresh for each request)."""
    return httpx.post(f"{service.base_url}{path}", headers=AUTH, json=body, timeout=30)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningService, Path]]:
    directory = tmp_path_factory.mktemp("memory-workers")
    log_path = directory / "service.log"
    with memory_service_process(
        directory, args=WORKER_ARGS, env={"METRICS_TOKEN": METRICS_TOKEN}, log_path=log_path
    ) as service:
        wait_workers(service, 2)
        yield service, log_path


def test_two_workers_answer_on_one_port_from_two_pids(logged: tuple[RunningService, Path]) -> None:
    service, log_path = logged
    workers = set(worker_pids(service.process.pid))
    for _ in range(30):
        assert post(service, "/list", {"scopeKey": "org:spread", "limit": 1}).status_code == 200
    answered = set(request_pids(log_path, "/list"))
    assert answered == workers  # both answered; the supervisor itself serves nothing
    assert service.process.pid not in answered


def test_metrics_sum_every_workers_counts(logged: tuple[RunningService, Path]) -> None:
    service, log_path = logged
    before = request_pids(log_path, "/list")
    for _ in range(40):
        assert post(service, "/list", {"scopeKey": "org:counted", "limit": 1}).status_code == 200
    served = request_pids(log_path, "/list")[len(before) :]
    assert len(served) == 40 and len(set(served)) == 2  # both workers counted some
    scrapes = [
        httpx.get(f"{service.base_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        for _ in range(6)  # answered by either worker: every one reports the whole service
    ]
    for scrape in scrapes:
        assert scrape.status_code == 200
        line = 'switchboard_http_requests_total{route="/list",server="memory",status="200"}'
        counts = [row.split()[-1] for row in scrape.text.splitlines() if row.startswith(line)]
        assert counts == [f"{len(before) + 40:.1f}"]
        assert "switchboard_http_open_connections" in scrape.text
    assert httpx.get(f"{service.base_url}/metrics").status_code == 401


def test_a_forget_through_one_worker_is_never_served_by_another(logged: tuple[RunningService, Path]) -> None:
    service, log_path = logged
    records = [
        {"kind": "fact", "text": f"the billing deploy runs step {n} from the runbook", "sourceThreadKey": "t"}
        for n in range(5)
    ]
    assert post(service, "/write", {"scopeKey": SCOPE, "records": records}).json()["inserted"] == 5
    query = {"scopeKey": SCOPE, "query": "billing deploy runbook step", "limit": 8}
    start = len(request_pids(log_path, "/retrieve"))
    served = [
        {record["id"] for record in post(service, "/retrieve", query).json()["records"]} for _ in range(30)
    ]
    assert len(set(request_pids(log_path, "/retrieve")[start:])) == 2  # both have the scope in memory
    target = sorted(served[0])[0]
    assert all(target in ids for ids in served)

    assert post(service, "/forget", {"scopeKey": SCOPE, "id": target}).json()["forgotten"] is True
    start = len(request_pids(log_path, "/retrieve"))
    after = [
        {record["id"] for record in post(service, "/retrieve", query).json()["records"]} for _ in range(60)
    ]
    assert len(set(request_pids(log_path, "/retrieve")[start:])) == 2  # both answered after the forget
    assert all(target not in ids and len(ids) == 4 for ids in after)


def test_sigterm_to_the_supervisor_stops_every_worker(tmp_path: Path) -> None:
    with memory_service_process(tmp_path, args=WORKER_ARGS) as service:
        workers = wait_workers(service, 2)
        metrics_dir = Path(dict_environ(workers[0])["PROMETHEUS_MULTIPROC_DIR"])
        assert metrics_dir.is_dir() and oct(metrics_dir.stat().st_mode & 0o777) == "0o700"
        assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        service.process.send_signal(signal.SIGTERM)
        assert service.process.wait(timeout=20) == 0
        assert not any(running(pid) for pid in workers)
        assert not metrics_dir.exists()


def test_a_killed_supervisor_leaves_no_orphans(tmp_path: Path) -> None:
    # A killed parent cannot remove its metrics directory: let it make that under tmp_path.
    with memory_service_process(tmp_path, args=WORKER_ARGS, env={"TMPDIR": str(tmp_path)}) as service:
        workers = wait_workers(service, 2)
        service.process.kill()
        service.process.wait(timeout=10)
        try:
            assert wait_until(lambda: not any(running(pid) for pid in workers))
        finally:  # a failure here must not leave the orphans it found
            for pid in filter(running, workers):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_that_dies_is_logged_and_replaced(tmp_path: Path) -> None:
    log_path = tmp_path / "service.log"
    with memory_service_process(
        tmp_path, args=WORKER_ARGS, env={"METRICS_TOKEN": METRICS_TOKEN}, log_path=log_path
    ) as service:
        first, second = wait_workers(service, 2)
        # Both serve before one dies: one killed while still booting is a start-up failure instead
        # (the service stops), and on a busy machine the second can boot long after the first answers.
        assert wait_until(lambda: {first, second} <= set(ready_pids(log_path)))
        for _ in range(10):
            assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        os.kill(first, signal.SIGKILL)
        assert wait_until(
            lambda: (
                first not in worker_pids(service.process.pid) and len(worker_pids(service.process.pid)) == 2
            )
        )
        replacement = (set(worker_pids(service.process.pid)) - {second}).pop()
        assert wait_until(lambda: replacement in ready_pids(log_path))
        for _ in range(20):
            assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        assert replacement in request_pids(log_path, "/list")
        events = [json.loads(line) for line in log_path.read_text().splitlines()]
        exited = [e for e in events if e["event"] == "memory.service_worker_exited"]
        assert exited == [
            {**exited[0], "worker_pid": first, "exit_status": -signal.SIGKILL, "action": "restart"}
        ]
        scrape = httpx.get(
            f"{service.base_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        line = 'switchboard_http_requests_total{route="/list",server="memory",status="200"} 30.0'
        assert line in scrape.text.splitlines()  # the dead worker's counts stay in the sum


def test_a_worker_refused_at_start_up_stops_the_service_with_status_2(tmp_path: Path) -> None:
    process = subprocess.run(
        [
            *(sys.executable, "-m", "memory.service", "--port", "0", "--data-dir", str(tmp_path)),
            *WORKER_ARGS,
            *("--database-url", "postgresql://nobody@127.0.0.1:1/none"),
        ],
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert process.returncode == 2
    assert b"cannot connect to PostgreSQL" in process.stderr


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "65"])
def test_a_bad_workers_value_is_one_line_naming_the_flag_and_default(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--workers", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    message = f"--workers: must be a whole number from 1 to 64 (default 1), not {value!r}"
    assert err == [f"switchboard memory-service: {message}"]


def dict_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in raw if entry)


def test_a_worker_socket_takes_no_connection_before_its_worker_serves() -> None:
    # As the supervisor hands it to a worker still loading its embedder and opening its store.
    bound = bind_listener("127.0.0.1", 0)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(bound.getsockname(), timeout=1).close()
    finally:
        bound.close()


def test_a_port_another_service_already_serves_is_refused_not_joined() -> None:
    for reuse_port in (False, True):  # a single-process server, or another service's worker group
        serving = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if reuse_port:
                serving.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            serving.bind(("127.0.0.1", 0))
            serving.listen()
            port = serving.getsockname()[1]
            with pytest.raises(OSError):
                ensure_port_free("127.0.0.1", port)
        finally:
            serving.close()
    ensure_port_free("127.0.0.1", port)  # free again once it stopped


def test_a_worker_killed_ten_times_in_twenty_seconds_is_always_replaced_and_the_service_answers(
    tmp_path: Path,
) -> None:
    # As anyone who found one way to crash a worker would: over and over. Only a worker that never
    # served stops the service; these all served, so each is replaced and the others keep answering.
    log_path = tmp_path / "service.log"
    args = ("--workers", "4", "--embedder", "none")
    with memory_service_process(tmp_path, args=args, log_path=log_path) as service:
        assert wait_until(lambda: len(set(ready_pids(log_path))) == 4)
        killed: list[int] = []
        started = time.monotonic()
        while len(killed) < 10 and time.monotonic() - started < 20:
            serving = [pid for pid in ready_pids(log_path) if pid not in killed and running(pid)]
            if len(serving) < 2:  # keep one serving, so every kill is followed by an answer
                time.sleep(0.02)
                continue
            os.kill(serving[0], signal.SIGKILL)
            killed.append(serving[0])
            assert wait_until(lambda: not running(killed[-1]), timeout=5)
            assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        assert len(killed) >= 10, f"only {len(killed)} kills in 20 s"
        assert service.process.poll() is None
        assert wait_until(lambda: len(set(ready_pids(log_path)) - set(killed)) == 4)
        assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        events = [json.loads(line) for line in log_path.read_text().splitlines()]
        exited = [e for e in events if e["event"] == "memory.service_worker_exited"]
        assert sorted(e["worker_pid"] for e in exited) == sorted(killed)
        assert {e["action"] for e in exited} == {"restart"}
        assert all(0 < e["restart_in_s"] <= 1.0 for e in exited)


def test_a_worker_that_dies_before_it_serves_stops_the_service(tmp_path: Path) -> None:
    # A worker the supervisor has not heard serve, killed while it boots: every restart could fail the
    # same way, so the service stops (status 1: it was not a refusal with its own line).
    log_path = tmp_path / "service.log"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "memory.service", "--port", "0", "--data-dir", str(tmp_path)),
            *WORKER_ARGS,
        ],
        stdout=log_path.open("wb"),
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "MEMORY_TOKEN": "t"},
    )
    try:
        assert wait_until(lambda: len(worker_pids(process.pid)) == 2)
        os.kill(worker_pids(process.pid)[0], signal.SIGKILL)  # long before its imports are done
        assert process.wait(timeout=30) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    events = [json.loads(line) for line in log_path.read_text().splitlines()]
    (exited,) = [e for e in events if e["event"] == "memory.service_worker_exited"]
    assert exited["action"] == "stop"


def test_a_replacement_that_cannot_boot_is_retried_while_the_other_worker_serves(tmp_path: Path) -> None:
    # As a brief outage meets a replacement at its start-up (here: its data directory is unusable for a
    # while): the service it joins already works, so the supervisor retries it instead of stopping.
    log_path = tmp_path / "service.log"
    with memory_service_process(tmp_path, args=WORKER_ARGS, log_path=log_path) as service:
        workers = wait_workers(service, 2)
        assert wait_until(lambda: set(ready_pids(log_path)) == set(workers))
        for _ in range(10):
            assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        survivor = request_pids(log_path, "/list")[0]  # it has the scope's database open already
        (doomed,) = set(workers) - {survivor}
        store_dir, away = tmp_path / "memory", tmp_path / "memory.away"
        store_dir.rename(away)
        store_dir.write_text("in the way")  # every boot of a replacement is refused now
        os.kill(doomed, signal.SIGKILL)

        def retries() -> list[dict[str, object]]:
            events = [json.loads(line) for line in log_path.read_text().splitlines()]
            exited = [e for e in events if e["event"] == "memory.service_worker_exited"]
            return [e for e in exited if e["action"] == "retry"]

        assert wait_until(lambda: len(retries()) >= 2, timeout=40)
        assert service.process.poll() is None
        for _ in range(5):
            assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        assert {e["exit_status"] for e in retries()} == {2}
        store_dir.unlink()
        away.rename(store_dir)
        assert wait_until(lambda: len(set(ready_pids(log_path)) - {doomed}) == 2, timeout=40)
        assert service.process.poll() is None
        assert post(service, "/list", {"scopeKey": SCOPE, "limit": 1}).status_code == 200
        delays = [float(str(e["restart_in_s"])) for e in retries()]
        assert delays == sorted(delays) and max(delays) <= 5.0


def test_each_of_two_workers_gives_its_forward_pass_its_share_of_the_cores(tmp_path: Path) -> None:
    log_path = tmp_path / "service.log"
    args = ("--workers", "2", "--embedder", "minilm")
    with memory_service_process(tmp_path / "data", args=args, log_path=log_path) as service:
        wait_workers(service, 2)
        assert wait_until(lambda: len(ready_pids(log_path)) == 2)
    events = [json.loads(line) for line in log_path.read_text().splitlines()]
    threads = [e["threads"] for e in events if e.get("event") == "memory.service_encoder"]
    assert threads and len(threads) >= 2
    assert set(threads) == {intra_op_threads(processes=2)}
    assert intra_op_threads(processes=2) == max(1, intra_op_threads() // 2)
