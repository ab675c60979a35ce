"""Web rate limits kept in the database (bot.web.limits): one limit for every
instance, on SQLite and PostgreSQL, down to two real `digestbot web` processes."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from conftest import FEED_FIXTURE, FreshDB
from helpers import Digestbot, any_db, free_port, wait_until
from sqlalchemy import func, select

from bot import subscribers
from bot.models import RateHit
from bot.web.limits import PRUNE_INTERVAL, SharedWindow

T0 = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def hits(fresh_db: FreshDB) -> int:
    with fresh_db.factory() as session:
        return int(session.scalar(select(func.count()).select_from(RateHit)) or 0)


@any_db
def test_a_window_allows_its_limit_then_refuses_until_hits_age_out(fresh_db: FreshDB) -> None:
    clock = Clock()
    window = SharedWindow(fresh_db.factory, "t", 3, 600, clock=clock)
    assert [window.allow("1.2.3.4") for _ in range(5)] == [True] * 3 + [False] * 2
    assert window.allow("5.6.7.8")  # another key has its own count
    assert hits(fresh_db) == 4  # refused requests are not counted
    clock.now = T0 + timedelta(seconds=599)
    assert not window.allow("1.2.3.4")
    clock.now = T0 + timedelta(seconds=600)  # the first three hits are out of the window
    assert [window.allow("1.2.3.4") for _ in range(4)] == [True] * 3 + [False]


@any_db
def test_two_windows_on_one_database_share_the_count(fresh_db: FreshDB) -> None:
    """Two app instances each build their own window object: one limit."""
    clock = Clock()
    first = SharedWindow(fresh_db.factory, "subscribe-ip", 4, 600, clock=clock)
    second = SharedWindow(fresh_db.factory, "subscribe-ip", 4, 600, clock=clock)
    answers = [(first if n % 2 else second).allow("10.0.0.1") for n in range(8)]
    assert answers == [True] * 4 + [False] * 4
    other_name = SharedWindow(fresh_db.factory, "login-ip", 4, 600, clock=clock)
    assert other_name.allow("10.0.0.1")  # windows of another name count apart


@any_db
def test_old_hits_are_pruned(fresh_db: FreshDB) -> None:
    clock = Clock()
    window = SharedWindow(fresh_db.factory, "t", 10, 60, clock=clock)
    keep = SharedWindow(fresh_db.factory, "u", 10, 60, clock=clock)
    for n in range(5):
        assert window.allow(f"k{n}")
    assert keep.allow("other")
    clock.now = T0 + timedelta(seconds=61)
    window._pruned_at -= PRUNE_INTERVAL + 1  # a minute has passed for this process too
    assert window.allow("k0")
    assert hits(fresh_db) == 2  # the new hit and the other window's (not ours to prune)


@any_db
def test_racing_requests_never_get_through_over_the_limit(fresh_db: FreshDB) -> None:
    window = SharedWindow(fresh_db.factory, "race", 5, 600)
    start = threading.Barrier(12)
    answers: list[bool] = []

    def hit() -> None:
        start.wait()
        answers.append(window.allow("9.9.9.9"))

    threads = [threading.Thread(target=hit) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 12
    allowed = sum(answers)
    assert allowed <= 5
    # racers can be refused together (each counts the others' hits), never let through
    # together over the limit; afterwards the rest of the limit is there
    assert [window.allow("9.9.9.9") for _ in range(6 - allowed)] == [True] * (5 - allowed) + [False]


# --- two real `digestbot web` processes on one database -------------------------------------

@pytest.fixture
def two_instances(fresh_db: FreshDB, digestbot: Digestbot, tmp_path: Path) -> Iterator[list[str]]:
    """Two `digestbot web` processes on their own ports, one database."""
    bases = []
    procs: list[subprocess.Popen[str]] = []
    for _ in range(2):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {
            "DIGESTBOT_DATABASE_URL": fresh_db.url,
            "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_BASE_URL": "https://digest.example.org",
            "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
            "DIGESTBOT_LOG_LEVEL": "WARNING",
        }
        procs.append(digestbot.start("web", "--port", str(port), env=env))
        bases.append(base)

    def up(proc: subprocess.Popen[str], base: str) -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"digestbot web exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    for proc, base in zip(procs, bases, strict=True):
        assert wait_until(lambda p=proc, b=base: up(p, b), timeout=30), "digestbot web did not start"
    yield bases


@any_db
def test_two_web_instances_enforce_one_limit(two_instances: list[str], fresh_db: FreshDB) -> None:
    """The default limit is 5 subscribe requests per client address in 10 minutes:
    requests alternating between the instances are refused from the sixth on
    (with a limit per process, each would have let 5 through)."""
    codes = []
    for n in range(10):
        base = two_instances[n % 2]
        codes.append(httpx.post(f"{base}/subscribe", data={"email": f"r{n}@example.com"},
                                timeout=10).status_code)
    assert codes == [200] * 5 + [429] * 5
    with fresh_db.factory() as session:
        assert subscribers.subscriber_counts(session) == {"pending": 5}
