"""Approval mode (DIGESTBOT_REQUIRE_APPROVAL): the scheduled send of an
unapproved week sends nothing, `status` says so, and a later approval sends
it once; the admin's one reminder mail. Real scheduler, real send, real SMTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from helpers import wait_until
from smtp import add_subscribers
from test_digest import W40, poll_fixture

from bot import scheduler as sched
from bot import status
from bot.config import WEEKDAYS
from bot.digest import draft as drafts
from bot.digest import draft_queries
from bot.digest.schedule import next_send_time
from bot.send.reminder import remind_if_due
from bot.service import Service

WEEK = W40.label
READERS = ["ada@example.org", "bo@example.org"]


def send_at(moment: datetime) -> dict[str, str]:
    return {"send_day": WEEKDAYS[moment.weekday()], "send_time": moment.time().isoformat(),
            "timezone": str(moment.tzinfo)}


@pytest.fixture
def service_of(fresh_db) -> Iterator:
    started: list[Service] = []

    def start(settings) -> Service:
        service = Service(settings, fresh_db.engine, fresh_db.factory)
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def held(factory) -> bool:
    with factory() as session:
        row = draft_queries.week_row(session, WEEK)
        return row is not None and row.held_at is not None


def test_an_unapproved_week_is_held_and_sent_once_after_approval(
        make_settings, fresh_db, smtp_server, service_of, monkeypatch):
    monkeypatch.setattr(sched, "APPROVAL_WATCH_SECONDS", 1)  # the watch runs every second here
    poll_fixture(make_settings(), fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    soon = (datetime.now(ZoneInfo("Asia/Shanghai")) + timedelta(seconds=3)).replace(microsecond=0)
    settings = make_settings(require_approval="true", **send_at(soon), **smtp_server.settings_env())

    service = service_of(settings)
    assert service.scheduler.get_job(sched.APPROVAL_JOB_ID) is not None
    assert wait_until(lambda: held(fresh_db.factory), timeout=20), "the weekly send did not run"
    assert smtp_server.messages == []
    report = status.gather(settings, fresh_db.engine, fresh_db.factory)
    assert report["approval"]["required"] and report["approval"]["waiting"] == [WEEK]

    drafts.approve(fresh_db.factory, settings, week=WEEK, by="test")
    smtp_server.wait_for(len(READERS), timeout=20)
    assert wait_until(lambda: not drafts.sendable_held_weeks(fresh_db.factory()))
    service.stop()
    assert smtp_server.copies_by_recipient() == {address: 1 for address in READERS}

    # the watch and the weekly send run again: nothing more goes out
    sched.set_context(sched.JobContext(settings, fresh_db.factory))
    try:
        sched.approval_job()
        sched.send_job()
    finally:
        sched.set_context(None)
    assert smtp_server.copies_by_recipient() == {address: 1 for address in READERS}
    report = status.gather(settings, fresh_db.engine, fresh_db.factory)
    assert report["approval"]["waiting"] == [] and report["last_digest"]["week"] == WEEK


def test_without_approval_mode_there_is_no_watch(make_settings, service_of):
    service = service_of(make_settings())
    assert service.scheduler.get_job(sched.APPROVAL_JOB_ID) is None


def test_the_admin_gets_one_reminder_before_an_unapproved_send(make_settings, fresh_db, smtp_server):
    settings = make_settings(require_approval="true", admin_email="editor@example.org",
                             approval_reminder_hours=6, **smtp_server.settings_env())
    poll_fixture(settings, fresh_db.factory)
    send = next_send_time(settings, datetime(2026, 10, 7, tzinfo=UTC))  # Mon 2026-10-12 09:00
    assert remind_if_due(settings, fresh_db.factory, send - timedelta(hours=7)) is None  # too early
    assert smtp_server.messages == []
    assert remind_if_due(settings, fresh_db.factory, send - timedelta(hours=5)) == WEEK
    [mail] = smtp_server.wait_for(1)
    assert mail.rcpt_tos == ("editor@example.org",)
    assert WEEK in str(mail.message["Subject"]) and "approval" in str(mail.message["Subject"])
    body = mail.message.get_body(("plain",)).get_content()
    assert f"digestbot draft approve --week {WEEK}" in body and f"/admin/draft?week={WEEK}" in body
    assert remind_if_due(settings, fresh_db.factory, send - timedelta(hours=4)) is None  # once
    assert len(smtp_server.messages) == 1


def test_no_reminder_for_an_approved_week(make_settings, fresh_db, smtp_server):
    settings = make_settings(require_approval="true", admin_email="editor@example.org",
                             **smtp_server.settings_env())
    poll_fixture(settings, fresh_db.factory)
    now = next_send_time(settings, datetime(2026, 10, 7, tzinfo=UTC)) - timedelta(hours=1)
    drafts.approve(fresh_db.factory, settings, week=WEEK, now=now)
    assert remind_if_due(settings, fresh_db.factory, now) is None
    assert smtp_server.messages == []
