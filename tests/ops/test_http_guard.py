"""The slow-client guard on both servers it runs under (uvicorn and aiohttp, real, in this loop).

The guard keeps time and never frames: every framing question is the server parser's, so a request the
parser refuses gets the parser's 400 at once (never a close without an answer, never a wait), and the
deadlines follow what that parser says. The services themselves, as processes, are tested with raw
sockets where each one is (tests/memory/service/test_service_slow_clients.py,
tests/app/slack/test_slow_clients.py, tests/app/slack/transports/test_serve.py).
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time

import pytest

from ops.http_guard import FD_RESERVE, MAX_HEAD_BYTES, ConnectionGuard, GuardLimits, fd_bounded
from tests.ops.guarded_servers import SERVERS, exchange, guarded

HEAD_DEADLINE = 0.6
BODY_DEADLINE = 1.0
KEEP_ALIVE = 0.3  # shorter than the head deadline: a head still arriving must outlive it
CAP = 4
LIMITS = GuardLimits(
    header_timeout=HEAD_DEADLINE, body_timeout=BODY_DEADLINE, max_connections=CAP, keep_alive=KEEP_ALIVE
)
POST = b"POST /x HTTP/1.1\r\nHost: h\r\n"
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"
EACH_SERVER = pytest.mark.parametrize("server", SERVERS)


def test_the_default_deadlines_are_10_s_for_the_head_and_30_s_for_the_body() -> None:
    limits = GuardLimits()
    assert (limits.header_timeout, limits.body_timeout) == (10.0, 30.0)
    assert limits.max_connections > 300  # 300 idle connections must not lock out a real request


@pytest.mark.parametrize("field", ["header_timeout", "body_timeout", "keep_alive"])
def test_a_deadline_that_is_not_positive_is_refused_naming_it(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GuardLimits(**{field: 0})


def test_the_cap_stays_below_the_open_file_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert fd_bounded(10**9) == (10**9 if soft == resource.RLIM_INFINITY else soft - FD_RESERVE)
    assert fd_bounded(5) == 5


RAISED = """
import resource
from ops.http_guard import GuardLimits, serving_limits
before = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
cap = serving_limits(GuardLimits()).max_connections
print(before, cap)
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_a_server_starting_under_a_soft_limit_of_256_raises_it_to_the_hard_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard open-file limit here is {hard}")

    def soft_256() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    done = subprocess.run(
        [sys.executable, "-c", RAISED], preexec_fn=soft_256, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    before, cap, after = (int(word) for word in " ".join(done.stdout.splitlines()[-2:]).split())
    assert (before, cap, after) == (256, 512, hard)


async def test_a_protocol_the_guard_has_no_adapter_for_is_refused_naming_it() -> None:
    class Unknown(asyncio.Protocol):
        pass

    guard = ConnectionGuard("test", GuardLimits())
    protocol = guard.wrap(Unknown)()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    errors: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: errors.append(context["exception"]))
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.sleep(0.1)
    writer.close()
    server.close()
    loop.set_exception_handler(None)
    assert [str(error) for error in errors] == [
        "the slow-client guard cannot watch Unknown: no adapter for it"
    ]


# ---- the server's parser decides; what it refuses is a 400 at once ---------------------------------

MALFORMED = {
    "non-hex-chunk-size": CHUNKED + b"zz\r\n",
    "0x-prefixed-chunk-size": CHUNKED + b"2\r\n{}\r\n0x10\r\n",
    "chunk-size-past-64-bits": CHUNKED + b"1ffffffffffffffff\r\nab",
    "negative-chunk-size": CHUNKED + b"-1\r\n",
    "chunk-data-longer-than-its-size": CHUNKED + b"2\r\nabc\r\n0\r\n\r\n",
    "transfer-encoding-containing-chunked": POST + b"Transfer-Encoding: notchunked\r\n\r\n",
    "chunked-not-last": POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n",
    "content-length-and-chunked": POST + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two-different-content-lengths": POST + b"Content-Length: 1\r\nContent-Length: 5\r\n\r\nhello",
    "signed-content-length": POST + b"Content-Length: +5\r\n\r\nhello",
    "content-length-list": POST + b"Content-Length: 5, 6\r\n\r\nhello",
    "space-before-colon": POST + b"Content-Length : 5\r\n\r\nhello",
}


