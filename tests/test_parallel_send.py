"""Several SMTP connections and several send processes on one digest (bot.send.workers,
bot.send.claims), against a real SMTP server and real `digestbot send` processes."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FreshDB
from helpers import Digestbot, any_db, free_port, wait_until
from smtp import SmtpServer, add_subscribers, ledger, make_digest
from sqlalchemy import select

from bot import send as send_stage
from bot.config import Settings
from bot.errors import DeliveryError
from bot.models import Delivery, Digest

WEEK = "2026-W40"


def readers(n: int) -> list[str]:
    return [f"reader{i:03d}@example.org" for i in range(n)]


def held(fresh_db: FreshDB, digest_id: int) -> set[str]:
    with fresh_db.factory() as session:
        return {o for o in session.scalars(select(Delivery.claimed_by).where(
            Delivery.digest_id == digest_id, Delivery.status.in_(("pending", "sending"))))
            if o is not None}


@any_db
def test_four_connections_share_the_send_and_each_reader_gets_one_copy(
    make_settings: Callable[..., Settings], fresh_db: FreshDB, smtp_server: SmtpServer,
) -> None:
    addresses = readers(40)
    add_subscribers(fresh_db.factory, addresses)
    digest_id = make_digest(fresh_db.factory, WEEK)
    smtp_server.delay = 0.02
    settings = make_settings(smtp_connections=4, **smtp_server.settings_env())
    seen: list[int] = []

    report = send_stage.send_digest(settings, fresh_db.factory, WEEK,
                                    progress=lambda r: seen.append(r.done))

    assert (report.outcome, report.sent, report.failed) == ("sent", 40, 0)
    assert smtp_server.copies_by_recipient() == {a: 1 for a in addresses}
    assert len(smtp_server.handler.sessions) >= 3, smtp_server.handler.sessions  # connections at once
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
    assert held(fresh_db, digest_id) == set()
    assert seen[-1] == 40 and seen == sorted(seen)  # one progress count for all connections
    with fresh_db.factory() as session:
        assert session.get(Digest, digest_id).status == "sent"  # type: ignore[union-attr]


def test_a_dead_server_stops_every_connection_with_every_row_pending(
    make_settings: Callable[..., Settings], fresh_db: FreshDB,
) -> None:
    add_subscribers(fresh_db.factory, readers(12))
    digest_id = make_digest(fresh_db.factory, WEEK)
    settings = make_settings(smtp_host="127.0.0.1", smtp_port=free_port(), smtp_security="none",
                             smtp_connections=4, smtp_max_retries=1)
    with pytest.raises(DeliveryError, match="not accepting mail") as down:
        send_stage.send_digest(settings, fresh_db.factory, WEEK, retry_base_delay=0.01)
    assert down.value.hint and "still pending" in down.value.hint
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"pending"}
    assert held(fresh_db, digest_id) == set()  # every worker handed its rows back


def test_the_rate_limit_is_for_the_whole_send_not_each_connection(
    make_settings: Callable[..., Settings], fresh_db: FreshDB, smtp_server: SmtpServer,
) -> None:
    addresses = readers(9)
    add_subscribers(fresh_db.factory, addresses)
    make_digest(fresh_db.factory, WEEK)
    settings = make_settings(smtp_connections=4, send_rate=20, **smtp_server.settings_env())
    started = time.monotonic()
    assert send_stage.send_digest(settings, fresh_db.factory, WEEK).sent == 9
    # 9 messages at 20 a second: the last leaves 8 intervals after the first;
    # per connection it would have been 2 intervals
    assert time.monotonic() - started >= 8 / 20
    assert smtp_server.copies_by_recipient() == {a: 1 for a in addresses}


@any_db
def test_three_send_processes_one_killed_midway_every_reader_once(
    fresh_db: FreshDB, smtp_server: SmtpServer, digestbot: Digestbot, tmp_path: Path,
) -> None:
    addresses = readers(60)
    add_subscribers(fresh_db.factory, addresses)
    digest_id = make_digest(fresh_db.factory, WEEK)
    smtp_server.delay = 0.05
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"), "DIGESTBOT_SMTP_CONNECTIONS": "2",
           **{f"DIGESTBOT_{k.upper()}": str(v) for k, v in smtp_server.settings_env().items()}}
    procs = [digestbot.start("send", "--week", WEEK, env=env) for _ in range(3)]
    started = wait_until(lambda: len(smtp_server.messages) >= 12 or any(
        p.poll() is not None for p in procs), 60)
    assert started and all(p.poll() is None for p in procs), [p.communicate() for p in procs
                                                              if p.poll() is not None]
    victim = procs[1]
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    for proc in (procs[0], procs[2]):
        proc.wait(120)
    # the survivors sent their own rows and took the dead one's free rows;
    # a row it left 'sending' is sent by the next run, under the same Message-ID
    finish = digestbot.run("send", "--week", WEEK, env=env)
    assert finish.returncode == 0, finish.stderr
    assert set(ledger(fresh_db.factory, digest_id).values()) == {"sent"}
    copies = smtp_server.copies_by_recipient()
    assert set(copies) == set(addresses)
    ids: dict[str, set[str]] = defaultdict(set)
    for received in smtp_server.messages:
        ids[str(received.message["To"]).lower()].add(str(received.message["Message-ID"]))
    twice = [a for a, n in copies.items() if n > 1]
    # at most the killed process's in-flight messages (two connections), each
    # repeated with the same Message-ID
    assert len(twice) <= 2 and all(len(ids[a]) == 1 for a in twice)
    assert max(copies.values()) <= 2


@any_db
def test_two_sends_starting_at_once_share_the_ledger_rows(fresh_db: FreshDB) -> None:
    """Two `digestbot send` processes starting together both add the missing ledger rows.
    Seen once in CI: on PostgreSQL the second INSERT waited for the first's rows, then failed
    on the (digest, subscriber) key and the whole send process stopped with a database error.
    Here the first transaction holds its new rows uncommitted while the second adds its own."""
    import threading
    from datetime import UTC, datetime

    from bot.send import ledger as send_ledger

    add_subscribers(fresh_db.factory, readers(5))
    digest_id = make_digest(fresh_db.factory, WEEK)
    now = datetime.now(UTC)
    second: list[int | BaseException] = []

    def add_rows() -> None:
        try:
            with fresh_db.factory() as session, session.begin():
                second.append(send_ledger.create_pending_deliveries(session, digest_id, now))
        except BaseException as exc:  # noqa: BLE001 (the failure is what is asserted)
            second.append(exc)

    with fresh_db.factory() as session, session.begin():
        send_ledger.create_pending_deliveries(session, digest_id, now)
        other = threading.Thread(target=add_rows)
        other.start()
        other.join(timeout=1.0)  # PostgreSQL: it waits on our uncommitted rows; SQLite: on the write lock
    other.join(timeout=30)
    assert not other.is_alive()
    assert len(second) == 1 and not isinstance(second[0], BaseException), second
    assert sorted(ledger(fresh_db.factory, digest_id).values()) == ["pending"] * 5
