"""The memory service as a real process under slow clients and connection floods (raw sockets).

A half-sent request head is answered 408 and closed at the head deadline, a body that stops short is
closed at the body deadline, at the cap the oldest connection without a request head makes room (and
only when every connection is in a request does a new one get a clean 503), and none of it delays an
authenticated request. The deadlines are shortened by flags here; their defaults are tested as values
(10 s / 30 s) and once for real with 300 half-open connections under a soft limit of 256 open files.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from memory.service.main import parse_args
from tests.memory.service_support import AUTH, RunningService, memory_service_process
from tests.ops.raw_sockets import half_open, read_responses, read_until_closed, soft_open_file_limit

HEAD_DEADLINE = 0.5
BODY_DEADLINE = 1.0
CAP = 8
RETRIEVE = {"scopeKey": "org:acme", "query": "deploy", "limit": 8}


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    args = ["--header-timeout", str(HEAD_DEADLINE), "--body-timeout", str(BODY_DEADLINE)]
    with memory_service_process(
        tmp_path_factory.mktemp("quick"), args=[*args, "--max-connections", str(CAP)]
    ) as running:
        yield running


def timed_retrieve(service: RunningService) -> float:
    started = time.monotonic()
    reply = httpx.post(f"{service.base_url}/retrieve", json=RETRIEVE, headers=AUTH, timeout=5)
    assert reply.status_code == 200, reply.text
    return time.monotonic() - started


def test_the_flags_default_to_10_s_for_the_head_and_30_s_for_the_body() -> None:
    args = parse_args([])
    assert (args.header_timeout, args.body_timeout) == (10.0, 30.0)


def test_a_half_sent_request_line_gets_a_408_and_is_closed_at_the_head_deadline(
    quick: RunningService,
) -> None:
    with half_open(quick.host, quick.port) as sock:
        received, elapsed = read_until_closed(sock, within=5)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert HEAD_DEADLINE * 0.8 <= elapsed < HEAD_DEADLINE + 1.0


def test_a_body_that_stops_short_is_closed_at_the_body_deadline(quick: RunningService) -> None:
    head = (
        "POST /write HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    ).format(token=AUTH["Authorization"].split()[1])
    with half_open(quick.host, quick.port, head.encode()) as sock:
        received, elapsed = read_until_closed(sock, within=5)
    assert received == b""  # nothing was answered: the request never arrived in full
    assert BODY_DEADLINE * 0.8 <= elapsed < BODY_DEADLINE + 1.0


def chunked_write_then_healthz(last_chunk: bytes) -> bytes:
    """A chunked POST /write (answered 411, its body drained) and a GET, on one kept-alive connection."""
    head = (
        "POST /write HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).format(token=AUTH["Authorization"].split()[1])
    return head.encode() + b"2\r\n{}\r\n" + last_chunk + b"GET /healthz HTTP/1.1\r\nHost: memory\r\n\r\n"


@pytest.mark.parametrize(
    "last_chunk",
    [b"0;x=y\r\n\r\n", b"0\r\nX-Checksum: abc\r\n\r\n", b"000\r\n\r\n"],
    ids=["chunk-extension", "trailer", "zero-padded-last-chunk"],
)
def test_a_kept_alive_connection_after_a_chunked_body_outlives_the_body_deadline(
    quick: RunningService, last_chunk: bytes
) -> None:
    with half_open(quick.host, quick.port, chunked_write_then_healthz(last_chunk)) as sock:
        refused, served = read_responses(sock, 2)
        time.sleep(BODY_DEADLINE * 1.5)  # past the body deadline, within uvicorn's keep-alive
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: memory\r\nConnection: close\r\n\r\n")
        received, _ = read_until_closed(sock, within=5)
    assert refused.startswith(b"HTTP/1.1 411 ") and served.startswith(b"HTTP/1.1 200 ")
    assert received.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(
    ("chunks", "status"),
    [(b"ffffffffffffffff\r\nab", b"411"), (b"5\r\nhello\r\n", b"411"), (b"zz\r\n", b"400")],
    ids=["largest-chunk-size", "unterminated", "malformed-chunk-size"],
)
def test_a_chunked_body_is_answered_at_once_and_a_malformed_one_with_a_400(
    quick: RunningService, chunks: bytes, status: bytes
) -> None:
    head = (
        "POST /write HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).format(token=AUTH["Authorization"].split()[1])
    with half_open(quick.host, quick.port, head.encode() + chunks) as sock:
        sock.settimeout(BODY_DEADLINE / 2)  # well before any deadline could have answered it
        status_line = sock.makefile("rb").readline()
    assert status_line.split(b" ")[1] == status


def test_a_head_sent_slowly_but_within_the_deadline_is_served(quick: RunningService) -> None:
    with half_open(quick.host, quick.port, b"GET /healthz HTTP/1.1\r\n") as sock:
        time.sleep(HEAD_DEADLINE / 3)
        sock.sendall(b"Host: memory\r\nConnection: close\r\n\r\n")
        received, _ = read_until_closed(sock, within=5)
    assert received.startswith(b"HTTP/1.1 200 ")


def test_a_half_sent_request_does_not_delay_an_authenticated_retrieve(quick: RunningService) -> None:
    with half_open(quick.host, quick.port):
        assert timed_retrieve(quick) < 1.0


def test_at_the_cap_the_oldest_connection_without_a_head_is_shed_for_an_authenticated_retrieve(
    quick: RunningService,
) -> None:
    held = [socket.create_connection((quick.host, quick.port), timeout=5) for _ in range(CAP)]
    try:
        time.sleep(0.1)  # let the service accept all of them
        assert timed_retrieve(quick) < 1.0
        shed, _ = read_until_closed(held[0], within=5)
    finally:
        for sock in held:
            sock.close()
    assert shed.startswith(b"HTTP/1.1 503 ")
    assert shed.endswith(b'{"error":"too many connections"}')


def test_at_the_cap_with_every_connection_in_a_request_a_new_one_gets_a_clean_503(
    quick: RunningService,
) -> None:
    head = (
        "POST /write HTTP/1.1\r\nHost: memory\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    ).format(token=AUTH["Authorization"].split()[1])
    held = [half_open(quick.host, quick.port, head.encode()) for _ in range(CAP)]
    try:
        time.sleep(0.1)
        with socket.create_connection((quick.host, quick.port), timeout=5) as extra:
            received, _ = read_until_closed(extra, within=5)
    finally:
        for sock in held:
            sock.close()
    assert received.startswith(b"HTTP/1.1 503 ")
    assert received.endswith(b'{"error":"too many connections"}')
    time.sleep(0.1)
    assert timed_retrieve(quick) < 1.0


def test_300_half_open_connections_under_a_soft_limit_of_256_open_files_delay_a_retrieve_by_under_a_second(
    tmp_path: Path,
) -> None:
    with ExitStack() as stack:
        with soft_open_file_limit(256):  # the service raises it to the hard limit at start-up
            service = stack.enter_context(memory_service_process(tmp_path))  # the default deadlines and cap
        baseline = timed_retrieve(service)
        idle = [half_open(service.host, service.port) for _ in range(300)]
        try:
            time.sleep(0.2)
            delayed = timed_retrieve(service)
        finally:
            for sock in idle:
                sock.close()
    assert delayed - baseline < 1.0