@EACH_SERVER
@pytest.mark.parametrize("request_bytes", MALFORMED.values(), ids=MALFORMED.keys())
async def test_what_the_parser_refuses_gets_a_400_at_once(server: str, request_bytes: bytes) -> None:
    async with guarded(server, LIMITS) as where:
        received, elapsed = await exchange(where, request_bytes)
    assert received.split(b"\r\n", 1)[0] in (b"HTTP/1.1 400 Bad Request", b"HTTP/1.0 400 Bad Request")
    assert elapsed < HEAD_DEADLINE


@EACH_SERVER
async def test_a_fake_last_chunk_inside_chunk_data_does_not_end_the_body(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        early, waited = await exchange(where, CHUNKED + b"20\r\nab\r\n0\r\n\r\n")
        whole, _ = await exchange(where, CHUNKED + b"20\r\nab\r\n0\r\n\r\n" + b"x" * 23 + b"\r\n0\r\n\r\n")
    assert early == b"" and BODY_DEADLINE * 0.8 <= waited < BODY_DEADLINE + 1.0
    assert whole.startswith(b"HTTP/1.1 200 ") and whole.endswith(b"\r\n32")


@EACH_SERVER
@pytest.mark.parametrize(
    "last_chunk",
    [b"0;x=y\r\n\r\n", b"0\r\nX-Checksum: abc\r\n\r\n", b"000\r\n\r\n"],
    ids=["chunk-extension", "trailer", "zero-padded-last-chunk"],
)
async def test_a_kept_alive_connection_after_a_chunked_body_outlives_the_body_deadline(
    server: str, last_chunk: bytes
) -> None:
    limits = GuardLimits(header_timeout=HEAD_DEADLINE * 4, body_timeout=BODY_DEADLINE / 2, keep_alive=5)
    async with guarded(server, limits) as where:
        received, _ = await exchange(
            where,
            CHUNKED + b"2\r\n{}\r\n" + last_chunk,
            then=b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            pause=BODY_DEADLINE,  # past the body deadline, within the keep-alive
        )
    assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b"ok")
    assert received.count(b"HTTP/1.1 200 ") == 2


# ---- the deadlines -----------------------------------------------------------------------------


