"""Each time phrase on a fixed clock: Tuesday 2026-12-01, 15:00 UTC."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.rules.when import TimeWindow, time_window

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC).timestamp()  # a Tuesday


def at(text: str) -> float:
    """`2026-11-24` (midnight UTC) or `2026-11-24T10:00` as epoch seconds."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def days(first: str, last: str) -> TimeWindow:
    """The whole calendar days `first` … `last`."""
    return TimeWindow(at(first), at(last) + 86_400.0)


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("what did we decide yesterday?", days("2026-11-30", "2026-11-30")),
        ("what did we decide today", days("2026-12-01", "2026-12-01")),
        ("the outage this morning", days("2026-12-01", "2026-12-01")),
        ("the day before yesterday", days("2026-11-29", "2026-11-29")),
        ("what did we decide last week?", days("2026-11-23", "2026-11-29")),
        ("anything this week", days("2026-11-30", "2026-12-06")),
        ("in the past week", days("2026-11-25", "2026-12-01")),
        ("two weeks ago we moved CI", days("2026-11-16", "2026-11-22")),
        ("3 days ago", days("2026-11-28", "2026-11-28")),
        ("a month ago", days("2026-11-01", "2026-11-30")),
        ("a couple of months ago", days("2026-10-01", "2026-10-31")),
        ("in the last 3 days", days("2026-11-29", "2026-12-01")),
        ("over the past two weeks", days("2026-11-18", "2026-12-01")),
        ("what changed this month", days("2026-12-01", "2026-12-31")),
        ("the budget from last month", days("2026-11-01", "2026-11-30")),
        ("what did we ship last month", days("2026-11-01", "2026-11-30")),
        ("the plan for this year", days("2026-01-01", "2026-12-31")),
        ("what we did last year", days("2025-01-01", "2025-12-31")),
        ("what happened in March", days("2026-03-01", "2026-03-31")),
        ("during May", days("2026-05-01", "2026-05-31")),
        ("in March 2025", days("2025-03-01", "2025-03-31")),
        ("the May 2025 offsite", days("2025-05-01", "2025-05-31")),
        ("in 2025", days("2025-01-01", "2025-12-31")),
        ("on March 3rd", days("2026-03-03", "2026-03-03")),
        ("the 5th of March", days("2026-03-05", "2026-03-05")),
        ("Dec 25 party", days("2025-12-25", "2025-12-25")),  # this year's is still to come
        ("on 2026-10-01", days("2026-10-01", "2026-10-01")),
        ("what did she watch on 1 May, 2022?", days("2022-05-01", "2022-05-01")),  # "May" with its year
        ("who came to dinner on May 3, 2023?", days("2023-05-03", "2023-05-03")),
        ("the 25th of May 2025", days("2025-05-25", "2025-05-25")),
        ("last Tuesday", days("2026-11-24", "2026-11-24")),
        ("last Wednesday", days("2026-11-25", "2026-11-25")),
        ("last Monday", days("2026-11-30", "2026-11-30")),
        ("on Friday", days("2026-11-27", "2026-11-27")),
        ("last weekend", days("2026-11-28", "2026-11-29")),
        ("since 2026-10-01, how do we deploy?", TimeWindow(at("2026-10-01"), NOW)),
        ("since last week", TimeWindow(at("2026-11-23"), NOW)),
        ("since the migration last week", days("2026-11-23", "2026-11-29")),  # "since" of another noun
        ("before 2026", TimeWindow(0.0, at("2026-01-01"))),
        ("since March", TimeWindow(at("2026-03-01"), NOW)),
        ("after 2026-11-01", TimeWindow(at("2026-11-02"), NOW)),
        ("before March 3", TimeWindow(0.0, at("2026-03-03"))),
        ("until last month", TimeWindow(0.0, at("2026-12-01"))),
        ("DEPLOYS LAST WEEK", days("2026-11-23", "2026-11-29")),  # any case
        ("what did we decide over the weekend", days("2026-11-28", "2026-11-29")),
        ("what did we decide between Nov 1 and Nov 15?", days("2026-11-01", "2026-11-15")),
        ("from 2026-10-01 to 2026-10-15", days("2026-10-01", "2026-10-15")),
        ("from Nov 1 - Nov 3", days("2026-11-01", "2026-11-03")),
        ("between the 5th of March and the 9th of March", days("2026-03-05", "2026-03-09")),
        ("between March and June", days("2026-03-01", "2026-06-30")),
        ("from March to June", days("2026-03-01", "2026-06-30")),
        ("between May 2025 and July 2025", days("2025-05-01", "2025-07-31")),
        ("from Nov 20 to Jan 5", days("2026-11-20", "2027-01-05")),  # the Jan 5 after the start
        ("between December and February", days("2026-12-01", "2027-02-28")),
        ("from last week to yesterday", days("2026-11-23", "2026-11-30")),
        ("between Nov 15 and Nov 1", days("2026-11-15", "2026-11-15")),  # no range backwards: X alone
        ("between Nov 1 and 2026-02-30", days("2026-11-01", "2026-11-01")),  # Y the calendar lacks
        ("since Nov 1 and Nov 15", TimeWindow(at("2026-11-01"), NOW)),  # "since" decides, not a range
        ("the budget from Nov 1", days("2026-11-01", "2026-11-01")),  # no second end: X alone
    ],
)
def test_a_time_phrase_names_its_window_relative_to_now(query: str, window: TimeWindow) -> None:
    assert time_window(query, NOW) == window


