"""The schedule inside `digestbot run`: real APScheduler, real SQLite job store.

Time is controlled two ways: triggers are asked for their next fire time at a
given ``now``, and "the process was down at send time" is made by writing a
past next-run time into the persistent job store between two starts, exactly
what a real outage leaves behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import FEED_FIXTURE

from bot import scheduler as sched
from bot.config import WEEKDAYS, Settings
from bot.errors import BotError
from bot.ingest import queries as feed_queries
from bot.models import Digest
from bot.service import Service


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class CountingSend:
    """Stands in for send.send_digest: records each call and how many overlapped."""

    def __init__(self, messages: int = 0, delay: float = 0.0) -> None:
        self.calls: list[str | None] = []
        self.messages_sent = 0
        self.messages = messages
        self.delay = delay
        self.running = 0
        self.max_running = 0
        self._lock = threading.Lock()

    def __call__(self, settings: Settings, factory: Any, week: str | None = None, *,
                 stop: threading.Event | None = None, **_kw: Any) -> Report:
        with self._lock:
            self.calls.append(week)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            for _ in range(self.messages):
                if stop is not None and stop.is_set():
                    return Report(week or "latest", "incomplete")
                time.sleep(self.delay)
                self.messages_sent += 1
            time.sleep(self.delay)
        finally:
            with self._lock:
                self.running -= 1
        return Report(week or "latest", "sent")


@dataclass
class Report:
    week: str
    outcome: str

    def summary(self) -> str:
        return f"{self.week}: {self.outcome}"


@pytest.fixture
def services(fresh_db) -> Iterator[Callable[..., Service]]:
    """Start services on the fresh database; all are stopped at the end."""
    started: list[Service] = []

    def start(settings: Settings, send: Any = None) -> Service:
        service = Service(settings, fresh_db.engine, fresh_db.factory, send=send)
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def send_at(moment: datetime) -> dict[str, str]:
    """Settings that put the weekly send at ``moment`` (in its own time zone)."""
    return {"send_day": WEEKDAYS[moment.weekday()], "send_time": moment.time().isoformat(),
            "timezone": str(moment.tzinfo)}


def move_stored_send(settings: Settings, when: datetime) -> None:
    """What an outage leaves behind: the stored send job's next run time lies in the past."""
    scheduler = sched.build_scheduler(settings, sched.make_jobstore(settings.database_url))
    scheduler.start(paused=True)
    scheduler.modify_job(sched.SEND_JOB_ID, next_run_time=when)
    scheduler.shutdown(wait=False)


def stored_send_time(engine: Any) -> datetime | None:
    return sched.stored_next_run_times(engine).get(sched.SEND_JOB_ID)


SHANGHAI = ZoneInfo("Asia/Shanghai")


# --- triggers -------------------------------------------------------------------

def test_weekly_send_is_monday_0900_shanghai_by_default(make_settings):
    settings = make_settings()
    wednesday = datetime(2026, 10, 7, 12, 0, tzinfo=UTC)
    fire = sched.next_send_time(settings, wednesday)
    assert fire == datetime(2026, 10, 12, 9, 0, tzinfo=SHANGHAI)
    assert fire.astimezone(UTC) == datetime(2026, 10, 12, 1, 0, tzinfo=UTC)
    assert fire.astimezone(SHANGHAI).strftime("%a %H:%M") == "Mon 09:00"
    # 00:59 UTC on Monday is 08:59 in Shanghai: the send is a minute away
    assert sched.next_send_time(settings, datetime(2026, 10, 12, 0, 59, tzinfo=UTC)) == fire
    # 01:00 UTC has passed it: next week
    after = sched.next_send_time(settings, datetime(2026, 10, 12, 1, 0, 1, tzinfo=UTC))
    assert after == datetime(2026, 10, 19, 9, 0, tzinfo=SHANGHAI)


def test_send_day_time_and_zone_come_from_settings(make_settings):
    settings = make_settings(send_day="friday", send_time="17:30", timezone="Europe/Berlin")
    berlin = ZoneInfo("Europe/Berlin")
    # across the end of summer time (25 October 2026): still 17:30 local
    fire = sched.next_send_time(settings, datetime(2026, 10, 26, 0, 0, tzinfo=UTC))
    assert fire == datetime(2026, 10, 30, 17, 30, tzinfo=berlin)
    assert fire.astimezone(UTC).hour == 16
    before = sched.next_send_time(settings, datetime(2026, 10, 20, 0, 0, tzinfo=UTC))
    assert before.astimezone(UTC) == datetime(2026, 10, 23, 15, 30, tzinfo=UTC)


