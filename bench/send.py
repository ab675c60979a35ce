"""Send benchmark: the real send path against a plain smtplib loop, same server.

Targets (issue #6), at N = 10,000 confirmed subscribers:
- the bot sends at >= 70 % of the floor's messages per second, where the floor
  is smtplib sending one pre-built message N times over one connection;
- the send's peak RSS at N = 10,000 is at most 1.2 x that at N = 1,000.

The SMTP server (aiosmtpd, accepting and discarding) runs in its own process
on 127.0.0.1; each measured run is a fresh child process, so peak RSS is the
send's own. The real path: ledger on, personal unsubscribe links on, rate
limit off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import Row, run_standalone  # noqa: E402

FIXTURE = HERE.parent / "tests" / "fixtures" / "messagedaily-rl.xml"
WEEK = "2026-W40"

SERVER = r"""
import socket, sys
from aiosmtpd.controller import Controller

class Sink:
    async def handle_DATA(self, server, session, envelope):
        return "250 OK"

with socket.socket() as probe:  # a free port; aiosmtpd cannot report port 0's choice
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
controller = Controller(Sink(), hostname="127.0.0.1", port=port)
controller.start()
print(port, flush=True)
sys.stdin.read()  # run until the parent closes our stdin
controller.stop()
"""


def _env(db_url: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGESTBOT_")}
    env.update({
        "DIGESTBOT_DATABASE_URL": db_url,
        "DIGESTBOT_FEED_URLS": str(FIXTURE),
        "DIGESTBOT_SMTP_HOST": "127.0.0.1",
        "DIGESTBOT_SMTP_PORT": str(port),
        "DIGESTBOT_SMTP_SECURITY": "none",
        "DIGESTBOT_SEND_RATE": "0",
        # like for like with the one-connection floor (bench/send_parallel.py runs several)
        "DIGESTBOT_SMTP_CONNECTIONS": "1",
        "DIGESTBOT_SECRET_KEY": "bench-secret-key",
        "DIGESTBOT_FROM_ADDR": "digestbot <digest@bench.example>",
        "DIGESTBOT_LOG_LEVEL": "WARNING",
    })
    return env


def setup_db(path: Path, n: int) -> str:
    """A migrated database holding the fixture's entries and n confirmed subscribers."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from bot import db, ingest
    from bot.config import load_settings
    from bot.models import Subscriber

    url = f"sqlite:///{path}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    factory = db.session_factory(engine)
    ingest.poll_feeds(load_settings({"DIGESTBOT_DATABASE_URL": url,
                                       "DIGESTBOT_FEED_URLS": str(FIXTURE)}), factory)
    now = datetime.now(UTC)
    rows = [{"email": f"reader{i:05d}@bench.example", "email_key": f"reader{i:05d}@bench.example",
             "status": "confirmed", "token_nonce": f"n{i}", "hard_failures": 0,
             "created_at": now, "confirmed_at": now} for i in range(n)]
    with db.transaction(factory) as session:
        for start in range(0, n, 2000):
            session.execute(insert(Subscriber), rows[start:start + 2000])
    engine.dispose()
    return url


BOT_RUN = r"""
import json, resource, sys, time
from bot import db, send
from bot.config import load_settings
settings = load_settings()
factory = db.session_factory(db.make_engine(settings.database_url))
start = time.perf_counter()
report = send.send_digest(settings, factory, sys.argv[1])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "sent": report.sent,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

FLOOR_RUN = r"""
import json, resource, smtplib, sys, time
from bot import db, digest, render
from bot.config import load_settings
from bot.mailer import DigestMessage
from bot import ingest
from bot import send
settings = load_settings()
factory = db.session_factory(db.make_engine(settings.database_url))
with factory() as session:
    data = digest.build_digest(session, digest.parse_week(sys.argv[1], settings.timezone), settings)
rendered = render.render_digest(data, settings)
message = DigestMessage(settings, rendered.subject, rendered.html, rendered.text).render(
    "reader@bench.example", "<floor@bench.example>", "https://bench.example/unsubscribe/x")
n = int(sys.argv[2])
start = time.perf_counter()
with smtplib.SMTP(settings.smtp_host, settings.smtp_port) as smtp:
    for i in range(n):
        smtp.sendmail("digest@bench.example", [f"reader{i:05d}@bench.example"], message)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "sent": n,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def child(code: str, env: dict[str, str], *args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(n: int, port: int, tmp: Path) -> tuple[dict[str, float], dict[str, float]]:
    """(floor, bot) for n subscribers, each on a fresh copy of the database."""
    url = setup_db(tmp / f"send{n}.sqlite3", n)
    env = _env(url, port)
    floor = child(FLOOR_RUN, env, WEEK, str(n))
    bot = child(BOT_RUN, env, WEEK)
    assert bot["sent"] == n, bot
    return floor, bot


def run(sizes: tuple[int, int] = (1_000, 10_000)) -> list[Row]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            small_floor, small = measure(sizes[0], port, Path(tmp))
            big_floor, big = measure(sizes[1], port, Path(tmp))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    rows = []
    for n, floor, bot in ((sizes[0], small_floor, small), (sizes[1], big_floor, big)):
        f_rate, b_rate = n / floor["seconds"], n / bot["seconds"]
        rows.append(Row("send", f"N={n:,}: smtplib loop (floor)", f"{f_rate:.0f} msg/s", "floor", True))
        rows.append(Row("send", f"N={n:,}: digestbot send", f"{b_rate:.0f} msg/s", "", True))
        share = b_rate / f_rate
        target = n == sizes[1]
        rows.append(Row("send", f"N={n:,}: share of floor", f"{share:.0%}",
                        ">= 70 %" if target else "", share >= 0.7 or not target))
    ratio = big["rss_kb"] / small["rss_kb"]
    rows.append(Row("send", f"peak RSS N={sizes[0]:,} / N={sizes[1]:,}",
                    f"{small['rss_kb'] / 1024:.0f} / {big['rss_kb'] / 1024:.0f} MB", "", True))
    rows.append(Row("send", "peak RSS ratio 10k / 1k", f"{ratio:.2f} x", "<= 1.2", ratio <= 1.2))
    return rows


if __name__ == "__main__":
    run_standalone(run)
