"""The weekly send across daylight-saving changes (issue 32, item 7): a send
time the clock skips fires once, at the next minute that exists; a send time
the clock shows twice fires once, at its first occurrence. Tested by asking
the trigger for its fire times, without waiting for any."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.config import load_settings
from bot.digest.due import last_send_time
from bot.digest.schedule import WeeklyTrigger, next_send_time, send_trigger

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def fires(trigger: WeeklyTrigger, since: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times, in UTC, as the scheduler walks them."""
    found: list[datetime] = []
    previous = None
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, since)
        assert fire is not None
        found.append(fire.astimezone(UTC))
        previous = since = fire
    return found


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def settings(zone: str, day: str = "sun", at: str = "02:30"):
    return load_settings({"DIGESTBOT_SEND_DAY": day, "DIGESTBOT_SEND_TIME": at,
                          "DIGESTBOT_TIMEZONE": zone})


def test_the_issue_case_berlin_0230_on_sundays():
    trigger = send_trigger(settings("Europe/Berlin"))
    # spring forward, 2026-03-29: 02:00 CET -> 03:00 CEST, 02:30 does not exist
    assert fires(trigger, utc(2026, 3, 20), 3) == [
        utc(2026, 3, 22, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST: the next minute that exists, once
        utc(2026, 4, 5, 0, 30)]  # 02:30 CEST
    # fall back, 2026-10-25: 03:00 CEST -> 02:00 CET, 02:30 comes twice
    assert fires(trigger, utc(2026, 10, 20), 3) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST, the first; not 01:30 UTC as well
        utc(2026, 11, 1, 1, 30),
        utc(2026, 11, 8, 1, 30)]


def test_new_york_both_changes():
    skipped = send_trigger(settings("America/New_York", at="02:30"))  # 2026-03-08 02:00 -> 03:00
    assert fires(skipped, utc(2026, 3, 2), 2) == [utc(2026, 3, 8, 7, 0), utc(2026, 3, 15, 6, 30)]
    assert fires(skipped, utc(2026, 3, 8, 7, 0), 1)[0].astimezone(NEW_YORK).strftime("%H:%M") == "03:00"
    repeated = send_trigger(settings("America/New_York", at="01:30"))  # 2026-11-01 02:00 -> 01:00
    assert fires(repeated, utc(2026, 10, 28), 2) == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 8, 6, 30)]


@pytest.mark.parametrize("zone, now, expected", [
    ("Europe/Berlin", utc(2026, 10, 25, 0, 45), utc(2026, 11, 1, 1, 30)),  # between the two 02:30s
    ("Europe/Berlin", utc(2026, 10, 25, 1, 15), utc(2026, 11, 1, 1, 30)),  # 02:15 the second time
    ("Europe/Berlin", utc(2026, 3, 29, 0, 59), utc(2026, 3, 29, 1, 0)),  # a minute before the jump
])
def test_next_send_time_inside_a_change(zone, now, expected):
    assert next_send_time(settings(zone), now).astimezone(UTC) == expected


def test_the_last_send_time_in_a_repeated_hour_is_its_first_occurrence():
    """``bot.digest.due`` reads the last send time to decide what is owed: after
    the second 02:30 it must still be the first, or a week would look owed twice."""
    after_both = utc(2026, 10, 25, 1, 45)
    berlin = settings("Europe/Berlin")
    # (in UTC: a time in a repeated hour never equals one of another zone, PEP 495)
    assert last_send_time(berlin, after_both).astimezone(UTC) == utc(2026, 10, 25, 0, 30)
    between = utc(2026, 10, 25, 1, 15)  # 02:15 the second time, after the first 02:30
    assert last_send_time(berlin, between).astimezone(UTC) == utc(2026, 10, 25, 0, 30)
    assert last_send_time(berlin, utc(2026, 3, 29, 1, 30)).astimezone(UTC) == utc(2026, 3, 29, 1, 0)


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                                  "America/Santiago", "Asia/Shanghai"])
def test_once_a_week_at_the_time_or_the_first_minute_after_a_skip(zone):
    """Over two years, for send times around midnight and the small hours:
    one fire per local week, on the wall time asked for, or (where the clock
    skipped it) at the first minute after the skip."""
    tz = ZoneInfo(zone)
    for minutes in range(0, 4 * 60, 15):
        at = time(minutes // 60, minutes % 60)
        trigger = WeeklyTrigger(6, at, tz)
        found = fires(trigger, utc(2026, 1, 1), 104)
        gaps = [b - a for a, b in zip(found, found[1:], strict=False)]
        assert all(timedelta(days=7) - timedelta(hours=2) <= g <= timedelta(days=7) + timedelta(hours=2)
                   for g in gaps), (zone, at)
        for fire in found:
            local = fire.astimezone(tz)
            assert local.weekday() == 6 or local.time() <= time(4), (zone, at, local)
            if local.time().replace(tzinfo=None) != at:  # moved: only out of a skipped time
                wanted = datetime.combine(local.date(), at).replace(tzinfo=tz)
                assert wanted.astimezone(UTC).astimezone(tz).time() != at, (zone, at, local)
                assert local - timedelta(minutes=1) < wanted.astimezone(UTC).astimezone(tz), (zone, at)


def test_the_trigger_survives_the_job_store():
    import pickle

    trigger = send_trigger(settings("Europe/Berlin"))
    again = pickle.loads(pickle.dumps(trigger))
    assert fires(again, utc(2026, 3, 20), 3) == fires(trigger, utc(2026, 3, 20), 3)
    assert str(again) == "weekly[sun 02:30:00 Europe/Berlin]"