@pytest.mark.parametrize(
    "query",
    [
        "how do we deploy?",
        "we may 5 times retry",  # "may" the verb is no month
        "the 3 may 2 or 4",  # nor with a number on each side but no year
        "the Monday standup",  # a weekday alone names a habit, not a day
        "port 2025 is open",  # a bare number is no year
        "the lastweek branch",  # whole words only
        "we never deploy on the weekend",  # a habit, not a weekend
        "a message from May",  # "May" after "from" is a name more often than a month
        "the choice between May and me",
        "between 2025 and may I ask",
        "a budget between 2000 and 2500 dollars",  # numbers between numbers are no years
        "latency between 2010 and 2020 ms",
        "from 2 to 3 people",
        "we never deploy during the weekend",
        "2026-02-30 is no date",  # the calendar lacks it
        "on 9999-12-31",  # its day's end is past the calendar's
        "since 9999-12-31",
        "",
    ],
)
def test_a_query_without_a_time_phrase_has_no_window(query: str) -> None:
    assert time_window(query, NOW) is None


def test_the_first_phrase_decides_and_an_impossible_date_is_read_past() -> None:
    assert time_window("yesterday, or last year", NOW) == days("2026-11-30", "2026-11-30")
    assert time_window("2026-02-30 or yesterday", NOW) == days("2026-11-30", "2026-11-30")


def test_the_window_follows_the_clock_it_is_given() -> None:
    later = at("2027-01-04T09:00")  # a Monday in the next year
    assert time_window("last week", later) == days("2026-12-28", "2027-01-03")
    assert time_window("in March", later) == days("2026-03-01", "2026-03-31")
    assert time_window("last month", later) == days("2026-12-01", "2026-12-31")


def test_february_29th_without_a_year_is_the_latest_leap_years() -> None:
    assert time_window("on Feb 29", NOW) == days("2024-02-29", "2024-02-29")


def test_a_window_must_start_before_it_ends() -> None:
    with pytest.raises(ValueError, match="start before it ends"):
        TimeWindow(2.0, 1.0)


def test_a_ranges_end_still_to_come_this_year_is_this_years() -> None:
    assert time_window("between Nov 1 and Nov 15", at("2026-11-10T09:00")) == days("2026-11-01", "2026-11-15")
    assert time_window("from Dec 20 to Jan 5", at("2026-12-25T09:00")) == days("2026-12-20", "2027-01-05")