def test_poll_interval_has_a_little_jitter(make_settings):
    settings = make_settings(poll_interval=30)
    trigger = sched.poll_trigger(settings)
    assert trigger.interval == timedelta(minutes=30)
    assert 0 < sched.poll_jitter(settings) <= 120
    now = datetime(2026, 10, 7, 12, 0, tzinfo=UTC)
    fires = [trigger.get_next_fire_time(now, now + timedelta(seconds=1)) for _ in range(20)]
    assert all(timedelta(minutes=30) <= f - now <= timedelta(minutes=30, seconds=90) for f in fires)


# --- jobs on a running scheduler ---------------------------------------------------

def test_poll_job_polls_at_start_and_again_on_schedule(make_settings, feed_server, fresh_db, services):
    url = feed_server.serve("/feed.xml", FEED_FIXTURE.read_bytes(), headers={"ETag": '"v1"'})
    service = services(make_settings(feed_urls=url))
    assert wait_for(lambda: _entries(fresh_db) == 77), "the poll at start stored nothing"
    assert len(feed_server.requests) == 1

    job = service.scheduler.get_job(sched.POLL_JOB_ID)
    assert job.func_ref == "bot.scheduler:poll_job" and job.args == () and job.kwargs == {}
    next_poll = job.next_run_time - datetime.now(UTC)
    assert timedelta(minutes=59) < next_poll <= timedelta(minutes=62)

    service.scheduler.modify_job(sched.POLL_JOB_ID, next_run_time=datetime.now(UTC))  # time passes
    assert wait_for(lambda: len(feed_server.requests) == 2)
    assert feed_server.requests[1][1].get("If-None-Match") == '"v1"'
    with fresh_db.factory() as session:
        [feed] = feed_queries.all_feeds(session)
        assert feed.consecutive_failures == 0 and feed.last_success_at is not None
    assert _entries(fresh_db) == 77


