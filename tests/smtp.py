"""A real SMTP server for tests: aiosmtpd's Controller on 127.0.0.1.

The handler records every accepted message and can be scripted to answer a
stage (MAIL, RCPT, DATA) with a reply such as ``421``/``451``/``550``, or to
drop the connection there. ``delay`` makes it slow: it waits that long after
the message data arrived and before it accepts (records and answers 250), and
``in_data`` is set meanwhile -- a client killed then has delivered nothing,
like a real server that never sent its 250.

Also here: small helpers that put subscribers and a frozen digest in the
database without going through bot.digest / bot.render.
"""

from __future__ import annotations

import asyncio
import email
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from typing import Any, cast

import pytest
from aiosmtpd.controller import Controller
from helpers import free_port, wait_until
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot import subscribers
from bot.digest import queries as digest_queries
from bot.mailer import UNSUBSCRIBE_PLACEHOLDER

# how long the server may take to start or a message to arrive before a test calls it a
# hang: generous, since on a busy machine its thread can wait seconds for a core (speed is
# measured in bench/, never here); a passing test never waits for it
PATIENCE = 120.0


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes

    @property
    def message(self) -> EmailMessage:
        return cast(EmailMessage, email.message_from_bytes(self.data, policy=policy.default))


@dataclass
class Rule:
    stage: str  # MAIL | RCPT | DATA
    reply: str | None  # e.g. "451 4.3.0 try later"; None with drop=True
    drop: bool = False
    times: int = 1  # how often it fires; -1: always
    address: str | None = None  # RCPT/DATA: only for this recipient
    after: int = 0  # let this many matching commands pass first


class Handler:
    def __init__(self) -> None:
        self.messages: list[Received] = []
        self.rules: list[Rule] = []
        self.delay = 0.0
        self.in_data = threading.Event()
        self.holding = 0.0  # the delay of the message now held in DATA, 0 if none
        self.sessions: set[int] = set()
        self.commands: Counter[str] = Counter()
        self._cond = threading.Condition()

    def _rule(self, stage: str, addresses: list[str]) -> Rule | None:
        with self._cond:
            for rule in self.rules:
                if rule.stage != stage or rule.times == 0:
                    continue
                if rule.address and rule.address.lower() not in (a.lower() for a in addresses):
                    continue
                if rule.after > 0:
                    rule.after -= 1
                    continue
                if rule.times > 0:
                    rule.times -= 1
                return rule
        return None

    @staticmethod
    def _apply(rule: Rule, server: Any) -> str:
        if rule.drop:
            server.transport.close()
            return "421 4.3.2 gone"  # never reaches the client
        assert rule.reply
        return rule.reply

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str,  # noqa: N802
                          mail_options: list[str]) -> str:
        self.sessions.add(id(session))
        self.commands["MAIL"] += 1
        rule = self._rule("MAIL", [])
        if rule:
            return self._apply(rule, server)
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,  # noqa: N802
                          rcpt_options: list[str]) -> str:
        self.commands["RCPT"] += 1
        rule = self._rule("RCPT", [address])
        if rule:
            return self._apply(rule, server)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.commands["DATA"] += 1
        rule = self._rule("DATA", list(envelope.rcpt_tos))
        if rule:
            return self._apply(rule, server)
        delay = self.delay
        if delay:
            self.holding = delay
            self.in_data.set()
            try:
                await asyncio.sleep(delay)  # cancelled if the client goes away
            finally:
                self.in_data.clear()
                self.holding = 0.0
        with self._cond:
            self.messages.append(Received(envelope.mail_from, tuple(envelope.rcpt_tos),
                                          bytes(envelope.original_content)))
            self._cond.notify_all()
        return "250 2.0.0 accepted"


class SmtpServer:
    """The scripted server plus what tests ask of it."""

    def __init__(self, port: int | None = None) -> None:
        self.handler = Handler()
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.controller = Controller(self.handler, hostname=self.host, port=self.port,
                                     ready_timeout=PATIENCE)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    # scripting ----------------------------------------------------------------

    def script(self, stage: str, reply: str | None = None, *, drop: bool = False, times: int = 1,
               address: str | None = None, after: int = 0) -> None:
        self.handler.rules.append(Rule(stage, reply, drop, times, address, after))

    @property
    def delay(self) -> float:
        return self.handler.delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        self.handler.delay = seconds

    # results --------------------------------------------------------------------

    @property
    def messages(self) -> list[Received]:
        with self.handler._cond:
            return list(self.handler.messages)

    def wait_for(self, count: int, timeout: float = PATIENCE) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.handler._cond:
            while len(self.handler.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"expected {count} messages, got "
                                         f"{len(self.handler.messages)} after {timeout}s")
                self.handler._cond.wait(left)
            return list(self.handler.messages)

    def wait_held(self, delay: float, timeout: float = PATIENCE) -> bool:
        """Until a message is held in DATA for ``delay`` seconds: after ``delay``
        was changed while another message sat in DATA, that is the next one."""
        return wait_until(lambda: self.handler.holding == delay, timeout)

    def copies_by_recipient(self) -> Counter[str]:
        """How many messages each address received, counted by the To header."""
        return Counter(str(m.message["To"]).lower() for m in self.messages)

    def settings_env(self) -> dict[str, Any]:
        return {"smtp_host": self.host, "smtp_port": self.port, "smtp_security": "none"}


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- database helpers -------------------------------------------------------------------

DIGEST_HTML = (
    "<!DOCTYPE html><html><body><h1>强化学习周报 2026-W40</h1>"
    "<p>本周精读：信用分配。</p>"
    f'<p><a href="{UNSUBSCRIBE_PLACEHOLDER}">退订</a></p></body></html>'
)
DIGEST_TEXT = f"强化学习周报 2026-W40\n\n本周精读：信用分配。\n\n退订：{UNSUBSCRIBE_PLACEHOLDER}\n"


def make_digest(factory: sessionmaker[Session], week: str = "2026-W40", *,
                subject: str = "强化学习周报 · 2026-W40", html: str = DIGEST_HTML,
                text: str = DIGEST_TEXT, status: str = "sending") -> int:
    """A frozen digest row, as bot.digest.freeze_digest leaves it."""
    with factory() as session, session.begin():
        digest = digest_queries.add_digest(session, week=week, subject=subject, html=html, text=text,
                                  entry_count=1, paper_count=0, entries=[])
        digest.status = status
        if status == "sent":
            digest.sent_at = datetime.now(UTC)
        return digest.id


def add_subscribers(factory: sessionmaker[Session], addresses: list[str],
                    status: str = "confirmed") -> list[int]:
    ids = []
    with factory() as session, session.begin():
        for address in addresses:
            sub = subscribers.add_subscriber(session, email=address, status=status,
                                       nonce=f"nonce-{address}", now=datetime.now(UTC))
            ids.append(sub.id)
    return ids


def ledger(factory: sessionmaker[Session], digest_id: int) -> dict[str, str]:
    """address -> delivery status for one digest."""
    from bot.models import Delivery, Subscriber

    with factory() as session:
        rows = session.execute(
            select(Subscriber.email, Delivery.status)
            .join(Delivery, Delivery.subscriber_id == Subscriber.id)
            .where(Delivery.digest_id == digest_id))
        return {email_: status for email_, status in rows}
