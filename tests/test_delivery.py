"""The send manager and its ledger, against a real SMTP server (aiosmtpd) and SQLite.

Digests are frozen rows made directly (tests/smtp.make_digest), so these
tests exercise delivery without bot.digest / bot.render.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import FreshDB
from helpers import any_db, free_port
from smtp import SmtpServer, add_subscribers, ledger, make_digest
from sqlalchemy import select, update

from bot import leases, subscribers
from bot import send as send_stage
from bot.config import Settings
from bot.errors import DeliveryError
from bot.models import Delivery, Digest, Subscriber
from bot.send import claims, loop
from bot.send import ledger as ledger_db
from bot.tokens import Tokens, address_tag

WEEK = "2026-W40"
READERS = ["ann@example.com", "bob@example.com", "cy@example.com"]
UNSUB_LINK = re.compile(r"/unsubscribe/([A-Za-z0-9_.-]+)")


@pytest.fixture
def settings(smtp_settings: Settings) -> Settings:
    """The shared SMTP settings, with fewer retries so a failing address gives up
    sooner, over one connection so the order of events is fixed
    (tests/test_parallel_send.py uses several)."""
    return dataclasses.replace(smtp_settings, smtp_max_retries=3, smtp_connections=1)


def send(settings: Settings, fresh_db: FreshDB, **kwargs: Any) -> send_stage.SendReport:
    kwargs.setdefault("retry_base_delay", 0.01)
    return send_stage.send_digest(settings, fresh_db.factory, kwargs.pop("week", WEEK), **kwargs)


def digest_row(fresh_db: FreshDB, digest_id: int) -> Digest:
    with fresh_db.factory() as session:
        row = session.get(Digest, digest_id)
        assert row is not None
        return row


def deliveries(fresh_db: FreshDB, digest_id: int) -> dict[str, Delivery]:
    with fresh_db.factory() as session:
        rows = session.execute(select(Subscriber.email, Delivery).join(
            Delivery, Delivery.subscriber_id == Subscriber.id).where(
            Delivery.digest_id == digest_id))
        return {email: d for email, d in rows}


@any_db
def test_sends_to_every_confirmed_subscriber_once(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    digest_id = make_digest(fresh_db.factory)
    ids = dict(zip(READERS, add_subscribers(fresh_db.factory, READERS), strict=True))
    add_subscribers(fresh_db.factory, ["pending@example.com"], status="pending")
    add_subscribers(fresh_db.factory, ["left@example.com"], status="unsubscribed")

    report = send(settings, fresh_db)

    assert (report.outcome, report.sent, report.failed, report.skipped) == ("sent", 3, 0, 0)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}
    row = digest_row(fresh_db, digest_id)
    assert row.status == "sent" and row.sent_at is not None
    assert held(fresh_db, digest_id) == set()  # no claim outlives the send
    records = deliveries(fresh_db, digest_id)
    assert {a: d.status for a, d in records.items()} == {r: "sent" for r in READERS}
    tokens = Tokens.from_settings(settings)
    links = set()
    for received in smtp_server.messages:
        msg = received.message
        to = str(msg["To"])
        assert received.rcpt_tos == (to,) and received.mail_from == "digest@news.example.org"
        assert msg["Message-ID"] == records[to].message_id
        assert re.fullmatch(r"<.+@news\.example\.org>", msg["Message-ID"])
        assert msg["List-Id"] == "<digest.news.example.org>"
        assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert msg["Subject"] == "强化学习周报 · 2026-W40"
        parts = list(msg.iter_parts())
        assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
        text, html = (p.get_content() for p in parts)
        [header_token] = UNSUB_LINK.findall(msg["List-Unsubscribe"])
        assert msg["List-Unsubscribe"] == (
            f"<https://digest.example.org/unsubscribe/{header_token}>, "
            f"<mailto:digest@news.example.org?subject=unsubscribe%20{header_token}>")
        assert UNSUB_LINK.findall(text) == [header_token] == UNSUB_LINK.findall(html)
        claim = tokens.read_unsubscribe(header_token)
        assert claim.subscriber_id == ids[to] and claim.address_tag == address_tag(to)
        assert "__DIGESTBOT" not in text + html
        links.add(header_token)
    assert len(links) == 3  # personal links differ per recipient


def test_421_and_451_are_retried(settings: Settings, fresh_db: FreshDB,
                                 smtp_server: SmtpServer) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    smtp_server.script("MAIL", "421 4.3.2 try again later")  # closes the connection
    smtp_server.script("RCPT", "451 4.3.0 greylisted", address="bob@example.com")
    smtp_server.script("DATA", "452 4.3.1 out of space", address="cy@example.com", times=2)

    report = send(settings, fresh_db)

    assert (report.outcome, report.sent, report.failed) == ("sent", 3, 0)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}
    attempts = {a: d.attempts for a, d in deliveries(fresh_db, digest_id).items()}
    assert attempts == {"ann@example.com": 2, "bob@example.com": 2, "cy@example.com": 3}
    assert len(smtp_server.handler.sessions) == 2  # reconnected once, after the 421


def test_4xx_that_never_clears_fails_that_delivery_only(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    smtp_server.script("RCPT", "450 4.2.1 mailbox busy", address="bob@example.com", times=-1)

    report = send(settings, fresh_db)

    assert (report.outcome, report.sent, report.failed, report.bounced) == ("sent", 2, 1, 0)
    bob = deliveries(fresh_db, digest_id)["bob@example.com"]
    assert (bob.status, bob.attempts) == ("failed", 4)  # 1 + smtp_max_retries
    assert "450" in (bob.last_error or "")
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, "bob@example.com")
        assert sub is not None and (sub.status, sub.hard_failures) == ("confirmed", 0)


@any_db
def test_550_fails_one_and_bounces_after_max_hard_failures(
    make_settings: Callable[..., Settings], fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    settings = make_settings(max_hard_failures=2, **smtp_server.settings_env())
    add_subscribers(fresh_db.factory, READERS)
    smtp_server.script("RCPT", "550 5.1.1 no such user", address="bob@example.com", times=-1)
    weeks = ["2026-W40", "2026-W41", "2026-W42"]
    ids = [make_digest(fresh_db.factory, week) for week in weeks]

    first = send(settings, fresh_db, week=weeks[0])
    assert (first.sent, first.failed, first.bounced, first.outcome) == (2, 1, 0, "sent")
    assert first.errors[0][0] == "bob@example.com" and "550" in first.errors[0][1]
    bob = deliveries(fresh_db, ids[0])["bob@example.com"]
    assert (bob.status, bob.attempts) == ("failed", 1)  # a 5xx is not retried

    second = send(settings, fresh_db, week=weeks[1])
    assert (second.failed, second.bounced) == (1, 1)
    with fresh_db.factory() as session:
        sub = subscribers.subscriber_by_key(session, "bob@example.com")
        assert sub is not None
        assert (sub.status, sub.hard_failures) == ("bounced", 2) and sub.bounced_at

    third = send(settings, fresh_db, week=weeks[2])
    assert (third.sent, third.failed) == (2, 0)
    assert "bob@example.com" not in ledger(fresh_db.factory, ids[2])
    assert smtp_server.copies_by_recipient() == {"ann@example.com": 3, "cy@example.com": 3}


def test_a_success_resets_the_hard_failure_count(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    add_subscribers(fresh_db.factory, ["ann@example.com"])
    with fresh_db.factory() as session, session.begin():
        session.execute(update(Subscriber).values(hard_failures=2))
    make_digest(fresh_db.factory)
    send(settings, fresh_db)
    with fresh_db.factory() as session:
        assert session.scalar(select(Subscriber.hard_failures)) == 0


@pytest.mark.parametrize("stage", ["MAIL", "RCPT", "DATA"])
def test_dropped_connection_is_reopened_and_nobody_gets_two(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer, stage: str
) -> None:
    readers = [f"r{n}@example.com" for n in range(6)]
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, readers)
    # counting that command on every connection (retries too): the third message
    # loses its connection, and later the sixth does
    smtp_server.script(stage, drop=True, after=2)
    smtp_server.script(stage, drop=True, after=5)

    report = send(settings, fresh_db)

    assert (report.outcome, report.sent) == ("sent", 6)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}
    assert len(smtp_server.handler.sessions) == 3
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}


def test_server_down_fails_clearly_and_leaves_everything_pending(
    make_settings: Callable[..., Settings], fresh_db: FreshDB
) -> None:
    port = free_port()
    settings = make_settings(smtp_host="127.0.0.1", smtp_port=port, smtp_security="none",
                             smtp_max_retries=2)
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)

    with pytest.raises(DeliveryError) as down:
        send(settings, fresh_db)
    assert f"127.0.0.1:{port}" in down.value.message and "not accepting mail" in down.value.message
    assert down.value.hint and "still pending" in down.value.hint
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"pending"}
    row = digest_row(fresh_db, digest_id)
    assert row.status == "sending" and held(fresh_db, digest_id) == set()  # claims handed back

    server = SmtpServer(port)  # the server comes back
    server.start()
    try:
        report = send(settings, fresh_db)
        assert (report.outcome, report.sent, report.resumed) == ("sent", 3, True)
        assert server.copies_by_recipient() == {r: 1 for r in READERS}
    finally:
        server.stop()


def test_server_going_down_mid_run_keeps_the_rest_pending(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    readers = [f"r{n}@example.com" for n in range(5)]
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, readers)
    smtp_server.script("MAIL", drop=True, after=2, times=-1)  # dies after two messages

    with pytest.raises(DeliveryError):
        send(settings, fresh_db)
    states = ledger(fresh_db.factory, digest_id)
    assert sorted(states.values()) == ["pending", "pending", "pending", "sent", "sent"]

    smtp_server.handler.rules.clear()
    report = send(settings, fresh_db)
    assert report.sent == 3
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}


@any_db
def test_a_row_left_sending_is_resent_with_its_message_id(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    now = datetime.now(UTC)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, now)
        session.execute(update(Delivery).where(Delivery.id == 1).values(
            status="sending", attempts=1, message_id="<crashed.1@news.example.org>"))
        session.execute(update(Delivery).where(Delivery.id == 2).values(status="sent",
                                                                         sent_at=now))

    report = send(settings, fresh_db)

    assert report.sent == 2
    by_to = {str(m.message["To"]): m.message for m in smtp_server.messages}
    assert set(by_to) == {"ann@example.com", "cy@example.com"}  # bob was already sent
    assert by_to["ann@example.com"]["Message-ID"] == "<crashed.1@news.example.org>"
    ann = deliveries(fresh_db, digest_id)["ann@example.com"]
    assert (ann.status, ann.attempts) == ("sent", 2)


def test_stop_finishes_the_message_in_flight_then_resumes(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    readers = [f"r{n}@example.com" for n in range(6)]
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, readers)
    stop = threading.Event()

    def progress(report: loop.DeliveryReport) -> None:
        if report.sent == 2:
            stop.set()

    report = send(settings, fresh_db, stop=stop, progress=progress)
    assert (report.outcome, report.sent) == ("incomplete", 2)
    states = ledger(fresh_db.factory, digest_id)
    assert sorted(states.values()) == ["pending"] * 4 + ["sent"] * 2  # nothing left 'sending'
    assert digest_row(fresh_db, digest_id).status == "sending"

    add_subscribers(fresh_db.factory, ["late@example.com"])  # confirmed meanwhile
    report = send(settings, fresh_db)
    assert (report.outcome, report.sent) == ("sent", 5)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in [*readers, "late@example.com"]}


def test_an_exception_from_progress_still_records_the_message_sent(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    """The scheduler stops a send by raising from the progress callback."""
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)

    class Stopping(Exception):
        pass

    def progress(report: loop.DeliveryReport) -> None:
        if report.sent == 1:
            raise Stopping

    with pytest.raises(Stopping):
        send(settings, fresh_db, progress=progress)
    assert sorted(ledger(fresh_db.factory, digest_id).values()) == ["pending", "pending", "sent"]
    assert held(fresh_db, digest_id) == set()
    send(settings, fresh_db)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}


@any_db
def test_unsubscribed_while_sending_is_skipped(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
        session.execute(update(Subscriber).where(Subscriber.email == "bob@example.com")
                        .values(status="unsubscribed"))

    report = send(settings, fresh_db)

    assert (report.sent, report.skipped, report.outcome) == (2, 1, "sent")
    assert ledger(fresh_db.factory, digest_id)["bob@example.com"] == "skipped"
    assert "bob@example.com" not in smtp_server.copies_by_recipient()


@any_db
def test_already_sent_unless_resend(settings: Settings, fresh_db: FreshDB,
                                    smtp_server: SmtpServer) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    send(settings, fresh_db)
    first_ids = {a: d.message_id for a, d in deliveries(fresh_db, digest_id).items()}

    again = send(settings, fresh_db)
    assert again.outcome == "already-sent" and "already" in again.summary()
    assert len(smtp_server.messages) == 3

    add_subscribers(fresh_db.factory, ["new@example.com"])
    resent = send(settings, fresh_db, resend=True)
    assert (resent.outcome, resent.sent) == ("sent", 4)
    assert smtp_server.copies_by_recipient() == {**{r: 2 for r in READERS}, "new@example.com": 1}
    second_ids = {a: d.message_id for a, d in deliveries(fresh_db, digest_id).items()}
    assert all(second_ids[a] != first_ids[a] for a in READERS)  # a new message, not a retry


def test_resend_refused_while_a_send_is_unfinished(settings: Settings, fresh_db: FreshDB) -> None:
    make_digest(fresh_db.factory)
    with pytest.raises(DeliveryError, match="has not finished"):
        send(settings, fresh_db, resend=True)


def test_dry_run_sends_nothing(settings: Settings, fresh_db: FreshDB,
                               smtp_server: SmtpServer) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    report = send(settings, fresh_db, dry_run=True)
    assert (report.outcome, report.recipients) == ("dry-run", 3)
    assert "would send 2026-W40" in report.summary() and "3 recipient" in report.summary()
    assert smtp_server.messages == [] and ledger(fresh_db.factory, digest_id) == {}


def held(fresh_db: FreshDB, digest_id: int) -> set[str]:
    """Workers holding claims on the digest's unfinished rows."""
    with fresh_db.factory() as session:
        return {owner for owner in session.scalars(select(Delivery.claimed_by).where(
            Delivery.digest_id == digest_id, Delivery.status.in_(claims.UNFINISHED)))
            if owner is not None}


