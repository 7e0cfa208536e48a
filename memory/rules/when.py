"""The time a question asks about: a phrase such as "yesterday", "last week", "in March", "since
2026-10-01" or "two weeks ago" read as a window of time, relative to the run's time. Pure: `now` is an
argument, and every calendar is UTC (the memory block shows UTC dates, so the two agree).

Our own small parser, not a date library: python-dateutil reads absolute dates but no relative phrase,
and the libraries that do (dateparser) are large, slow to import and per call, and guess at any number
in a question. This reads only the phrases written below, whole words, the first one in the question;
a question without one has no window, and nothing about its ranking changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final

__all__ = ["TimeWindow", "time_window"]

_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """[start, end) in epoch seconds: the span a question's time phrase names."""

    start: float
    end: float

    def __post_init__(self) -> None:
        if not self.start < self.end:
            raise ValueError(f"a time window must start before it ends, got {self.start!r}–{self.end!r}")


_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH_NUMBER = {name: index + 1 for index, name in enumerate(_MONTHS)}
_MONTH_NUMBER.update({name[:3]: index + 1 for index, name in enumerate(_MONTHS) if name != "may"})
_MONTH_NUMBER["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
}  # fmt: skip
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
          "months": "month", "year": "year", "years": "year"}  # fmt: skip

_MONTH = "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True))
# "may" is a verb more often than a month: only "in May", "May 2026" and a date with its year read it as one.
_DAY_MONTH = "|".join(sorted((m for m in _MONTH_NUMBER if m != "may"), key=len, reverse=True))
_WEEKDAY = "|".join(_WEEKDAYS)
_COUNT = r"\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
_UNIT = "|".join(_UNITS)
_YEAR = r"(?:19|20)\d{2}"
_ORDINAL = r"(?:st|nd|rd|th)?"
# "May" with its day and year ("May 23, 2023", "1 May, 2022") is a date: the verb takes no year.
_MAY_DAY_YEAR = rf"may(?=\.?\s+\d{{1,2}}{_ORDINAL},?\s+{_YEAR}\b)"
_MAY_YEAR = rf"may(?=,?\s+{_YEAR}\b)"
# "since March", "before 2025": right after an opening word a month or year needs no "in".
_AFTER_OPENING = r"(?:(?<=since\s)|(?<=after\s)|(?<=before\s)|(?<=until\s))"
# A point or span of the calendar, each alternative its own named groups.
_SPAN = "|".join(
    (
        r"(?P<iso>\d{4}-\d{2}-\d{2})",
        rf"(?P<md_month>{_DAY_MONTH}|{_MAY_DAY_YEAR})\.?\s+(?P<md_day>\d{{1,2}}){_ORDINAL}(?:,?\s+(?P<md_year>{_YEAR}))?",
        rf"(?P<dm_day>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<dm_month>{_DAY_MONTH}|{_MAY_YEAR})(?:,?\s+(?P<dm_year>{_YEAR}))?",
        rf"(?P<ago_count>{_COUNT})\s+(?P<ago_unit>{_UNIT})\s+ago",
        rf"(?P<rel>last|this|past|previous)\s+(?P<rel_unit>week|month|year|weekend|{_WEEKDAY})",
        r"(?P<day_word>today|tonight|this\s+morning|this\s+afternoon|the\s+day\s+before\s+yesterday|yesterday)",
        rf"(?:(?:in|during)\s+|{_AFTER_OPENING})(?:(?P<m_month>{_MONTH})(?:\s+(?P<m_year>{_YEAR}))?|(?P<year>{_YEAR}))",
        rf"on\s+(?P<weekday>{_WEEKDAY})",
        r"over\s+the\s+(?P<the_weekend>weekend)",
        rf"(?P<ym_month>{_MONTH})\s+(?P<ym_year>{_YEAR})",
    )
)
_LAST_N = (
    r"(?:(?:in|over|during|within)\s+)?(?:the\s+)?"
    rf"(?P<last_n>(?:last|past)\s+(?P<n>{_COUNT})\s+(?P<n_unit>{_UNIT}))"
)
_PATTERN = re.compile(
    rf"\b(?:(?P<open>since|after|before|until)\s+(?:the\s+)?)?(?:{_LAST_N}|{_SPAN})\b", re.IGNORECASE
)
# A range: "between X and Y", "from X to Y", X and Y each a phrase of `_PATTERN`; or, with both ends bare
# months, "between March and June" ("May" only with its year: alone it is a name or a verb more often).
_RANGE_OPENING = re.compile(r"\b(?:between|from)\s+(?:the\s+)?$", re.IGNORECASE)
_LINK = r"\s+(?:and|to|until|till|through|thru)\s+|\s*[-–]\s*"
_RANGE_LINK = re.compile(rf"(?:{_LINK})(?:the\s+)?", re.IGNORECASE)
_BARE_MONTH = rf"(?:(?:{_DAY_MONTH})(?:\s+{_YEAR})?|may\s+{_YEAR})"
_MONTH_RANGE = re.compile(
    rf"\b(?:between|from)\s+(?P<first>{_BARE_MONTH})(?:{_LINK})(?P<last>{_BARE_MONTH})\b", re.IGNORECASE
)
# The groups of a day or month named without its year: a range's end read as such may need the next one.
_YEARLESS: Final = (("md_month", "md_year"), ("dm_month", "dm_year"), ("m_month", "m_year"))


