"""What the memory service cannot do is refused at start-up: one line naming the flag, exit 2, in either
mode (one process, or `--workers`), before anything says it started. `/readyz` answers 503 while the
store cannot write, where `/healthz` (liveness) keeps answering 200.

The full and read-only disks are real: a small tmpfs mounted for the test (root only; skipped otherwise).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from memory.service.app import READY_CACHE_SECONDS
from tests.memory.service_support import ROOT, TOKEN, free_port, memory_service_process

PROG = "switchboard memory-service"
MODES = [(), ("--workers", "2")]
MODE_IDS = ["one-process", "workers"]


def start(data_dir: Path, port: int, args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """Run the service to its exit (a refusal exits at once; the timeout catches one that serves)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_TOKEN": TOKEN}
    return subprocess.run(
        [
            *(sys.executable, "-m", "memory.service", "--port", str(port), "--data-dir", str(data_dir)),
            *("--embedder", "none", *args),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )


def refused(process: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a refused start; nothing on stdout says it started."""
    assert process.returncode == 2, process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "service_started" not in process.stdout
    assert "service_stopped" not in process.stdout  # it never started, so it never stopped
    assert lines[0].startswith(f"{PROG}: ")
    return lines[0]


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A small tmpfs of its own (a disk that really fills up, or is really read-only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = Path(tempfile.mkdtemp(prefix="switchboard-tmpfs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)])
    if done.returncode != 0:
        mount_point.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
        mount_point.rmdir()


def fill(directory: Path) -> None:
    """Write until the disk is full."""
    with (directory / "filler").open("wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(bytes(65536))
            handle.flush()
            os.fsync(handle.fileno())


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_port_in_use_is_one_line_naming_the_flag(tmp_path: Path, mode: Sequence[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(start(tmp_path, port, mode))
    assert line == f"{PROG}: --port {port}: cannot listen on 127.0.0.1:{port}: Address already in use"


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_data_dir_that_is_a_file_is_one_line_naming_it(tmp_path: Path, mode: Sequence[str]) -> None:
    data_dir = tmp_path / "data"
    data_dir.write_text("not a directory")
    line = refused(start(data_dir, free_port(), mode))
    assert line == (
        f"{PROG}: --data-dir {data_dir}: the memory store cannot write there: "
        f"{data_dir} is a file, not a directory"
    )


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_full_disk_at_start_up_is_one_line_naming_the_data_dir(mode: Sequence[str]) -> None:
    with tmpfs("256k") as disk:
        fill(disk)
        line = refused(start(disk / "data", free_port(), mode))
    assert line.startswith(f"{PROG}: --data-dir {disk / 'data'}: the memory store cannot write there: ")
    assert line.endswith("No space left on device")


def test_a_read_only_data_dir_is_one_line_naming_it() -> None:
    # Root may write anywhere the permissions say no; a read-only filesystem stops it too.
    with tmpfs("1m") as disk:
        (disk / "data").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        line = refused(start(disk / "data", free_port()))
    assert line.endswith("Read-only file system")
    assert f"--data-dir {disk / 'data'}" in line


def test_a_directory_without_write_permission_is_named(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes whatever the permissions say (the read-only disk test covers it)")
    from memory.stores.build import data_dir_problem

    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        problem = data_dir_problem(locked / "memory")
        assert problem == f"cannot write in {locked / 'memory'}: Permission denied"
    finally:
        locked.chmod(0o700)


def test_readyz_fails_while_the_store_cannot_write_and_healthz_stays_live(tmp_path: Path) -> None:
    with memory_service_process(tmp_path, args=("--embedder", "none")) as service:
        assert httpx.get(f"{service.base_url}/readyz").json() == {"ok": True}
        store_dir = tmp_path / "memory"
        moved = tmp_path / "moved-away"
        store_dir.rename(moved)
        store_dir.write_text("something else took the store's place")
        try:
            time.sleep(READY_CACHE_SECONDS)  # the verdict of the probe above is kept that long
            reply = httpx.get(f"{service.base_url}/readyz")
            assert reply.status_code == 503
            assert reply.json() == {"ok": False, "error": "the store cannot write"}
            assert httpx.get(f"{service.base_url}/healthz").status_code == 200
        finally:
            store_dir.unlink()
            moved.rename(store_dir)
        time.sleep(READY_CACHE_SECONDS)
        assert httpx.get(f"{service.base_url}/readyz").status_code == 200


def test_readyz_asks_no_token_but_a_service_without_one_is_not_ready(tmp_path: Path) -> None:
    with memory_service_process(tmp_path, args=("--embedder", "none")) as service:
        assert httpx.get(f"{service.base_url}/readyz").status_code == 200  # no Authorization sent
    with memory_service_process(tmp_path, token=None, args=("--embedder", "none")) as service:
        reply = httpx.get(f"{service.base_url}/readyz")
        assert httpx.get(f"{service.base_url}/healthz").status_code == 200
    assert reply.status_code == 503
    assert reply.json() == {"ok": False, "error": "no data token is set: every data request is refused"}
