"""Words that fit any feed (issue 35, item 5): a databases feed's digest is not
"强化学习周报", its subscribe page says what DIGESTBOT_TAGLINE says, the
catch-all is "其他" / "Also this week", and one paper name in 14 entries is
not "1 篇论文"."""

from __future__ import annotations

from datetime import timedelta

from helpers import free_port
from test_digest import W40
from test_feeds_manage import W40_DAY, post, rss
from test_web import LiveServer

from bot import ingest
from bot.digest import DigestData, DigestEntryView, ThemeView, build_digest
from bot.ingest.papers import extract_papers
from bot.render import counts_line, render_digest, sections
from bot.templating import language
from bot.web import create_app

DB_TITLE = "Query Processing Notes"


def databases_feed(feed_server, n: int = 14, named: int = 1) -> str:
    """A feed of ``n`` database papers of 2026-W40; ``named`` of their titles name a paper."""
    items = [post(f"https://db.example/p/{i}", f"Paper {i}: join orders and cardinalities",
                  W40_DAY + timedelta(hours=i)) for i in range(n - named)]
    items += [post(f"https://db.example/n/{i}", f"FLARE{i}: learned cardinality estimation 精读",
                   W40_DAY - timedelta(hours=i + 1)) for i in range(named)]
    return feed_server.serve("/db.xml", rss(DB_TITLE, items))


def test_without_a_title_the_digest_is_named_after_the_first_feed(make_settings, fresh_db,
                                                                  feed_server):
    settings = make_settings(feed_urls=databases_feed(feed_server))
    assert settings.title == ""
    ingest.poll_feeds(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
    rendered = render_digest(data, settings)
    assert rendered.subject.startswith(f"{DB_TITLE} · 2026 年第 40 周")
    for part in (rendered.subject, rendered.html, rendered.text):
        assert "强化学习" not in part and "RL Weekly" not in part


def test_a_title_set_wins(make_settings, fresh_db, feed_server):
    settings = make_settings(feed_urls=databases_feed(feed_server), title="DB Reading Club")
    ingest.poll_feeds(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        rendered = render_digest(build_digest(session, W40, settings), settings)
    assert rendered.subject.startswith("DB Reading Club · ")


def test_one_paper_name_in_fourteen_entries_is_not_one_paper(make_settings, fresh_db, feed_server):
    """Seen: "1 篇论文" for 14 papers: one title named a paper, the other 13
    none. A count that covers fewer than half the entries is not shown: the
    line counts entries."""
    settings = make_settings(feed_urls=databases_feed(feed_server))
    ingest.poll_feeds(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
    assert (data.entry_count, data.paper_count) == (14, 1)
    assert counts_line(data, language("zh")) == "14 篇文章"
    assert counts_line(data, language("en")) == "14 entries"
    assert "篇论文" not in render_digest(data, settings).subject


def test_a_venue_is_not_a_paper():
    """Why the databases digest said "1 篇论文": its one "paper" was the venue
    that began a title."""
    assert extract_papers("SIGMOD: learned cardinality estimation") == []
    assert extract_papers("NeurIPS 2025 精读：FLARE × CoVer") == ["FLARE", "CoVer"]


def test_entries_that_name_papers_are_counted_as_papers():
    entry = DigestEntryView(entry_id=1, title="FLARE：…精读", link=None, published=W40_DAY,
                            summary="", papers=("FLARE", "CoVer"), late=False)
    theme = ThemeView(name="t", name_en="t", description="", catch_all=False, entries=(entry,))
    data = DigestData(week=W40, themes=(theme,), entry_count=1, paper_count=2)
    assert counts_line(data, language("en")) == "1 deep read · 2 papers"


def test_the_catch_all_is_neutral():
    entry = DigestEntryView(entry_id=1, title="t", link=None, published=W40_DAY, summary="",
                            papers=(), late=False)
    catch_all = ThemeView(name="", name_en=None, description="", catch_all=True, entries=(entry,))
    data = DigestData(week=W40, themes=(catch_all,), entry_count=1, paper_count=0)
    assert [s.name for s in sections(data, language("zh"))] == ["其他"]
    assert [s.name for s in sections(data, language("en"))] == ["Also this week"]


def test_the_subscribe_page_says_the_tagline(make_settings, fresh_db):
    plain = make_settings(feed_urls="")
    port = free_port()
    with LiveServer(create_app(plain, fresh_db.factory), port) as client:
        page = client.get("/").text
    assert "强化学习" not in page and "每周一封邮件，按主题整理本周的文章。" in page
    own = make_settings(feed_urls="", tagline="每周一封：数据库系统论文速递")
    port = free_port()
    with LiveServer(create_app(own, fresh_db.factory), port) as client:
        page = client.get("/").text
    assert "每周一封：数据库系统论文速递" in page
    assert "每周一封邮件，按主题整理本周的文章。" not in page
    assert "每周文摘" in page  # no title, no feed with one: the neutral name


def test_a_site_started_before_the_first_poll_takes_the_feed_s_title(make_settings, fresh_db,
                                                                     feed_server):
    """`digestbot run` on a new database starts the web app before the first
    poll: the site is named after the feed as soon as the poll brings its title."""
    settings = make_settings(feed_urls=databases_feed(feed_server))
    port = free_port()
    with LiveServer(create_app(settings, fresh_db.factory), port) as client:
        assert "每周文摘" in client.get("/").text  # no feed title yet
        ingest.poll_feeds(settings, fresh_db.factory)
        page = client.get("/").text
    assert DB_TITLE in page and "每周文摘" not in page
