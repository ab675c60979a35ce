"""The schedule inside `digestbot run`: real APScheduler, real SQLite job store.

Time is controlled two ways: triggers are asked for their next fire time at a
given ``now``, and "the process was down at send time" is a send time set in
the recent past: whether that send is owed is read from the database
(``bot.digest.due``), whatever the job store says. A kill -9 of a real
``digestbot run`` around the send time is in test_kill_at_send.py.
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
from helpers import any_db, wait_until
from sqlalchemy import select

from bot import ingest
from bot import scheduler as sched
from bot.config import WEEKDAYS, Settings
from bot.errors import BotError
from bot.ingest import queries as feed_queries
from bot.models import Digest
from bot.service import Service


def settled(service: Service) -> bool:
    """Nothing is due and no job runs: nothing can fire before the next (future) run time.

    What a test waits for before asserting that something did *not* happen,
    instead of sleeping and hoping. (A job is counted as running from its hand-out
    to the executor, before its next run time is stored, until it has returned.)
    """
    scheduler = service.scheduler
    assert scheduler is not None
    now = datetime.now(UTC)
    due = [job for job in scheduler.get_jobs() if job.next_run_time and job.next_run_time <= now]
    running = scheduler._lookup_executor("default")._instances  # APScheduler's count per job
    return not due and not any(running.values())


class CountingSend:
    """Stands in for send.send_digest: records each call and how many overlapped."""

    def __init__(self, messages: int = 0, delay: float = 0.0, records: bool = True) -> None:
        self.records = records  # False: as if killed before the digest was frozen
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
        if week and self.records:  # what a finished send leaves in the database
            with factory() as session, session.begin():
                row = session.scalar(select(Digest).where(Digest.week == week))
                if row is None:
                    session.add(Digest(week=week, status="sent", subject="s", html="", text=""))
                else:
                    row.status = "sent"
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

@any_db
def test_poll_job_polls_at_start_and_again_on_schedule(make_settings, feed_server, fresh_db, services):
    url = feed_server.serve("/feed.xml", FEED_FIXTURE.read_bytes(), headers={"ETag": '"v1"'})
    service = services(make_settings(feed_urls=url))
    assert wait_until(lambda: _entries(fresh_db) == 77), "the poll at start stored nothing"
    assert len(feed_server.requests) == 1

    job = service.scheduler.get_job(sched.POLL_JOB_ID)
    assert job.func_ref == "bot.scheduler:poll_job" and job.args == () and job.kwargs == {}
    next_poll = job.next_run_time - datetime.now(UTC)
    assert timedelta(minutes=59) < next_poll <= timedelta(minutes=62)

    assert wait_until(lambda: settled(service))  # the first poll has returned, not only stored
    service.scheduler.modify_job(sched.POLL_JOB_ID, next_run_time=datetime.now(UTC))  # time passes
    assert wait_until(lambda: len(feed_server.requests) == 2)
    assert feed_server.requests[1][1].get("If-None-Match") == '"v1"'
    with fresh_db.factory() as session:
        [feed] = feed_queries.all_feeds(session)
        assert feed.consecutive_failures == 0 and feed.last_success_at is not None
    assert _entries(fresh_db) == 77


def test_a_failing_feed_does_not_stop_the_others(make_settings, feed_server, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    good = feed_server.serve("/feed.xml", FEED_FIXTURE.read_bytes())
    # the bad feed answers late: the good one is stored at once, but its report (in feed order)
    # waits for the bad one's, so the entries are there before the log line says so
    bad = feed_server.serve("/missing.xml", b"gone", status=404, delay=1.0)
    services(make_settings(feed_urls=f"{bad},{good}"))
    assert wait_until(lambda: _entries(fresh_db) == 77)

    def polls() -> list[logging.LogRecord]:
        return [r for r in list(caplog.records) if r.getMessage().startswith("poll ")]

    assert wait_until(lambda: any(good in r.getMessage() and "77 new" in r.getMessage() for r in polls()))
    assert any(bad in r.getMessage() and r.levelno == logging.WARNING for r in polls())


def with_entries(settings: Settings, fresh_db: Any) -> str:
    """The example feed polled: the week a send now covers is its last, 2026-W40."""
    ingest.poll_feeds(settings, fresh_db.factory)
    return "2026-W40"


def test_weekly_send_fires_at_its_time_in_the_configured_zone(make_settings, fresh_db, services):
    week = with_entries(make_settings(), fresh_db)
    for zone in ("Asia/Shanghai", "America/New_York"):
        soon = (datetime.now(ZoneInfo(zone)) + timedelta(seconds=3)).replace(microsecond=0)
        counter = CountingSend(records=False)
        service = services(make_settings(**send_at(soon)), send=counter)
        job = service.scheduler.get_job(sched.SEND_JOB_ID)
        assert job.next_run_time == soon
        assert job.func_ref == "bot.scheduler:send_job" and job.args == ()
        assert job.coalesce and job.max_instances == 1
        assert counter.calls == []
        assert wait_until(lambda c=counter: c.calls == [week], timeout=10)
        assert datetime.now(UTC) >= soon
        # and the next one is a week later, same local time
        assert wait_until(lambda s=service, t=soon: s.scheduler.get_job(sched.SEND_JOB_ID).next_run_time
                        == t + timedelta(days=7))
        service.stop()


@any_db
def test_restart_after_a_missed_send_time_sends_exactly_once(make_settings, fresh_db, services):
    missed = (datetime.now(SHANGHAI) - timedelta(hours=1)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(missed))
    week = with_entries(settings, fresh_db)
    counter = CountingSend()
    services(settings, send=counter).stop()  # a first start makes up nothing: it never ran before
    assert counter.calls == []

    first = services(settings, send=counter)  # back up an hour after the send time
    assert wait_until(lambda: counter.calls == [week])
    assert wait_until(lambda: settled(first))
    assert stored_send_time(fresh_db.engine) == missed + timedelta(days=7)
    first.stop()

    second = services(settings, send=counter)  # and restarted: the database says it went out
    assert wait_until(lambda: settled(second))
    assert counter.calls == [week]
    assert second.scheduler.get_job(sched.SEND_JOB_ID).next_run_time == missed + timedelta(days=7)


def test_a_send_the_job_store_moved_on_from_is_still_sent(make_settings, fresh_db, services):
    """What a kill -9 just after the send time leaves: the job store already
    says next week, the digest was never frozen. The database decides: owed."""
    missed = (datetime.now(SHANGHAI) - timedelta(minutes=5)).replace(microsecond=0)
    settings = make_settings(**send_at(missed))
    week = with_entries(settings, fresh_db)
    services(settings, send=CountingSend()).stop()  # the service has run on this database
    killed = CountingSend(records=False)  # handed out, then the process died before freezing
    dying = services(settings, send=killed)
    assert wait_until(lambda: killed.calls == [week])
    dying.stop()
    assert stored_send_time(fresh_db.engine) == missed + timedelta(days=7)  # the store moved on

    counter = CountingSend()
    restarted = services(settings, send=counter)
    assert wait_until(lambda: counter.calls == [week])
    assert wait_until(lambda: settled(restarted))
    assert counter.calls == [week]


def test_two_missed_send_times_give_one_send(make_settings, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    latest = (datetime.now(SHANGHAI) - timedelta(hours=2)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(latest))
    week = with_entries(settings, fresh_db)
    counter = CountingSend()
    services(settings, send=counter).stop()  # last up more than a week ago, say

    service = services(settings, send=counter)  # two send times passed since
    assert wait_until(lambda: counter.calls == [week])
    assert (f"send due at {latest.isoformat(timespec='minutes')} ({week}) has not gone out: "
            "sending it now") in caplog.text
    assert wait_until(lambda: stored_send_time(fresh_db.engine) == latest + timedelta(days=7))
    assert wait_until(lambda: settled(service))
    assert counter.calls == [week]


def test_a_send_missed_by_more_than_the_grace_period_is_skipped(make_settings, fresh_db, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    missed = (datetime.now(SHANGHAI) - timedelta(hours=30)).replace(second=0, microsecond=0)
    settings = make_settings(send_grace_hours=24, **send_at(missed))
    with_entries(settings, fresh_db)
    counter = CountingSend()
    services(settings, send=counter).stop()  # it ran here before
    caplog.clear()

    service = services(settings, send=counter)
    assert wait_until(lambda: stored_send_time(fresh_db.engine) == missed + timedelta(days=7))
    assert wait_until(lambda: settled(service))
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
    assert wait_until(lambda: counter.calls == ["2026-W40"])
    assert wait_until(lambda: settled(service))
    assert counter.calls == ["2026-W40"]  # not the weekly send, whose time has not come
    assert service.scheduler.get_job(sched.RESUME_JOB_ID) is None  # a one-off, gone now
    assert sched.RESUME_JOB_ID not in sched.stored_next_run_times(fresh_db.engine)


def test_sends_due_together_run_one_after_the_other(make_settings, fresh_db, services):
    missed = (datetime.now(SHANGHAI) - timedelta(hours=1)).replace(second=0, microsecond=0)
    settings = make_settings(**send_at(missed))
    week = with_entries(settings, fresh_db)
    counter = CountingSend(delay=0.3)
    services(settings, send=counter).stop()  # it ran here before
    with fresh_db.factory() as session, session.begin():
        session.add(Digest(week="2026-W39", status="sending", subject="s", html="", text=""))

    services(settings, send=counter)
    assert wait_until(lambda: len(counter.calls) == 2 and counter.running == 0)
    assert sorted(counter.calls, key=str) == ["2026-W39", week]
    assert counter.max_running == 1


class SendLocked(BotError):
    pass


def test_a_locked_send_is_logged_and_the_scheduler_carries_on(make_settings, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")

    def locked(*_args: Any, **_kw: Any) -> None:
        raise SendLocked("2026-W40 is being sent by another run (pid 4242)")

    soon = (datetime.now(SHANGHAI) + timedelta(seconds=3)).replace(microsecond=0)
    service = services(make_settings(**send_at(soon)), send=locked)
    assert wait_until(lambda: any("another run" in r.getMessage() for r in caplog.records))
    [record] = [r for r in caplog.records if "another run" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.name == "bot.scheduler"
    assert record.getMessage().startswith("send ")
    assert service.is_running()
    # and it looks again later for what is left unfinished
    retry = service.scheduler.get_job(sched.RESUME_JOB_ID)
    wait = retry.next_run_time - datetime.now(UTC)
    assert timedelta(minutes=sched.RETRY_MINUTES - 1) < wait <= timedelta(minutes=sched.RETRY_MINUTES)
    assert service.health_check() == "running"


def test_an_unexpected_error_in_a_send_is_logged_with_the_digest(make_settings, fresh_db, caplog):
    def broken(*_args: Any, **_kw: Any) -> None:
        raise RuntimeError("boom")

    settings = make_settings(**send_at(datetime.now(SHANGHAI) - timedelta(minutes=1)))
    week = with_entries(settings, fresh_db)
    with caplog.at_level(logging.INFO, logger="bot"):
        sched.set_context(sched.JobContext(settings, fresh_db.factory, send=broken))
        try:
            sched.send_job()
        finally:
            sched.set_context(None)
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.getMessage() == f"send {week} failed" and record.exc_info


def test_stop_ends_a_send_after_the_message_in_flight(make_settings, services, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    counter = CountingSend(messages=500, delay=0.02)
    soon = (datetime.now(SHANGHAI) + timedelta(seconds=3)).replace(microsecond=0)
    service = services(make_settings(**send_at(soon)), send=counter)
    assert wait_until(lambda: counter.messages_sent >= 3)
    started = time.monotonic()
    service.stop()
    assert time.monotonic() - started < 2
    sent = counter.messages_sent
    assert 3 <= sent < 500 and counter.running == 0  # the send has returned: no message after
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

def test_a_send_another_worker_holds_is_logged_and_retried(make_settings, fresh_db, smtp_server, caplog):
    from datetime import UTC, datetime, timedelta

    from smtp import add_subscribers, ledger, make_digest
    from sqlalchemy import update

    from bot import leases
    from bot.models import Delivery
    from bot.send import ledger as ledger_db

    caplog.set_level(logging.INFO, logger="bot")
    digest_id = make_digest(fresh_db.factory, "2026-W40")
    add_subscribers(fresh_db.factory, ["a@example.org", "b@example.org"])
    with fresh_db.factory() as session, session.begin():  # `digestbot send` is running
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
        session.execute(update(Delivery).values(claimed_by=leases.worker_id(),
                                                lease_until=datetime.now(UTC) + timedelta(minutes=5)))
    settings = make_settings(**smtp_server.settings_env())
    sched.set_context(sched.JobContext(settings, fresh_db.factory))
    try:
        sched.resume_job()
        [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "2 more are being sent by another send of this week" in record.getMessage()
        assert smtp_server.messages == []
        with fresh_db.factory() as session, session.begin():  # it has stopped and handed them back
            session.execute(update(Delivery).values(claimed_by=None, lease_until=None))
        sched.resume_job()  # the retry sends
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
    assert wait_until(lambda: set(ledger(fresh_db.factory, digest_id).values()) == {"sent"})
    assert smtp_server.copies_by_recipient() == {a: 1 for a in addresses}
