"""What makes the send fast must not make it less safe (issue 16):

- SMTP PIPELINING: MAIL, RCPT and DATA in one write when the server offers
  it; every refusal still ends as before, and the connection stays usable;
- dot-stuffing only when a line starts with a dot, and then correctly;
- Message-IDs given when rows are claimed: on disk before the server sees
  the message's data, and the SQLite ledger's write-ahead log synced by a
  helper thread (a failing sync stops the send with a message).
"""

from __future__ import annotations

import dataclasses
import email
import os
import socket
import threading
from collections.abc import Iterator
from email import policy
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from conftest import FreshDB
from helpers import any_db
from smtp import Handler, SmtpServer, add_subscribers, ledger, make_digest
from sqlalchemy import select

from bot import send as send_stage
from bot.config import Settings
from bot.errors import DeliveryError
from bot.mailer import PermanentFailure, SmtpSender, TemporaryFailure
from bot.models import Delivery, Subscriber
from bot.send import walsync

WEEK = "2026-W40"
# how long a socket or a wait may take before the test calls it a hang: generous, because
# on a busy machine the server's thread can wait seconds for a core (speed lives in bench/)
PATIENCE = 120.0
READERS = [f"r{n}@example.com" for n in range(7)]


class PipeliningHandler(Handler):
    """The tests' scripted server, offering PIPELINING (aiosmtpd reads
    pipelined commands one after the other, as RFC 2920 asks)."""

    async def handle_EHLO(self, server: Any, session: Any, envelope: Any, hostname: str,  # noqa: N802
                          responses: list[str]) -> list[str]:
        session.host_name = hostname
        return [*responses[:-1], "250-PIPELINING", responses[-1]]


def start_server(handler: Handler) -> SmtpServer:
    server = SmtpServer()
    server.controller.loop.close()  # the default handler's controller, never started
    server.handler = handler
    server.controller = Controller(handler, hostname=server.host, port=server.port,
                                   ready_timeout=PATIENCE)
    server.start()
    return server


@pytest.fixture
def pipelining_server() -> Iterator[SmtpServer]:
    server = start_server(PipeliningHandler())
    try:
        yield server
    finally:
        server.stop()


def smtp(server: SmtpServer) -> SmtpSender:
    return SmtpSender(server.host, server.port, security="none", timeout=PATIENCE)


# --- PIPELINING -----------------------------------------------------------------------------