@EACH_SERVER
async def test_a_half_sent_request_line_gets_a_408_at_the_head_deadline(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        received, elapsed = await exchange(where, b"POST /x")
    assert received.startswith(b"HTTP/1.1 408 ")
    assert HEAD_DEADLINE * 0.8 <= elapsed < HEAD_DEADLINE + 1.0


@EACH_SERVER
async def test_a_head_still_arriving_outlives_the_keep_alive_and_gets_its_408(server: str) -> None:
    async with guarded(server, LIMITS) as where:  # (aiohttp closed it silently at its keep-alive)
        received, elapsed = await exchange(where, b"GET /x HTTP/1.1\r\n", then=b"Host: h\r\n", pause=0.1)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert HEAD_DEADLINE * 0.6 <= elapsed < HEAD_DEADLINE + 1.0


@EACH_SERVER
async def test_a_head_sent_slowly_but_within_the_deadline_is_served(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        received, _ = await exchange(
            where,
            b"GET /x HTTP/1.1\r\n",
            then=b"Host: h\r\nConnection: close\r\n\r\n",
            pause=HEAD_DEADLINE / 2,
        )
    assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b"ok")


@EACH_SERVER
async def test_a_head_longer_than_the_limit_is_refused_at_once(server: str) -> None:
    head = b"GET /x HTTP/1.1\r\nHost: h\r\n" + b"X-Filler: " + b"a" * 4000 + b"\r\n"
    async with guarded(server, LIMITS) as where:
        received, elapsed = await exchange(where, head * (MAX_HEAD_BYTES // len(head) + 2))
    assert received.split(b" ", 2)[1] in (b"431", b"400")
    assert elapsed < HEAD_DEADLINE


@EACH_SERVER
@pytest.mark.parametrize(
    "body", [b"Content-Length: 100\r\n\r\n{", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"]
)
async def test_a_body_that_stops_short_is_closed_at_the_body_deadline(server: str, body: bytes) -> None:
    async with guarded(server, LIMITS) as where:
        received, elapsed = await exchange(where, POST + body)
    assert received == b""  # nothing can be answered: the request never arrived in full
    assert BODY_DEADLINE * 0.8 <= elapsed < BODY_DEADLINE + 1.0


@EACH_SERVER
async def test_a_body_sent_slowly_but_within_the_deadline_is_served(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        received, _ = await exchange(
            where,
            POST + b"Content-Length: 4\r\nConnection: close\r\n\r\nab",
            then=b"cd",
            pause=BODY_DEADLINE / 2,
        )
    assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b"\r\n4")


# ---- the cap -----------------------------------------------------------------------------------


@EACH_SERVER
async def test_at_the_cap_the_oldest_connection_without_a_head_is_shed_for_a_new_one(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        held = [await asyncio.open_connection(where.host, where.port) for _ in range(CAP)]
        held[-1][1].write(b"GET /x HT")  # half a head is no request either
        await asyncio.sleep(0.05)
        started = time.monotonic()
        received, _ = await exchange(where, b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        served_in = time.monotonic() - started
        async with asyncio.timeout(2):
            shed = await held[0][0].read()
        for _, writer in held:
            writer.close()
    assert received.startswith(b"HTTP/1.1 200 ") and served_in < 1.0
    assert shed.startswith(b"HTTP/1.1 503 ") and shed.endswith(b'{"error":"too many connections"}')
    assert where.guard.open == 0


@EACH_SERVER
async def test_at_the_cap_with_every_connection_in_a_request_a_new_one_gets_a_clean_503(server: str) -> None:
    async with guarded(server, LIMITS) as where:
        held = [await asyncio.open_connection(where.host, where.port) for _ in range(CAP)]
        for _, writer in held:
            writer.write(POST + b"Content-Length: 10\r\n\r\nab")  # heads complete, bodies owed
        await asyncio.sleep(0.05)
        received, _ = await exchange(where, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.05)
        after, _ = await exchange(where, b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in received
    assert after.startswith(b"HTTP/1.1 200 ")


@EACH_SERVER
async def test_at_the_cap_a_body_stalled_longer_than_the_head_deadline_is_shed_for_a_new_one(
    server: str,
) -> None:
    limits = GuardLimits(header_timeout=HEAD_DEADLINE, body_timeout=30.0, max_connections=CAP)
    async with guarded(server, limits) as where:
        held = [await asyncio.open_connection(where.host, where.port) for _ in range(CAP)]
        for _, writer in held:
            writer.write(POST + b"Content-Length: 500000\r\n\r\na")  # heads complete, bodies stalled
        await asyncio.sleep(HEAD_DEADLINE * 1.5)
        started = time.monotonic()
        received, _ = await exchange(where, b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        served_in = time.monotonic() - started
        async with asyncio.timeout(2):
            shed = await held[0][0].read()  # the oldest stall: closed, nothing written into its request
        for _, writer in held:
            writer.close()
    assert received.startswith(b"HTTP/1.1 200 ") and served_in < 1.0
    assert shed == b""


@EACH_SERVER
async def test_at_the_cap_a_body_still_arriving_is_not_shed(server: str) -> None:
    limits = GuardLimits(header_timeout=HEAD_DEADLINE, body_timeout=30.0, max_connections=CAP)
    async with guarded(server, limits) as where:
        held = [await asyncio.open_connection(where.host, where.port) for _ in range(CAP)]
        for _, writer in held:
            writer.write(POST + b"Content-Length: 500000\r\n\r\na")
        for _ in range(3):  # each sends a byte more often than the head deadline
            await asyncio.sleep(HEAD_DEADLINE / 2)
            for _, writer in held:
                writer.write(b"a")
        received, _ = await exchange(where, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
        for _, writer in held:
            writer.close()
    assert received.startswith(b"HTTP/1.1 503 ")
