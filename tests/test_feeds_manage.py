"""Feeds an operator manages (issue 11): feeds in the database, one article one
appearance, a new feed's backlog, and the whole story through real parts:
feeds on a real HTTP server (127.0.0.1), digests through a real SMTP server
(aiosmtpd), the CLI as a user runs it."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FEED_FIXTURE
from helpers import any_db
from smtp import add_subscribers
from sqlalchemy import func, select

from bot import ingest
from bot.cli import cli
from bot.config import example_feed_path
from bot.db import transaction
from bot.digest import week_of
from bot.ingest import feeds as managed
from bot.ingest.urls import article_key, fingerprint, normalise_feed_url
from bot.models import DigestEntry, Entry, EntrySource, Feed
from bot.send import send_digest

REPO = Path(__file__).resolve().parent.parent
SHANGHAI = "Asia/Shanghai"
W40_DAY = datetime(2026, 10, 1, 4, 0, tzinfo=UTC)  # Thursday of 2026-W40 in Shanghai


# --- feeds written for the tests -------------------------------------------------------------

def rss(title: str, items: list[dict[str, str]]) -> bytes:
    body = "".join(
        f"<item><title>{i['title']}</title><link>{i['link']}</link><guid>{i.get('guid', i['link'])}"
        f"</guid><pubDate>{i['date']}</pubDate><description>{i['summary']}</description></item>"
        for i in items)
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{title}'
            f"</title><link>https://example.org/</link>{body}</channel></rss>").encode()


def post(link: str, title: str, when: datetime, summary: str | None = None,
         guid: str | None = None) -> dict[str, str]:
    return {"link": link, "title": title, "date": format_datetime(when),
            "summary": summary or f"Summary of {title}.", "guid": guid or link}


def old_posts(site: str, n: int = 20) -> list[dict[str, str]]:
    """``n`` posts from weeks 36 to 40 of 2026: all before any feed is added in these tests."""
    return [post(f"https://{site}/old/{i}", f"{site} old post {i}", W40_DAY - timedelta(days=2 * i))
            for i in range(n)]


def soon() -> datetime:
    """A publication time certainly later than a feed added just before (RSS dates have whole seconds)."""
    return (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)


def entry_count(factory) -> int:
    with factory() as session:
        return session.scalar(select(func.count()).select_from(Entry))


def digest_links(message) -> list[str]:
    """The article links of a digest email's text part, in order."""
    text = message.get_body(preferencelist=("plain",)).get_content()
    return re.findall(r"阅读全文：(\S+)", text)


# --- identities ---------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "stored"), [
    ("HTTPS://Example.ORG:443/feed/#top", "https://example.org/feed"),
    ("http://example.org:80", "http://example.org/"),
    ("http://example.org:8080/a/?x=1", "http://example.org:8080/a?x=1"),
    ("https://example.org/feed.xml", "https://example.org/feed.xml"),
])
def test_a_feed_url_has_one_spelling(given, stored):
    assert normalise_feed_url(given) == stored


def test_a_local_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.xml").write_text("x")
    assert normalise_feed_url("f.xml") == str(tmp_path / "f.xml")
    assert normalise_feed_url((tmp_path / "f.xml").as_uri()) == str(tmp_path / "f.xml")
    assert normalise_feed_url("./sub/../f.xml") == str(tmp_path / "f.xml")


def test_article_keys_and_fingerprints():
    key = article_key("https://blog.example/p/1")
    for same in ("http://WWW.blog.example/p/1/#comments", "https://blog.example/p/1?utm_source=rss"):
        assert article_key(same) == key
    assert article_key("https://blog.example/p/2") != key
    assert article_key("https://blog.example/p/1?id=3") != key  # a real query parameter counts
    assert article_key("https://blog.example/") is None  # a home page is no article
    assert article_key("mailto:x@example.org") is None
    assert fingerprint("A  Title", "Same text.") == fingerprint("a title", "same  text.")
    assert fingerprint("A title", "") is None


# --- the CLI ------------------------------------------------------------------------------

def invoke(env, *args):
    result = CliRunner().invoke(cli, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    return result


def cli_env(fresh_db, tmp_path, **extra) -> dict[str, str]:
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": str(FEED_FIXTURE),
           "DIGESTBOT_OUTBOX_DIR": str(tmp_path / "outbox")}
    return env | {f"DIGESTBOT_{k.upper()}": v for k, v in extra.items()}


