"""Which entries a week's digest holds: weeks, time zones, late arrivals,
frozen digests, empty weeks and determinism. Real SQLite, real grouping.

The helpers at the top are shared with test_render.py and test_preview.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from helpers import any_db
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot import db, ingest
from bot.config import Settings
from bot.digest import (
    DigestConflictError,
    DigestData,
    Week,
    WeekError,
    build_digest,
    freeze_digest,
    latest_complete_week,
    parse_week,
    safe_link,
    trim_summary,
    week_of,
)
from bot.ingest import parse as parsing
from bot.ingest import queries as feed_queries
from bot.models import Digest, DigestEntry, Entry, Feed
from bot.render import digest_json, render_digest

FIXTURE = Path(__file__).parent / "fixtures" / "messagedaily-rl.xml"
W40 = Week(2026, 40)
AFTER_FIXTURE = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the fixture's weeks have all ended


# --- helpers (also used by the other digest test files) ------------------------------


def parsed_fixture() -> tuple[parsing.ParsedEntry, ...]:
    return parsing.parse(FIXTURE.read_bytes(), str(FIXTURE)).entries


def poll_fixture(settings: Settings, factory: sessionmaker[Session]) -> None:
    [result] = ingest.poll_feeds(settings, factory)
    assert result.status == "ok" and result.new == 77, result.summary()


def make_feed(session: Session, url: str = "https://feed.example/rss.xml") -> Feed:
    return feed_queries.get_or_create_feed(session, url)


def add_entry(
    session: Session, feed: Feed, published: datetime, *, key: str | None = None,
    title: str | None = None, summary: str = "一句摘要。", papers: Sequence[str] = (),
    link: str | None = "auto",
) -> Entry:
    """Insert one entry directly, for edge cases the fixture does not have."""
    key = key or f"https://feed.example/posts/{published.isoformat()}-{title}"
    entry = Entry(
        feed_id=feed.id, key=key, title=title or f"Entry {published.isoformat()}",
        link=key if link == "auto" else link, summary_html=summary, summary_text=summary,
        papers=list(papers), published_at=published, dated=True, content_hash=key[-64:],
        first_seen_at=datetime.now(UTC),
    )
    session.add(entry)
    session.flush()
    return entry


def entries_into_week(
    session: Session, parsed: Sequence[parsing.ParsedEntry], week: Week, feed: Feed | None = None
) -> None:
    """Store ``parsed`` entries re-dated across ``week`` (for big synthetic weeks)."""
    feed = feed or make_feed(session)
    for i, item in enumerate(parsed):
        moved = replace(item, published=week.start + timedelta(hours=3 + (i * 157) % 160))
        feed_queries.save_entries(session, feed, [moved], datetime.now(UTC))


def freeze(session: Session, week: Week, settings: Settings) -> DigestData:
    data = build_digest(session, week, settings)
    freeze_digest(session, data, render_digest(data, settings))
    session.commit()
    return data


def titles(data: DigestData) -> list[str]:
    return [entry.title for entry in data.entries]


# --- weeks --------------------------------------------------------------------------


def test_week_label_and_bounds_in_shanghai():
    week = Week(2026, 40)
    assert week.label == str(week) == "2026-W40"
    assert (week.first_day, week.last_day) == (date(2026, 9, 28), date(2026, 10, 4))
    assert week.start.isoformat() == "2026-09-28T00:00:00+08:00"
    assert week.end.isoformat() == "2026-10-05T00:00:00+08:00"  # exclusive
    assert week.start.astimezone(UTC) == datetime(2026, 9, 27, 16, 0, tzinfo=UTC)
    assert week.previous().label == "2026-W39" and week.next().label == "2026-W41"
    assert Week(2026, 40, "UTC") == week  # the label is the identity


@pytest.mark.parametrize(("utc", "label"), [
    (datetime(2026, 10, 4, 15, 30, tzinfo=UTC), "2026-W40"),  # Sunday 23:30 in Shanghai
    (datetime(2026, 10, 4, 16, 10, tzinfo=UTC), "2026-W41"),  # Monday 00:10 in Shanghai
    (datetime(2026, 9, 27, 16, 0, tzinfo=UTC), "2026-W40"),   # Monday 00:00 exactly
    (datetime(2026, 9, 27, 15, 59, 59, tzinfo=UTC), "2026-W39"),
])
def test_week_of_uses_the_configured_timezone(utc, label):
    assert week_of(utc, "Asia/Shanghai").label == label
    assert Week(2026, 40).contains(utc) == (label == "2026-W40")


def test_week_of_differs_by_timezone():
    moment = datetime(2026, 10, 4, 16, 10, tzinfo=UTC)
    assert week_of(moment, "UTC").label == "2026-W40"
    assert week_of(moment, "Asia/Shanghai").label == "2026-W41"
    with pytest.raises(ValueError):
        week_of(datetime(2026, 10, 4), "UTC")


def test_iso_week_53_and_year_boundaries():
    # 2026 has 53 ISO weeks (it starts on a Thursday); 2025 has 52
    assert parse_week("2026-W53").first_day == date(2026, 12, 28)
    assert Week(2026, 53).next() == Week(2027, 1)
    assert Week(2027, 1).previous() == Week(2026, 53)
    assert Week(2025, 52).next() == Week(2026, 1)
    # 1 January 2027 00:30 in Shanghai is still in 2026-W53
    assert week_of(datetime(2026, 12, 31, 16, 30, tzinfo=UTC)).label == "2026-W53"
    # 29 December 2025 (Monday) starts 2026-W01
    assert week_of(datetime(2025, 12, 28, 16, 0, tzinfo=UTC)).label == "2026-W01"
    assert week_of(datetime(2025, 12, 28, 15, 59, tzinfo=UTC)).label == "2025-W52"
    with pytest.raises(WeekError, match="2025 has no ISO week 53"):
        Week(2025, 53)


@pytest.mark.parametrize("text", ["2026-W40", "2026W40", "2026-w40", " 2026-W40 "])
def test_parse_week_accepts(text):
    assert parse_week(text) == W40


@pytest.mark.parametrize(("text", "message"), [
    ("2026-40", "is not an ISO week"),
    ("W40", "is not an ISO week"),
    ("", "is not an ISO week"),
    ("2026-W4x", "is not an ISO week"),
    ("2026-W00", "2026 has no ISO week 0"),
    ("2026-W54", "2026 has no ISO week 54: it has weeks 1 to 53"),
    ("2025-W53", "2025 has no ISO week 53: it has weeks 1 to 52"),
])
def test_parse_week_errors_say_what_is_wrong(text, message):
    with pytest.raises(WeekError, match=message) as info:
        parse_week(text)
    assert info.value.hint and "2026-W40" in info.value.hint


# --- which entries belong to a week -----------------------------------------------------


@any_db
def test_entries_go_to_the_week_of_their_local_publication_time(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        feed = make_feed(session)
        add_entry(session, feed, datetime(2026, 10, 4, 15, 30, tzinfo=UTC), title="周日深夜")
        add_entry(session, feed, datetime(2026, 10, 4, 16, 10, tzinfo=UTC), title="周一凌晨")
        session.commit()
        assert titles(build_digest(session, W40, settings)) == ["周日深夜"]
        assert titles(build_digest(session, W40.next(), settings)) == ["周一凌晨"]
        # the same moments seen from UTC both fall on Sunday
        utc = make_settings(timezone="UTC")
        assert sorted(titles(build_digest(session, W40, utc))) == ["周一凌晨", "周日深夜"]


@any_db
def test_fixture_week_40(fresh_db, make_settings):
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
    assert data.entry_count == 13 == len(data.entries) == len(set(data.entry_ids))
    assert data.paper_count == len({p for e in data.entries for p in e.papers}) > 13
    assert all(W40.contains(e.published) and not e.late for e in data.entries)
    # every W40 entry fits a named theme, lone ones included (issue 12): no catch-all
    assert not any(t.catch_all for t in data.themes)
    assert all(len(e.summary) <= settings.summary_length for e in data.entries)


@any_db
def test_latest_complete_week(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        assert latest_complete_week(session, settings, AFTER_FIXTURE) is None
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        assert latest_complete_week(session, settings, AFTER_FIXTURE) == W40
        # during W40 its own entries do not count yet: W39 is the latest complete one
        during = datetime(2026, 10, 1, 4, 0, tzinfo=UTC)
        assert latest_complete_week(session, settings, during) == Week(2026, 39)
        # Monday 00:10 in Shanghai: W40 has just ended
        assert latest_complete_week(session, settings,
                                    datetime(2026, 10, 4, 16, 10, tzinfo=UTC)) == W40


def test_empty_week_has_no_entries(fresh_db, make_settings):
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, Week(2026, 44), settings)
    assert data.is_empty and data.themes == () and data.entry_count == data.paper_count == 0
    assert digest_json(data)["themes"] == []


# --- frozen digests and late arrivals ------------------------------------------------------


@any_db
def test_late_arrival_goes_into_the_next_unsent_digest(fresh_db, make_settings):
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        frozen = freeze(session, W40, settings)
        assert frozen.entry_count == 13
        # first seen after W40's send started, but published in W40
        feed = make_feed(session)
        late = add_entry(session, feed, datetime(2026, 10, 3, 9, 0, tzinfo=UTC), title="迟到的精读",
                         papers=["LATE"])
        w41 = add_entry(session, feed, datetime(2026, 10, 6, 9, 0, tzinfo=UTC), title="W41 精读")
        session.commit()

        again = build_digest(session, W40, settings)
        assert again.entry_ids == frozen.entry_ids  # a resend shows the frozen digest
        assert late.id not in again.entry_ids

        data41 = build_digest(session, W40.next(), settings)
        views = {e.entry_id: e for e in data41.entries}
        assert set(views) == {late.id, w41.id}
        assert views[late.id].late and not views[w41.id].late
        assert data41.late_count == 1

        freeze_digest(session, data41, render_digest(data41, settings))
        session.commit()
        rows = session.execute(select(DigestEntry.entry_id, DigestEntry.late)).all()
        # every entry is in exactly one frozen digest; none is skipped
        all_ids = set(session.scalars(select(Entry.id)).all())
        in_weeks = {e.id for e in session.scalars(select(Entry)).all()
                    if week_of(e.published_at).label in ("2026-W40", "2026-W41")}
        assert len(rows) == len({r.entry_id for r in rows}) == len(in_weeks)
        assert {r.entry_id for r in rows} == in_weeks <= all_ids
        assert {r.entry_id for r in rows if r.late} == {late.id}
        # and later weeks do not see it again
        assert late.id not in build_digest(session, Week(2026, 42), settings).entry_ids


def test_entry_of_an_unsent_earlier_week_stays_in_its_own_week(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        feed = make_feed(session)
        old = add_entry(session, feed, datetime(2026, 9, 15, 9, 0, tzinfo=UTC), title="W38 精读")
        add_entry(session, feed, datetime(2026, 9, 30, 9, 0, tzinfo=UTC), title="W40 精读")
        session.commit()
        assert old.id not in build_digest(session, W40, settings).entry_ids
        assert build_digest(session, Week(2026, 38), settings).entry_ids == (old.id,)


@any_db
def test_freezing_twice_returns_the_first_digest(fresh_db, make_settings):
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
        first = freeze_digest(session, data, render_digest(data, settings))
        session.commit()
        assert first.status == "sending" and first.week == "2026-W40"
        assert (first.entry_count, first.paper_count) == (data.entry_count, data.paper_count)
        other = replace(render_digest(data, settings), subject="changed")
        second = freeze_digest(session, data, other)
        assert second.id == first.id and second.subject != "changed"
        assert session.scalar(select(Digest).where(Digest.week == "2026-W40")) is first


@any_db
def test_an_entry_cannot_be_frozen_into_two_digests(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        feed = make_feed(session)
        add_entry(session, feed, datetime(2026, 9, 22, 9, 0, tzinfo=UTC), title="W39")
        freeze(session, Week(2026, 39), settings)
        late = add_entry(session, feed, datetime(2026, 9, 23, 9, 0, tzinfo=UTC), title="late W39")
        session.commit()
        # the late entry is offered to every unsent week until one of them is frozen
        data40 = build_digest(session, W40, settings)
        data41 = build_digest(session, W40.next(), settings)
        assert late.id in data40.entry_ids and late.id in data41.entry_ids
        freeze_digest(session, data40, render_digest(data40, settings))
        session.commit()
        with pytest.raises(DigestConflictError, match="already belong to another digest"):
            freeze_digest(session, data41, render_digest(data41, settings))
        assert late.id not in build_digest(session, W40.next(), settings).entry_ids


# --- determinism -----------------------------------------------------------------------


def _json_after_inserting(path: Path, order: Sequence[parsing.ParsedEntry], settings: Settings,
                          week: Week) -> str:
    engine = db.make_engine(f"sqlite:///{path}")
    try:
        db.upgrade(engine)
        factory = db.session_factory(engine)
        with db.transaction(factory) as session:
            feed = make_feed(session, str(FIXTURE))
            for item in order:  # one by one, so row ids follow this order
                feed_queries.save_entries(session, feed, [item], datetime.now(UTC))
        with factory() as session:
            shown = digest_json(build_digest(session, week, settings))
        for theme in shown["themes"]:  # row ids follow the insertion order; nothing else may
            for entry in theme["entries"]:
                entry.pop("id")
        return json.dumps(shown, ensure_ascii=False, sort_keys=True)
    finally:
        engine.dispose()


@pytest.mark.parametrize("week", [Week(2026, 36), W40])
def test_same_entries_in_any_order_give_the_same_digest(tmp_path, make_settings, week):
    settings = make_settings()
    parsed = list(parsed_fixture())
    outputs = set()
    for seed in range(3):
        order = parsed[:]
        random.Random(seed).shuffle(order)
        outputs.add(_json_after_inserting(tmp_path / f"{seed}.sqlite3", order, settings, week))
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["entry_count"] > 10


# --- text helpers --------------------------------------------------------------------------


def test_trim_summary_prefers_a_sentence_end():
    text = "第一句话说明问题。" * 3 + "第二句很长" * 30
    trimmed = trim_summary(text, 60)
    assert trimmed == "第一句话说明问题。" * 3 and len(trimmed) <= 60


def test_trim_summary_ignores_decimal_points_and_keeps_the_limit():
    text = "ALFWorld 91.0% vs 86.9% on the benchmark and more words follow here " * 5
    trimmed = trim_summary(text, 50)
    assert len(trimmed) <= 50 and trimmed.endswith("…")
    assert "91.…" not in trimmed and not trimmed[:-1].endswith(("9", "w"))  # whole words only
    assert trim_summary("short.", 50) == "short."
    assert trim_summary("a\r\nb", 50) == "a b"


def test_trim_summary_without_any_boundary_cuts_hard():
    trimmed = trim_summary("字" * 500, 180)
    assert trimmed == "字" * 179 + "…" and len(trimmed) == 180


def test_summary_length_setting_is_used(fresh_db, make_settings):
    settings = make_settings(summary_length=60)
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
    assert max(len(e.summary) for e in data.entries) <= 60


@pytest.mark.parametrize(("link", "safe"), [
    ("https://example.org/a?b=1", True),
    ("http://example.org/", True),
    ("javascript:alert(1)", False),
    ("/relative/path", False),
    ("https://example.org/a b", False),
    (None, False),
    ("data:text/html,<script>", False),
])
def test_only_absolute_http_links_are_kept(link, safe):
    assert safe_link(link) == (link if safe else None)


@any_db
def test_two_feeds_may_use_the_same_entry_key(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        one, two = make_feed(session, "https://a.example/rss"), make_feed(session, "https://b.example/rss")
        moment = datetime(2026, 9, 30, 4, 0, tzinfo=UTC)
        first = add_entry(session, one, moment, key="shared-guid", title="来自 A")
        second = add_entry(session, two, moment, key="shared-guid", title="来自 B")
        session.commit()
        data = build_digest(session, W40, settings)
    assert data.entry_ids == tuple(sorted((first.id, second.id)))


def test_a_week_with_a_dst_change_is_still_monday_to_monday():
    week = Week(2026, 13, "Europe/Berlin")  # clocks go forward on Sunday 29 March 2026
    assert week.start.isoformat() == "2026-03-23T00:00:00+01:00"
    assert week.end.isoformat() == "2026-03-30T00:00:00+02:00"
    assert week.end - week.start == timedelta(days=7)  # wall clock; 167 real hours
    assert week.end.astimezone(UTC) - week.start.astimezone(UTC) == timedelta(hours=167)
