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
from time import struct_time
from typing import Any

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
    """Parse feed bytes; raise FeedError if feedparser finds no feed in them."""
    headers = {"content-location": url}
    if content_type:
        headers["content-type"] = content_type
    result = feedparser.parse(body, response_headers=headers, sanitize_html=False,
                              resolve_relative_uris=True)
    warning = None
    if result.get("bozo") and not isinstance(result.get("bozo_exception"), HARMLESS):
        problem = str(result.get("bozo_exception", "unknown problem"))
        if not result.get("version") and not result.entries:
            raise FeedError(f"{url}: not a feed that can be read ({problem})",
                            hint="open the URL and check it serves RSS or Atom")
        warning = f"the feed is not well-formed ({problem}); stored what could be read"
    title = result.feed.get("title")
    entries = tuple(_parse_entry(e, url) for e in result.entries)
    return ParsedFeed(_plain(title) if title else None, entries, warning)


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