def test_add_list_pause_resume_remove(fresh_db, tmp_path, feed_server):
    env = cli_env(fresh_db, tmp_path)
    url = feed_server.serve("/f.xml", rss("Blog", [post("https://blog.example/p/1", "One", W40_DAY)]))
    added = invoke(env, "feeds", "add", url.upper().replace("/F.XML", "/f.xml") + "#x",
                   "--name", "My blog")
    assert added.exit_code == 0, added.output
    assert f"added feed 1: {url}" in added.output and "1 new" in added.output
    assert "nothing is held back" in added.output  # no digest has gone out yet
    again = invoke(env, "feeds", "add", url + "/")
    assert again.exit_code == 0 and "already there" in again.output

    listed = invoke(env, "feeds", "list", "--format", "json")
    [row] = json.loads(listed.output)
    assert (row["id"], row["name"], row["url"], row["status"], row["entries"]) == \
        (1, "My blog", url, "active", 1)
    plain = invoke(env, "feeds", "--format", "json")  # `feeds` alone is `feeds list`
    assert plain.exit_code == 0 and '"My blog"' in plain.output

    assert "paused: feed 1" in invoke(env, "feeds", "pause", "1").output
    requests = len(feed_server.requests)
    polled = invoke(env, "poll")  # the configured fixture feed is added and polled; not ours
    assert "77 new" in polled.output and len(feed_server.requests) == requests
    assert "resumed: feed 1" in invoke(env, "feeds", "resume", url).output

    removed = invoke(env, "feeds", "remove", url)
    assert removed.exit_code == 0 and "removed feed 1" in removed.output and "1 deleted" in removed.output
    assert "My blog" not in invoke(env, "feeds", "list", "--format", "tsv").output
    assert "removed" in invoke(env, "feeds", "list", "--all", "--format", "tsv").output
    missing = invoke(env, "feeds", "pause", url)
    assert missing.exit_code == 1 and "no feed" in missing.output and "feeds list" in missing.output
    bad = invoke(env, "feeds", "add", "ftp://example.org/feed")
    assert bad.exit_code == 1 and "neither an http(s) URL nor a file path" in bad.output


def test_adding_a_web_page_names_the_feed_it_links_to(fresh_db, tmp_path, feed_server):
    """Seen: `feeds add` of a blog's home page said "an HTML page, not a feed" and dropped the hint
    that names the page's own feed; `poll` dropped it too."""
    env = cli_env(fresh_db, tmp_path)
    feed = feed_server.serve("/blog/feed.xml", rss("Blog", [post("https://blog.example/p/1", "One", W40_DAY)]))
    page = feed_server.serve("/blog", b'<!doctype html><html><head><title>Blog</title>'
                             b'<link rel="alternate" type="application/rss+xml" href="/blog/feed.xml"></head></html>',
                             headers={"Content-Type": "text/html"})
    added = invoke(env, "feeds", "add", page)
    assert added.exit_code == 3 and "an HTML page, not a feed" in added.output
    assert f"hint: this URL is a web page, not a feed: use the address of its RSS or Atom feed; " \
           f"the page names one: {feed}" in " ".join(added.output.split())
    polled = invoke(env, "poll", page)
    assert f"the page names one: {feed}" in " ".join(polled.output.split())


def test_configured_feeds_are_added_and_never_removed(make_settings, fresh_db, feed_server):
    one = feed_server.serve("/1.xml", rss("One", [post("https://one.example/p/1", "One", W40_DAY)]))
    two = feed_server.serve("/2.xml", rss("Two", [post("https://two.example/p/1", "Two", W40_DAY)]))
    ingest.poll_feeds(make_settings(feed_urls=f"{one},{two}"), fresh_db.factory)
    with transaction(fresh_db.factory) as session:
        managed.remove_feed(session, two)
    # a narrower DIGESTBOT_FEED_URLS removes nothing; a removed feed is not brought back
    results = ingest.poll_feeds(make_settings(feed_urls=f"{two}"), fresh_db.factory)
    assert [r.url for r in results] == [one]
    with fresh_db.factory() as session:
        assert [f.url for f in managed.queries.active_feeds(session)] == [one]


