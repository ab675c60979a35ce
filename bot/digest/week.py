"""ISO weeks in the configured time zone: the unit a digest covers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.errors import BotError

DEFAULT_TIMEZONE = "Asia/Shanghai"


WEEK_HINT = "write an ISO week as YYYY-Www, for example 2026-W40"
MIN_YEAR, MAX_YEAR = 1970, 9998


_WEEK_RE = re.compile(r"^\s*(\d{4})-?[Ww](\d{1,2})\s*$")



class WeekError(BotError):
    """A week label that is malformed or names a week that does not exist."""


def iso_weeks_in(year: int) -> int:
    """52 or 53: 28 December always lies in the last ISO week of its year."""
    return date(year, 12, 28).isocalendar()[1]


@dataclass(frozen=True, order=True)
class Week:
    """One ISO week. ``timezone`` only places its start and end in time; two
    weeks with the same label are equal whatever zone they carry."""

    year: int
    number: int
    timezone: str = field(default=DEFAULT_TIMEZONE, compare=False, repr=False)

    def __post_init__(self) -> None:
        # a week's start and end must exist as moments in every time zone (and
        # as Unix timestamps): 0001-W01 begins before 0001-01-01 00:00 UTC
        if not MIN_YEAR <= self.year <= MAX_YEAR:
            raise WeekError(f"year {self.year} is out of range: weeks from {MIN_YEAR} "
                            f"to {MAX_YEAR} are supported", hint=WEEK_HINT)
        weeks = iso_weeks_in(self.year)
        if not 1 <= self.number <= weeks:
            raise WeekError(f"{self.year} has no ISO week {self.number}: it has weeks 1 to {weeks}",
                            hint=WEEK_HINT)

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def first_day(self) -> date:
        """Monday."""
        return date.fromisocalendar(self.year, self.number, 1)

    @property
    def last_day(self) -> date:
        """Sunday."""
        return self.first_day + timedelta(days=6)

    @property
    def start(self) -> datetime:
        """Monday 00:00 in the week's time zone."""
        return datetime.combine(self.first_day, time(0), tzinfo=self.tz)

    @property
    def end(self) -> datetime:
        """The next Monday 00:00 (exclusive), so DST weeks are still whole weeks."""
        return datetime.combine(self.first_day + timedelta(days=7), time(0), tzinfo=self.tz)

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def next(self) -> Week:
        return self._shifted(7)

    def previous(self) -> Week:
        return self._shifted(-7)

    def with_timezone(self, timezone: str) -> Week:
        return replace(self, timezone=timezone)

    def _shifted(self, days: int) -> Week:
        year, number, _ = (self.first_day + timedelta(days=days)).isocalendar()
        return Week(year, number, self.timezone)

    def __str__(self) -> str:
        return self.label


def parse_week(text: str, timezone: str = DEFAULT_TIMEZONE) -> Week:
    """``"2026-W40"`` (also ``2026W40``, ``2026-w40``) to a Week, or a WeekError."""
    match = _WEEK_RE.match(text or "")
    if not match:
        raise WeekError(f"{text!r} is not an ISO week", hint=WEEK_HINT)
    return Week(int(match[1]), int(match[2]), timezone)


def week_of(moment: datetime, tz: ZoneInfo | str = DEFAULT_TIMEZONE) -> Week:
    """The week containing an aware moment, as seen in ``tz``."""
    if moment.tzinfo is None:
        raise ValueError("week_of needs a timezone-aware datetime")
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    year, number, _ = moment.astimezone(zone).isocalendar()
    return Week(year, number, zone.key)
