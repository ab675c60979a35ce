"""When the weekly send fires, and which week it will send.

The scheduler (``bot.scheduler``) runs the send on this trigger; the editor's
desk and ``status`` ask which week that send covers, so "this week's draft"
is the digest the next scheduled send would freeze.
"""

from __future__ import annotations

from datetime import UTC, datetime

from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.digest.build import latest_complete_week
from bot.digest.week import Week, week_of


def send_trigger(settings: Settings) -> CronTrigger:
    """The weekly send: ``send_day`` at ``send_time`` in ``timezone``."""
    at = settings.send_time
    return CronTrigger(day_of_week=settings.send_day.lower()[:3], hour=at.hour, minute=at.minute,
                       second=at.second, timezone=settings.tz)


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
