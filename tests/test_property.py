"""Random inputs through the real pipeline (hypothesis): random bytes and random
well-formed feeds through poll -> preview, random rows through import.

What must hold for every input: no traceback (every failure is a recorded
feed error or a reported line), no unsafe HTML in the email (no script,
frame, event handler or non-http link), nothing valid dropped (every item of
a well-formed feed reaches the digest, every valid address is imported).

Each example gets its own SQLite database, a copy of one migrated at the start
of the module, so examples do not see each other's entries. Examples are
bounded (``max_examples``) to keep the suite fast.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot import db, digest, ingest, render
from bot.config import Settings, load_settings
from bot.subscriptions import HEADER_NAMES, AddressError, normalize_address, read_csv

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WEEK = "2026-W40"
MONDAY = datetime(2026, 9, 27, 16, 0, tzinfo=UTC)  # 2026-W40 starts Monday 00:00 in Shanghai


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.sqlite3"
    engine = db.make_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    engine.dispose()
    return path


class Example:
    """A fresh database (a copy of the template) and settings on it, for one example."""

    counter = 0

    def __init__(self, template: Path, root: Path) -> None:
        Example.counter += 1
        self.dir = root / f"example{Example.counter}"
        self.dir.mkdir()
        path = self.dir / "db.sqlite3"
        shutil.copy(template, path)
        self.engine = db.make_engine(f"sqlite:///{path}")
        self.factory = db.session_factory(self.engine)
        self.feed = self.dir / "feed.xml"
        self.settings: Settings = load_settings({
            "DIGESTBOT_DATABASE_URL": f"sqlite:///{path}", "DIGESTBOT_FEED_URLS": str(self.feed),
            "DIGESTBOT_SECRET_KEY": "test-secret-key-not-for-production",
            "DIGESTBOT_OUTBOX_DIR": str(self.dir / "outbox"), "DIGESTBOT_SEND_EMPTY": "true"})

    def close(self) -> None:
        self.engine.dispose()


@pytest.fixture(scope="module")
def examples(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("examples")
    made: list[Example] = []

    def make() -> Example:
        made.append(Example(template_db, root))
        return made[-1]

    yield make
    for example in made:
        example.close()


# --- what a safe email looks like ------------------------------------------------------------

UNSAFE_TAGS = {"script", "iframe", "frame", "object", "embed", "style", "link", "form",
               "input", "svg", "math", "base", "img"}
PERSONAL_SLOT = "__DIGESTBOT_UNSUBSCRIBE_URL__"  # the template's own slot, filled in per reader
CHOICE_SLOT = "__DIGESTBOT_PREFERENCES_URL__"  # the "choose your themes" slot, filled in per reader


class SafetyCheck(HTMLParser):
    """Collects what would be unsafe in an email: dangerous elements, event
    handlers, and links or sources that are not http(s), mailto or in-page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in UNSAFE_TAGS or (tag == "meta" and any(n == "http-equiv" for n, _ in attrs)):
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"{tag} {name}=")
            if name in ("href", "src", "action", "formaction", "background") and value is not None:
                target = value.strip().lower()
                slot = value in (PERSONAL_SLOT, CHOICE_SLOT)
                if not target.startswith(("http://", "https://", "mailto:", "#")) and not slot:
                    self.problems.append(f"{tag} {name}={value!r}")


def assert_safe(html: str) -> None:
    check = SafetyCheck()
    check.feed(html)
    assert not check.problems, check.problems


def preview_every_week(example: Example) -> list[digest.DigestData]:
    """Build and render the digest of every week that has entries, as `preview` does."""
    built = []
    with example.factory() as session:
        weeks = sorted({digest.week_of(published, example.settings.tz).label for published in
                        session.scalars(ingest_published())})
        for label in weeks:
            data = digest.build_digest(session, digest.parse_week(label, example.settings.timezone),
                                       example.settings)
            rendered = render.render_digest(data, example.settings)
            assert_safe(rendered.html)
            if rendered.archive_html is not None:
                assert_safe(rendered.archive_html)
            assert "\r" not in rendered.subject and "\n" not in rendered.subject
            # the reader's personal link goes into the footer's slot only, whatever the feed says
            assert rendered.html.count(PERSONAL_SLOT) == 1 and rendered.text.count(PERSONAL_SLOT) == 1
            built.append(data)
    return built


