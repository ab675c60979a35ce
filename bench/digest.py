"""Digest benchmark: grouping + rendering + CSS inlining of a 40- and a 400-entry week.

Targets (issue #6): the 40-entry week under one second; the 400-entry week at
most 15 x the 40-entry one (no quadratic blow-up).
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot import db
from bot.config import load_settings
from bot.digest import build_digest, parse_week
from bot.ingest import parse as parsing
from bot.ingest import queries as feed_queries
from bot.models import Entry
from bot.render import render_digest

sys.path.insert(0, str(Path(__file__).parent))
from common import Row, median_of, run_standalone  # noqa: E402

FIXTURE = Path(__file__).parent.parent / "tests" / "fixtures" / "messagedaily-rl.xml"
WEEK = "2026-W40"  # Mon 2026-09-28 .. Sun 2026-10-04, Asia/Shanghai


def fill_week(factory, n: int) -> None:
    """n entries in WEEK, made from the fixture's 77 with unique keys."""
    parsed = parsing.parse(FIXTURE.read_bytes(), str(FIXTURE)).entries
    start = datetime(2026, 9, 28, 1, tzinfo=UTC)
    with db.transaction(factory) as session:
        feed = feed_queries.get_or_create_feed(session, "bench://feed")
        for i in range(n):
            item = parsed[i % len(parsed)]
            session.add(Entry(
                feed_id=feed.id, key=f"{item.key}#{i}", link=item.link,
                title=item.title if i < len(parsed) else f"{item.title} ({i})",
                summary_html=item.summary_html, summary_text=item.summary_text,
                papers=list(item.papers), published_at=start + timedelta(minutes=i * 7 % 9000),
                dated=True, content_hash=item.content_hash,
            ))


def time_week(n: int, tmp: str) -> tuple[float, int]:
    engine = db.make_engine(f"sqlite:///{tmp}/digest{n}.sqlite3")
    db.upgrade(engine)
    factory = db.session_factory(engine)
    fill_week(factory, n)
    settings = load_settings({"DIGESTBOT_DATABASE_URL": str(engine.url)})
    week = parse_week(WEEK, settings.timezone)
    size = 0

    def once() -> None:
        nonlocal size
        with factory() as session:
            data = build_digest(session, week, settings)
        assert data.entry_count == n
        size = len(render_digest(data, settings).html.encode())

    once()  # warm: themes file, templates, jieba dictionary
    seconds = median_of(once, runs=5 if n <= 40 else 3)
    engine.dispose()
    return seconds, size


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        t40, size40 = time_week(40, tmp)
        t400, size400 = time_week(400, tmp)
    ratio = t400 / t40
    return [
        Row("digest", "40-entry week: group + render + inline", f"{t40 * 1000:.0f} ms", "< 1000 ms",
            t40 < 1.0),
        Row("digest", "40-entry week: HTML size", f"{size40 / 1024:.1f} KB", "< 102 KB", size40 < 102 * 1024),
        Row("digest", "400-entry week: group + render + inline", f"{t400 * 1000:.0f} ms", "", True),
        Row("digest", "400-entry / 40-entry", f"{ratio:.1f} x", "<= 15", ratio <= 15),
    ]


if __name__ == "__main__":
    run_standalone(run)