def claim_all(fresh_db: FreshDB, digest_id: int, owner: str, lease_until: datetime) -> None:
    with fresh_db.factory() as session, session.begin():
        session.execute(update(Delivery).where(Delivery.digest_id == digest_id)
                        .values(claimed_by=owner, lease_until=lease_until))


def test_rows_a_live_worker_holds_are_left_to_it(settings: Settings, fresh_db: FreshDB,
                                                 smtp_server: SmtpServer) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
    other = leases.worker_id()  # alive: this process
    claim_all(fresh_db, digest_id, other, datetime.now(UTC) + timedelta(minutes=5))
    report = send(settings, fresh_db)
    assert (report.outcome, report.sent) == ("incomplete", 0)
    assert smtp_server.messages == [] and held(fresh_db, digest_id) == {other}
    claim_all(fresh_db, digest_id, other, datetime.now(UTC) - timedelta(seconds=1))  # lease over
    assert send(settings, fresh_db).sent == 3
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}


@any_db
def test_rows_of_a_dead_worker_are_taken_over_at_once(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer
) -> None:
    import socket
    import subprocess
    import sys

    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    owner = f"{socket.gethostname()}:{int(dead.stdout)}:abcd"
    claim_all(fresh_db, digest_id, owner, datetime.now(UTC) + timedelta(minutes=5))
    assert leases.is_dead(owner) and not leases.is_dead(leases.worker_id())
    assert send(settings, fresh_db).sent == 3
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}