def ingest_published() -> Any:
    from sqlalchemy import select

    from bot.models import Entry

    return select(Entry.published_at)


# --- random bytes ------------------------------------------------------------------------------

FEEDISH = st.sampled_from([
    b"", b"<", b"<?xml version='1.0'?>", b"<rss version='2.0'><channel>", b"<item>", b"</item>",
    b"<title>", b"</title>", b"<link>javascript:alert(1)</link>", b"<link>http://x.example/a</link>",
    b"<description>&lt;script&gt;x&lt;/script&gt;<![CDATA[<img src=x onerror=alert(1)>]]>",
    b"</description>", b"<pubDate>Wed, 30 Sep 2026 08:00:00 +0000</pubDate>", b"</channel></rss>",
    b"<feed xmlns='http://www.w3.org/2005/Atom'>", b"<entry>", b"</entry>", b"&#0;", b"&amp;",
    b"\xff\xfe", b"\x00", b"]]>", b"<html><body>", b"__DIGESTBOT_UNSUBSCRIBE_URL__",
])


@SETTINGS
@given(parts=st.lists(st.one_of(FEEDISH, st.binary(max_size=64)), max_size=40))
def test_random_bytes_never_crash_a_poll_or_a_preview(examples: Any, parts: list[bytes]) -> None:
    example = examples()
    example.feed.write_bytes(b"".join(parts))
    [result] = ingest.poll_feeds(example.settings, example.factory)
    assert result.status in ("ok", "error", "not-modified"), result
    if result.status == "error":
        assert result.error and result.hint  # a message and a hint, recorded for the feed
    preview_every_week(example)


# --- random well-formed feeds ---------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Co", "Cn")),
               max_size=80)
HOSTILE = st.sampled_from([
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[/]", "[link=http://e.x]a[/link]",
    '"><iframe src=//e.x>', "__DIGESTBOT_UNSUBSCRIBE_URL__", "<a href='javascript:alert(1)'>x</a>",
    "<style>body{display:none}</style>", "&amp;&lt;", "{{ 7*7 }}", "{% raw %}", "%(title)s",
])
LINKS = st.sampled_from([
    "https://example.org/p/{n}", "http://example.org/p/{n}?u=__DIGESTBOT_UNSUBSCRIBE_URL__",
    "javascript:alert({n})", "data:text/html,<script>{n}</script>", "//example.org/{n}",
    "ftp://example.org/{n}", "https://example.org/p/{n}#\"onmouseover=alert(1)",
])


@st.composite
def feed_items(draw: Any) -> list[dict[str, str]]:
    count = draw(st.integers(min_value=1, max_value=12))
    items = []
    for n in range(count):
        title = draw(st.one_of(TEXT, HOSTILE, st.builds(lambda a, b: a + b, TEXT, HOSTILE)))
        summary = draw(st.one_of(TEXT, HOSTILE, st.builds(lambda a, b: a + b, HOSTILE, TEXT)))
        minutes = draw(st.integers(min_value=0, max_value=7 * 24 * 60 - 1))
        # distinct articles (the same title and summary twice is one article, stored once)
        items.append({"guid": f"urn:example:{n}", "title": f"{title} #{n}", "summary": summary,
                      "link": draw(LINKS).format(n=n),
                      "date": (MONDAY + timedelta(minutes=minutes)).strftime("%a, %d %b %Y %H:%M:%S +0000")})
    return items


def rss(items: list[dict[str, str]], cdata: bool) -> bytes:
    def body(text: str) -> str:
        return f"<![CDATA[{text.replace(']]>', ']]&gt;')}]]>" if cdata else escape(text)
    entries = "".join(
        f"<item><guid isPermaLink=\"false\">{escape(i['guid'])}</guid><title>{escape(i['title'])}</title>"
        f"<link>{escape(i['link'])}</link><pubDate>{i['date']}</pubDate>"
        f"<description>{body(i['summary'])}</description></item>" for i in items)
    return ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
            f"<title>{escape('Random feed')}</title><link>https://example.org/</link>{entries}"
            "</channel></rss>").encode()


