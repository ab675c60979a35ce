"""Named leases (bot.leases) and the one-instance-sends rule of the scheduler."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from helpers import any_db
from smtp import add_subscribers, make_digest

from bot import leases
from bot import scheduler as sched

TTL = timedelta(minutes=5)


@any_db
def test_a_lease_has_one_holder_until_it_runs_out(fresh_db) -> None:
    first, second = leases.worker_id(), leases.worker_id()
    now = datetime.now(UTC)
    assert leases.acquire(fresh_db.factory, "job", first, TTL, now)
    assert not leases.acquire(fresh_db.factory, "job", second, TTL, now)
    assert leases.acquire(fresh_db.factory, "job", first, TTL, now)  # the holder renews
    assert leases.acquire(fresh_db.factory, "job", second, TTL, now + TTL + timedelta(seconds=1))
    leases.release(fresh_db.factory, "job", first)  # not the holder any more: no effect
    assert not leases.acquire(fresh_db.factory, "job", first, TTL, now + TTL + timedelta(seconds=2))
    leases.release(fresh_db.factory, "job", second)
    assert leases.acquire(fresh_db.factory, "job", first, TTL, now)


def test_a_lease_of_a_process_killed_here_is_taken_at_once(fresh_db) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = f"{socket.gethostname()}:{int(gone.stdout)}:dead"
    assert leases.is_dead(dead)
    assert leases.acquire(fresh_db.factory, "job", dead, TTL)
    assert leases.acquire(fresh_db.factory, "job", leases.worker_id(), TTL)


def test_the_scheduled_send_is_skipped_while_another_instance_holds_it(
        make_settings, fresh_db, smtp_server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    make_digest(fresh_db.factory, "2026-W40")
    add_subscribers(fresh_db.factory, ["a@example.org"])
    other = leases.worker_id()  # another `digestbot run`, alive
    assert leases.acquire(fresh_db.factory, sched.SEND_LEASE_NAME, other, TTL)
    ctx = sched.JobContext(make_settings(**smtp_server.settings_env()), fresh_db.factory)
    assert sched._send(ctx, "2026-W40") is None
    assert smtp_server.messages == []
    assert any("another instance is sending" in r.getMessage() for r in caplog.records)
    leases.release(fresh_db.factory, sched.SEND_LEASE_NAME, other)
    report = sched._send(ctx, "2026-W40")
    assert report is not None and report.sent == 1
    assert smtp_server.copies_by_recipient() == {"a@example.org": 1}


@any_db
def test_an_abandoned_lease_is_cleared_once_and_a_live_one_never(fresh_db) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = f"{socket.gethostname()}:{int(gone.stdout)}:dead"
    alive = "another-host.example:4242:abcd"  # on another machine: alive until its lease runs out
    now = datetime.now(UTC)
    assert not leases.clear_abandoned(fresh_db.factory, "job", now)  # free: nothing to clear
    assert leases.acquire(fresh_db.factory, "job", alive, TTL, now)
    assert not leases.clear_abandoned(fresh_db.factory, "job", now)
    assert not leases.acquire(fresh_db.factory, "job", leases.worker_id(), TTL, now)
    assert leases.clear_abandoned(fresh_db.factory, "job", now + TTL + timedelta(seconds=1))
    assert not leases.clear_abandoned(fresh_db.factory, "job", now + TTL + timedelta(seconds=1))
    assert leases.acquire(fresh_db.factory, "job", dead, TTL, now)
    assert leases.clear_abandoned(fresh_db.factory, "job", now)  # its process is gone
    assert not leases.clear_abandoned(fresh_db.factory, "job", now)
    mine = leases.worker_id()
    assert leases.acquire(fresh_db.factory, "job", mine, TTL, now)  # free again
    assert not leases.clear_abandoned(fresh_db.factory, "job", now)  # held by this live process
