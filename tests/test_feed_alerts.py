"""When a feed breaks, someone hears about it (issue 11): one mail per failure
streak and one when it recovers, to a real SMTP server (aiosmtpd), for feeds on
a real HTTP server; the log and `digestbot status` without an admin address;
/healthz stays green while one feed of several fails."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
from click.testing import CliRunner
from helpers import wait_until

from bot import ingest, status
from bot.cli import cli
from bot.service import Service, create_web_app

GOOD = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>Good feed</title>'
        b"<item><title>A post</title><link>https://good.example/p/1</link>"
        b"<pubDate>Thu, 01 Oct 2026 04:00:00 +0000</pubDate><description>Text.</description></item>"
        b"</channel></rss>")
FLAKY = GOOD.replace(b"Good feed", b"Flaky feed").replace(b"good.example", b"flaky.example")
ADMIN = "ops@example.org"


def poll(settings, fresh_db, times: int = 1) -> None:
    for _ in range(times):
        ingest.poll_feeds(settings, fresh_db.factory)


def test_one_mail_per_failure_streak_and_one_when_it_recovers(make_settings, fresh_db, feed_server,
                                                             smtp_server):
    good = feed_server.serve("/good.xml", GOOD)
    flaky = feed_server.serve("/flaky.xml", FLAKY)
    settings = make_settings(feed_urls=f"{good},{flaky}", admin_email=ADMIN,
                             **smtp_server.settings_env())
    poll(settings, fresh_db)
    feed_server.serve("/flaky.xml", b"oops", status=503)
    poll(settings, fresh_db, 2)
    assert smtp_server.messages == []  # two failures: not yet
    poll(settings, fresh_db)
    [alert] = smtp_server.wait_for(1)
    poll(settings, fresh_db, 4)  # the streak goes on: no more mail
    assert len(smtp_server.messages) == 1

    mail = alert.message
    assert mail["To"] == ADMIN and alert.rcpt_tos == (ADMIN,)
    assert mail["Subject"] == "[digestbot] feed failing: Flaky feed"
    body = mail.get_content()
    for words in ("has failed its last 3 polls in a row", flaky, "failing since:",
                  "last error:     HTTP 503 Service Unavailable",
                  "hint:           the server has a problem; the next poll will try again",
                  "digestbot feeds pause 2"):
        assert words in body, words

    feed_server.serve("/flaky.xml", FLAKY)
    poll(settings, fresh_db, 2)
    recovered = smtp_server.wait_for(2)[1].message
    assert len(smtp_server.messages) == 2
    assert recovered["Subject"] == "[digestbot] feed working again: Flaky feed"
    assert "succeeded after 7 failed polls since" in recovered.get_content()

    feed_server.serve("/flaky.xml", b"", status=404)  # a new streak: a new mail
    poll(settings, fresh_db, 3)
    third = smtp_server.wait_for(3)[2].message
    assert third["Subject"] == "[digestbot] feed failing: Flaky feed"
    assert "HTTP 404" in third.get_content() and "the feed has moved or gone" in third.get_content()
    # nothing about the good feed, which went on working
    assert all("Good feed" not in m.message["Subject"] for m in smtp_server.messages)


def test_the_threshold_is_a_setting(make_settings, fresh_db, feed_server, smtp_server):
    flaky = feed_server.serve("/flaky.xml", b"", status=500)
    settings = make_settings(feed_urls=flaky, admin_email=ADMIN, feed_alert_after=1,
                             **smtp_server.settings_env())
    poll(settings, fresh_db)
    [alert] = smtp_server.wait_for(1)
    assert "has failed its last 1 polls" in alert.message.get_content()


def test_an_alert_that_cannot_be_mailed_is_tried_at_the_next_failure(make_settings, fresh_db,
                                                                     feed_server, smtp_server, caplog):
    flaky = feed_server.serve("/flaky.xml", b"", status=500)
    settings = make_settings(feed_urls=flaky, admin_email=ADMIN, **smtp_server.settings_env())
    smtp_server.script("RCPT", "451 4.3.0 try again later", times=1)
    poll(settings, fresh_db, 3)
    assert smtp_server.messages == []
    assert any("could not mail ops@example.org" in r.getMessage() for r in caplog.records)
    poll(settings, fresh_db, 2)  # the next failure tries again, once
    smtp_server.wait_for(1)
    assert len(smtp_server.messages) == 1


def test_without_an_admin_the_log_and_status_say_it(make_settings, fresh_db, feed_server, caplog):
    caplog.set_level(logging.INFO, logger="bot")
    good = feed_server.serve("/good.xml", GOOD)
    flaky = feed_server.serve("/flaky.xml", b"", status=500)
    settings = make_settings(feed_urls=f"{good},{flaky}")
    poll(settings, fresh_db, 5)
    warnings = [r for r in caplog.records if "feed failing: Flaky" in r.getMessage()
                or "feed failing: " + flaky in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "set DIGESTBOT_ADMIN_EMAIL" in warnings[0].getMessage()

    data = status.gather(settings, fresh_db.engine, fresh_db.factory)
    assert [f["url"] for f in data["feeds"]] == [flaky, good]  # failing feeds first
    assert data["feeds"][0]["health"] == "failing" and data["feeds"][0]["consecutive_failures"] == 5
    assert data["feed_alerts"] == {"admin_email": None, "after_failures": 3, "broken": [flaky]}
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": f"{good},{flaky}"}
    shown = CliRunner().invoke(cli, ["status", "--format", "table"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "nobody is mailed about it: set DIGESTBOT_ADMIN_EMAIL" in shown.output
    assert shown.output.index("failing") < shown.output.index("Good feed")
    listed = json.loads(CliRunner().invoke(cli, ["feeds", "list", "--format", "json"], env=env).output)
    assert [(f["url"], f["consecutive_failures"]) for f in listed] == [(good, 0), (flaky, 5)]


def test_healthz_stays_green_while_one_feed_of_several_fails(make_settings, fresh_db, feed_server):
    good = feed_server.serve("/good.xml", GOOD)
    flaky = feed_server.serve("/flaky.xml", b"", status=500)
    settings = make_settings(feed_urls=f"{good},{flaky}")
    service = Service(settings, fresh_db.engine, fresh_db.factory, send=lambda *a, **k: None)
    app = create_web_app(settings, fresh_db.factory, service)

    async def healthz() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            return await client.get("/healthz")

    service.start()
    try:
        # the poll at start reaches both feeds
        assert wait_until(lambda: len({path for path, _ in feed_server.requests}) == 2)
        assert wait_until(lambda: asyncio.run(healthz()).json()["feeds"]["failing"] == 1)
        answer = asyncio.run(healthz())
    finally:
        service.stop()
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    assert answer.json()["feeds"] == {"active": 2, "failing": 1}
