"""Polling against a real HTTP server on 127.0.0.1 and a real migrated SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers import any_db
from sqlalchemy import func, select

from bot import ingest
from bot.ingest import poll as poll_stage
from bot.models import Entry, Feed

RSS_ITEM = """<item><title>{title}</title><link>{link}</link><guid>{link}</guid>{date}
<description>{desc}</description></item>"""


def rss(items: str, encoding: str = "utf-8") -> str:
    return (f'<?xml version="1.0" encoding="{encoding}"?><rss version="2.0"><channel>'
            f"<title>Test feed</title><link>https://example.org/</link>{items}</channel></rss>")


def item(n: int, title: str | None = None, date: str | None = "Mon, 28 Sep 2026 08:00:00 +0000",
         desc: str = "摘要。") -> str:
    return RSS_ITEM.format(
        title=title or f"Paper {n} 精读", link=f"https://example.org/p/{n}",
        date=f"<pubDate>{date}</pubDate>" if date else "", desc=desc,
    )


def poll(settings, db, urls):
    return ingest.poll_feeds(settings, db.factory, urls)


def count_entries(db) -> int:
    with db.factory() as s:
        return s.scalar(select(func.count()).select_from(Entry))


def feed_row(db, url) -> Feed:
    with db.factory() as s:
        return s.scalar(select(Feed).where(Feed.url == url))


@any_db
def test_first_poll_stores_77_then_nothing_new(feed_server, feed_bytes, make_settings, fresh_db):
    url = feed_server.serve("/rl.xml", feed_bytes, headers={"Content-Type": "application/rss+xml"})
    settings = make_settings(feed_urls=url)

    [first] = poll(settings, fresh_db, None)
    assert (first.status, first.new, first.updated) == ("ok", 77, 0)
    assert first.warning is None
    assert count_entries(fresh_db) == 77

    [second] = poll(settings, fresh_db, None)
    assert second.new == 0
    assert count_entries(fresh_db) == 77
    health = feed_row(fresh_db, url)
    assert health.title == "强化学习 on MessageDaily"
    assert health.consecutive_failures == 0 and health.last_success_at is not None


@any_db
def test_entries_are_stored_with_papers_and_utc_dates(feed_server, feed_bytes, make_settings, fresh_db):
    url = feed_server.serve("/rl.xml", feed_bytes)
    poll(make_settings(feed_urls=url), fresh_db, None)
    with fresh_db.factory() as s:
        entry = s.scalar(select(Entry).where(Entry.title.like("信用分配四重奏%")))
    assert entry.papers == ["FAULT", "SHARPO", "T2SPO", "DARS"]
    assert entry.published_at == datetime(2026, 10, 3, tzinfo=UTC)
    assert entry.key == "https://messagedaily.example/posts/ec84be11ab4d/"
    assert entry.summary_text.startswith("2026 年 10 月初")


def test_304_costs_no_parsing_and_no_writes(feed_server, feed_bytes, make_settings, fresh_db,
                                            monkeypatch):
    url = feed_server.serve("/rl.xml", feed_bytes, headers={"ETag": '"v1"',
                                                            "Last-Modified": "Sat, 03 Oct 2026 00:00:00 GMT"})
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)

    def no_parse(*args, **kwargs):
        raise AssertionError("a 304 must not be parsed")

    monkeypatch.setattr(poll_stage, "parse", no_parse)
    [result] = poll(settings, fresh_db, None)
    assert result.status == "not-modified"
    path, headers = feed_server.requests[-1]
    assert headers["If-None-Match"] == '"v1"'
    assert headers["If-Modified-Since"] == "Sat, 03 Oct 2026 00:00:00 GMT"
    assert headers["User-Agent"].startswith("digestbot/")
    with fresh_db.factory() as s:
        assert s.scalar(select(func.count()).where(Entry.updated_at.is_not(None))) == 0


def test_unchanged_body_without_validators_is_not_parsed(feed_server, feed_bytes, make_settings,
                                                         fresh_db, monkeypatch):
    url = feed_server.serve("/rl.xml", feed_bytes)
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)
    monkeypatch.setattr(poll_stage, "parse", lambda *a, **k: pytest.fail("same bytes were parsed"))
    [result] = poll(settings, fresh_db, None)
    assert result.status == "not-modified"


@any_db
def test_updated_entry_is_updated_not_duplicated(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/f.xml", rss(item(1) + item(2)).encode())
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)
    feed_server.serve("/f.xml", rss(item(1, title="Paper 1 精读（修订）") + item(2)).encode())

    [result] = poll(settings, fresh_db, None)
    assert (result.new, result.updated, result.unchanged) == (0, 1, 1)
    with fresh_db.factory() as s:
        titles = sorted(s.scalars(select(Entry.title)))
        changed = s.scalar(select(Entry).where(Entry.key == "https://example.org/p/1"))
    assert titles == ["Paper 1 精读（修订）", "Paper 2 精读"]
    assert changed.updated_at is not None


def test_feed_that_later_adds_entries(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/f.xml", rss(item(1)).encode())
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)
    feed_server.serve("/f.xml", rss(item(3) + item(2) + item(1)).encode())
    [result] = poll(settings, fresh_db, None)
    assert (result.new, result.unchanged) == (2, 1)
    assert count_entries(fresh_db) == 3


def test_item_without_date_gets_first_seen_time(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/f.xml", rss(item(1, date=None)).encode())
    before = datetime.now(UTC)
    poll(make_settings(feed_urls=url), fresh_db, None)
    with fresh_db.factory() as s:
        entry = s.scalar(select(Entry))
    assert entry.dated is False
    assert entry.published_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= entry.published_at <= datetime.now(UTC)
    assert entry.published_at == entry.first_seen_at


@any_db
def test_item_without_guid_or_link_is_keyed_by_content(feed_server, make_settings, fresh_db):
    body = rss("<item><title>No link</title><description>x</description></item>")
    url = feed_server.serve("/f.xml", body.encode())
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)
    feed_server.serve("/f.xml", (body + " ").encode())  # new bytes, same item
    [result] = poll(settings, fresh_db, None)
    assert (result.new, result.unchanged) == (0, 1)
    with fresh_db.factory() as s:
        assert s.scalar(select(Entry.key)).startswith("sha256:")


@pytest.mark.parametrize(
    ("status", "expected"), [(404, "HTTP 404"), (500, "HTTP 500"), (410, "HTTP 410")]
)
def test_http_errors_are_recorded_per_feed(feed_server, make_settings, fresh_db, status, expected):
    url = feed_server.serve("/bad.xml", b"nope", status=status)
    settings = make_settings(feed_urls=url)
    [result] = poll(settings, fresh_db, None)
    assert result.status == "error" and expected in result.error
    poll(settings, fresh_db, None)
    health = feed_row(fresh_db, url)
    assert health.consecutive_failures == 2
    assert expected in health.last_error and health.last_success_at is None


def test_timeout(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/slow.xml", rss(item(1)).encode(), delay=1.5)
    [result] = poll(make_settings(feed_urls=url, http_timeout=0.3), fresh_db, None)
    assert result.status == "error" and "no answer within 0.3 s" in result.error


def test_oversize_feed_is_refused(feed_server, feed_bytes, make_settings, fresh_db):
    url = feed_server.serve("/big.xml", feed_bytes)
    [result] = poll(make_settings(feed_urls=url, max_feed_bytes=10_000), fresh_db, None)
    assert result.status == "error" and "larger than 10,000 bytes" in result.error
    assert count_entries(fresh_db) == 0


def test_redirect_loop_and_good_redirect(feed_server, make_settings, fresh_db):
    loop = feed_server.serve("/a", b"", status=302, headers={"Location": "/b"})
    feed_server.serve("/b", b"", status=302, headers={"Location": "/a"})
    feed_server.serve("/moved", b"", status=301, headers={"Location": "/real.xml"})
    moved = feed_server.url("/moved")
    feed_server.serve("/real.xml", rss(item(1)).encode())
    results = poll(make_settings(feed_urls=f"{loop},{moved}"), fresh_db, None)
    assert results[0].status == "error" and "more than 5 redirects" in results[0].error
    assert results[1].status == "ok" and results[1].new == 1


def test_malformed_but_readable_feed_is_stored_with_warning(feed_server, make_settings, fresh_db):
    broken = rss(item(1) + item(2)).replace("</channel></rss>", "<unclosed></channel></rss>")
    url = feed_server.serve("/broken.xml", broken.encode())
    [result] = poll(make_settings(feed_urls=url), fresh_db, None)
    assert result.status == "ok" and result.new == 2
    assert result.warning and "not well-formed" in result.warning


def test_unreadable_feed_is_an_error(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/junk", b"\x00\x01 this is not a feed <<<", headers={"Content-Type": "text/plain"})
    [result] = poll(make_settings(feed_urls=url), fresh_db, None)
    assert result.status == "error" and "not a feed" in result.error


def test_non_utf8_feed(feed_server, make_settings, fresh_db):
    body = rss(item(1, title="信用分配：过程奖励精读", desc="中文摘要。"), encoding="GB18030")
    url = feed_server.serve("/gb.xml", body.encode("gb18030"))
    [result] = poll(make_settings(feed_urls=url), fresh_db, None)
    assert result.new == 1
    with fresh_db.factory() as s:
        entry = s.scalar(select(Entry))
    assert entry.title == "信用分配：过程奖励精读" and entry.summary_text == "中文摘要。"


def test_one_broken_feed_does_not_stop_the_other(feed_server, feed_bytes, make_settings, fresh_db):
    bad = feed_server.serve("/bad.xml", b"", status=500)
    good = feed_server.serve("/rl.xml", feed_bytes)
    results = poll(make_settings(feed_urls=f"{bad},{good}"), fresh_db, None)
    assert [r.status for r in results] == ["error", "ok"]
    assert results[1].new == 77
    assert feed_row(fresh_db, bad).consecutive_failures == 1


@any_db
def test_failure_keeps_entries_and_recovery_resets_health(feed_server, make_settings, fresh_db):
    url = feed_server.serve("/f.xml", rss(item(1)).encode())
    settings = make_settings(feed_urls=url)
    poll(settings, fresh_db, None)
    feed_server.serve("/f.xml", b"", status=503)
    poll(settings, fresh_db, None)
    assert count_entries(fresh_db) == 1
    assert feed_row(fresh_db, url).consecutive_failures == 1
    feed_server.serve("/f.xml", rss(item(1) + item(2)).encode())
    poll(settings, fresh_db, None)
    health = feed_row(fresh_db, url)
    assert health.consecutive_failures == 0 and count_entries(fresh_db) == 2


def test_feed_html_is_sanitised_and_plain_text_escaped(feed_server, make_settings, fresh_db):
    evil = ('<![CDATA[<p onclick="x()">Hi <script>alert(1)</script><img src="http://t/p.gif">'
            '<a href="javascript:alert(1)">bad</a> <a href="https://ok.org/">good</a></p>]]>')
    atom = ('<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            '<title>A</title><id>urn:a</id><updated>2026-09-28T00:00:00Z</updated>'
            '<entry><title type="text">a &lt;b&gt; tag</title><id>urn:1</id>'
            '<updated>2026-09-28T00:00:00Z</updated><summary type="text">1 &lt; 2 &amp; x</summary></entry>'
            '</feed>')
    url1 = feed_server.serve("/evil.xml", rss(item(1, desc=evil)).encode())
    url2 = feed_server.serve("/atom.xml", atom.encode())
    poll(make_settings(feed_urls=f"{url1},{url2}"), fresh_db, None)
    with fresh_db.factory() as s:
        rss_entry = s.scalar(select(Entry).where(Entry.key == "https://example.org/p/1"))
        atom_entry = s.scalar(select(Entry).where(Entry.key == "urn:1"))
    html = rss_entry.summary_html
    for bad in ("script", "onclick", "<img", "javascript:"):
        assert bad not in html
    assert '<a href="https://ok.org/" rel="noopener noreferrer nofollow">good</a>' in html
    assert atom_entry.title == "a <b> tag"
    assert atom_entry.summary_html == "1 &lt; 2 &amp; x"
    assert atom_entry.summary_text == "1 < 2 & x"


def test_local_file_feed_and_missing_file(tmp_path, make_settings, fresh_db):
    path = tmp_path / "feed.xml"
    path.write_text(rss(item(1)), encoding="utf-8")
    missing = tmp_path / "nope.xml"
    results = poll(make_settings(feed_urls=f"{path},{missing}"), fresh_db, None)
    assert results[0].new == 1
    assert results[1].status == "error" and "cannot read the file" in results[1].error
    # feeds live in the database now: naming one polls just that one
    [again] = poll(make_settings(feed_urls=str(path)), fresh_db, [str(path)])
    assert again.status == "not-modified"