@any_db
def test_claims_are_exclusive_and_renewable(fresh_db: FreshDB) -> None:
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
    first = ledger_db.DbLedger(fresh_db.factory, digest_id, 3, claim_size=2)
    second = ledger_db.DbLedger(fresh_db.factory, digest_id, 3, claim_size=2)
    try:
        mine = first.unfinished(0, 10)
        theirs = second.unfinished(0, 10)
        assert len(mine) == 2 and len(theirs) == 1
        assert not {r.id for r in mine} & {r.id for r in theirs}
        assert second.unfinished(0, 10) == theirs  # its own rows, none of the first's
        with fresh_db.factory() as session:
            before = session.scalar(select(Delivery.lease_until).where(Delivery.id == mine[0].id))
        first.renew()
        with fresh_db.factory() as session:
            after = session.scalar(select(Delivery.lease_until).where(Delivery.id == mine[0].id))
        assert before is not None and after is not None and after > before
        # a row held by the other worker cannot be marked 'sending' by this one
        assert first.step(None, (theirs[0], "<x@y>"))[0] == "gone"
    finally:
        first.close()
        second.close()
    assert held(fresh_db, digest_id) == set()  # close() hands unsent rows back


def test_rate_limit(make_settings: Callable[..., Settings], fresh_db: FreshDB,
                    smtp_server: SmtpServer) -> None:
    settings = make_settings(send_rate=20, **smtp_server.settings_env())
    make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, [f"r{n}@example.com" for n in range(6)])
    start = time.monotonic()
    assert send(settings, fresh_db).sent == 6
    assert time.monotonic() - start >= 5 / 20


