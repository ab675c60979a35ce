"""A prompt stop (issue 32, item 9): SIGTERM stops `digestbot run` whatever it
is doing -- polling, reading with the language model, grouping, sending -- keeping what is done; a
send finishes or releases the message in flight and leaves every other row
pending.

No test times the stop. Each makes the work in hand long (a server that
stalls for minutes, a batch of the sentence encoder) and asserts that the
process is gone while that work would still be running, and that the state
it leaves is whole: rows pending, nothing doubled, the next run finishes."""

from __future__ import annotations

import signal
import subprocess
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import FEED_FIXTURE
from helpers import free_port, wait_until
from smtp import add_subscribers, ledger, make_digest
from sqlalchemy import func, select

from bot import digest, ingest
from bot.config import WEEKDAYS
from bot.digest import queries as digest_queries
from bot.ingest import queries as feed_queries
from bot.models import Digest
from bot.send import send_digest
from bot.stopping import Stopped, until_stopped
from evaluation.llm_server import Reply, running

STALL = 180.0  # seconds a stalled server holds: far longer than any stop may take
EXIT_BOUND = 60  # the process must be gone this long after SIGTERM, well inside STALL


def run_env(tmp_path: Path, database_url: str, **settings: str) -> dict[str, str]:
    env = {"DIGESTBOT_DATABASE_URL": database_url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox"), "DIGESTBOT_LOG_LEVEL": "INFO"}
    env.update({f"DIGESTBOT_{k.upper()}": v for k, v in settings.items()})
    return env


def start(digestbot, env: dict[str, str]) -> subprocess.Popen[str]:
    return digestbot.start("run", "--host", "127.0.0.1", "--port", str(free_port()), env=env)


def sigterm_and_wait(proc: subprocess.Popen[str], doing: str) -> str:
    """SIGTERM, then the process's stderr once it exited; fails if it is still there."""
    proc.send_signal(signal.SIGTERM)
    try:
        _out, err = proc.communicate(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        pytest.fail(f"SIGTERM {doing}: digestbot run still ran {EXIT_BOUND}s later:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "digestbot stopped" in err, err[-3000:]
    return err


def entry_count(fresh_db) -> int:
    with fresh_db.factory() as session:
        return feed_queries.count_entries(session)


# --- the helper -------------------------------------------------------------------

def test_until_stopped_returns_the_steps_result_or_its_error():
    stop = threading.Event()
    assert until_stopped(lambda: 42, stop, name="t") == 42
    assert until_stopped(lambda: 43, None, name="t") == 43

    def broken() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        until_stopped(broken, stop, name="t")


def test_until_stopped_does_not_wait_for_a_step_that_blocks():
    stop, release = threading.Event(), threading.Event()
    threading.Timer(0.2, stop.set).start()
    try:
        with pytest.raises(Stopped):
            until_stopped(release.wait, stop, name="blocked")  # would block until released
        assert not release.is_set()  # it returned while the step was still blocked
    finally:
        release.set()


# --- polling ----------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_sigterm_while_a_feed_server_stalls(tmp_path, fresh_db, feed_server, digestbot):
    url = feed_server.serve("/slow.xml", FEED_FIXTURE.read_bytes(), delay=STALL)
    proc = start(digestbot, run_env(tmp_path, fresh_db.url, feed_urls=url, http_timeout=str(int(STALL * 2))))
    try:
        assert wait_until(lambda: any(path == "/slow.xml" for path, _ in feed_server.requests)
                          or proc.poll() is not None, timeout=120), "the feed was never requested"
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        sigterm_and_wait(proc, "while a feed server stalls")
    finally:
        if proc.poll() is None:
            proc.kill()
    with fresh_db.factory() as session:  # an abandoned fetch is no failure of the feed
        feed = feed_queries.feed_by_url(session, url)
        assert feed is None or not feed.consecutive_failures
    assert entry_count(fresh_db) == 0


# --- reading with the language model ------------------------------------------------

@pytest.mark.timeout(300)
def test_sigterm_while_the_language_model_stalls(tmp_path, fresh_db, digestbot):
    """A stop does not wait for a language-model call in flight (it may take
    DIGESTBOT_LLM_TIMEOUT); the poll's entries are kept, the rest read later."""
    stall = lambda body: Reply(content="{}", delay=STALL)  # noqa: E731
    with running(stall) as server:
        env = run_env(tmp_path, fresh_db.url, llm_base_url=server.base_url, llm_model="test-model",
                      llm_timeout=str(int(STALL * 2)))
        proc = start(digestbot, env)
        try:
            assert wait_until(lambda: bool(server.requests) or proc.poll() is not None, timeout=200), \
                "the model was never asked"
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            sigterm_and_wait(proc, "while the language model stalls")
        finally:
            if proc.poll() is None:
                proc.kill()
    assert entry_count(fresh_db) == 77  # what the poll stored is kept


# --- grouping ---------------------------------------------------------------------

def test_a_stop_during_the_grouping_freezes_nothing_and_the_week_stays_owed(
        settings, fresh_db, monkeypatch):
    ingest.poll_feeds(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    real, release, grouping = digest.build_digest, threading.Event(), threading.Event()

    def slow_build(*args: Any, **kwargs: Any) -> Any:
        grouping.set()
        release.wait(STALL)  # a grouping that takes minutes
        return real(*args, **kwargs)

    monkeypatch.setattr(digest, "build_digest", slow_build)
    stop = threading.Event()
    threading.Thread(target=lambda: grouping.wait(30) and stop.set(), daemon=True).start()
    try:
        report = send_digest(settings, fresh_db.factory, stop=stop)
        assert not release.is_set()  # returned while the grouping still ran
    finally:
        release.set()
    assert report.outcome == "stopped" and "nothing was sent" in report.summary()
    with fresh_db.factory() as session:
        assert session.scalar(select(func.count()).select_from(Digest)) == 0
    monkeypatch.setattr(digest, "build_digest", real)
    again = send_digest(settings, fresh_db.factory)
    assert (again.outcome, again.sent) == ("sent", 1)


# --- sending ----------------------------------------------------------------------

def test_a_stop_while_the_server_stalls_releases_the_message_in_flight(
        make_settings, fresh_db, smtp_server):
    readers = [f"reader{i}@example.org" for i in range(6)]
    add_subscribers(fresh_db.factory, readers)
    digest_id = make_digest(fresh_db.factory)
    smtp = smtp_server.settings_env()
    settings = make_settings(smtp_connections=1, smtp_timeout=STALL * 2, **smtp)
    stop, reports = threading.Event(), []
    smtp_server.delay = 0.05
    sending = threading.Thread(target=lambda: reports.append(
        send_digest(settings, fresh_db.factory, "2026-W40", stop=stop, retry_base_delay=0.01)))
    sending.start()
    try:
        smtp_server.wait_for(2, timeout=60)
        smtp_server.delay = STALL  # the next message is held before the server's answer
        assert smtp_server.wait_held(STALL, timeout=60)
        stop.set()
        sending.join(EXIT_BOUND)
        assert not sending.is_alive(), "the send waited for the stalled server"
    finally:
        smtp_server.delay = 0
        sending.join(STALL)
    [report] = reports
    assert report.outcome == "incomplete"
    states = ledger(fresh_db.factory, digest_id)
    received = len(smtp_server.messages)
    assert "sending" not in states.values()  # the one in flight went back to pending
    assert list(states.values()).count("sent") == received == report.sent
    assert list(states.values()).count("pending") == len(readers) - received
    done = send_digest(settings, fresh_db.factory, "2026-W40", retry_base_delay=0.01)
    assert done.outcome == "sent"
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}


@pytest.mark.timeout(600)
def test_sigterm_of_run_while_the_smtp_server_stalls(tmp_path, fresh_db, make_settings, smtp_server,
                                                     digestbot):
    """`digestbot run` sending the owed weekly digest; the server stalls on one
    message for minutes; SIGTERM: the process is gone while it still stalls,
    that message is pending again like every other unsent one, and the next
    run gives everyone exactly one copy."""
    readers = [f"reader{i}@example.org" for i in range(8)]
    add_subscribers(fresh_db.factory, readers)
    due = (datetime.now(ZoneInfo("Asia/Shanghai")) - timedelta(minutes=1)).replace(second=0, microsecond=0)
    schedule = {"send_day": WEEKDAYS[due.weekday()], "send_time": due.strftime("%H:%M"),
                "timezone": "Asia/Shanghai"}
    smtp = {k: str(v) for k, v in smtp_server.settings_env().items()}
    settings = make_settings(**schedule, **smtp)
    ingest.poll_feeds(settings, fresh_db.factory)
    _mark_scheduled_before(settings, fresh_db, due)
    env = run_env(tmp_path, fresh_db.url, **schedule, **smtp, smtp_connections="1",
                  smtp_timeout=str(int(STALL * 2)))
    smtp_server.delay = 0.2
    proc = start(digestbot, env)
    try:
        assert wait_until(lambda: len(smtp_server.messages) >= 2 or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        smtp_server.delay = STALL
        assert smtp_server.wait_held(STALL, timeout=60), "no message reached the stall"
        err = sigterm_and_wait(proc, "while the SMTP server stalls")
    finally:
        if proc.poll() is None:
            proc.kill()
        smtp_server.delay = 0
    with fresh_db.factory() as session:
        frozen = digest_queries.latest_digest(session)
        assert frozen is not None and frozen.status == "sending"
        digest_id = frozen.id
    states = ledger(fresh_db.factory, digest_id)
    assert "sending" not in states.values(), states
    assert list(states.values()).count("sent") == len(smtp_server.messages)
    assert list(states.values()).count("pending") == len(readers) - len(smtp_server.messages)
    assert "stopped after the message in flight" in err

    proc = start(digestbot, run_env(tmp_path, fresh_db.url, **schedule, **smtp))
    try:
        assert wait_until(lambda: set(ledger(fresh_db.factory, digest_id).values()) == {"sent"},
                          timeout=120), ledger(fresh_db.factory, digest_id)
    finally:
        sigterm_and_wait(proc, "after the send")
    assert smtp_server.copies_by_recipient() == {r: 1 for r in readers}


def _mark_scheduled_before(settings, fresh_db, due: datetime) -> None:
    """This database had a scheduler before, whose weekly send was due at ``due``."""
    from bot import scheduler as sched
    from bot.service import Service

    previous = Service(settings, fresh_db.engine, fresh_db.factory)
    previous.start()
    previous.stop()
    scheduler = sched.build_scheduler(settings, sched.make_jobstore(settings.database_url))
    scheduler.start(paused=True)
    scheduler.modify_job(sched.SEND_JOB_ID, next_run_time=due)
    scheduler.shutdown(wait=False)
