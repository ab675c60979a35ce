"""kill -9 of a real `digestbot run` at several instants around the weekly send
time, then a restart: every subscriber gets that week exactly once (issue 10).

APScheduler moves the weekly job on to next week when it hands it to a worker,
before the digest is frozen; a process killed in between used to come back to
a job store that said "next week" and never sent the week. Whether the send is
owed is now read from the database (``bot.digest.due``), so every instant is safe.

One send time for several processes, each on its own database with its own
readers and one shared real SMTP server (aiosmtpd); each process is killed at
its own offset after the send time, from inside the first second on.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from zoneinfo import ZoneInfo

from conftest import FEED_FIXTURE
from helpers import Digestbot, free_port, wait_until
from smtp import SmtpServer, add_subscribers, ledger
from sqlalchemy.orm import Session, sessionmaker

from bot import db, ingest
from bot import scheduler as sched
from bot.config import WEEKDAYS, load_settings
from bot.digest import queries as digest_queries

SHANGHAI = ZoneInfo("Asia/Shanghai")
OFFSETS = (0.05, 0.25, 0.6, 1.5)  # seconds after the send time: three inside the first
READERS = 12
WEEK = "2026-W40"  # the example feed's last week: what the send covers
LEAD = 15.0  # seconds from start to the send time, first try; longer if the machine is slow


@dataclass
class Instance:
    offset: float
    env: dict[str, str]
    factory: sessionmaker[Session]
    engine: object
    readers: list[str]
    proc: subprocess.Popen[str] | None = None
    after_kill: tuple[str, datetime | None] = ("", None)  # digest state, stored next send


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return bool(json.loads(response.read()).get("scheduler") == "running")
    except (urllib.error.URLError, ConnectionError, OSError, ValueError):
        return False


def _all_healthy(ports: list[int]) -> bool:
    return all(_healthy(port) for port in ports)


def _start(digestbot: Digestbot, instance: Instance) -> int:
    port = free_port()
    instance.proc = digestbot.start("run", "--host", "127.0.0.1", "--port", str(port), env=instance.env)
    return port


def _state(instance: Instance) -> tuple[str, datetime | None]:
    """The week's digest state and the job store's next send time."""
    with instance.factory() as session:
        digest = digest_queries.digest_for_week(session, WEEK)
    stored = sched.stored_next_run_times(instance.engine)  # type: ignore[arg-type]
    return (digest.status if digest else "not frozen", stored.get(sched.SEND_JOB_ID))


def _exited(instance: Instance) -> str:
    """Why a process that should run is not answering (for the failure message)."""
    if instance.proc is None:
        return "not started"
    if instance.proc.poll() is None:
        instance.proc.kill()
        return f"not answering: {instance.proc.communicate()[1][-2000:]}"
    return f"exited {instance.proc.returncode}: {instance.proc.communicate()[1][-2000:]}"


def week_sent(factory: sessionmaker[Session], readers: int) -> bool:
    """WEEK's digest is sent and every one of its ``readers`` rows is 'sent'
    (also used by test_send_takeover.py)."""
    with factory() as session:
        digest = digest_queries.digest_for_week(session, WEEK)
        if digest is None or digest.status != "sent":
            return False
        digest_id = digest.id
    states = ledger(factory, digest_id)
    return len(states) == readers and set(states.values()) == {"sent"}


def start_all_before_the_send_time(digestbot: Digestbot, instances: list[Instance]) -> datetime:
    """Start every instance with one send time, far enough ahead that all are
    up before it; on a machine too slow for that, stop them (nothing has
    happened yet) and try again with more time. Returns the send time."""
    lead = LEAD
    for _attempt in range(3):
        send_time = (datetime.now(SHANGHAI) + timedelta(seconds=lead)).replace(microsecond=0)
        for instance in instances:
            instance.env |= {"DIGESTBOT_SEND_DAY": WEEKDAYS[send_time.weekday()],
                             "DIGESTBOT_SEND_TIME": send_time.time().isoformat(),
                             "DIGESTBOT_TIMEZONE": "Asia/Shanghai"}
        started = time.monotonic()
        ports = [_start(digestbot, instance) for instance in instances]
        up = wait_until(partial(_all_healthy, ports), timeout=lead - 3)
        if up and datetime.now(SHANGHAI) < send_time - timedelta(seconds=1):
            return send_time
        problems = [_exited(i) for i in instances]  # stops them
        assert all(p.startswith("not answering") for p in problems), problems
        lead = 3 * (time.monotonic() - started) + 5
    raise AssertionError(f"digestbot run did not come up in {lead:.0f} s: {problems}")


def test_a_kill_at_any_instant_around_the_send_time_sends_the_week_once(
        tmp_path: Path, smtp_server: SmtpServer, digestbot: Digestbot) -> None:
    smtp = {f"DIGESTBOT_{k.upper()}": str(v) for k, v in smtp_server.settings_env().items()}
    instances = []
    for n, offset in enumerate(OFFSETS):
        url = f"sqlite:///{tmp_path / f'kill{n}.sqlite3'}"
        env = {"DIGESTBOT_DATABASE_URL": url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
               "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
               "DIGESTBOT_LOG_LEVEL": "INFO", **smtp}
        engine = db.make_engine(url)
        db.upgrade(engine)
        factory = db.session_factory(engine)
        ingest.poll_feeds(load_settings(env), factory)
        readers = [f"k{n}-reader{i}@example.org" for i in range(READERS)]
        add_subscribers(factory, readers)
        instances.append(Instance(offset, env, factory, engine, readers))
    smtp_server.delay = 0.03  # a send takes a moment, as against a real relay
    try:
        # 1. every process up before the send time, then each killed at its instant
        send_time = start_all_before_the_send_time(digestbot, instances)
        for instance in instances:
            instant = send_time + timedelta(seconds=instance.offset)
            time.sleep(max(0.0, (instant - datetime.now(SHANGHAI)).total_seconds()))
            assert instance.proc is not None
            instance.proc.kill()
        for instance in instances:
            assert instance.proc is not None
            instance.proc.communicate(timeout=10)
            assert instance.proc.returncode == -signal.SIGKILL
            instance.after_kill = _state(instance)

        # 2. restarted: every week still owed is sent, the half-sent ones finished
        for instance in instances:
            _start(digestbot, instance)
        assert wait_until(lambda: all(week_sent(i.factory, READERS) for i in instances),
                          timeout=90), \
            {i.offset: _state(i) for i in instances}
        for instance in instances:
            assert instance.proc is not None
            instance.proc.send_signal(signal.SIGTERM)
            _out, err = instance.proc.communicate(timeout=15)
            assert instance.proc.returncode == 0, err
            assert "Traceback" not in err
    finally:
        digestbot.kill_leftovers()

    # the instant that used to lose the week was hit: the job had been handed
    # out (the store says next week) and the digest was not frozen yet
    next_week = send_time + timedelta(days=7)
    assert any(i.after_kill == ("not frozen", next_week) for i in instances), \
        [(i.offset, i.after_kill) for i in instances]

    # each reader got the week, as one message: a second copy could only come
    # from the SMTP-inherent window (killed between the server's 250 and our
    # commit), and would carry the same Message-ID
    ids: dict[str, set[str]] = defaultdict(set)
    for received in smtp_server.messages:
        ids[str(received.message["To"]).lower()].add(str(received.message["Message-ID"]))
    everyone = [r for i in instances for r in i.readers]
    assert sorted(ids) == sorted(everyone)
    for instance in instances:
        for reader in instance.readers:
            assert len(ids[reader]) == 1, (instance.offset, instance.after_kill, reader, ids[reader])
    copies = smtp_server.copies_by_recipient()
    assert all(copies[r] <= 2 for r in everyone), {r: n for r, n in copies.items() if n > 1}
