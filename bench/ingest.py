"""Ingest benchmark: polling a 5,000-entry feed against feedparser alone.

Targets (issue #6):
- first poll            <= 3 x  the time feedparser takes to parse the same bytes
- re-poll, same bytes   <= 1.3 x that parse time, and zero entry writes
- re-poll answered 304  < 20 ms of the bot's own time
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import feedparser
from sqlalchemy import func, select

from bot import db, ingest
from bot.config import load_settings
from bot.ingest import fetch as fetching
from bot.models import Entry

sys.path.insert(0, str(Path(__file__).parent))
from common import Row, StaticServer, best_of, run_standalone  # noqa: E402

FIXTURE = Path(__file__).parent.parent / "tests" / "fixtures" / "messagedaily-rl.xml"
N_ENTRIES = 5_000


def synthetic_feed(n: int = N_ENTRIES) -> bytes:
    """n items made from the fixture's 77: unique guids and links, spread-out dates."""
    text = FIXTURE.read_text(encoding="utf-8")
    head, rest = text.split("<item>", 1)
    items = re.findall(r"<item>.*?</item>", "<item>" + rest, flags=re.S)
    start = datetime(2026, 10, 3, tzinfo=UTC)
    out = []
    for i in range(n):
        item = items[i % len(items)]
        item = re.sub(r"/posts/([0-9a-f]+)/", rf"/posts/\g<1>-{i}/", item)
        if i >= len(items):  # the same title and summary would be the same article (one entry)
            item = item.replace("<title>", f"<title>({i}) ", 1)
        item = re.sub(r"<pubDate>.*?</pubDate>",
                      f"<pubDate>{format_datetime(start - timedelta(hours=i))}</pubDate>", item)
        out.append(item)
    return (head + "\n".join(out) + "\n  </channel>\n</rss>\n").encode("utf-8")


def entry_writes(factory) -> int:
    with factory() as s:
        return s.scalar(select(func.count()).select_from(Entry).where(Entry.updated_at.is_not(None))) or 0


def run() -> list[Row]:
    body = synthetic_feed()
    parse_time = best_of(lambda: feedparser.parse(body), runs=3)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, StaticServer(body) as plain, \
            StaticServer(body, etag='"v1"') as tagged:
        first_times = []
        for attempt in range(2):  # a fresh database each time; keep the better run
            engine = db.make_engine(f"sqlite:///{tmp}/ingest{attempt}.sqlite3")
            db.upgrade(engine)
            factory = db.session_factory(engine)
            settings = load_settings({"DIGESTBOT_DATABASE_URL": str(engine.url),
                                      "DIGESTBOT_FEED_URLS": f"{plain.url},{tagged.url}"})
            options = ingest.fetch_options(settings)
            start = time.perf_counter()
            first = ingest.poll_feed(plain.url, options, factory)
            first_times.append(time.perf_counter() - start)
            assert first.new == N_ENTRIES, first
        first_time = min(first_times)

        with factory() as s:
            count_before = s.scalar(select(func.count()).select_from(Entry))
        writes_before = entry_writes(factory)
        repoll_time = best_of(lambda: ingest.poll_feed(plain.url, options, factory), runs=5)
        with factory() as s:
            count_after = s.scalar(select(func.count()).select_from(Entry))
        writes = (count_after - count_before) + entry_writes(factory) - writes_before

        # one HTTP client per poll run, as ingest.poll_feeds uses it
        with fetching.make_client(options) as client:
            ingest.poll_feed(tagged.url, options, factory, client)  # learn the ETag
            not_modified = ingest.poll_feed(tagged.url, options, factory, client)
            assert not_modified.status == "not-modified"
            t304 = best_of(lambda: ingest.poll_feed(tagged.url, options, factory, client), runs=10)
        engine.dispose()

    rows.append(Row("ingest", f"feedparser.parse, {N_ENTRIES:,} entries ({len(body) / 1e6:.1f} MB)",
                    f"{parse_time * 1000:.0f} ms", "floor", True))
    rows.append(Row("ingest", "first poll", f"{first_time * 1000:.0f} ms", "", True))
    rows.append(Row("ingest", "first poll / parse", f"{first_time / parse_time:.2f} x", "<= 3",
                    first_time / parse_time <= 3))
    rows.append(Row("ingest", "re-poll, HTTP 200 same bytes", f"{repoll_time * 1000:.1f} ms", "", True))
    rows.append(Row("ingest", "re-poll / parse", f"{repoll_time / parse_time:.3f} x", "<= 1.3",
                    repoll_time / parse_time <= 1.3))
    rows.append(Row("ingest", "entry writes on re-poll", str(writes), "0", writes == 0))
    rows.append(Row("ingest", "re-poll answered 304", f"{t304 * 1000:.1f} ms", "< 20 ms", t304 < 0.020))
    return rows


if __name__ == "__main__":
    run_standalone(run)
