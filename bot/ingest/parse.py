"""Parsing a feed: bytes in, plain values out. No fetching, no database.

feedparser reads the bytes; every title and summary is then cleaned with nh3,
because feed HTML is untrusted and ends up in people's inboxes.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from time import struct_time
from typing import Any
from urllib.parse import urljoin, urlsplit

import feedparser
import nh3

from bot.errors import FeedError
from bot.ingest.papers import extract_papers

# What survives sanitising in a summary: text structure and links, nothing
# that can run code, load remote content or restyle the email.
SAFE_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "em", "i", "li", "ol", "p",
    "pre", "strong", "sub", "sup", "ul",
}


SAFE_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}}


MAX_KEY_LENGTH = 500


# feedparser flags these as "bozo" too, but the feed itself is fine
HARMLESS = (feedparser.NonXMLContentType, feedparser.CharacterEncodingOverride)


@dataclass(frozen=True)
class ParsedEntry:
    key: str
    link: str | None
    title: str
    summary_html: str
    summary_text: str
    published: datetime | None
    papers: tuple[str, ...]
    content_hash: str


@dataclass(frozen=True)
class ParsedFeed:
    title: str | None
    entries: tuple[ParsedEntry, ...]
    warning: str | None = None


def parse(body: bytes, url: str, content_type: str | None = None) -> ParsedFeed:
    """Parse feed bytes; raise FeedError if feedparser finds no feed in them.

    An empty answer, or one that is neither RSS nor Atom (a web page, an error
    page served with 200), is a failing feed, not a healthy one with 0 entries."""
    if not body.strip():
        raise FeedError(f"{url}: the answer is empty, not a feed",
                        hint="open the URL and check it serves RSS or Atom; the server may be "
                             "misconfigured or the feed moved")
    headers = {"content-location": url}
    if content_type:
        headers["content-type"] = content_type
    result = feedparser.parse(body, response_headers=headers, sanitize_html=False,
                              resolve_relative_uris=True)
    warning = None
    problem = str(result.get("bozo_exception", "")) if result.get("bozo") else ""
    if not result.get("version") and not result.entries:
        raise _not_a_feed(body, url, problem)
    if result.get("bozo") and not isinstance(result.get("bozo_exception"), HARMLESS):
        warning = f"the feed is not well-formed ({problem}); stored what could be read"
    title = result.feed.get("title")
    entries = tuple(_parse_entry(e, url) for e in result.entries)
    return ParsedFeed(_plain(title) if title else None, entries, warning)


def _not_a_feed(body: bytes, url: str, problem: str) -> FeedError:
    """The error for bytes that hold no feed, with the feed's address if it is
    a web page that names one (``<link rel="alternate" type="application/rss+xml">``)."""
    head = body[:2048].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        found = _FeedLinks.find(body, url)
        hint = ("this URL is a web page, not a feed: use the address of its RSS or Atom feed"
                + (f"; the page names one: {found[0]}" if found else
                   " (look for an RSS or Atom link on the page)"))
        return FeedError(f"{url}: an HTML page, not a feed (neither RSS nor Atom)", hint=hint)
    return FeedError(f"{url}: not a feed that can be read, neither RSS nor Atom"
                     + (f" ({problem})" if problem else ""),
                     hint="open the URL and check it serves RSS or Atom")


class _FeedLinks(HTMLParser):
    """The feed addresses a web page names in its ``<link rel="alternate">`` tags."""

    TYPES = ("application/rss+xml", "application/atom+xml")

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if (tag == "link" and "alternate" in values.get("rel", "").lower().split()
                and values.get("type", "").lower() in self.TYPES and values.get("href")):
            link = urljoin(self.base, values["href"].strip())
            if urlsplit(link).scheme in ("http", "https"):
                self.found.append(link)

    @classmethod
    def find(cls, body: bytes, base: str) -> list[str]:
        parser = cls(base)
        try:
            parser.feed(body[:200_000].decode("utf-8", errors="replace"))
        except Exception:  # a page too broken to read: no suggestion then
            return []
        return parser.found


def _parse_entry(entry: Any, feed_url: str) -> ParsedEntry:
    title = _title(entry)
    summary_html = _summary_html(entry)
    summary_text = _plain(summary_html)
    link = entry.get("link") or None
    key = entry_key(entry.get("id"), link, title, summary_text)
    return ParsedEntry(
        key=key,
        link=link,
        title=title,
        summary_html=summary_html,
        summary_text=summary_text,
        published=_date(entry.get("published_parsed") or entry.get("updated_parsed")),
        papers=tuple(extract_papers(title)),
        content_hash=hashlib.sha256(
            "\0".join((title, summary_html, link or "")).encode()
        ).hexdigest(),
    )


def entry_key(guid: str | None, link: str | None, title: str, summary: str) -> str:
    """An entry's identity in its feed: the guid, else the link, else a content hash."""
    key = (guid or "").strip() or (link or "").strip()
    if not key:
        key = "sha256:" + hashlib.sha256(f"{title}\0{summary}".encode()).hexdigest()
    if len(key) > MAX_KEY_LENGTH:
        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return key


def _title(entry: Any) -> str:
    detail = entry.get("title_detail") or {}
    raw = entry.get("title") or ""
    text = raw if detail.get("type") == "text/plain" else _plain(raw)
    return _squash(text) or "(untitled)"


def _summary_html(entry: Any) -> str:
    """The richest description the entry has, as sanitised HTML."""
    detail = None
    if entry.get("content"):
        detail = entry["content"][0]
    elif entry.get("summary_detail"):
        detail = entry["summary_detail"]
    if not detail or not detail.get("value"):
        return ""
    value = detail["value"]
    if detail.get("type") == "text/plain":
        return html.escape(value)
    return sanitise(value)


def sanitise(fragment: str) -> str:
    """Feed HTML made safe for an email: allow-listed tags only, safe links."""
    return nh3.clean(
        fragment,
        tags=SAFE_TAGS,
        attributes=SAFE_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    ).strip()


def _plain(fragment: str) -> str:
    """Text of an HTML fragment: tags dropped, entities decoded, spaces squashed."""
    text = nh3.clean(re.sub(r"<(br|/p|/li|/div)\b[^>]*>", " ", fragment, flags=re.I), tags=set())
    return _squash(html.unescape(text))


def _squash(text: str) -> str:
    return " ".join(text.split())


def _date(parsed: struct_time | None) -> datetime | None:
    if not parsed:
        return None
    try:
        return datetime(*parsed[:6], tzinfo=UTC)
    except (ValueError, TypeError):
        return None
