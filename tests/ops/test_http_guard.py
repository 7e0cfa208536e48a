"""The slow-client guard's pure parts: the request boundaries it tracks, its defaults, its cap.

The guard on real servers is tested with raw sockets where each server is (tests/memory/
test_service_slow_clients.py, tests/app/slack/test_slow_clients.py).
"""

from __future__ import annotations

import resource

import pytest

from ops.http_guard import FD_RESERVE, GuardLimits, RequestTracker, fd_bounded


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