def test_mail_rcpt_and_data_go_out_before_any_reply() -> None:
    """A server that answers nothing until it has all three commands: a client
    waiting for the reply to MAIL would time out here."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: dict[str, bytes] = {}

    def serve() -> None:
        conn, _ = listener.accept()
        conn.settimeout(PATIENCE)
        with conn:
            conn.sendall(b"220 raw ESMTP\r\n")
            buffer = _read_until(conn, b"\r\n", b"")
            conn.sendall(b"250-raw\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
            buffer = _read_until(conn, b"DATA\r\n", b"")
            seen["commands"] = buffer
            conn.sendall(b"250 ok\r\n250 ok\r\n354 go ahead\r\n")
            seen["data"] = _read_until(conn, b"\r\n.\r\n", b"")
            conn.sendall(b"250 queued\r\n")
            _read_until(conn, b"\r\n", b"")  # QUIT
            conn.sendall(b"221 bye\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    sender = SmtpSender("127.0.0.1", port, security="none", timeout=PATIENCE)
    sender.send("d@example.org", "a@example.com", b"Subject: x\r\n\r\nbody\r\n", "<1@x>")
    sender.close()
    thread.join(PATIENCE)
    listener.close()
    assert seen["commands"] == b"MAIL FROM:<d@example.org>\r\nRCPT TO:<a@example.com>\r\nDATA\r\n"
    assert seen["data"] == b"Subject: x\r\n\r\nbody\r\n.\r\n"


def _read_until(conn: socket.socket, end: bytes, buffer: bytes) -> bytes:
    while not buffer.endswith(end):
        chunk = conn.recv(65536)
        if not chunk:
            raise AssertionError(f"client went away; had {buffer!r}")
        buffer += chunk
    return buffer


def test_refusals_while_pipelining_end_as_without(pipelining_server: SmtpServer) -> None:
    server = pipelining_server
    sender = smtp(server)
    message = b"Subject: x\r\n\r\nbody\r\n"
    server.script("RCPT", "550 5.1.1 no such user", address="gone@example.com")
    with pytest.raises(PermanentFailure) as permanent:
        sender.send("d@example.org", "gone@example.com", message, "")
    assert permanent.value.code == 550
    server.script("DATA", "451 4.3.0 try again later")
    with pytest.raises(TemporaryFailure) as temporary:
        sender.send("d@example.org", "ok@example.com", message, "")
    assert temporary.value.code == 451 and not temporary.value.connection
    server.script("MAIL", "452 4.3.1 busy")
    with pytest.raises(TemporaryFailure) as busy:
        sender.send("d@example.org", "ok@example.com", message, "")
    assert busy.value.code == 452
    sender.send("d@example.org", "ok@example.com", message, "")
    assert [m.rcpt_tos for m in server.wait_for(1, timeout=PATIENCE)] == [("ok@example.com",)]
    assert len(server.handler.sessions) == 1  # refusals keep the connection in step
    server.script("MAIL", "421 4.3.2 shutting down")
    with pytest.raises(TemporaryFailure) as closing:
        sender.send("d@example.org", "ok@example.com", message, "")
    assert closing.value.connection and closing.value.code == 421
    server.script("RCPT", drop=True)
    with pytest.raises(TemporaryFailure) as dropped:
        sender.send("d@example.org", "ok@example.com", message, "")
    assert dropped.value.connection
    server.script("MAIL", "553 5.7.1 not allowed to send as that address")
    with pytest.raises(DeliveryError, match="refused our sender address"):
        sender.send("d@example.org", "ok@example.com", message, "")
    sender.send("d@example.org", "last@example.com", message, "")
    sender.close()
    assert [m.rcpt_tos[0] for m in server.wait_for(2, timeout=PATIENCE)] == ["ok@example.com", "last@example.com"]


@pytest.mark.parametrize("pipelining", [False, True])
def test_lines_starting_with_a_dot_arrive_intact(pipelining: bool, smtp_server: SmtpServer,
                                                 pipelining_server: SmtpServer) -> None:
    server = pipelining_server if pipelining else smtp_server
    sender = smtp(server)
    bodies = [b"Subject: dots\r\n\r\n.\r\n..two\r\n.three\r\nend\r\n", b"Subject: none\r\n\r\nplain\r\n"]
    for n, body in enumerate(bodies):
        sender.send("d@example.org", f"r{n}@example.com", body, "")
    sender.close()
    assert [m.data for m in server.wait_for(2, timeout=PATIENCE)] == bodies


# --- Message-IDs on disk before the data ------------------------------------------------------

class CheckingHandler(PipeliningHandler):
    """At each DATA, reads the ledger from its own connection: the Message-ID
    the server is given must already be committed for that recipient."""

    def __init__(self, factory: Any, pipelining: bool) -> None:
        super().__init__()
        self.factory, self.pipelining = factory, pipelining
        self.problems: list[str] = []

    async def handle_EHLO(self, server: Any, session: Any, envelope: Any, hostname: str,  # noqa: N802
                          responses: list[str]) -> list[str]:
        if self.pipelining:
            return await super().handle_EHLO(server, session, envelope, hostname, responses)
        session.host_name = hostname
        return responses

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        header = email.message_from_bytes(envelope.original_content, policy=policy.default)
        with self.factory() as db:
            recorded = db.scalar(select(Delivery.message_id).join(
                Subscriber, Subscriber.id == Delivery.subscriber_id).where(
                Subscriber.email == envelope.rcpt_tos[0]))
        if recorded != header["Message-ID"]:
            self.problems.append(f"{envelope.rcpt_tos[0]}: {recorded} != {header['Message-ID']}")
        return await super().handle_DATA(server, session, envelope)


@any_db
@pytest.mark.parametrize("pipelining", [False, True])
def test_each_message_id_is_committed_before_its_data(
    pipelining: bool, smtp_settings: Settings, fresh_db: FreshDB,
) -> None:
    handler = CheckingHandler(fresh_db.factory, pipelining)
    server = start_server(handler)
    try:
        settings = dataclasses.replace(smtp_settings, smtp_host=server.host, smtp_port=server.port,
                                       smtp_connections=2)
        digest_id = make_digest(fresh_db.factory)
        add_subscribers(fresh_db.factory, READERS)
        report = send_stage.send_digest(settings, fresh_db.factory, WEEK)
        assert (report.outcome, report.sent) == ("sent", len(READERS))
        assert server.copies_by_recipient() == {r: 1 for r in READERS}
        assert handler.problems == []
        assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
    finally:
        server.stop()


def test_a_failing_disk_sync_stops_the_send_with_a_message(
    smtp_settings: Settings, fresh_db: FreshDB, smtp_server: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_sync = os.fdatasync

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    settings = dataclasses.replace(smtp_settings, smtp_connections=1)
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    monkeypatch.setattr(walsync.os, "fdatasync", broken)
    with pytest.raises(DeliveryError, match="cannot write the delivery ledger") as failed:
        send_stage.send_digest(settings, fresh_db.factory, WEEK)
    assert failed.value.hint and "resumes" in failed.value.hint
    assert smtp_server.messages == []  # no Message-ID on disk: nothing was handed over
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"pending"}

    monkeypatch.setattr(walsync.os, "fdatasync", real_sync)
    assert send_stage.send_digest(settings, fresh_db.factory, WEEK).sent == len(READERS)
    assert smtp_server.copies_by_recipient() == {r: 1 for r in READERS}


def test_a_batch_s_message_ids_are_on_disk_before_its_first_message(fresh_db: FreshDB) -> None:
    from datetime import UTC, datetime
    from itertools import count

    from bot.send import ledger as ledger_db

    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    with fresh_db.factory() as session, session.begin():
        ledger_db.create_pending_deliveries(session, digest_id, datetime.now(UTC))
    numbers = count()
    book = ledger_db.DbLedger(fresh_db.factory, digest_id, 3, claim_size=3,
                              new_message_id=lambda: f"<m{next(numbers)}@x>")
    try:
        rows = book.unfinished(0, 10)
        assert [r.message_id for r in rows] == ["<m0@x>", "<m1@x>", "<m2@x>"]
        with fresh_db.factory() as session:  # committed: another connection sees them
            assert set(session.scalars(select(Delivery.message_id).where(
                Delivery.message_id.is_not(None)))) == {"<m0@x>", "<m1@x>", "<m2@x>"}
        assert book.step(None, (rows[0], rows[0].message_id))[0] == "claimed"
        book.durable()  # what the send calls before the data goes out
        wal = book._wal
        assert wal is not None and wal._synced >= book._claimed > 0
    finally:
        book.close()
