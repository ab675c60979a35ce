"""`digestbot run`: one process with the web app and the scheduler, started and
stopped the way Docker and a terminal do it (a real subprocess, real signals)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from conftest import FEED_FIXTURE
from helpers import Digestbot, free_port, wait_until
from smtp import add_subscribers, ledger

from bot import ingest
from bot import scheduler as sched
from bot.config import WEEKDAYS
from bot.digest import queries as digest_queries
from bot.ingest import queries as feed_queries
from bot.service import Service, create_web_app


def service_env(tmp_path: Path, database_url: str, **settings: str) -> dict[str, str]:
    env = {
        "DIGESTBOT_DATABASE_URL": database_url,
        "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
        "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
        "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"),
        "DIGESTBOT_LOG_LEVEL": "INFO",
    }
    env.update({f"DIGESTBOT_{k.upper()}": v for k, v in settings.items()})
    return env


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def start_run(digestbot: Digestbot, env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return digestbot.start("run", "--host", "127.0.0.1", "--port", str(port), env=env)


def wait_healthy(proc: subprocess.Popen[str], port: int, timeout: float = 20) -> tuple[int, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"digestbot run exited with {proc.returncode}:\n{err}")
        try:
            return get_json(f"http://127.0.0.1:{port}/healthz")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    proc.kill()
    pytest.fail("digestbot run did not answer /healthz in time")


def stop(proc: subprocess.Popen[str], sig: int, timeout: float = 10) -> tuple[float, str, str]:
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"digestbot run did not stop within {timeout}s:\n{err}")
    return time.monotonic() - started, out, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_answers_healthz_and_stops_cleanly(tmp_path, fresh_db, sig, digestbot):
    port = free_port()
    proc = start_run(digestbot, service_env(tmp_path, fresh_db.url), port)
    try:
        status, body = wait_healthy(proc, port)
        assert status == 200, body
        assert body["status"] == "ok" and body["database"] is True and body["scheduler"] == "running"
        # the poll at start really runs in this process
        assert wait_until(lambda: _entries(fresh_db), timeout=15)
        assert _entries(fresh_db) == 77
    finally:
        elapsed, _out, err = stop(proc, sig)
    assert proc.returncode == 0, err
    assert elapsed < 5, f"took {elapsed:.1f}s to stop"
    assert "Traceback" not in err
    assert "scheduler stopped" in err and "digestbot stopped" in err
    # one log line per poll, naming the feed
    [poll_line] = [line for line in err.splitlines() if "bot.ingest.poll: poll" in line]
    assert "INFO" in poll_line and str(FEED_FIXTURE) in poll_line and "77 new" in poll_line
    # the jobs are in the job store of the same database, for the next start
    stored = sched.stored_next_run_times(fresh_db.engine)
    assert set(stored) == {sched.POLL_JOB_ID, sched.SEND_JOB_ID}


def test_run_logs_at_the_configured_level(tmp_path, fresh_db, digestbot):
    port = free_port()
    proc = start_run(digestbot, service_env(tmp_path, fresh_db.url, log_level="WARNING"), port)
    try:
        wait_healthy(proc, port)
    finally:
        _elapsed, _out, err = stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err
    assert " INFO " not in err


def test_run_on_an_unmigrated_database_says_what_to_do(tmp_path, digestbot):
    env = service_env(tmp_path, f"sqlite:///{tmp_path / 'new.sqlite3'}")
    result = digestbot.run("run", "--port", str(free_port()), env=env, timeout=60)
    assert result.returncode == 1
    assert "digestbot db upgrade" in result.stderr and "Traceback" not in result.stderr


def test_run_with_the_port_taken_says_so_before_it_polls_or_sends(tmp_path, fresh_db, digestbot):
    """Seen: a second `digestbot run` on a taken port started the scheduler (a poll, an overdue
    send) and only then failed to bind, with uvicorn's exit status 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = service_env(tmp_path, fresh_db.url)
        result = digestbot.run("run", "--host", "127.0.0.1", "--port", str(port), env=env, timeout=60)
        web = digestbot.run("web", "--host", "127.0.0.1", "--port", str(port), env=env, timeout=60)
    for ended in (result, web):
        assert ended.returncode == 1 and "Traceback" not in ended.stderr, ended.stderr
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in ended.stderr
        assert "DIGESTBOT_PORT" in ended.stderr
    assert "scheduler started" not in result.stderr and "serving on" not in web.stdout
    with fresh_db.factory() as session:
        assert feed_queries.all_feeds(session) == []  # not even DIGESTBOT_FEED_URLS was added and polled


