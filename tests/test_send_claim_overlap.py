"""The per-message claim off the critical path, and still safe (issue 16).

Where a commit is a round trip to a server (PostgreSQL), the ledger's
per-message step -- record the last message, claim this one -- runs in a
helper thread while the message's SMTP commands go out (``DbLedger.begin_step``,
``bot.send.loop``). So a row's MAIL, RCPT and DATA may reach the server
before the send knows the row is its to send. These tests check both sides:
the commands do go out while the claim runs, and a row the claim finds is not
ours (its subscriber gone, another worker holding it) is neither delivered nor
recorded -- even when the server refused it before the claim was known.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import FreshDB
from helpers import any_db, wait_until
from smtp import Handler, SmtpServer, add_subscribers, ledger, make_digest
from sqlalchemy import select, update
from test_send_fast import PipeliningHandler, start_server

from bot import send as send_stage
from bot.config import Settings
from bot.models import Delivery, Subscriber
from bot.send import ledger as ledger_db

WEEK = "2026-W40"
READERS = ["ann@example.com", "bob@example.com", "cy@example.com"]
OTHERS = [f"r{n}@example.com" for n in range(9)]
OTHER_WORKER = "another-host.example:4242:abcd"  # alive as far as this machine can tell

only_pg = pytest.mark.parametrize(
    "db_backend", [pytest.param("postgresql", marks=pytest.mark.postgresql)], indirect=True)


@pytest.fixture(params=[False, True], ids=["one-by-one", "pipelining"])
def server(request: pytest.FixtureRequest) -> Iterator[SmtpServer]:
    started = start_server(PipeliningHandler() if request.param else Handler())
    try:
        yield started
    finally:
        started.stop()


def settings_for(smtp_settings: Settings, server: SmtpServer) -> Settings:
    # one connection: the order of events is fixed
    return dataclasses.replace(smtp_settings, smtp_host=server.host, smtp_port=server.port,
                               smtp_connections=1, smtp_max_retries=1)


def on_claim(monkeypatch: pytest.MonkeyPatch, before: dict[int, Any]) -> None:
    """Run ``before[n]()`` just before the n-th claim UPDATE (1-based), where
    the ledger runs it (in its helper thread on PostgreSQL)."""
    real = ledger_db.claim_delivery
    calls = [0]

    def claim(*args: Any, **kwargs: Any) -> bool:
        calls[0] += 1
        if calls[0] in before:
            before[calls[0]]()
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger_db, "claim_delivery", claim)


@only_pg
def test_on_postgresql_the_claim_runs_while_the_commands_go_out(
    smtp_settings: Settings, fresh_db: FreshDB, server: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    # bob's claim waits for bob's RCPT: it comes only if the commands go out meanwhile
    on_claim(monkeypatch, {2: lambda: seen.append(
        wait_until(lambda: server.handler.commands["RCPT"] >= 2, timeout=5))})
    digest_id = make_digest(fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    report = send_stage.send_digest(settings_for(smtp_settings, server), fresh_db.factory, WEEK)
    assert seen == [True], "bob's claim ran before his commands went out"
    assert (report.outcome, report.sent) == ("sent", 3)
    assert server.copies_by_recipient() == {r: 1 for r in READERS}
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}


@any_db
def test_a_row_found_not_ours_is_neither_delivered_nor_recorded(
    smtp_settings: Settings, fresh_db: FreshDB, server: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digest_id = make_digest(fresh_db.factory)
    # 12 rows, one connection: claimed 3 at a time (bot.send.run), so ann, bob and cy
    # are this send's before the first claim
    add_subscribers(fresh_db.factory, READERS + OTHERS)
    server.script("RCPT", "550 5.1.1 no such user", address="cy@example.com", times=-1)

    def meanwhile() -> None:
        """Once the send holds every row: bob unsubscribes, and another worker
        takes cy's row over (as after this one's lease ran out)."""
        with fresh_db.factory() as session, session.begin():
            session.execute(update(Subscriber).where(Subscriber.email == "bob@example.com")
                            .values(status="unsubscribed"))
            cy = select(Subscriber.id).where(Subscriber.email == "cy@example.com")
            session.execute(update(Delivery).where(Delivery.digest_id == digest_id,
                                                   Delivery.subscriber_id.in_(cy.scalar_subquery()))
                            .values(status="sending", claimed_by=OTHER_WORKER,
                                    lease_until=datetime.now(UTC) + timedelta(minutes=5)))

    on_claim(monkeypatch, {1: meanwhile})  # before ann's claim: nothing is locked yet
    report = send_stage.send_digest(settings_for(smtp_settings, server), fresh_db.factory, WEEK)

    assert (report.sent, report.skipped, report.failed, report.bounced) == (10, 1, 0, 0)
    assert server.copies_by_recipient() == {r: 1 for r in ["ann@example.com", *OTHERS]}
    assert ledger(fresh_db.factory, digest_id) == {
        "ann@example.com": "sent", "bob@example.com": "skipped", "cy@example.com": "sending",
        **{r: "sent" for r in OTHERS}}
    with fresh_db.factory() as session:
        # cy's 550 came before the send knew the row was not its own: not counted
        assert session.scalar(select(Subscriber.hard_failures)
                              .where(Subscriber.email == "cy@example.com")) == 0
        assert session.scalar(select(Delivery.claimed_by).join(Subscriber).where(
            Subscriber.email == "cy@example.com")) == OTHER_WORKER
