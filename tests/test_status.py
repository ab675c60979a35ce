"""`digestbot status`: feeds, the next send, the last digest, subscribers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from click.testing import CliRunner
from conftest import FEED_FIXTURE
from helpers import any_db, wait_until

from bot import ingest, status
from bot import scheduler as sched
from bot.cli import cli
from bot.config import WEEKDAYS
from bot.ingest import queries as feed_queries
from bot.models import Delivery, Digest, Subscriber
from bot.service import Service

SHANGHAI = ZoneInfo("Asia/Shanghai")
WEDNESDAY = datetime(2026, 10, 7, 12, 0, tzinfo=UTC)


def test_a_new_database(make_settings, fresh_db):
    data = status.gather(make_settings(), fresh_db.engine, fresh_db.factory, now=WEDNESDAY)
    [feed] = data["feeds"]
    assert feed["url"] == str(FEED_FIXTURE) and feed["health"] == "not polled yet"
    assert feed["last_poll"] is None and feed["next_poll"] is None
    schedule = data["schedule"]
    assert schedule["next_send"] == "2026-10-12T09:00:00+08:00"
    assert schedule["next_send_source"] == "settings" and schedule["service_seen"] is False
    assert (schedule["send_day"], schedule["send_time"], schedule["timezone"]) == ("mon", "09:00", "Asia/Shanghai")
    assert data["last_digest"] is None
    assert data["subscribers"] == {"pending": 0, "confirmed": 0, "unsubscribed": 0, "bounced": 0,
                                   "complained": 0, "total": 0}
    assert data["bounces"]["mailbox"] is None and data["bounces"]["processed"] == {}


@any_db
def test_feeds_schedule_digest_and_subscribers(make_settings, fresh_db, tmp_path):
    missing = str(tmp_path / "gone.xml")
    settings = make_settings(feed_urls=f"{FEED_FIXTURE},{missing}", send_day="fri", send_time="18:30")
    service = Service(settings, fresh_db.engine, fresh_db.factory, send=lambda *a, **k: None)
    service.start()
    # the poll at start has gone through both feeds (the broken one comes last)
    assert wait_until(lambda: _polled_at_start(fresh_db.engine) and _failures(fresh_db, missing) == 1)
    service.stop()  # the job store now holds the service's jobs
    with fresh_db.factory() as session, session.begin():
        subs = [Subscriber(email=f"r{i}@example.org", email_key=f"r{i}@example.org", status=state,
                           token_nonce="n")
                for i, state in enumerate(["confirmed"] * 3 + ["pending", "unsubscribed", "bounced"])]
        session.add_all(subs)
        session.add(Digest(week="2026-W39", status="sent", subject="old", html="", text=""))
        digest = Digest(week="2026-W40", status="sending", subject="第 40 周", html="", text="",
                        entry_count=12)
        session.add(digest)
        session.flush()
        for sub, state in zip(subs[:3], ["sent", "sent", "failed"], strict=True):
            session.add(Delivery(digest_id=digest.id, subscriber_id=sub.id, status=state))
        session.add(Delivery(digest_id=digest.id, subscriber_id=subs[3].id, status="pending"))

    now = datetime.now(UTC)
    data = status.gather(settings, fresh_db.engine, fresh_db.factory, now=now)
    bad, good = data["feeds"]  # failing feeds first
    assert good["health"] == "ok" and good["entries"] == 77 and good["last_poll"]
    assert good["title"] == "强化学习 on MessageDaily"
    next_poll = datetime.fromisoformat(good["next_poll"])
    assert timedelta(minutes=55) < next_poll - now <= timedelta(minutes=62)
    assert bad["health"] == "failing" and bad["consecutive_failures"] == 1
    assert "cannot read the file" in bad["last_error"]

    schedule = data["schedule"]
    assert schedule["next_send_source"] == "job store" and schedule["service_seen"]
    when = datetime.fromisoformat(schedule["next_send"])
    assert when == sched.next_send_time(settings, now)
    assert when.strftime("%a %H:%M %z") == "Fri 18:30 +0800"

    last = data["last_digest"]
    assert last["week"] == "2026-W40" and last["status"] == "sending" and last["entries"] == 12
    assert last["deliveries"] == {"sent": 2, "failed": 1, "pending": 1}
    assert data["subscribers"] == {"pending": 1, "confirmed": 3, "unsubscribed": 1, "bounced": 1,
                                   "complained": 0, "total": 6}


def test_a_missed_send_is_reported(make_settings, fresh_db):
    """Owed is what the database says, not the job store: here the service ran
    at the send time two hours ago and died before it froze the digest (the
    send is a no-op), so the store already points at next week."""
    missed = datetime.now(SHANGHAI).replace(microsecond=0) - timedelta(hours=2)
    settings = make_settings(send_day=WEEKDAYS[missed.weekday()], send_time=missed.time().isoformat())
    ingest.poll_feeds(settings, fresh_db.factory)
    service = Service(settings, fresh_db.engine, fresh_db.factory, send=lambda *a, **k: None)
    service.start()
    service.stop()
    assert sched.stored_next_run_times(fresh_db.engine)[sched.SEND_JOB_ID] == missed + timedelta(days=7)
    data = status.gather(settings, fresh_db.engine, fresh_db.factory)
    assert data["schedule"]["missed_send"] == missed.isoformat()
    assert data["schedule"]["missed_week"] == "2026-W40"
    # once that week is sent, nothing is missed
    with fresh_db.factory() as session, session.begin():
        session.add(Digest(week="2026-W40", status="sent", subject="s", html="", text=""))
    data = status.gather(settings, fresh_db.engine, fresh_db.factory)
    assert data["schedule"]["missed_send"] is None and data["schedule"]["missed_week"] is None


def test_status_command(make_settings, fresh_db):
    settings = make_settings()
    ingest.poll_feeds(settings, fresh_db.factory)
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE)}
    result = CliRunner().invoke(cli, ["status", "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["feeds"][0]["entries"] == 77 and data["schedule"]["next_send"]
    table = CliRunner().invoke(cli, ["status", "--format", "table"], env=env)
    assert table.exit_code == 0, table.output
    for words in ("强化学习 on", "77", "next send", "Asia/Shanghai", "last digest  none sent yet",
                  "0 confirmed", "has not run on this database yet"):
        assert words in table.output, words


def test_status_on_an_unmigrated_database(tmp_path):
    env = {"DIGESTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}"}
    result = CliRunner().invoke(cli, ["status"], env=env)
    assert result.exit_code == 1 and "digestbot db upgrade" in result.output


def _failures(fresh_db, url: str) -> int:
    with fresh_db.factory() as session:
        feed = feed_queries.feed_by_url(session, url)
        return feed.consecutive_failures if feed else 0


def _polled_at_start(engine) -> bool:
    next_poll = sched.stored_next_run_times(engine).get(sched.POLL_JOB_ID)
    return bool(next_poll and next_poll > datetime.now(UTC) + timedelta(minutes=30))