def test_healthz_fails_when_the_scheduler_is_not_running(make_settings, fresh_db):
    settings = make_settings()
    service = Service(settings, fresh_db.engine, fresh_db.factory)
    app = create_web_app(settings, fresh_db.factory, service)

    async def healthz() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            return await client.get("/healthz")

    service.start()
    try:
        ok = asyncio.run(healthz())
        assert ok.status_code == 200 and ok.json()["scheduler"] == "running"
        service.stop()
        failing = asyncio.run(healthz())
        assert failing.status_code == 503
        assert failing.json()["scheduler"] is False and failing.json()["database"] is True
    finally:
        service.stop()


def _entries(fresh_db: Any) -> int:
    with fresh_db.factory() as session:
        return feed_queries.count_entries(session)


def test_a_crash_mid_send_then_run_completes_the_ledger_once_per_subscriber(
        tmp_path, fresh_db, make_settings, smtp_server, digestbot):
    """kill -9 of `digestbot run` in the middle of the weekly send, then `run`
    again: every subscriber ends up with exactly one copy."""
    addresses = [f"reader{i}@example.org" for i in range(8)]
    add_subscribers(fresh_db.factory, addresses)
    # the weekly send was due a minute ago while the service was down
    due = (datetime.now(ZoneInfo("Asia/Shanghai")) - timedelta(minutes=1)).replace(second=0, microsecond=0)
    schedule = {"send_day": WEEKDAYS[due.weekday()], "send_time": due.strftime("%H:%M"),
                "timezone": "Asia/Shanghai"}
    smtp = {k: str(v) for k, v in smtp_server.settings_env().items()}
    settings = make_settings(**schedule, **smtp)
    ingest.poll_feeds(settings, fresh_db.factory)
    previous = Service(settings, fresh_db.engine, fresh_db.factory)
    previous.start()
    previous.stop()
    scheduler = sched.build_scheduler(settings, sched.make_jobstore(settings.database_url))
    scheduler.start(paused=True)
    scheduler.modify_job(sched.SEND_JOB_ID, next_run_time=due)
    scheduler.shutdown(wait=False)

    # one connection: one message in flight at the kill (tests/test_parallel_send.py kills
    # a send with several, where each in-flight message may come twice, same Message-ID)
    env = service_env(tmp_path, fresh_db.url, **schedule, **smtp, smtp_connections="1")
    smtp_server.delay = 0.3  # each message takes a while to be accepted

    # 1. `run` starts, sends the missed digest, and is killed in the middle of it
    proc = start_run(digestbot, env, free_port())
    try:
        wait_until(lambda: len(smtp_server.messages) >= 3 or proc.poll() is not None, timeout=30)
        assert proc.poll() is None and len(smtp_server.messages) >= 3, "no send started"
        smtp_server.delay = 30  # the next message hangs in DATA ...
        assert smtp_server.wait_held(30), "no message reached DATA"
        proc.kill()  # ... and the process dies before the server accepts it
    finally:
        if proc.poll() is None:
            proc.kill()
        _out, err1 = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    smtp_server.delay = 0
    with fresh_db.factory() as session:
        digest = digest_queries.latest_digest(session)
        assert digest is not None and digest.status == "sending"
        week = digest.week
        digest_id = digest.id
    before = ledger(fresh_db.factory, digest_id)
    sent_before = sorted(a for a, state in before.items() if state == "sent")
    assert 3 <= len(sent_before) < len(addresses), before
    assert "sending" in before.values(), before  # the message in flight when it died
    # the weekly job was moved on to next week when it was handed out: no second weekly run
    assert sched.stored_next_run_times(fresh_db.engine)[sched.SEND_JOB_ID] == due + timedelta(days=7)

    # 2. `run` again: the interrupted send is resumed from the ledger
    port = free_port()
    proc = start_run(digestbot, env, port)
    try:
        wait_healthy(proc, port)
        assert wait_until(lambda: set(ledger(fresh_db.factory, digest_id).values()) == {"sent"},
                          timeout=30), ledger(fresh_db.factory, digest_id)
    finally:
        _elapsed, _out, err2 = stop(proc, signal.SIGTERM)
    assert proc.returncode == 0, err2
    assert smtp_server.copies_by_recipient() == {a: 1 for a in addresses}
    with fresh_db.factory() as session:
        done = digest_queries.digest_for_week(session, week)
        assert done is not None and done.status == "sent" and done.sent_at is not None
        assert digest_queries.weeks_being_sent(session) == []
    assert f"send {week}: resuming an interrupted send" in err2
    assert f"send {week}: " in err2 and "(done)" in err2
    assert "Traceback" not in err2