@SETTINGS
@given(items=feed_items(), cdata=st.booleans())
def test_every_item_of_a_well_formed_feed_reaches_a_safe_digest(examples: Any, items: list[dict[str, str]],
                                                                 cdata: bool) -> None:
    example = examples()
    example.feed.write_bytes(rss(items, cdata))
    [result] = ingest.poll_feeds(example.settings, example.factory)
    assert result.status == "ok", result
    assert result.new == len(items)  # nothing valid dropped: every guid is an entry
    [data] = preview_every_week(example)
    assert data.week.label == WEEK and data.entry_count == len(items)
    # links that survive are http(s) only, and every http(s) link survives
    links = {entry.link for entry in data.entries}
    assert all(link is None or link.startswith(("http://", "https://")) for link in links)
    assert {i["link"] for i in items if i["link"].startswith(("http://", "https://"))} <= links


# --- random rows through import -----------------------------------------------------------------

LOCAL = st.text("abcdefghijklmnopqrstuvwxyz0123456789._+-", min_size=1, max_size=12).filter(
    lambda s: not s.startswith(".") and not s.endswith(".") and ".." not in s)
ADDRESS = st.builds(lambda local, domain: f"{local}@{domain}.example.org", LOCAL,
                    st.sampled_from(["a", "b", "mail", "xn--bcher-kva"]))
NOISE = st.text(st.characters(codec="utf-8", exclude_characters="\r\n@", exclude_categories=("Cs",)),
                max_size=20).filter(lambda s: s.strip().strip('"').strip().lower() not in HEADER_NAMES)


@st.composite
def csv_lines(draw: Any) -> list[tuple[str, str | None]]:
    """(line, the valid address it holds or None)."""
    lines = []
    for _ in range(draw(st.integers(min_value=0, max_value=40))):
        address = draw(st.one_of(ADDRESS, st.none()))
        first = address if address is not None else draw(NOISE)
        if address is not None and draw(st.booleans()):
            first = first.upper() if draw(st.booleans()) else f" {first} "
        quote = draw(st.sampled_from(["", '"']))  # (a ' is part of a valid local part)
        rest = draw(st.lists(NOISE, max_size=3))
        lines.append((",".join([quote + first, *rest]), address))
    return lines


def _valid(address: str) -> str | None:
    try:
        return normalize_address(address).lower()
    except AddressError:
        return None


@SETTINGS
@given(lines=csv_lines(), header=st.booleans(), encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]))
def test_every_valid_address_in_random_rows_is_imported(lines: list[tuple[str, str | None]], header: bool,
                                                        encoding: str) -> None:
    text = "\n".join((["email,name"] if header else []) + [line for line, _ in lines]) + "\n"
    rows = list(read_csv(text.encode(encoding)))
    expected = {_valid(address) for _, address in lines if address is not None} - {None}
    imported = {row.address.lower() for row in rows if row.address and row.duplicate_of is None}
    assert expected <= imported, sorted(expected - imported)
    # one verdict per non-blank line; a repeat is flagged, never imported twice
    assert len(rows) == sum(1 for line, _ in lines if line.strip())
    keys = [row.address.lower() for row in rows if row.address and row.duplicate_of is None]
    assert len(keys) == len(set(keys))
    for row in rows:
        assert (row.address is None) == (row.error is not None)