def test_outbox_transport(make_settings: Callable[..., Settings], fresh_db: FreshDB,
                          tmp_path: Path) -> None:
    settings = make_settings()  # no SMTP host: the outbox
    make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    report = send(settings, fresh_db)
    assert report.sent == 3 and "outbox" in report.transport
    files = list((tmp_path / "outbox").glob("*.eml"))
    assert len(files) == 3
    assert all(f.name.endswith("@localhost.eml") for f in files)


class FakeLedger:
    """The narrow Ledger interface, in memory: the loop needs nothing else."""

    def __init__(self, rows: list[loop.LedgerRow]) -> None:
        self.rows = {r.id: r for r in rows}
        self.status = {r.id: "pending" for r in rows}
        self.commits: list[tuple[Any, Any]] = []

    def unfinished(self, after_id: int, limit: int) -> list[loop.LedgerRow]:
        ids = sorted(i for i, s in self.status.items()
                     if s in ("pending", "sending") and i > after_id)
        return [self.rows[i] for i in ids[:limit]]

    def count_unfinished(self) -> int:
        return len(self.unfinished(0, 10**6))

    def step(self, done: Any, claim: Any) -> tuple[str, bool]:
        self.commits.append((done and (done.row.id, done.status), claim and claim[0].id))
        if done:
            self.status[done.row.id] = done.status
        if claim:
            self.status[claim[0].id] = "sending"
            return "claimed", False
        return "none", False

    def begin_step(self, done: Any, claim: Any) -> bool:
        self.settled = self.step(done, claim)
        return self.settled[0] == "claimed"

    def settle(self) -> tuple[str, bool]:
        return self.settled

    def renew(self) -> None:
        pass

    def durable(self) -> None:
        self.commits.append(("durable", None))

    def finish_digest(self) -> bool:
        return all(s not in ("pending", "sending") for s in self.status.values())


