"""`digestbot subscribers ...` and `digestbot send` as an admin runs them: click's
CliRunner in-process, and real subprocesses for kill -9 / SIGTERM / a second send."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import FEED_FIXTURE, FreshDB
from helpers import Digestbot, wait_until
from smtp import SmtpServer, add_subscribers, ledger, make_digest
from sqlalchemy import select

from bot import subscribers
from bot.cli import cli
from bot.digest import queries as digest_queries
from bot.models import Delivery

WEEK = "2026-W40"  # the newest complete week of the fixture feed


@pytest.fixture
def env(fresh_db: FreshDB, tmp_path: Path) -> dict[str, str]:
    return {
        "DIGESTBOT_DATABASE_URL": fresh_db.url,
        "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
        "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
        "DIGESTBOT_BASE_URL": "https://digest.example.org",
        "DIGESTBOT_SMTP_HOST": "",
        "DIGESTBOT_CONFIG": "",
    }


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)


def outbox(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "outbox").glob("*.eml"))


def statuses(fresh_db: FreshDB) -> dict[str, str]:
    with fresh_db.factory() as session:
        return {s.email: s.status for s in subscribers.list_subscribers(session)}


# --- subscribers ----------------------------------------------------------------------------

def test_add_confirmed_is_idempotent(env: dict[str, str], fresh_db: FreshDB,
                                     tmp_path: Path) -> None:
    first = run(env, "subscribers", "add", "--confirmed", "Demo@Example.org", "b@example.org")
    assert first.exit_code == 0, first.output
    assert "Demo@example.org: added, confirmed" in first.output
    again = run(env, "subscribers", "add", "--confirmed", "demo@example.org")
    assert again.exit_code == 0 and "already confirmed" in again.output
    assert statuses(fresh_db) == {"Demo@example.org": "confirmed", "b@example.org": "confirmed"}
    assert outbox(tmp_path) == []  # no confirmation mails


def test_add_sends_a_confirmation_mail(env: dict[str, str], fresh_db: FreshDB,
                                       tmp_path: Path) -> None:
    result = run(env, "subscribers", "add", "new@example.org")
    assert result.exit_code == 0 and "pending, confirmation mail sent" in result.output
    [mail] = outbox(tmp_path)
    assert b"To: new@example.org" in mail.read_bytes()
    assert statuses(fresh_db) == {"new@example.org": "pending"}


def test_add_reports_bad_addresses_and_keeps_good_ones(env: dict[str, str],
                                                       fresh_db: FreshDB) -> None:
    result = run(env, "subscribers", "add", "--confirmed", "good@example.org", "bad@", "x y@z")
    assert result.exit_code == 1
    assert "'bad@' is not a valid email address" in result.output
    assert statuses(fresh_db) == {"good@example.org": "confirmed"}


def test_list_with_status_filter(env: dict[str, str], fresh_db: FreshDB) -> None:
    add_subscribers(fresh_db.factory, ["c@example.org"])
    add_subscribers(fresh_db.factory, ["p@example.org"], status="pending")
    everyone = run(env, "subscribers", "list")
    assert everyone.exit_code == 0
    assert "c@example.org" in everyone.output and "p@example.org" in everyone.output
    assert "1 confirmed, 1 pending" in everyone.output
    pending = run(env, "subscribers", "list", "--status", "pending")
    assert "p@example.org" in pending.output and "c@example.org" not in pending.output
    assert run(env, "subscribers", "list", "--status", "nonsense").exit_code == 2


def test_remove(env: dict[str, str], fresh_db: FreshDB) -> None:
    add_subscribers(fresh_db.factory, ["a@example.org", "b@example.org"])
    result = run(env, "subscribers", "remove", "A@example.org", "zz@example.org")
    assert result.exit_code == 0
    assert "A@example.org: removed" in result.output
    assert "zz@example.org: not a subscriber" in result.output
    assert statuses(fresh_db) == {"b@example.org": "confirmed"}


def test_import_csv(env: dict[str, str], fresh_db: FreshDB, tmp_path: Path) -> None:
    path = tmp_path / "list.csv"
    path.write_text("name,email\nAnn,ann@example.org\nBad,nope\nCy,cy@example.org\n"
                    "Ann again,ANN@example.org\n", encoding="utf-8")
    result = run(env, "subscribers", "import", str(path), "--confirmed")
    assert result.exit_code == 0, result.output
    assert "line 3:" in result.output and "not a valid email address" in result.output
    assert ("4 line(s) read: 2 address(es) (2 added), 1 repeated line(s) skipped, 1 rejected"
            in result.output)
    assert statuses(fresh_db) == {"ann@example.org": "confirmed", "cy@example.org": "confirmed"}


def test_import_without_confirmed_mails_everyone(env: dict[str, str], fresh_db: FreshDB,
                                                 tmp_path: Path) -> None:
    path = tmp_path / "list.csv"
    path.write_text("a@example.org\nb@example.org\n", encoding="utf-8")
    assert run(env, "subscribers", "import", str(path)).exit_code == 0
    assert statuses(fresh_db) == {"a@example.org": "pending", "b@example.org": "pending"}
    assert len(outbox(tmp_path)) == 2


def test_export_csv(env: dict[str, str], fresh_db: FreshDB) -> None:
    add_subscribers(fresh_db.factory, ["a@example.org"])
    add_subscribers(fresh_db.factory, ["b@example.org"], status="unsubscribed")
    result = run(env, "subscribers", "export")
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["email"], r["status"]) for r in rows] == [("a@example.org", "confirmed"),
                                                         ("b@example.org", "unsubscribed")]
    assert rows[0]["created_at"].startswith("20") and "confirmed_at" in rows[0]


# --- send -----------------------------------------------------------------------------------

def test_send_dry_run_builds_but_sends_and_freezes_nothing(
    env: dict[str, str], fresh_db: FreshDB, tmp_path: Path
) -> None:
    assert run(env, "poll").exit_code == 0
    add_subscribers(fresh_db.factory, ["a@example.org", "b@example.org"])
    result = run(env, "send", "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"dry run: would send {WEEK}" in result.output
    assert "to 2 recipient(s)" in result.output and "nothing was sent" in result.output
    assert outbox(tmp_path) == []
    with fresh_db.factory() as session:
        assert digest_queries.digest_for_week(session, WEEK) is None


def test_send_to_one_address_is_a_test(env: dict[str, str], fresh_db: FreshDB,
                                       tmp_path: Path) -> None:
    assert run(env, "poll").exit_code == 0
    add_subscribers(fresh_db.factory, ["a@example.org"])
    result = run(env, "send", "--to", "editor@example.org")
    assert result.exit_code == 0, result.output
    assert f"test message of {WEEK} sent to editor@example.org" in result.output
    [mail] = outbox(tmp_path)
    import email
    from email import policy

    msg = email.message_from_bytes(mail.read_bytes(), policy=policy.default)
    assert msg["To"] == "editor@example.org" and msg["Subject"].startswith("[TEST] ")
    with fresh_db.factory() as session:
        assert digest_queries.digest_for_week(session, WEEK) is None  # not frozen, no ledger
    assert run(env, "send", "--to", "not an address").exit_code == 1


def test_send_then_already_sent(env: dict[str, str], fresh_db: FreshDB, tmp_path: Path) -> None:
    assert run(env, "poll").exit_code == 0
    add_subscribers(fresh_db.factory, ["a@example.org", "b@example.org"])
    first = run(env, "send")
    assert first.exit_code == 0, first.output
    assert f"{WEEK}: 2 sent, 0 failed, 0 skipped (done)" in first.output
    assert len(outbox(tmp_path)) == 2
    second = run(env, "send")
    assert second.exit_code == 0 and "was sent already" in second.output
    assert len(outbox(tmp_path)) == 2
    with fresh_db.factory() as session:
        digest = digest_queries.digest_for_week(session, WEEK)
        assert digest is not None and digest.status == "sent"


def test_send_with_no_confirmed_subscribers_says_nobody_got_it(
        env: dict[str, str], fresh_db: FreshDB, tmp_path: Path) -> None:
    """Seen: `send` with only a pending subscriber said "0 sent, 0 failed, 0 skipped (done)", and the
    next try, after someone confirmed, "was sent already", with no word on how to mail them."""
    assert run(env, "poll").exit_code == 0
    assert run(env, "subscribers", "add", "pending@example.org").exit_code == 0
    mails = len(outbox(tmp_path))  # the confirmation mail
    first = run(env, "send")
    assert first.exit_code == 0, first.output
    assert "no confirmed subscribers, so nobody got it" in first.output
    assert f"digestbot send --week {WEEK} --resend" in first.output
    assert len(outbox(tmp_path)) == mails
    add_subscribers(fresh_db.factory, ["late@example.org"])
    assert "was sent already" in run(env, "send").output
    resent = run(env, "send", "--week", WEEK, "--resend")
    assert resent.exit_code == 0 and f"{WEEK}: 1 sent" in resent.output, resent.output


def test_send_with_nothing_polled(env: dict[str, str]) -> None:
    result = run(env, "send")
    assert result.exit_code == 1 and "no complete week with entries" in result.output


def test_feed_text_cannot_inject_headers(env: dict[str, str], fresh_db: FreshDB,
                                         smtp_server: SmtpServer, tmp_path: Path) -> None:
    feed = tmp_path / "evil.xml"
    feed.write_text(
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
        "<item><title>Paper A&#13;&#10;Bcc: evil@example.net&#13;&#10;X-Evil: 1</title>"
        "<link>https://example.org/a</link><guid>a</guid>"
        "<description>line&#13;&#10;Bcc: evil@example.net</description>"
        "<pubDate>Tue, 29 Sep 2026 08:00:00 +0000</pubDate></item>"
        "</channel></rss>", encoding="utf-8")
    env = env | {"DIGESTBOT_FEED_URLS": str(feed), "DIGESTBOT_SMTP_HOST": smtp_server.host,
                 "DIGESTBOT_SMTP_PORT": str(smtp_server.port), "DIGESTBOT_SMTP_SECURITY": "none",
                 "DIGESTBOT_TITLE": "Weekly\r\nBcc: evil@example.net"}
    assert run(env, "poll").exit_code == 0
    add_subscribers(fresh_db.factory, ["a@example.org"])
    result = run(env, "send", "--week", WEEK)
    assert result.exit_code == 0, result.output
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == ("a@example.org",)
    msg = received.message
    assert msg.get_all("Bcc") is None and msg.get_all("X-Evil") is None
    assert "\n" not in msg["Subject"] and "\r" not in msg["Subject"]
    headers = received.data.split(b"\r\n\r\n", 1)[0]
    assert b"\nBcc" not in headers and b"\nX-Evil" not in headers
    text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "Paper A" in text


# --- real processes ----------------------------------------------------------------------------

@pytest.fixture
def slow_send(env: dict[str, str], fresh_db: FreshDB,
              smtp_server: SmtpServer) -> Iterator[tuple[dict[str, str], list[str], int]]:
    readers = [f"reader{n:02d}@example.org" for n in range(20)]
    add_subscribers(fresh_db.factory, readers)
    digest_id = make_digest(fresh_db.factory, WEEK)
    smtp_server.delay = 0.2  # each message: 0.2 s between its data and the server's 250
    # one connection: the message in flight is a single, known one
    env = env | {"DIGESTBOT_SMTP_HOST": smtp_server.host, "DIGESTBOT_SMTP_CONNECTIONS": "1",
                 "DIGESTBOT_SMTP_PORT": str(smtp_server.port), "DIGESTBOT_SMTP_SECURITY": "none"}
    yield env, readers, digest_id


def wait_until_mid_data(smtp_server: SmtpServer, received: int, proc: subprocess.Popen[str],
                        timeout: float = 30) -> None:
    """Until ``received`` messages are in and the server is inside the next one's DATA."""
    reached = wait_until(lambda: proc.poll() is not None or (
        len(smtp_server.messages) >= received and smtp_server.handler.in_data.is_set()),
        timeout, interval=0.002)
    assert proc.poll() is None, proc.communicate()
    assert reached, "the send did not get going"


