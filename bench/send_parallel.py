"""Parallel send benchmark (issue #16): several SMTP connections against a relay
that takes its time, and the send's own cost against a sink that takes none.

Targets:
- latency: a sink that waits 50 ms per message before its 250, in its own
  process. The floor is one smtplib connection (about 20 msg/s). With
  DIGESTBOT_SMTP_CONNECTIONS=8 the bot reaches >= 0.9 x 8 x that floor, at
  10,000 subscribers, on SQLite and on PostgreSQL.
- zero latency: against Postfix's smtp-sink (fast enough not to be the
  bottleneck), one connection reaches >= 90 % of one smtplib connection
  (they take turns three times; the medians are compared).
- 100,000 subscribers on PostgreSQL: peak RSS <= 1.2 x that at 10,000, and
  the time per message within 1.3 x (time linear in N).

The rates compared with a floor are the delivery's: the floor builds its one
message before its clock starts, so the bot's clock covers the delivery
(ledger, personal links, SMTP) and not the one-off building, rendering and
freezing of the digest (about a second in a fresh process, a third of a
3,000-message run at zero latency); the whole send's rate is shown next to it.

Each measured run is a fresh child process (its peak RSS is the send's own).
PostgreSQL runs in a throwaway cluster (tests/pg.py); without it, those rows
say so. The latency floor is timed on 300 messages: at 50 ms each its rate
does not depend on N.

    .venv/bin/python bench/send_parallel.py [--quick] [--pg-latency]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from common import Row  # noqa: E402
from send import FLOOR_RUN, WEEK, _env, child, setup_db  # noqa: E402

LATENCY = 0.05

LATENCY_SINK = r"""
import asyncio, socket, sys
from aiosmtpd.controller import Controller

class Slow:
    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(float(sys.argv[1]))
        return "250 OK"

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
controller = Controller(Slow(), hostname="127.0.0.1", port=port)
controller.start()
print(port, flush=True)
sys.stdin.read()
controller.stop()
"""

# "seconds": the whole `send_digest` (building, rendering and freezing the digest,
# writing the ledger, delivering); "delivery": the delivery alone, which is what
# the floor times (it builds its one message before its clock starts)
BOT_RUN = r"""
import json, resource, sys, time
from bot import db, send
from bot.config import load_settings
from bot.send import run as send_run
settings = load_settings()
factory = db.session_factory(db.make_engine(settings.database_url))
timed = {}
deliver = send_run.deliver_parallel
def timed_deliver(*args, **kwargs):
    began = time.perf_counter()
    try:
        return deliver(*args, **kwargs)
    finally:
        timed["delivery"] = time.perf_counter() - began
send_run.deliver_parallel = timed_deliver
start = time.perf_counter()
report = send.send_digest(settings, factory, sys.argv[1])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "delivery": timed["delivery"], "sent": report.sent,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


@contextlib.contextmanager
def latency_sink(latency: float) -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", LATENCY_SINK, str(latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