class FakeComposer:
    def new_message_id(self) -> str:
        return "<id@x>"

    def prepare(self, rows: list[loop.LedgerRow]) -> None:
        pass

    def compose(self, row: loop.LedgerRow, message_id: str) -> bytes:
        return f"To: {row.email}\r\n\r\nhi\r\n".encode()


class ListSender:
    description = "a list"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, envelope_from: str, recipient: str, message: bytes, message_id: str,
             ready: Any = None) -> None:
        ready()
        self.sent.append(recipient)

    def close(self) -> None:
        pass


def test_one_commit_per_message_in_batches() -> None:
    rows = [loop.LedgerRow(i, i, f"r{i}@x.org", f"r{i}@x.org", "pending", None, 0)
            for i in range(1, 6)]
    fake = FakeLedger(rows)
    sender = ListSender()
    report = loop.deliver(fake, sender, FakeComposer(), "d@x.org", batch=2)
    assert report.sent == 5 and report.complete
    assert sender.sent == [r.email for r in rows]
    # each commit records the previous message and claims the next: 5 claims + 1 final record
    durable = ("durable", None)
    assert fake.commits == [(None, 1), durable, ((1, "sent"), 2), durable, ((2, "sent"), 3),
                            durable, ((3, "sent"), 4), durable, ((4, "sent"), 5), durable,
                            ((5, "sent"), None)]


