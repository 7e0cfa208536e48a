"""The slow-client guard's pure parts: the request boundaries it tracks, its defaults, its cap.

The guard on real servers is tested with raw sockets where each server is (tests/memory/
test_service_slow_clients.py, tests/app/slack/test_slow_clients.py).
"""

from __future__ import annotations

import resource

import pytest

from ops.http_guard import (
    FD_RESERVE,
    MAX_CHUNK_LINE,
    MAX_HEAD_BYTES,
    ChunkedBody,
    GuardLimits,
    RequestTracker,
    fd_bounded,
)

NEXT_REQUEST = b"GET /next HTTP/1.1\r\n"


def phase(tracker: RequestTracker) -> str:
    """The tracker's phase, read fresh (mypy would keep the narrowed literal across a feed)."""
    return tracker.phase


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


def fed(body: bytes, *, one_byte_at_a_time: bool) -> tuple[str, bytes]:
    """A chunked body's state after `body`, and the bytes it handed back (what follows the body)."""
    chunks = ChunkedBody()
    pieces = [body[i : i + 1] for i in range(len(body))] if one_byte_at_a_time else [body]
    rest = b""
    for piece in pieces:
        rest += bytes(chunks.feed(memoryview(piece)))
    return chunks.state, rest


SPLITS = pytest.mark.parametrize("one_byte_at_a_time", [False, True], ids=["whole", "byte-by-byte"])


@SPLITS
def test_a_fake_last_chunk_inside_chunk_data_does_not_end_a_chunked_body(one_byte_at_a_time: bool) -> None:
    state, rest = fed(b"20\r\nab\r\n0\r\n\r\n", one_byte_at_a_time=one_byte_at_a_time)
    assert (state, rest) == ("data", b"")
    state, rest = fed(
        b"20\r\nab\r\n0\r\n\r\n" + b"x" * 23 + b"\r\n0\r\n\r\n" + NEXT_REQUEST,
        one_byte_at_a_time=one_byte_at_a_time,
    )
    assert (state, rest) == ("done", NEXT_REQUEST)


@SPLITS
@pytest.mark.parametrize(
    "body",
    [
        b"5\r\nhello\r\n0\r\n\r\n",
        b"000\r\n\r\n",
        b"5;name=value\r\nhello\r\n0;x=y\r\n\r\n",
        b'5 ; a="b;c"\r\nhello\r\n0\r\n\r\n',
        b"A\r\n0123456789\r\n0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n",
        b"00a\r\n\r\n0\r\n\r\nabc\r\n0\r\n\r\n",
    ],
    ids=["plain", "zero-padded-last", "extensions", "quoted-extension", "trailers", "crlf-in-data"],
)
def test_a_chunked_body_ends_after_its_last_chunk_and_trailers(body: bytes, one_byte_at_a_time: bool) -> None:
    assert fed(body + NEXT_REQUEST, one_byte_at_a_time=one_byte_at_a_time) == ("done", NEXT_REQUEST)
    assert fed(body[:-1], one_byte_at_a_time=one_byte_at_a_time)[0] not in ("done", "bad")


@SPLITS
@pytest.mark.parametrize(
    "body",
    [
        b"\r\n",
        b"zz\r\n",
        b"0x5\r\nhello\r\n",
        b"-5\r\n",
        b"+5\r\n",
        b"5\nhello\r\n",
        b"5\r\nhelloXY0\r\n\r\n",
        b"0\r\nX-Checksum: abc\n\r\n",
        b"1" + b"0" * 16 + b"\r\n",
        b"5;" + b"e" * MAX_CHUNK_LINE + b"\r\n",
    ],
    ids=[
        "empty-size",
        "not-hex",
        "0x-prefix",
        "minus",
        "plus",
        "bare-lf",
        "no-crlf-after-data",
        "bare-lf-trailer",
        "size-past-64-bits",
        "line-too-long",
    ],
)
def test_a_malformed_or_oversized_chunk_line_is_bad(body: bytes, one_byte_at_a_time: bool) -> None:
    assert fed(body, one_byte_at_a_time=one_byte_at_a_time)[0] == "bad"


def test_trailers_past_the_head_limit_are_bad() -> None:
    trailer = b"X-Pad: " + b"p" * 1000 + b"\r\n"
    state, _ = fed(b"0\r\n" + trailer * (MAX_HEAD_BYTES // len(trailer) + 1), one_byte_at_a_time=False)
    assert state == "bad"


def test_a_line_without_its_newline_is_bad_as_soon_as_it_is_too_long() -> None:
    assert fed(b"5;" + b"e" * (MAX_CHUNK_LINE - 2), one_byte_at_a_time=False)[0] == "size"
    assert fed(b"5;" + b"e" * MAX_CHUNK_LINE, one_byte_at_a_time=False)[0] == "bad"


def test_a_chunked_request_then_the_next_one_on_a_kept_alive_connection() -> None:
    tracker = RequestTracker()
    tracker.feed(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n000\r\n")
    assert (phase(tracker), tracker.serial) == ("body", 1)
    tracker.feed(b"T: 1\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
    assert (phase(tracker), tracker.serial, tracker.malformed) == ("idle", 2, False)


def test_a_malformed_chunked_body_marks_the_tracker_malformed() -> None:
    tracker = RequestTracker()
    tracker.feed(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nnot-hex\r\n")
    assert tracker.malformed


def test_a_head_split_across_reads_is_complete_only_at_its_blank_line() -> None:
    tracker = RequestTracker()
    tracker.feed(b"GET /healthz HTTP/1.1\r\nHost: x\r")
    assert (phase(tracker), tracker.serial) == ("head", 1)
    tracker.feed(b"\n\r")
    assert phase(tracker) == "head"
    tracker.feed(b"\n")
    assert phase(tracker) == "idle"


def test_a_declared_body_is_complete_when_its_length_has_arrived() -> None:
    tracker = RequestTracker()
    tracker.feed(b"POST /write HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234")
    assert phase(tracker) == "body"
    tracker.feed(b"5678")
    assert phase(tracker) == "body"
    tracker.feed(b"9")
    assert phase(tracker) == "idle"


def test_a_chunked_body_is_complete_at_its_last_chunk_even_when_split() -> None:
    tracker = RequestTracker()
    tracker.feed(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r")
    assert phase(tracker) == "body"
    tracker.feed(b"\n\r\n")
    assert phase(tracker) == "idle"


def test_the_next_request_on_a_kept_alive_connection_starts_a_new_head() -> None:
    tracker = RequestTracker()
    tracker.feed(b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}POST /b HT")
    assert (phase(tracker), tracker.serial) == ("head", 2)
    tracker.feed(b"TP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert (phase(tracker), tracker.serial) == ("idle", 2)