@contextlib.contextmanager
def smtp_sink() -> Iterator[int | None]:
    """Postfix's smtp-sink on a free port, or None where it is not installed."""
    exe = shutil.which("smtp-sink") or ("/usr/sbin/smtp-sink" if Path("/usr/sbin/smtp-sink").exists()
                                        else None)
    if exe is None:
        yield None
        return
    from helpers import free_port

    port = free_port()
    proc = subprocess.Popen([exe, "-u", "root", f"127.0.0.1:{port}", "1000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket

        from helpers import wait_until

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_until(up, 10)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def databases(tmp: Path) -> Iterator[dict[str, object]]:
    """name -> a function making a database URL with n subscribers."""
    made: dict[str, object] = {"sqlite": lambda n, tag: setup_db(tmp / f"{tag}.sqlite3", n)}
    try:
        import pg  # tests/pg.py
    except ImportError:
        pg = None
    if pg is None or pg.unavailable():
        yield made
        return
    with pg.cluster() as cluster, contextlib.ExitStack() as keep:
        def on_pg(n: int, tag: str) -> str:
            url = keep.enter_context(cluster.database(migrated=True))  # dropped at the end
            _fill(url, n)
            return url
        made["postgresql"] = on_pg
        yield made


def _fill(url: str, n: int) -> None:
    """The fixture's entries and n confirmed subscribers in a migrated database."""
    from datetime import UTC, datetime

    from send import FIXTURE
    from sqlalchemy import insert

    from bot import db, ingest
    from bot.config import load_settings
    from bot.models import Subscriber

    engine = db.make_engine(url)
    factory = db.session_factory(engine)
    ingest.poll_feeds(load_settings({"DIGESTBOT_DATABASE_URL": url,
                                     "DIGESTBOT_FEED_URLS": str(FIXTURE)}), factory)
    now = datetime.now(UTC)
    with db.transaction(factory) as session:
        for start in range(0, n, 5000):
            session.execute(insert(Subscriber), [
                {"email": f"reader{i:06d}@bench.example", "email_key": f"reader{i:06d}@bench.example",
                 "status": "confirmed", "token_nonce": f"n{i}", "hard_failures": 0,
                 "created_at": now, "confirmed_at": now} for i in range(start, min(n, start + 5000))])
    engine.dispose()


def bot(url: str, port: int, connections: int) -> dict[str, float]:
    env = _env(url, port) | {"DIGESTBOT_SMTP_CONNECTIONS": str(connections)}
    return child(BOT_RUN, env, WEEK)


def run(quick: bool = False, pg_latency: bool = False) -> list[Row]:
    """All the rows; with ``pg_latency``, only the floor and PostgreSQL's
    8-connection latency rows (to compare changes to the PostgreSQL ledger)."""
    rows: list[Row] = []
    n = 2_000 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmpdir, databases(Path(tmpdir)) as dbs:
        tmp = Path(tmpdir)
        if pg_latency:
            if "postgresql" not in dbs:
                return [Row("send8", "PostgreSQL not available (tests/pg.py)", "-", "", False)]
            dbs = {"postgresql": dbs["postgresql"]}
        with latency_sink(LATENCY) as port:
            floor_url = setup_db(tmp / "floor.sqlite3", 1)
            floor = child(FLOOR_RUN, _env(floor_url, port), WEEK, "300")
            floor_rate = 300 / floor["seconds"]
            rows.append(Row("send8", f"{LATENCY * 1000:.0f} ms sink: smtplib, 1 connection (floor)",
                            f"{floor_rate:.1f} msg/s", "floor", True))
            for name, make in dbs.items():
                url = make(n, f"lat-{name}")  # type: ignore[operator]
                result = bot(url, port, 8)
                assert result["sent"] == n, result
                rate = n / result["delivery"]
                share = rate / (8 * floor_rate)
                rows.append(Row("send8", f"{name}, N={n:,}, 8 connections: delivery",
                                f"{rate:.0f} msg/s", "", True))
                rows.append(Row("send8", f"{name}: whole send (digest built, frozen, delivered)",
                                f"{n / result['seconds']:.0f} msg/s", "", True))
                rows.append(Row("send8", f"{name}: share of 8 x floor", f"{share:.1%}", ">= 90 %",
                                share >= 0.9))
        if pg_latency:
            return rows
        with smtp_sink() as sink_port:
            if sink_port is None:
                rows.append(Row("send1", "smtp-sink (Debian postfix) not installed", "-", "", False))
            else:
                m = 3_000
                base = tmp / "zero-base.sqlite3"
                setup_db(base, m)
                # the floor and the bot take turns, 3 times (a fresh copy of the database
                # for each send): on a shared machine one run of each says little
                floors, bots, wholes = [], [], []
                for turn in range(3):
                    run_db = tmp / f"zero-{turn}.sqlite3"
                    shutil.copy(base, run_db)
                    url = f"sqlite:///{run_db}"
                    floors.append(m / child(FLOOR_RUN, _env(url, sink_port), WEEK, str(m))["seconds"])
                    one = bot(url, sink_port, 1)
                    bots.append(m / one["delivery"])
                    wholes.append(m / one["seconds"])
                f_rate, b_rate = statistics.median(floors), statistics.median(bots)
                rows.append(Row("send1", f"smtp-sink, N={m:,}: smtplib, 1 connection (floor)",
                                f"{f_rate:.0f} msg/s", "floor", True))
                rows.append(Row("send1", f"smtp-sink, N={m:,}: digestbot, 1 connection: delivery",
                                f"{b_rate:.0f} msg/s", "", True))
                rows.append(Row("send1", "digestbot: whole send (digest built, frozen, delivered)",
                                f"{statistics.median(wholes):.0f} msg/s", "", True))
                rows.append(Row("send1", "the 3 turns: floor / delivery, msg/s",
                                ", ".join(f"{f:.0f}/{b:.0f}" for f, b in zip(floors, bots, strict=True)),
                                "", True))
                rows.append(Row("send1", "share of floor", f"{b_rate / f_rate:.0%}", ">= 90 %",
                                b_rate / f_rate >= 0.9))
        if "postgresql" in dbs and sink_port_available():
            with smtp_sink() as sink_port:
                assert sink_port is not None
                big_n = 20_000 if quick else 100_000
                small = bot(dbs["postgresql"](n, "pg-small"), sink_port, 8)  # type: ignore[operator]
                big = bot(dbs["postgresql"](big_n, "pg-big"), sink_port, 8)  # type: ignore[operator]
                rss = big["rss_kb"] / small["rss_kb"]
                per = (big["delivery"] / big_n) / (small["delivery"] / n)
                rows.append(Row("send-pg", f"peak RSS N={n:,} / N={big_n:,}",
                                f"{small['rss_kb'] / 1024:.0f} / {big['rss_kb'] / 1024:.0f} MB", "", True))
                rows.append(Row("send-pg", "peak RSS ratio", f"{rss:.2f} x", "<= 1.2", rss <= 1.2))
                rows.append(Row("send-pg", f"N={big_n:,}, 8 connections: delivery / whole send",
                                f"{big_n / big['delivery']:.0f} / {big_n / big['seconds']:.0f} msg/s",
                                "", True))
                rows.append(Row("send-pg", "time per message, big / small", f"{per:.2f} x", "<= 1.3",
                                per <= 1.3))
        elif "postgresql" not in dbs:
            rows.append(Row("send-pg", "PostgreSQL not available (tests/pg.py)", "-", "", False))
    return rows


def sink_port_available() -> bool:
    return bool(shutil.which("smtp-sink") or Path("/usr/sbin/smtp-sink").exists())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N, for a first look")
    parser.add_argument("--pg-latency", action="store_true",
                        help="only the floor and PostgreSQL's 8-connection latency rows")
    args = parser.parse_args()
    for row in run(args.quick, args.pg_latency):
        print(row.show())