def test_the_bundled_example_is_only_added_to_an_empty_database(make_settings, fresh_db, feed_server):
    url = feed_server.serve("/f.xml", rss("Mine", [post("https://mine.example/p/1", "Mine", W40_DAY)]))
    with transaction(fresh_db.factory) as session:
        managed.add_feed(session, url, datetime.now(UTC))
    default = make_settings(feed_urls=example_feed_path())
    assert [r.url for r in ingest.poll_feeds(default, fresh_db.factory)] == [url]


def test_the_same_article_through_two_feeds_is_stored_once(make_settings, fresh_db, feed_server):
    day = W40_DAY
    a = feed_server.serve("/a.xml", rss("A", [
        post("https://blog.example/p/1", "Post one", day),
        post("https://blog.example/p/2", "Post two", day),
        post("https://blog.example/p/3", "Post three", day, summary="The third post."),
        post("https://blog.example/p/4", "Only in A", day),
    ]))
    b = feed_server.serve("/b.xml", rss("B", [
        post("http://WWW.blog.example/p/1/#comments", "Post one (B)", day, guid="urn:b-1"),
        post("https://blog.example/p/2?utm_source=rss", "Post two", day, guid="urn:b-2"),
        post("https://mirror.example/third", "Post three", day, summary="The  third post.", guid="urn:b-3"),
        post("https://other.example/b/1", "Only in B", day),
    ]))
    settings = make_settings(feed_urls=f"{a},{b}")
    [first] = ingest.poll_feeds(settings, fresh_db.factory, [a])  # so A's is the entry stored
    [second] = ingest.poll_feeds(settings, fresh_db.factory, [b])
    assert [(r.new, r.merged) for r in (first, second)] == [(4, 0), (1, 3)]
    assert "3 already stored through another feed" in second.summary()
    assert entry_count(fresh_db.factory) == 5
    again = ingest.poll_feeds(make_settings(feed_urls=f"{a},{b}"), fresh_db.factory)
    assert [r.status for r in again] == ["not-modified", "not-modified"]
    with fresh_db.factory() as session:
        sources = session.execute(select(EntrySource.key, Entry.link)
                                  .join(Entry, Entry.id == EntrySource.entry_id)).all()
    assert sorted(sources) == [("urn:b-1", "https://blog.example/p/1"),
                               ("urn:b-2", "https://blog.example/p/2"),
                               ("urn:b-3", "https://blog.example/p/3")]


@any_db
def test_removing_a_feed_keeps_what_was_mailed_and_hands_over_what_is_shared(
        smtp_settings, fresh_db, feed_server, smtp_server):
    a = feed_server.serve("/a.xml", rss("A", [post("https://blog.example/p/1", "Mailed", W40_DAY),
                                              post("https://blog.example/p/2", "Shared", soon()),
                                              post("https://blog.example/p/3", "Only A", soon())]))
    ingest.poll_feeds(smtp_settings, fresh_db.factory, [a])
    add_subscribers(fresh_db.factory, ["r@example.org"])
    send_digest(smtp_settings, fresh_db.factory, "2026-W40")
    b = feed_server.serve("/b.xml", rss("B", [post("https://blog.example/p/2", "Shared", soon())]))
    ingest.poll_feeds(smtp_settings, fresh_db.factory, [b])

    with transaction(fresh_db.factory) as session:
        done = managed.remove_feed(session, a)
    assert (done.kept, done.handed_over, done.deleted) == (1, 1, 1)
    with fresh_db.factory() as session:
        rows = dict(session.execute(select(Entry.link, Feed.url).join(Feed)).all())
        assert session.scalar(select(func.count()).select_from(DigestEntry)) == 1
    assert rows == {"https://blog.example/p/1": a, "https://blog.example/p/2": b}


# --- the whole story over HTTP and SMTP ---------------------------------------------------