def test_ledger_commits_durably_and_restores_the_connection(
    fresh_db: FreshDB, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from bot.send import walsync

    syncs: list[tuple[float, str]] = []  # (when it began, the file synced to disk)
    commits: list[float] = []  # when each step's commit was made
    real_sync, real_commit = os.fdatasync, ledger_db.raw_commit

    def fdatasync(fd: int) -> None:
        began = time.monotonic()
        real_sync(fd)
        syncs.append((began, os.readlink(f"/proc/self/fd/{fd}")))

    def raw_commit(conn: Any) -> None:
        real_commit(conn)
        commits.append(time.monotonic())

    def synced_since(moment: float) -> bool:
        return any(began >= moment and path == wal for began, path in syncs)

    monkeypatch.setattr(walsync.os, "fdatasync", fdatasync)
    monkeypatch.setattr(ledger_db, "raw_commit", raw_commit)
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
    wal = f"{fresh_db.path}-wal"
    book = ledger_db.DbLedger(fresh_db.factory, digest_id, 3)
    first, second = book.unfinished(0, 10)[:2]
    assert book.step(None, (first, "<a@x>")) == ("claimed", False)
    book.durable()  # the commit is made, and synced to disk after it was made
    assert len(commits) == 1 and synced_since(commits[0])
    assert ledger(fresh_db.factory, digest_id)["ann@example.com"] == "sending"
    book.step(loop.Outcome(first, "sent"), (second, "<b@x>"))
    book.durable()  # what another connection sees once durable() returned
    assert len(commits) == 2 and synced_since(commits[1])
    states = ledger(fresh_db.factory, digest_id)
    assert (states["ann@example.com"], states["bob@example.com"]) == ("sent", "sending")
    book.close()
    with fresh_db.engine.connect() as other:  # the pooled connection is back to NORMAL
        assert other.exec_driver_sql("PRAGMA synchronous").scalar() == 1
    with fresh_db.factory() as session:
        ann = session.scalars(select(Delivery).where(Delivery.id == first.id)).one()
        assert (ann.status, ann.message_id, ann.attempts) == ("sent", "<a@x>", 1)
        assert ann.sent_at is not None and ann.sent_at.tzinfo is not None


def test_a_failed_ledger_commit_stops_before_the_next_message_is_accepted(
    settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlite3

    readers = [f"r{n}@example.com" for n in range(5)]
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, readers)
    real_commit = ledger_db.raw_commit
    calls = []

    def flaky_commit(conn: Any) -> None:
        calls.append(1)
        if len(calls) == 3:  # the commit of "r1 sent, r2 claimed"
            raise sqlite3.OperationalError("disk I/O error")
        real_commit(conn)

    monkeypatch.setattr(ledger_db, "raw_commit", flaky_commit)
    with pytest.raises(DeliveryError, match="cannot write the delivery ledger") as failed:
        send(settings, fresh_db)
    assert failed.value.hint and "resumes" in failed.value.hint
    # the third message was never handed over: its data waits for that commit
    assert len(smtp_server.messages) == 2
    assert sorted(ledger(fresh_db.factory, digest_id).values()) == ["pending"] * 3 + ["sent"] * 2

    monkeypatch.setattr(ledger_db, "raw_commit", real_commit)
    assert send(settings, fresh_db).sent == 3
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}