def test_kill_9_mid_send_then_resume_gives_everyone_exactly_one_copy(
    slow_send: tuple[dict[str, str], list[str], int], fresh_db: FreshDB,
    smtp_server: SmtpServer, digestbot: Digestbot,
) -> None:
    env, readers, digest_id = slow_send
    proc = digestbot.start("send", "--week", WEEK, env=env)
    try:
        wait_until_mid_data(smtp_server, 5, proc)
        os.kill(proc.pid, signal.SIGKILL)  # mid-DATA of the sixth message
    finally:
        proc.wait(10)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    # the server drops the message in DATA when it notices the dead connection
    assert wait_until(lambda: not smtp_server.handler.in_data.is_set())
    states = ledger(fresh_db.factory, digest_id)
    assert sorted(states.values()).count("sent") == len(smtp_server.messages) == 5
    assert list(states.values()).count("sending") == 1  # the message in flight
    with fresh_db.factory() as session:  # the dead worker's claim is left on its message
        holders = set(session.scalars(select(Delivery.claimed_by).where(
            Delivery.digest_id == digest_id, Delivery.status == "sending")))
        assert len(holders) == 1 and None not in holders

    smtp_server.delay = 0.0
    again = digestbot.start("send", "--week", WEEK, env=env)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert "15 sent, 0 failed, 0 skipped (done)" in out
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}


