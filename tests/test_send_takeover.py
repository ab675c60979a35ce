"""Two real `digestbot run` processes on one database: the one holding the
scheduled send is killed -9 mid-send, and the other finishes the week
without a restart (``watch-sends`` in bot/scheduler.py), every reader once.

Only one instance sends (the "scheduled-send" lease). The other may not even
have run the weekly job (the two share APScheduler's job store), so nothing
but the lease the dead instance left behind tells it a send is unfinished.
"""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from datetime import datetime

from conftest import FEED_FIXTURE, FreshDB
from helpers import Digestbot, any_db, wait_until
from smtp import SmtpServer, add_subscribers
from test_kill_at_send import SHANGHAI, Instance, start_all_before_the_send_time, week_sent

from bot import ingest
from bot import scheduler as sched
from bot.config import load_settings
from bot.models import Lease

READERS = [f"reader{i:02d}@example.org" for i in range(30)]


def holder_pid(fresh_db: FreshDB) -> int | None:
    """The process holding the scheduled send's lease (owner ``host:pid:random``)."""
    with fresh_db.factory() as session:
        lease = session.get(Lease, sched.SEND_LEASE_NAME)
        return int(lease.owner.rsplit(":", 2)[1]) if lease is not None else None


@any_db
def test_the_other_instance_finishes_a_send_whose_holder_was_killed(
        fresh_db: FreshDB, smtp_server: SmtpServer, digestbot: Digestbot) -> None:
    smtp = {f"DIGESTBOT_{k.upper()}": str(v) for k, v in smtp_server.settings_env().items()}
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
           "DIGESTBOT_LOG_LEVEL": "WARNING", "DIGESTBOT_SMTP_CONNECTIONS": "1", **smtp}
    ingest.poll_feeds(load_settings(env), fresh_db.factory)
    add_subscribers(fresh_db.factory, READERS)
    instances = [Instance(0.0, dict(env), fresh_db.factory, fresh_db.engine, READERS)
                 for _ in range(2)]
    smtp_server.delay = 0.1  # the send takes a few seconds: time to kill its holder midway
    try:
        send_time = start_all_before_the_send_time(digestbot, instances)
        lead = (send_time - datetime.now(SHANGHAI)).total_seconds()
        assert wait_until(lambda: len(smtp_server.messages) >= 5, timeout=lead + 30), \
            "the scheduled send did not start"
        pid = holder_pid(fresh_db)
        by_pid = {i.proc.pid: i for i in instances if i.proc is not None}
        assert pid in by_pid, (pid, list(by_pid))
        victim = by_pid.pop(pid)
        (survivor,) = by_pid.values()
        assert victim.proc is not None and survivor.proc is not None
        victim.proc.kill()
        victim.proc.communicate(timeout=10)
        killed_at = time.monotonic()
        assert len(smtp_server.messages) < len(READERS), "killed too late: the send had ended"

        # the survivor, never restarted, takes the send over once the holder is gone
        assert wait_until(lambda: week_sent(fresh_db.factory, len(READERS)),
                          timeout=sched.SEND_WATCH_SECONDS + 60), \
            f"{len(smtp_server.messages)} of {len(READERS)} messages"
        assert time.monotonic() - killed_at < sched.SEND_WATCH_SECONDS + 60
        assert survivor.proc.poll() is None, "the survivor exited"
        survivor.proc.send_signal(signal.SIGTERM)
        _out, err = survivor.proc.communicate(timeout=15)
        assert survivor.proc.returncode == 0, err
        assert "Traceback" not in err
        assert "taking it over" in err
    finally:
        digestbot.kill_leftovers()

    # each reader got the week once: a second copy only from the SMTP-inherent
    # window (killed between the server's 250 and the commit), same Message-ID
    ids: dict[str, set[str]] = defaultdict(set)
    for received in smtp_server.messages:
        ids[str(received.message["To"]).lower()].add(str(received.message["Message-ID"]))
    assert sorted(ids) == sorted(READERS)
    assert all(len(found) == 1 for found in ids.values()), ids
    assert all(n <= 2 for n in smtp_server.copies_by_recipient().values())