def test_a_failing_feed_does_not_stop_the_others(make_settings, feed_server, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    good = feed_server.serve("/feed.xml", FEED_FIXTURE.read_bytes())
    bad = feed_server.url("/missing.xml")
    services(make_settings(feed_urls=f"{bad},{good}"))
    assert wait_for(lambda: _entries(fresh_db) == 77)
    polls = [r for r in caplog.records if r.getMessage().startswith("poll ")]
    assert any(bad in r.getMessage() and r.levelno == logging.WARNING for r in polls)
    assert any(good in r.getMessage() and "77 new" in r.getMessage() for r in polls)


def test_weekly_send_fires_at_its_time_in_the_configured_zone(make_settings, services):
    for zone in ("Asia/Shanghai", "America/New_York"):
        soon = (datetime.now(ZoneInfo(zone)) + timedelta(seconds=3)).replace(microsecond=0)
        counter = CountingSend()
        service = services(make_settings(**send_at(soon)), send=counter)
        job = service.scheduler.get_job(sched.SEND_JOB_ID)
        assert job.next_run_time == soon
        assert job.func_ref == "bot.scheduler:send_job" and job.args == ()
        assert job.coalesce and job.max_instances == 1
        assert counter.calls == []
        assert wait_for(lambda c=counter: c.calls == [None], timeout=10)
        assert datetime.now(UTC) >= soon
        # and the next one is a week later, same local time
        assert wait_for(lambda s=service, t=soon: s.scheduler.get_job(sched.SEND_JOB_ID).next_run_time
                        == t + timedelta(days=7))
        service.stop()


def test_restart_after_a_missed_send_time_sends_exactly_once(make_settings, fresh_db, services):
    missed = (datetime.now(SHANGHAI) - timedelta(hours=1)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(missed))
    counter = CountingSend()

    first = services(settings, send=counter)  # running last week
    assert stored_send_time(fresh_db.engine) == missed + timedelta(days=7)
    first.stop()
    move_stored_send(settings, missed)  # ...then down when the send was due

    services(settings, send=counter)  # back up an hour late
    assert wait_for(lambda: counter.calls == [None])
    assert wait_for(lambda: stored_send_time(fresh_db.engine) == missed + timedelta(days=7))
    time.sleep(1.0)
    assert counter.calls == [None]

    third = services(settings, send=counter)  # and restarted once more: nothing new
    time.sleep(1.5)
    assert counter.calls == [None]
    assert third.scheduler.get_job(sched.SEND_JOB_ID).next_run_time == missed + timedelta(days=7)


def test_two_missed_send_times_give_one_send(make_settings, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    latest = (datetime.now(SHANGHAI) - timedelta(hours=2)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(latest))
    counter = CountingSend()
    services(settings, send=counter).stop()
    move_stored_send(settings, latest - timedelta(days=7))  # down for more than a week

    services(settings, send=counter)
    assert wait_for(lambda: counter.calls == [None])
    assert f"send due at {latest.isoformat(timespec='minutes')} was missed while stopped: sending it now" \
        in caplog.text
    assert wait_for(lambda: stored_send_time(fresh_db.engine) == latest + timedelta(days=7))
    time.sleep(1.0)
    assert counter.calls == [None]


def test_a_send_missed_by_more_than_the_grace_period_is_skipped(make_settings, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    missed = (datetime.now(SHANGHAI) - timedelta(hours=30)).replace(second=0, microsecond=0)
    settings = make_settings(send_grace_hours=24, **send_at(missed))
    counter = CountingSend()
    services(settings, send=counter).stop()
    move_stored_send(settings, missed)

    services(settings, send=counter)
    assert wait_for(lambda: stored_send_time(fresh_db.engine) == missed + timedelta(days=7))
    time.sleep(1.0)
    assert counter.calls == []
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "bot.scheduler"]
    assert "more than DIGESTBOT_SEND_GRACE_HOURS=24 ago: skipped" in warning.getMessage()


def test_a_changed_schedule_replaces_the_stored_job(make_settings, fresh_db, services):
    services(make_settings(), send=CountingSend()).stop()
    now = datetime.now(UTC)
    assert stored_send_time(fresh_db.engine) == sched.next_send_time(make_settings(), now)
    friday = make_settings(send_day="fri", send_time="18:00")
    services(friday, send=CountingSend())
    assert stored_send_time(fresh_db.engine) == sched.next_send_time(friday, now)
    ids = set(sched.stored_next_run_times(fresh_db.engine))
    assert ids == {sched.POLL_JOB_ID, sched.SEND_JOB_ID}  # replaced, not duplicated


def test_an_interrupted_send_is_resumed_at_start(make_settings, fresh_db, services):
    with fresh_db.factory() as session, session.begin():
        session.add(Digest(week="2026-W40", status="sending", subject="s", html="", text=""))
        session.add(Digest(week="2026-W39", status="sent", subject="s", html="", text=""))
    counter = CountingSend()
    service = services(make_settings(), send=counter)
    assert wait_for(lambda: counter.calls == ["2026-W40"])
    time.sleep(0.5)
    assert counter.calls == ["2026-W40"]  # not the weekly send, whose time has not come
    assert service.scheduler.get_job(sched.RESUME_JOB_ID) is None  # a one-off, gone now
    assert sched.RESUME_JOB_ID not in sched.stored_next_run_times(fresh_db.engine)


def test_sends_due_together_run_one_after_the_other(make_settings, fresh_db, services):
    with fresh_db.factory() as session, session.begin():
        session.add(Digest(week="2026-W40", status="sending", subject="s", html="", text=""))
    missed = (datetime.now(SHANGHAI) - timedelta(hours=1)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(missed))
    counter = CountingSend(delay=0.3)
    services(settings, send=counter).stop()
    counter.calls.clear()
    move_stored_send(settings, missed)

    services(settings, send=counter)
    assert wait_for(lambda: len(counter.calls) == 2 and counter.running == 0)
    assert sorted(counter.calls, key=str) == ["2026-W40", None]
    assert counter.max_running == 1


class SendLocked(BotError):
    pass


def test_a_locked_send_is_logged_and_the_scheduler_carries_on(make_settings, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")

    def locked(*_args: Any, **_kw: Any) -> None:
        raise SendLocked("2026-W40 is being sent by another run (pid 4242)")

    soon = (datetime.now(SHANGHAI) + timedelta(seconds=3)).replace(microsecond=0)
    service = services(make_settings(**send_at(soon)), send=locked)
    assert wait_for(lambda: any("another run" in r.getMessage() for r in caplog.records))
    [record] = [r for r in caplog.records if "another run" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.name == "bot.scheduler"
    assert record.getMessage().startswith("send ")
    assert service.is_running()
    # and it looks again later for what is left unfinished
    retry = service.scheduler.get_job(sched.RESUME_JOB_ID)
    wait = retry.next_run_time - datetime.now(UTC)
    assert timedelta(minutes=sched.RETRY_MINUTES - 1) < wait <= timedelta(minutes=sched.RETRY_MINUTES)
    assert service.health_check() == "running"


def test_an_unexpected_error_in_a_send_is_logged_with_the_digest(make_settings, services, caplog):
    def broken(*_args: Any, **_kw: Any) -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.INFO, logger="bot"):
        sched.set_context(sched.JobContext(make_settings(), None, send=broken))  # type: ignore[arg-type]
        try:
            sched.send_job()
        finally:
            sched.set_context(None)
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == "send of the week just ended failed" and record.exc_info


def test_stop_ends_a_send_after_the_message_in_flight(make_settings, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    counter = CountingSend(messages=500, delay=0.02)
    soon = (datetime.now(SHANGHAI) + timedelta(seconds=3)).replace(microsecond=0)
    service = services(make_settings(**send_at(soon)), send=counter)
    assert wait_for(lambda: counter.messages_sent >= 3)
    started = time.monotonic()
    service.stop()
    assert time.monotonic() - started < 2
    sent = counter.messages_sent
    assert 3 <= sent < 500 and counter.running == 0
    time.sleep(0.2)
    assert counter.messages_sent == sent
    assert any("stopped after the message in flight" in r.getMessage() for r in caplog.records)
    assert service.health_check() is False


def test_jobs_need_the_context_the_service_sets(make_settings):
    sched.set_context(None)
    with pytest.raises(RuntimeError, match="digestbot run"):
        sched.poll_job()


def _entries(fresh_db: Any) -> int:
    with fresh_db.factory() as session:
        return feed_queries.count_entries(session)


# --- with the real send_digest and a real SMTP server ------------------------------------

def test_a_send_locked_by_an_admin_run_is_logged_not_crashed(make_settings, fresh_db, smtp_server, caplog):
    from smtp import add_subscribers, ledger, make_digest

    from bot.send.lock import DigestLock

    caplog.set_level(logging.INFO, logger="bot")
    digest_id = make_digest(fresh_db.factory, "2026-W40")
    add_subscribers(fresh_db.factory, ["a@example.org", "b@example.org"])
    settings = make_settings(**smtp_server.settings_env())
    sched.set_context(sched.JobContext(settings, fresh_db.factory))
    try:
        with DigestLock(fresh_db.factory, digest_id, "2026-W40"):  # `digestbot send` is running
            sched.resume_job()
        [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert record.getMessage().startswith("send 2026-W40: another send of 2026-W40 is running")
        assert smtp_server.messages == []
        sched.resume_job()  # it has finished (here: given up the lock); the next try sends
    finally:
        sched.set_context(None)
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
    assert smtp_server.copies_by_recipient() == {"a@example.org": 1, "b@example.org": 1}


def test_stopping_mid_send_leaves_nothing_half_recorded(make_settings, fresh_db, smtp_server, services):
    from smtp import add_subscribers, ledger, make_digest

    digest_id = make_digest(fresh_db.factory, "2026-W40")
    addresses = [f"r{i}@example.org" for i in range(20)]
    add_subscribers(fresh_db.factory, addresses)
    settings = make_settings(**smtp_server.settings_env())
    smtp_server.delay = 0.2
    service = services(settings)  # resumes the digest at start
    smtp_server.wait_for(3)
    started = time.monotonic()
    service.stop()
    assert time.monotonic() - started < 3
    states = ledger(fresh_db.factory, digest_id)
    sent = [a for a, state in states.items() if state == "sent"]
    assert set(states.values()) == {"sent", "pending"}, states  # none left 'sending'
    assert 3 <= len(sent) < len(addresses)
    assert sorted(smtp_server.copies_by_recipient()) == sorted(sent)

    smtp_server.delay = 0
    services(settings)  # the next start finishes it
    assert wait_for(lambda: set(ledger(fresh_db.factory, digest_id).values()) == {"sent"})
    assert smtp_server.copies_by_recipient() == {a: 1 for a in addresses}