@any_db
def test_each_article_once_across_digests_no_backlog_one_alert(
        make_settings, fresh_db, feed_server, smtp_server):
    a_items = [post(f"https://blog.example/a/{i}", f"A post {i}", W40_DAY) for i in range(4)]
    shared = [post("http://www.blog.example/a/0/", "A post 0", W40_DAY, guid="urn:b0"),
              post("https://mirror.example/b/copy", "A post 1", W40_DAY,
                   summary="Summary of A post 1.", guid="urn:b1")]
    b_items = [post("https://other.example/b/1", "B post 1", W40_DAY)]
    a = feed_server.serve("/a.xml", rss("Feed A", a_items))
    b = feed_server.serve("/b.xml", rss("Feed B", shared + b_items))
    d = feed_server.serve("/d.xml", rss("Feed D", [post("https://d.example/p/1", "D post", W40_DAY)]))
    settings = make_settings(feed_urls=f"{a},{b},{d}", admin_email="ops@example.org",
                             **smtp_server.settings_env())
    results = ingest.poll_feeds(settings, fresh_db.factory)  # in parallel: either may store first
    assert sum(r.new for r in results) == 6 and sum(r.merged for r in results) == 2
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    first = send_digest(settings, fresh_db.factory, "2026-W40")
    assert first.outcome == "sent"

    # later: a new feed with 20 old posts, one of them an article already mailed
    c = feed_server.serve("/c.xml", rss("Feed C", old_posts("c.example") + [shared[0]]))
    with transaction(fresh_db.factory) as session:
        managed.add_feed(session, c, datetime.now(UTC))
    # D breaks for five polls, then recovers; A, B and C bring news meanwhile
    feed_server.serve("/d.xml", b"", status=500)
    for _ in range(5):
        ingest.poll_feeds(settings, fresh_db.factory)
    news = post("https://blog.example/a/new", "Fresh post", soon())
    feed_server.serve("/a.xml", rss("Feed A", a_items + [news]))
    feed_server.serve("/b.xml", rss("Feed B", shared + b_items + [dict(news, guid="urn:b-new")]))
    feed_server.serve("/c.xml", rss("Feed C", old_posts("c.example") + [
        shared[0], post("https://c.example/new/1", "C news", soon())]))
    feed_server.serve("/d.xml", rss("Feed D", [post("https://d.example/p/1", "D post", W40_DAY)]))
    ingest.poll_feeds(settings, fresh_db.factory)
    this_week = week_of(soon(), SHANGHAI).label
    second = send_digest(settings, fresh_db.factory, this_week)
    assert second.outcome == "sent"

    mails = smtp_server.wait_for(4)
    digests = [m.message for m in mails if m.message["To"] == "reader@example.org"]
    alerts = [m.message for m in mails if m.message["To"] == "ops@example.org"]
    assert len(digests) == 2
    assert [str(m["Subject"]) for m in alerts] == ["[digestbot] feed failing: Feed D",
                                                   "[digestbot] feed working again: Feed D"]
    assert "failed its last 3 polls" in alerts[0].get_content() and "HTTP 500" in alerts[0].get_content()

    # A and B are polled in parallel: the copy stored may carry either feed's link
    twin = {article_key(shared[1]["link"]): article_key(a_items[1]["link"])}
    links = [[twin.get(key, key) for key in map(article_key, digest_links(m))] for m in digests]
    every = Counter(key for digest in links for key in digest)
    assert every and max(every.values()) == 1, every  # each article once across all digests
    assert set(links[0]) == {article_key(i["link"]) for i in a_items + b_items} | {"d.example/p/1"}
    assert set(links[1]) == {"blog.example/a/new", "c.example/new/1"}  # no backlog, nothing again
    text = digests[1].get_body(preferencelist=("plain",)).get_content()
    html = digests[1].get_body(preferencelist=("html",)).get_content()
    for part in (text, html):  # several feeds: each entry names its source
        assert "来源：Feed A · Feed B" in part and "来源：Feed C" in part
    with fresh_db.factory() as session:
        held = session.scalar(select(func.count()).where(Entry.backlog == "held"))
    assert held == 20  # stored (searchable), never mailed