def time_window(query: str, now: float) -> TimeWindow | None:
    """The window the question's first time phrase names, or None when it names none.

    A day, a week (Monday to Sunday), a month or a year is its whole calendar span; "since X" and
    "after X" run from X to now, "before X" and "until X" from the beginning of time to X; "between X
    and Y" and "from X to Y" from X's start to Y's end; "the last 3 weeks" is the 21 days up to now;
    "over the weekend" is the latest one. A month or weekday without a year means the latest one not after
    today ("in March" asked in February is last year's March). A date the calendar does not hold
    ("2026-02-30") is no phrase.
    """
    today = datetime.fromtimestamp(now, UTC).date()
    months = _MONTH_RANGE.search(query)
    for match in _PATTERN.finditer(query):
        if months is not None and months.start() < match.start():
            found = _month_range(months, today)
            if found is not None:
                return found
            months = None
        found = _window_of(match, today, now)
        if found is not None:
            return _range(query, match, found, today, now) or found
    return _month_range(months, today) if months is not None else None


def _window_of(match: re.Match[str], today: date, now: float) -> TimeWindow | None:
    """The window one matched phrase names; None for a date the calendar lacks or past its end."""
    groups = {key: value.lower() for key, value in match.groupdict().items() if value is not None}
    try:
        return _window(groups, today, now)
    except (ValueError, OverflowError):
        return None


def _range(
    query: str, first: re.Match[str], window: TimeWindow, today: date, now: float
) -> TimeWindow | None:
    """ "between X and Y", "from X to Y": from X's start to Y's end, when the phrase `first` is X, has
    no opening word of its own, and a phrase Y follows; None otherwise (X alone then decides)."""
    if first.group("open") is not None or _RANGE_OPENING.search(query[: first.start()]) is None:
        return None
    link = _RANGE_LINK.match(query, first.end())
    second = None if link is None else _PATTERN.match(query, link.end())
    if second is None or second.group("open") is not None:
        return None
    last = _window_of(second, today, now)
    if last is not None and last.end <= window.start and _yearless(second) and _wraps(window, last):
        last = _window_of(second, _a_year_later(today), now)  # "from Dec 20 to Jan 5": the next Jan 5
    if last is None or last.end <= window.start:
        return None
    return TimeWindow(window.start, last.end)


def _wraps(first: TimeWindow, last: TimeWindow) -> bool:
    """Whether a range's end, named without its year, means the next one: in another month than the
    start (December to January), or in the same month on a later day (the end still to come this
    year); the same month on an earlier day is a range written backwards."""
    start = datetime.fromtimestamp(first.start, UTC).date()
    end = datetime.fromtimestamp(last.end - _DAY, UTC).date()
    return start.month != end.month or end.day >= start.day


def _yearless(match: re.Match[str]) -> bool:
    return any(match.group(month) and not match.group(year) for month, year in _YEARLESS)


def _month_range(match: re.Match[str], today: date) -> TimeWindow | None:
    """ "between March and June": from the first month's first day to the last one's end (the next
    one's, when the last month named without a year would come before the first)."""
    try:
        first = _month_span(match.group("first"), today)
        last = _month_span(match.group("last"), today)
        if last[1] < first[0] and len(match.group("last").split()) == 1:
            last = _month_span(match.group("last"), _a_year_later(today))
    except (ValueError, OverflowError):
        return None
    if last[1] < first[0]:
        return None
    return TimeWindow(_epoch(first[0]), _epoch(last[1] + timedelta(days=1)))


def _month_span(text: str, today: date) -> tuple[date, date]:
    """ "March" or "March 2025" as `_month_days` reads it."""
    month, *year = text.lower().split()
    return _month_days(month, year[0] if year else None, today)


