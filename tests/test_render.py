"""The email itself: JSON shape, HTML fit for mail clients, text part, escaping,
placeholders, size and speed. Real templates, real premailer."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from sqlalchemy import update
from test_digest import (
    W40,
    add_entry,
    entries_into_week,
    make_feed,
    parsed_fixture,
    poll_fixture,
)
from test_templating import CJK, leftover_cjk

from bot.digest import DigestData, DigestEntryView, ThemeView, Week, build_digest, freeze_digest
from bot.models import Entry
from bot.render import (
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    Rendered,
    digest_json,
    render_digest,
    sections,
)
from bot.templating import language

ZH, EN = language("zh"), language("en")
LATE_NOTE = ("Items marked “Late addition” were published in an earlier week but arrived after "
             "that week's digest went out.")
EMPTY_BODY = "There were no new deep reads this week. See you next week."

GMAIL_CLIP_BYTES = 102 * 1024
SCRIPT_TITLE = 'Evil</table></td></tr><script>alert("x")</script><style>*{display:none}</style> 标题'

FEED_TITLE = "强化学习 on MessageDaily"  # the bundled feed's own title: the digest's name when DIGESTBOT_TITLE is unset


@pytest.fixture
def w40(fresh_db, make_settings):
    """The fixture feed's week 40: settings, data and the rendered email."""
    settings = make_settings()
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
    return settings, data, render_digest(data, settings)


def synthetic_week(fresh_db, make_settings, count: int, **settings_values):
    """``count`` fixture entries (copied as needed) all dated in week 40."""
    settings = make_settings(**settings_values)
    parsed = parsed_fixture()
    items = [replace(parsed[i % len(parsed)], key=f"{parsed[i % len(parsed)].key}#{i}")
             for i in range(count)]
    with fresh_db.factory() as session:
        entries_into_week(session, items, W40)
        session.commit()
        return settings, build_digest(session, W40, settings)