def test_sigterm_stops_after_the_message_in_flight(
    slow_send: tuple[dict[str, str], list[str], int], fresh_db: FreshDB,
    smtp_server: SmtpServer, digestbot: Digestbot,
) -> None:
    env, readers, digest_id = slow_send
    proc = digestbot.start("send", "--week", WEEK, env=env)
    try:
        wait_until_mid_data(smtp_server, 3, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "stopping after the message in flight" in err
    assert "stopped early, run again to finish" in out
    states = ledger(fresh_db.factory, digest_id)
    assert "sending" not in states.values()  # the in-flight one finished and was recorded
    assert list(states.values()).count("sent") == len(smtp_server.messages) == 4

    smtp_server.delay = 0.0
    assert run(env, "send", "--week", WEEK).exit_code == 0
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}


def test_a_second_send_while_one_runs_shares_the_rows(
    slow_send: tuple[dict[str, str], list[str], int], fresh_db: FreshDB,
    smtp_server: SmtpServer, digestbot: Digestbot,
) -> None:
    """A second `digestbot send` of the same week joins the first: it takes the
    rows nobody holds, leaves the first one's rows to it, and between them
    every reader gets one copy."""
    env, readers, digest_id = slow_send
    proc = digestbot.start("send", "--week", WEEK, env=env)
    try:
        wait_until_mid_data(smtp_server, 1, proc)
        second = run(env, "send", "--week", WEEK)
        # whichever ends first while the other still holds rows says so, and exits 0
        assert second.exit_code == 0, second.output
        assert "sent" in second.output and "failed" in second.output
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert any("are being sent by another send of this week" in text
                   for text in (second.output, out)) or "(done)" in second.output + out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