def _month_days(month: str, year: str | None, today: date) -> tuple[date, date]:
    """A month's first and last days: of `year`, else the latest such month not after today."""
    number = _MONTH_NUMBER[month]
    first = date(int(year), number, 1) if year else _latest(today, number, 1)
    return first, _month_end(first)


def _a_year_later(today: date) -> date:
    return today.replace(year=today.year + 1, day=min(today.day, 28) if today.month == 2 else today.day)


def _window(groups: dict[str, str], today: date, now: float) -> TimeWindow | None:
    if "last_n" in groups:
        days = _count(groups["n"]) * _unit_days(groups["n_unit"])
        span: tuple[date, date] | None = (today - timedelta(days=days - 1), today)
    else:
        span = _span(groups, today)
    if span is None:
        return None
    start, end = _epoch(span[0]), _epoch(span[1] + timedelta(days=1))
    opening = groups.get("open")
    if opening in ("since", "after"):
        start, end = (end if opening == "after" else start), max(now, end)
    elif opening in ("before", "until"):
        start, end = 0.0, (start if opening == "before" else end)
    return TimeWindow(start, end) if start < end else None


def _span(groups: dict[str, str], today: date) -> tuple[date, date] | None:
    """The calendar days (first, last) a point phrase names."""
    if "iso" in groups:
        day = date.fromisoformat(groups["iso"])
        return day, day
    for prefix in ("md", "dm"):
        if f"{prefix}_month" in groups:
            month, number = _MONTH_NUMBER[groups[f"{prefix}_month"]], int(groups[f"{prefix}_day"])
            year = groups.get(f"{prefix}_year")
            day = date(int(year), month, number) if year else _latest(today, month, number)
            return day, day
    if "ago_count" in groups:
        return _ago(today, _count(groups["ago_count"]), _UNITS[groups["ago_unit"]])
    if "rel" in groups:
        return _relative(today, groups["rel"], groups["rel_unit"])
    if "day_word" in groups:
        word = groups["day_word"]
        back = 2 if word.endswith("before yesterday") else 1 if word == "yesterday" else 0
        day = today - timedelta(days=back)
        return day, day
    for key_month, key_year in (("m_month", "m_year"), ("ym_month", "ym_year")):
        if key_month in groups:
            return _month_days(groups[key_month], groups.get(key_year), today)
    if "year" in groups:
        return date(int(groups["year"]), 1, 1), date(int(groups["year"]), 12, 31)
    if "the_weekend" in groups:  # the latest one: this one on a Saturday or Sunday
        return _relative(today, "this" if today.weekday() >= 5 else "last", "weekend")
    if "weekday" in groups:
        day = today - timedelta(days=(today.weekday() - _WEEKDAYS.index(groups["weekday"])) % 7)
        return day, day
    return None


def _relative(today: date, rel: str, unit: str) -> tuple[date, date]:
    """ "last week", "this month", "past year", "last weekend", "last Tuesday"."""
    back = 0 if rel == "this" else 1
    if unit in _WEEKDAYS:  # "last Tuesday": the latest one before today; "this Tuesday": this week's
        wanted = _WEEKDAYS.index(unit)
        if rel == "this":
            day = today - timedelta(days=today.weekday() - wanted)
        else:
            day = today - timedelta(days=(today.weekday() - wanted - 1) % 7 + 1)
        return day, day
    if unit == "weekend":
        saturday = today - timedelta(days=today.weekday()) + timedelta(days=5 - 7 * back)
        return saturday, saturday + timedelta(days=1)
    if rel == "past":  # "the past week": the days up to today, not the calendar week
        return today - timedelta(days=_unit_days(unit) - 1), today
    return _ago(today, back, unit)


def _ago(today: date, count: int, unit: str) -> tuple[date, date]:
    """The calendar day, week, month or year `count` of them before today's."""
    if unit == "day":
        day = today - timedelta(days=count)
        return day, day
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * count)
        return monday, monday + timedelta(days=6)
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        first = date(months // 12, months % 12 + 1, 1)
        return first, _month_end(first)
    year = today.year - count
    return date(year, 1, 1), date(year, 12, 31)


def _latest(today: date, month: int, day: int) -> date:
    """This year's date, or last year's when this year's is still to come (February 29th: the latest
    leap year's)."""
    year = today.year
    while True:
        try:
            found = date(year, month, day)
        except ValueError:
            if month == 2 and day == 29 and year > today.year - 8:
                year -= 1
                continue
            raise
        if found <= today:
            return found
        year -= 1


def _month_end(first: date) -> date:
    return (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[" ".join(word.split())]


def _unit_days(unit: str) -> int:
    return {"day": 1, "week": 7, "month": 30, "year": 365}[_UNITS.get(unit, unit)]


def _epoch(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
