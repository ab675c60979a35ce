"""/archive.xml over a real socket (uvicorn), read back by a feed reader
(feedparser): the sent digests with their full HTML, links to /archive/WEEK,
announced by <link rel="alternate"> on the archive and subscribe pages."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import feedparser
import httpx
import pytest
from conftest import FROM_ADDR, FreshDB
from helpers import free_port
from smtp import add_subscribers, make_digest
from test_digest import poll_fixture
from test_web import LiveServer

from bot.config import Settings
from bot.mailer import UNSUBSCRIBE_PLACEHOLDER
from bot.models import Digest
from bot.send import send_digest
from bot.titles import titled
from bot.web import create_app

ATOM_LINK = re.compile(r'<link rel="alternate" type="application/atom\+xml" title="([^"]+)" href="([^"]+)">')


@pytest.fixture
def served(fresh_db: FreshDB, make_settings: Callable[..., Settings]) -> Iterator[tuple[Settings, httpx.Client]]:
    port = free_port()
    settings = make_settings(base_url=f"http://127.0.0.1:{port}", from_addr=FROM_ADDR)
    with LiveServer(create_app(settings, fresh_db.factory), port) as client:
        yield settings, client


def read_feed(client: httpx.Client) -> feedparser.FeedParserDict:
    answer = client.get("/archive.xml")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/atom+xml")
    parsed = feedparser.parse(answer.content)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return parsed


def test_feed_lists_sent_digests_with_their_html(fresh_db: FreshDB,
                                                 served: tuple[Settings, httpx.Client]) -> None:
    settings, client = served
    base = settings.base_url
    empty = read_feed(client)
    # no DIGESTBOT_TITLE and no feed yet when the app started: the neutral name (bot.titles)
    assert empty.feed.title == titled(settings, fresh_db.factory).title == "每周文摘"
    assert empty.entries == []

    poll_fixture(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.com"])
    report = send_digest(settings, fresh_db.factory, "2026-W40")
    assert report.outcome == "sent"
    make_digest(fresh_db.factory, "2026-W39", subject='周报 <b>&"', status="sent")
    make_digest(fresh_db.factory, "2026-W41", subject="still sending")  # not in the feed

    parsed = read_feed(client)
    assert parsed.feed.link == f"{base}/archive"
    assert any(link.rel == "self" and link.href == f"{base}/archive.xml" for link in parsed.feed.links)
    assert [e.link for e in parsed.entries] == [f"{base}/archive/2026-W40", f"{base}/archive/2026-W39"]
    newest, older = parsed.entries
    assert newest.title == report.subject and older.title == '周报 <b>&"'
    assert newest.id == f"{base}/archive/2026-W40" and newest.published_parsed is not None
    html = newest.content[0].value
    # the full digest: every section and entry, the personal link pointing at the subscribe page
    archived = client.get("/archive/2026-W40").text
    titles = re.findall(r'<a href="https://messagedaily\.example/posts/[^"]+"[^>]*>([^<]+)</a>', archived)
    assert len(titles) >= 10 and all(t in html for t in titles)
    assert UNSUBSCRIBE_PLACEHOLDER not in html and f'href="{base}/"' in html
    # without the hidden inbox preview line, which a feed reader would show as text
    preheader = re.search(r'<div style="display:\s*none[^"]*">([^<]{10,})', archived)
    assert preheader and preheader.group(1)[:20] not in html


@pytest.mark.parametrize("page", ["/", "/archive"])
def test_pages_announce_the_feed(served: tuple[Settings, httpx.Client], page: str,
                                 fresh_db: FreshDB) -> None:
    settings, client = served
    title = titled(settings, fresh_db.factory).title
    text = client.get(page).text
    head = text.split("</head>", 1)[0]
    link = ATOM_LINK.search(head)
    assert link, head
    assert link.group(1) == title
    found = feedparser.parse(client.get(link.group(2)).content)  # what a reader's discovery does
    assert not found.bozo and found.feed.title == title


def test_the_archive_shows_dates_in_the_configured_zone(fresh_db: FreshDB,
                                                         served: tuple[Settings, httpx.Client]) -> None:
    """Seen (issue 35, item 9): the archive showed UTC dates while `status`
    and the console use DIGESTBOT_TIMEZONE (Asia/Shanghai here)."""
    settings, client = served
    assert settings.timezone == "Asia/Shanghai"
    digest_id = make_digest(fresh_db.factory, "2026-W40", subject="W40", status="sent")
    with fresh_db.factory() as session, session.begin():
        # Sunday 20:00 UTC is Monday 04:00 in Shanghai
        session.get(Digest, digest_id).sent_at = datetime(2026, 10, 4, 20, 0, tzinfo=UTC)
    page = client.get("/archive").text
    assert "2026-W40 · 2026-10-05" in page
    assert "2026-10-04" not in page