class _Tags(HTMLParser):
    """Counts start tags and collects hrefs, the way a mail client would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.hrefs += [value for name, value in attrs if name == "href"]


def tags_of(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    return parser


# --- JSON -----------------------------------------------------------------------------


def test_json_shape(w40):
    _, data, _ = w40
    out = digest_json(data)
    assert set(out) == {"week", "start", "end", "entry_count", "paper_count", "note", "excluded",
                        "themes"}
    assert (out["week"], out["start"], out["end"]) == ("2026-W40", "2026-09-28", "2026-10-04")
    assert out["entry_count"] == 13 == sum(len(t["entries"]) for t in out["themes"])
    assert out["paper_count"] == data.paper_count
    for theme in out["themes"]:
        assert set(theme) == {"name", "key", "name_en", "catch_all", "intro", "entries"}
        assert theme["intro"] == ""  # no language model: no introduction
        assert isinstance(theme["name"], str) and isinstance(theme["catch_all"], bool)
        for entry in theme["entries"]:
            assert set(entry) == {"id", "title", "link", "published", "papers", "late", "source", "tldr"}
            assert entry["tldr"] == ""
            assert entry["source"] is None  # one feed: no entry names it
            assert entry["link"].startswith("https://messagedaily.example/posts/")
            published = datetime.fromisoformat(entry["published"])
            assert W40.contains(published) and published.utcoffset() is not None
            assert isinstance(entry["papers"], list) and entry["late"] is False
    assert not any(t["catch_all"] for t in out["themes"][:-1])  # a catch-all, if any, is last


# --- HTML --------------------------------------------------------------------------------


def test_html_is_inlined_and_self_contained(w40):
    settings, data, rendered = w40
    html = rendered.html
    for banned in ("<style", "<link", "<script", "class="):
        assert banned not in html.lower()
    assert 'style="' in html and "PingFang SC" in html and "Noto Sans CJK SC" in html
    assert 'name="color-scheme" content="light dark"' in html
    assert 'name="supported-color-schemes" content="light dark"' in html
    parsed = tags_of(html)
    for href in parsed.hrefs:
        assert href.startswith(("https://", "http://", "#theme-")) or href in (
            UNSUBSCRIBE_PLACEHOLDER, PREFERENCES_PLACEHOLDER)
    anchors = {h[1:] for h in parsed.hrefs if h.startswith("#")}
    assert anchors == {f"theme-{n}" for n in range(1, len(data.themes) + 1)}
    assert all(f'id="{anchor}"' in html for anchor in anchors)
    assert f"{settings.base_url}/archive/2026-W40" in parsed.hrefs


def test_html_shows_the_week_its_themes_and_entries(w40):
    _, data, rendered = w40
    assert rendered.subject == f"{FEED_TITLE} · 2026 年第 40 周（9/28–10/4）· 13 篇精读 · 24 篇论文"
    assert f"<title>{rendered.subject}</title>" in rendered.html
    for theme in data.themes:
        assert theme.name in rendered.html
        if theme.name_en:
            assert theme.name_en.upper().replace("&", "&amp;") in rendered.html
    for entry in data.entries:
        assert f'href="{entry.link}"' in rendered.html
        for paper in entry.papers:
            assert f">{paper}</span>" in rendered.html
    assert rendered.html.count("阅读全文") == 13
    assert "补录" not in rendered.html  # nothing late this week


def test_preheader_summarises_the_themes(w40):
    _, data, rendered = w40
    assert rendered.preheader.startswith("本周主题：" + data.themes[0].name)
    assert len(rendered.preheader) <= 140
    body = rendered.html.split("<body", 1)[1]
    assert body.index(rendered.preheader) < body.index("<table")  # first thing in the body
    assert "display:none" in body[: body.index(rendered.preheader)]


def test_unsubscribe_placeholder_survives_in_both_parts(w40):
    _, _, rendered = w40
    assert UNSUBSCRIBE_PLACEHOLDER == "__DIGESTBOT_UNSUBSCRIBE_URL__"
    assert f'href="{UNSUBSCRIBE_PLACEHOLDER}"' in rendered.html
    assert rendered.text.count(UNSUBSCRIBE_PLACEHOLDER) >= 1


def test_text_part_carries_every_title_and_link(w40):
    _, data, rendered = w40
    for entry in data.entries:
        assert entry.title in rendered.text
        assert entry.link and entry.link in rendered.text
    assert rendered.text.startswith(rendered.subject + "\n")
    assert "http://127.0.0.1:8000/archive/2026-W40" in rendered.text
    assert "<a " not in rendered.text and "&lt;" not in rendered.text


def test_feed_markup_is_escaped_in_html_and_plain_in_text(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        feed = make_feed(session)
        add_entry(session, feed, datetime(2026, 9, 30, 4, 0, tzinfo=UTC), title="正常的精读")
        add_entry(session, feed, datetime(2026, 10, 1, 4, 0, tzinfo=UTC), title=SCRIPT_TITLE,
                  summary='摘要 <b>粗体</b> </table><img src="https://evil.example/x.png">。',
                  papers=["<i>X</i>"], link="javascript:alert(1)")
        session.commit()
        clean = render_digest(build_digest(session, W40, settings), settings)
        session.execute(update(Entry).where(Entry.title == SCRIPT_TITLE)
                        .values(title="Harmless 标题"))
        session.commit()
        baseline = render_digest(build_digest(session, W40, settings), settings)
    html = clean.html
    assert "<script" not in html and "<style" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;/table&gt;" in html
    assert "javascript:" not in html
    # the hostile entry leaves the layout exactly as a harmless one does
    assert tags_of(html).tags == tags_of(baseline.html).tags
    # text: shown literally, on one line, never as a link
    line = next(line for line in clean.text.splitlines() if "Evil" in line)
    assert SCRIPT_TITLE in line
    assert "javascript:" not in clean.text


def test_subject_has_no_line_breaks(fresh_db, make_settings):
    settings = make_settings(title="周报\r\nBcc: victim@example.org")
    with fresh_db.factory() as session:
        add_entry(session, make_feed(session), datetime(2026, 9, 30, 4, 0, tzinfo=UTC),
                  title="标题\r\n换行")
        session.commit()
        rendered = render_digest(build_digest(session, W40, settings), settings)
    assert "\r" not in rendered.subject and "\n" not in rendered.subject
    assert rendered.subject.startswith("周报 Bcc: victim@example.org · 2026 年第 40 周")


def test_late_entries_are_marked(fresh_db, make_settings):
    settings = make_settings()
    with fresh_db.factory() as session:
        feed = make_feed(session)
        add_entry(session, feed, datetime(2026, 9, 22, 4, 0, tzinfo=UTC), title="W39 精读")
        data39 = build_digest(session, Week(2026, 39), settings)
        freeze_digest(session, data39, render_digest(data39, settings))
        add_entry(session, feed, datetime(2026, 9, 23, 4, 0, tzinfo=UTC), title="迟到的精读")
        add_entry(session, feed, datetime(2026, 9, 30, 4, 0, tzinfo=UTC), title="本周精读")
        session.commit()
        rendered = render_digest(build_digest(session, W40, settings), settings)
    assert rendered.html.count(">补录</span>") == 1
    assert "[补录]" in next(line for line in rendered.text.splitlines() if "迟到的精读" in line)
    assert ZH.gettext(LATE_NOTE) in rendered.text
    assert ZH.gettext(LATE_NOTE).startswith("标有「补录」")


def test_english_strings(fresh_db, make_settings):
    settings = make_settings(language="en", title="RL Weekly")
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        rendered = render_digest(build_digest(session, W40, settings), settings)
    assert rendered.subject == "RL Weekly · 2026-W40 (Sep 28 – Oct 4) · 13 deep reads · 24 papers"
    assert "Read more" in rendered.html and "阅读全文" not in rendered.html
    assert 'lang="en"' in rendered.html
    assert "Unsubscribe: " + UNSUBSCRIBE_PLACEHOLDER in rendered.text
    assert rendered.preheader.startswith("This week: ")
    assert EN.gettext(LATE_NOTE) == LATE_NOTE and EN.gettext(EMPTY_BODY) == EMPTY_BODY


def test_english_edition_has_no_chinese_but_the_feeds_own_text(fresh_db, make_settings):
    """The bundled feed is Chinese; with DIGESTBOT_LANGUAGE=en (and no title
    set) only the entries' titles, summaries and paper names, and the names of
    themes that have no English name, may be Chinese."""
    settings = make_settings(language="en")
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, W40, settings)
        empty = render_digest(build_digest(session, Week(2026, 44), settings), settings)
    rendered = render_digest(data, settings)
    # no DIGESTBOT_TITLE: the digest is named after the feed, in the feed's own words
    feed_text = [FEED_TITLE] + [text for entry in data.entries
                                for text in (entry.title, entry.summary, *entry.papers)]
    unnamed = [theme.name for theme in data.themes if not theme.name_en]
    assert not unnamed, f"themes without an English name (left out of the check): {unnamed}"
    visible = html_text(rendered.html)
    assert "Wed, Sep 30" in visible and "Credit assignment & process rewards" in visible
    assert leftover_cjk(visible, feed_text + unnamed) == []
    assert leftover_cjk(rendered.text, feed_text + unnamed) == []
    assert leftover_cjk(rendered.subject + rendered.preheader, [FEED_TITLE, *unnamed]) == []
    assert rendered.subject.startswith(f"{FEED_TITLE} · 2026-W40")
    for part in (empty.subject, empty.html, empty.text):
        assert not CJK.search(part.replace(FEED_TITLE, "")), part


def test_english_edition_translates_catch_all_and_derived_sections():
    """Sections whose words are not in the themes file get them from the catalogue."""
    entry = DigestEntryView(entry_id=1, title="t", link=None, published=datetime(2026, 9, 30, tzinfo=UTC),
                            papers=(), summary="s", late=False)
    catch_all = ThemeView(name="", name_en=None, description="",  # unnamed by the themes file
                          catch_all=True, entries=(entry,))
    derived = ThemeView(name="Harness / 脚手架", name_en="Harness", description="按共享关键词自动归组：…",
                        catch_all=False, entries=(entry,), derived=True)
    data = DigestData(week=W40, themes=(derived, catch_all), entry_count=2, paper_count=0)
    zh = sections(data, language("zh"))
    en = sections(data, language("en"))
    assert [(s.name, s.subtitle, s.description) for s in zh] == [
        ("Harness / 脚手架", "Harness", "按共享关键词自动归组：这些精读有共同的特征词。"),
        ("其他", None, "本周的其他文章。")]
    assert [(s.name, s.subtitle, s.description) for s in en] == [
        ("Harness", None, "Grouped automatically: these entries share distinctive terms."),
        ("Also this week", None, "The week's other entries.")]
    assert [s.anchor for s in en] == ["theme-1", "theme-2"]


def test_english_edition_names_a_section_of_chinese_terms_after_its_papers():
    """A section derived from shared Chinese terms gets an English name and description
    in the English edition (it used to keep "环境 / 沙盒"), and keeps them in Chinese."""
    def entry(n, papers):
        return DigestEntryView(entry_id=n, title=f"t{n}", link=None, published=datetime(2026, 9, 30, tzinfo=UTC),
                               papers=papers, summary="s", late=False)
    chinese_terms = ThemeView(name="环境 / 沙盒", name_en=None, description="", catch_all=False, derived=True,
                              entries=(entry(1, ("SkillGym", "VHD-Play")), entry(2, ("SkillGym", "WeEnv", "甲"))))
    no_latin = replace(chinese_terms, entries=(entry(3, ("某论文",)),))
    data = DigestData(week=W40, themes=(chinese_terms, no_latin), entry_count=3, paper_count=5)
    en = sections(data, language("en"))
    assert [(s.name, s.description) for s in en] == [
        ("Related reads: SkillGym · VHD-Play · WeEnv", "Grouped automatically: these entries share distinctive terms."),
        ("Related reads", "Grouped automatically: these entries share distinctive terms.")]
    assert not any(CJK.search(s.name + s.description) for s in en)
    zh = sections(data, language("zh"))
    assert [(s.name, s.description) for s in zh][0] == ("环境 / 沙盒", "按共享关键词自动归组：这些精读有共同的特征词。")


def html_text(html: str) -> str:
    """What a reader sees of an HTML mail: its text, entities decoded, plus the title."""
    parser = _Text()
    parser.feed(html)
    return "\n".join(parser.chunks)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []

    def handle_data(self, data):
        self.chunks.append(data)


def test_empty_week_renders_when_asked(fresh_db, make_settings):
    settings = make_settings(send_empty="true")
    with fresh_db.factory() as session:
        rendered = render_digest(build_digest(session, W40, settings), settings)
    assert rendered.subject == "每周文摘 · 2026 年第 40 周（9/28–10/4）· 本周没有新精读"  # no title, no feed
    assert ZH.gettext(EMPTY_BODY) in rendered.html and ZH.gettext(EMPTY_BODY) in rendered.text
    assert ZH.gettext(EMPTY_BODY) == "这一周没有新的精读。下周见。"
    assert UNSUBSCRIBE_PLACEHOLDER in rendered.html and UNSUBSCRIBE_PLACEHOLDER in rendered.text


# --- size and speed ----------------------------------------------------------------------


def test_a_40_entry_week_fits_under_gmail_clipping(fresh_db, make_settings):
    settings, data = synthetic_week(fresh_db, make_settings, 40)
    assert data.entry_count == 40
    rendered = render_digest(data, settings)
    size = len(rendered.html.encode("utf-8"))
    assert size < GMAIL_CLIP_BYTES, f"{size / 1024:.1f} KB"
    assert len(re.findall(r"阅读全文", rendered.html)) == 40
    assert all(entry.title in rendered.text for entry in data.entries)


def test_rendered_is_a_plain_value(w40):
    _, _, rendered = w40
    assert isinstance(rendered, Rendered)
    assert rendered == render_digest(w40[1], w40[0])  # deterministic
