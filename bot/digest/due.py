"""Is the weekly send due? A fact read from the database, never from a job store.

APScheduler moves the weekly job on to next week the moment it hands the job
to a worker, before anything is frozen: a process killed in that instant came
back to a job store that said "next week", and the week was never sent. So
whether a send is owed is derived, at start and at every send time, from:

- the last scheduled send time ``fire`` at or before now (the settings' cron);
- the week that send covers: the latest complete week with entries at
  ``fire``, else the week before ``fire``'s (what ``send_digest`` picks then);
- whether that week's digest exists and how far its send got.

A week whose digest does not exist is **due** while ``fire`` is less than
``send_grace_hours`` ago, and **missed** after that (the scheduler makes up a
due send only on a database it had already scheduled: a first start does not). A digest 'sending' was
interrupted and is resumed from its ledger; 'sent' is done. No crash at any
instant can skip a week: until the digest is frozen the week stays due, after
that the ledger finishes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.digest import queries
from bot.digest.build import latest_complete_week
from bot.digest.schedule import send_trigger
from bot.digest.week import Week, week_of

DUE, MISSED, SENDING, SENT, NOTHING = "due", "missed", "sending", "sent", "nothing to send"


@dataclass(frozen=True)
class WeeklySend:
    """The last scheduled send and what the database says of it."""

    fire: datetime  # the scheduled send time, in the configured zone
    week: Week  # the week that send covers
    state: str  # due | missed | sending | sent | nothing to send (or another digest status)

    @property
    def due(self) -> bool:
        return self.state == DUE


def last_send_time(settings: Settings, now: datetime | None = None) -> datetime:
    """The latest scheduled send time at or before ``now``."""
    # compared in UTC: two times of one zone compare by wall clock, blind to a repeated hour
    now = (now or datetime.now(UTC)).astimezone(UTC)
    trigger = send_trigger(settings)
    fire = trigger.get_next_fire_time(None, now - timedelta(days=8))
    assert fire is not None and fire.astimezone(UTC) <= now  # a weekly trigger fires within any 8 days
    while ((following := trigger.get_next_fire_time(fire, fire.astimezone(UTC) + timedelta(seconds=1)))
           and following.astimezone(UTC) <= now):
        fire = following
    return fire


def weekly_send(session: Session, settings: Settings, now: datetime | None = None) -> WeeklySend:
    """The last scheduled send, the week it covers and whether it is still owed."""
    now = (now or datetime.now(UTC)).astimezone(settings.tz)
    fire = last_send_time(settings, now)
    latest = latest_complete_week(session, settings, fire)
    week = latest or week_of(fire, settings.tz).previous()
    digest = queries.digest_for_week(session, week.label)
    if digest is not None:
        state = digest.status
    elif latest is None and not settings.send_empty:
        state = NOTHING  # no entries before that send: it had nothing to send
    elif now.astimezone(UTC) - fire.astimezone(UTC) <= timedelta(hours=settings.send_grace_hours):
        state = DUE
    else:
        state = MISSED
    return WeeklySend(fire, week, state)
