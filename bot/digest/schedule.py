"""When the weekly send fires, and which week it will send.

The scheduler (``bot.scheduler``) runs the send on this trigger; the editor's
desk and ``status`` ask which week that send covers, so "this week's draft"
is the digest the next scheduled send would freeze.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from sqlalchemy.orm import Session

from bot.config import WEEKDAYS, Settings
from bot.digest.build import latest_complete_week
from bot.digest.week import Week, week_of

_MINUTE = timedelta(minutes=1)
_LONGEST_GAP = timedelta(days=2)  # the longest a clock ever jumped (Samoa skipped 2011-12-30)


class WeeklyTrigger(BaseTrigger):
    """Once a week, on ``weekday`` (0 = Monday) at ``at`` on the wall clock of ``tz``.

    Exactly once a week across daylight-saving changes, which apscheduler's
    CronTrigger gets wrong (it fires twice in a repeated hour, and at a time
    that does not exist in a skipped one):

    - a time the clock skips (02:30 on the night it jumps from 02:00 to
      03:00) fires at the next minute that exists, 03:00;
    - a time the clock shows twice (02:30 on the night it goes back from
      03:00 to 02:00) fires at its first occurrence only (``fold=0``).

    Kept in the job store as a pickle: its state is the three fields.
    """

    def __init__(self, weekday: int, at: time, tz: tzinfo) -> None:
        self.weekday = weekday
        self.at = at.replace(tzinfo=None, fold=0)
        self.tz = tz

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        """The first fire strictly after ``previous_fire_time`` (the scheduler then
        lists the misfired ones up to now), else the first at or after ``now``."""
        # in UTC: two times of one zone compare by their wall clocks, blind to
        # which of a repeated hour's two 02:30s each is
        start = (now.astimezone(UTC) if previous_fire_time is None
                 else previous_fire_time.astimezone(UTC) + timedelta(microseconds=1))
        day = start.astimezone(self.tz).date() - timedelta(days=3)  # a skipped day moves a fire on
        for offset in range(14):
            candidate = day + timedelta(days=offset)
            if candidate.weekday() == self.weekday:
                fire = self.fire_on(candidate)
                if fire.astimezone(UTC) >= start:
                    return fire
        raise AssertionError("a weekly trigger fires within any two weeks")  # pragma: no cover

    def fire_on(self, day: date) -> datetime:
        """When the send of local date ``day`` fires, as an aware time in ``tz``."""
        wall = datetime.combine(day, self.at)
        if not _exists(wall, self.tz):
            wall = wall.replace(second=0, microsecond=0)
            limit = wall + _LONGEST_GAP
            while not _exists(wall, self.tz) and wall < limit:
                wall += _MINUTE
        return wall.replace(tzinfo=self.tz, fold=0).astimezone(UTC).astimezone(self.tz)

    def __getstate__(self) -> dict[str, Any]:
        return {"version": 1, "weekday": self.weekday, "at": self.at, "tz": self.tz}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.weekday, self.at, self.tz = state["weekday"], state["at"], state["tz"]

    def __str__(self) -> str:
        return f"weekly[{WEEKDAYS[self.weekday]} {self.at.isoformat()} {self.tz}]"

    def __repr__(self) -> str:
        return f"<WeeklyTrigger ({self})>"


def _exists(wall: datetime, tz: tzinfo) -> bool:
    """Does this naive wall-clock time occur in ``tz`` (not skipped by a clock change)?"""
    there_and_back = wall.replace(tzinfo=tz, fold=0).astimezone(UTC).astimezone(tz)
    return there_and_back.replace(tzinfo=None) == wall


def send_trigger(settings: Settings) -> WeeklyTrigger:
    """The weekly send: ``send_day`` at ``send_time`` in ``timezone``."""
    return WeeklyTrigger(WEEKDAYS.index(settings.send_day.lower()[:3]), settings.send_time, settings.tz)


def next_send_time(settings: Settings, now: datetime | None = None) -> datetime:
    """When the weekly send fires next after ``now``, in the configured time zone."""
    now = (now or datetime.now(UTC)).astimezone(settings.tz)
    fire = send_trigger(settings).get_next_fire_time(None, now)
    assert fire is not None  # a weekly cron always fires again
    return fire


def scheduled_week(session: Session, settings: Settings, now: datetime | None = None) -> Week:
    """The week the next scheduled send covers: what the send will pick then
    (the latest complete week with entries), else the week ending before it."""
    at = next_send_time(settings, now)
    return latest_complete_week(session, settings, at) or week_of(at, settings.tz).previous()