def test_a_backlog_post_of_a_week_not_sent_yet_stays_in_its_own_week(make_settings, fresh_db,
                                                                    feed_server, smtp_server):
    """"in the archive of their own week if that week had no digest": the
    backlog of a week already mailed is never mailed, that of a week not sent
    yet is part of it, like any post of that week."""
    a = feed_server.serve("/a.xml", rss("Feed A", [post("https://blog.example/a/1", "A", W40_DAY)]))
    settings = make_settings(feed_urls=a, **smtp_server.settings_env())
    ingest.poll_feeds(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    send_digest(settings, fresh_db.factory, "2026-W40")
    earlier = (datetime.now(UTC) - timedelta(minutes=1)).replace(microsecond=0)
    this_week = week_of(earlier, SHANGHAI)
    c = feed_server.serve("/c.xml", rss("Feed C", [
        post("https://c.example/old/w40", "Old, of a week mailed", W40_DAY),
        post("https://c.example/old/now", "Older than the feed, of this week", earlier)]))
    with transaction(fresh_db.factory) as session:
        managed.add_feed(session, c, datetime.now(UTC))
    [result] = ingest.poll_feeds(settings, fresh_db.factory, [c])
    assert result.backlog == 2  # both were published before the feed was added
    send_digest(settings, fresh_db.factory, this_week.label)
    send_digest(settings, fresh_db.factory, this_week.next().label)
    digests = smtp_server.wait_for(2)
    assert len(smtp_server.messages) == 2
    assert digest_links(digests[1].message) == ["https://c.example/old/now"]


@any_db
def test_backfill_puts_the_backlog_into_the_next_digest(make_settings, fresh_db, feed_server,
                                                       smtp_server):
    a = feed_server.serve("/a.xml", rss("Feed A", [post("https://blog.example/a/1", "A", W40_DAY)]))
    settings = make_settings(feed_urls=a, **smtp_server.settings_env())
    ingest.poll_feeds(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    send_digest(settings, fresh_db.factory, "2026-W40")
    c = feed_server.serve("/c.xml", rss("Feed C", old_posts("c.example")))
    with transaction(fresh_db.factory) as session:
        managed.add_feed(session, c, datetime.now(UTC), backfill=True)
    [result] = ingest.poll_feeds(settings, fresh_db.factory, [c])
    assert result.backlog == 20 and "go into the next digest" in result.summary()
    this_week = week_of(datetime.now(UTC), SHANGHAI)
    send_digest(settings, fresh_db.factory, this_week.label)
    send_digest(settings, fresh_db.factory, this_week.next().label)  # nothing left for it
    digests = smtp_server.wait_for(2)
    assert len(smtp_server.messages) == 2
    links = digest_links(digests[1].message)
    assert sorted(links) == sorted(f"https://c.example/old/{i}" for i in range(20))
    assert "补录" in digests[1].message.get_body(preferencelist=("plain",)).get_content()


# --- "Done when": the README's path, through the installed command ------------------------

def test_bundled_feed_twice_then_a_new_feed_with_backlog_through_the_cli(
        digestbot, tmp_path, fresh_db, feed_server, smtp_server):
    copy = tmp_path / "elsewhere" / "messagedaily-rl.xml"
    copy.parent.mkdir()
    shutil.copy(REPO / "bot" / "data" / "messagedaily-rl.xml", copy)  # identical file, another path
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_SECRET_KEY": "k" * 32,
           "DIGESTBOT_FEED_URLS": ",".join([example_feed_path(),
                                            str(REPO / "examples" / "messagedaily-rl.xml"),
                                            str(copy)])} | {
        f"DIGESTBOT_{k.upper()}": str(v) for k, v in smtp_server.settings_env().items()}

    def run(*args: str) -> str:
        result = digestbot.run(*args, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        return result.stdout

    polled = run("poll")
    assert "77 new" in polled and "77 already stored through another feed" in polled
    assert "154 new" not in polled and "0 new, 0 updated, 0 unchanged, 77 already" in polled
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    assert "2026-W40: 1 sent" in run("send")
    backlog = feed_server.serve("/new.xml", rss("New feed", old_posts("new.example")))
    added = run("feeds", "add", backlog)
    assert "20 new" in added
    assert "20 of the new ones are its backlog, from before it was added" in added
    assert ("20 of weeks up to 2026-W40, the last week mailed: stored, never mailed; "
            "0 of later weeks") in added
    run("poll")  # the bundled feeds again, and the new one: nothing new
    this_week = week_of(datetime.now(UTC), SHANGHAI).label
    assert "no entries: nothing to send" in run("send", "--week", this_week)
    [mail] = smtp_server.wait_for(1)
    assert len(smtp_server.messages) == 1
    links = digest_links(mail.message)
    assert len(links) == 13 == len(set(links))
    listed = run("feeds", "list", "--format", "tsv")
    # examples/ is a symlink to bot/data/ in the repository: the same feed once it is resolved
    paths = {normalise_feed_url(p) for p in env["DIGESTBOT_FEED_URLS"].split(",")}
    assert len(listed.strip().splitlines()) == 1 + len(paths) + 1  # header, the files, the new feed


# --- an existing database -----------------------------------------------------------------

@any_db
def test_the_migration_merges_articles_stored_twice(db_url, tmp_path):
    """A database of 0001 where the same feed was polled under two spellings and
    one copy of an article was mailed: the upgrade keeps the mailed copy, merges
    the unmailed one into it, and normalises the URLs that do not clash."""
    from sqlalchemy import text

    from bot import db

    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0001")
        now = "2026-10-01 00:00:00"
        with engine.begin() as conn:
            for feed_id, url in ((1, "https://Example.org/feed/"), (2, str(tmp_path / "x" / ".." / "f.xml"))):
                conn.execute(text("INSERT INTO feeds (id, url, consecutive_failures, created_at) "
                                  "VALUES (:id, :url, 0, :now)"), {"id": feed_id, "url": url, "now": now})
            rows = [(1, 1, "https://blog.example/p/1"), (2, 2, "http://www.blog.example/p/1/"),
                    (3, 2, "https://blog.example/p/2"), (4, 1, "https://blog.example/p/2#x")]
            for entry_id, feed_id, link in rows:
                conn.execute(text(
                    "INSERT INTO entries (id, feed_id, key, link, title, summary_html, summary_text, "
                    "papers, published_at, dated, first_seen_at, content_hash) VALUES (:id, :feed, "
                    ":link, :link, :title, '', 'S', '[]', :now, true, :now, 'h')"),
                    {"id": entry_id, "feed": feed_id, "link": link, "now": now,
                     "title": f"post {entry_id}"})
            conn.execute(text("INSERT INTO digests (id, week, status, subject, html, text, entry_count, "
                              "paper_count, created_at) VALUES (1, '2026-W40', 'sent', 's', '', '', 1, "
                              "0, :now)"), {"now": now})
            conn.execute(text("INSERT INTO digest_entries (digest_id, entry_id, late) "
                              "VALUES (1, 2, false)"))
        db.upgrade(engine)
        factory = db.session_factory(engine)
        with factory() as session:
            entries = dict(session.execute(select(Entry.id, Entry.link_key)).all())
            sources = session.execute(select(EntrySource.feed_id, EntrySource.key,
                                             EntrySource.entry_id)).all()
            urls = sorted(session.scalars(select(Feed.url)))
    finally:
        engine.dispose()
    # the mailed copy (2) stays; 1 merges into it; of 3 and 4, the earlier one stays
    assert entries == {2: "blog.example/p/1", 3: "blog.example/p/2"}
    assert sorted(sources) == [(1, "https://blog.example/p/1", 2),
                               (1, "https://blog.example/p/2#x", 3)]
    assert urls == sorted(["https://example.org/feed", str(tmp_path / "f.xml")])


def test_feeds_add_says_which_backlog_posts_are_mailed(make_settings, fresh_db, feed_server,
                                                      smtp_server, tmp_path):
    """Seen (issue 35, item 10): `feeds add` said "18 of the new ones are its
    backlog: never mailed as late additions", then mailed those 18 in their
    week's digest. By the design (bot.ingest.feeds) both halves are true of
    different posts: those of weeks already mailed are never mailed, those of
    a week not mailed yet are part of its digest. The words say which is which."""
    a = feed_server.serve("/a.xml", rss("Feed A", [post("https://blog.example/a/1", "A", W40_DAY)]))
    settings = make_settings(feed_urls=a, **smtp_server.settings_env())
    ingest.poll_feeds(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.org"])
    send_digest(settings, fresh_db.factory, "2026-W40")
    earlier = (datetime.now(UTC) - timedelta(minutes=1)).replace(microsecond=0)
    c = feed_server.serve("/c.xml", rss("Feed C", [
        post("https://c.example/old/w40", "Old, of a week mailed", W40_DAY),
        post("https://c.example/old/now", "Older than the feed, of this week", earlier)]))
    env = cli_env(fresh_db, tmp_path, feed_urls=a, timezone=SHANGHAI,
                  **{k: str(v) for k, v in smtp_server.settings_env().items()})
    added = invoke(env, "feeds", "add", c)
    assert added.exit_code == 0, added.output
    assert "never mailed as late additions" not in added.output
    assert "1 of weeks up to 2026-W40, the last week mailed: stored, never mailed" in added.output
    assert "1 of later weeks: in their week's digest" in added.output
    this_week = week_of(earlier, SHANGHAI)
    send_digest(settings, fresh_db.factory, this_week.label)
    [_, mail] = smtp_server.wait_for(2)
    assert digest_links(mail.message) == ["https://c.example/old/now"]
