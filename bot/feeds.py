"""Fetching and parsing feeds: bytes in, plain values out. No database code.

Fetching uses httpx rather than feedparser's own fetcher so that we control
what an unattended poller needs: timeouts, a size cap, a redirect limit, a
descriptive User-Agent and conditional GET. Parsing hands the bytes to
feedparser, then cleans every title and summary with nh3, because feed HTML is
untrusted and ends up in people's inboxes.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path
from time import struct_time
from typing import Any
from urllib.parse import urlsplit

import feedparser
import httpx
import nh3

from bot.errors import FeedError
from bot.papers import extract_papers

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
class FetchOptions:
    timeout: float = 20.0
    max_bytes: int = 10_000_000
    max_redirects: int = 5
    user_agent: str = "digestbot"


@dataclass(frozen=True)
class FetchResult:
    """A fetched feed. ``body`` is None when the server said 304 Not Modified."""

    url: str
    body: bytes | None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.body is None


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


def is_local(url: str) -> bool:
    scheme = urlsplit(url).scheme
    return scheme == "file" or scheme == "" or (len(scheme) == 1 and url[1:3] in (":\\", ":/"))


def fetch(
    url: str,
    options: FetchOptions,
    etag: str | None = None,
    last_modified: str | None = None,
    client: httpx.Client | None = None,
) -> FetchResult:
    """Fetch a feed by URL or local path, using the validators of the last fetch."""
    if is_local(url):
        return _read_file(url, options, last_modified)
    own_client = client is None
    client = client or make_client(options)
    try:
        return _fetch_http(client, url, options, etag, last_modified)
    finally:
        if own_client:
            client.close()


def make_client(options: FetchOptions) -> httpx.Client:
    """One HTTP client for a poll run: TLS verified, redirects capped."""
    return httpx.Client(
        timeout=httpx.Timeout(options.timeout, connect=min(options.timeout, 10.0)),
        follow_redirects=True,
        max_redirects=options.max_redirects,
        headers={"User-Agent": options.user_agent,
                 "Accept": "application/rss+xml, application/atom+xml, application/xml;q=0.9, */*;q=0.5"},
    )


def _fetch_http(
    client: httpx.Client, url: str, options: FetchOptions, etag: str | None, last_modified: str | None
) -> FetchResult:
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304:
                return FetchResult(url, None, etag, last_modified)
            if response.status_code >= 400:
                raise FeedError(f"{url}: HTTP {response.status_code} {response.reason_phrase}",
                                hint=_status_hint(response.status_code))
            body = _read_capped(response, url, options.max_bytes)
            return FetchResult(
                url, body,
                etag=response.headers.get("etag"),
                last_modified=response.headers.get("last-modified"),
                content_type=response.headers.get("content-type"),
            )
    except httpx.TooManyRedirects:
        raise FeedError(f"{url}: more than {options.max_redirects} redirects",
                        hint="the server redirects in a loop; check the feed URL in a browser") from None
    except httpx.TimeoutException:
        raise FeedError(f"{url}: no answer within {options.timeout:g} s",
                        hint="the server is slow or down; raise DIGESTBOT_HTTP_TIMEOUT if it is just slow") from None
    except httpx.HTTPError as exc:
        raise FeedError(f"{url}: {type(exc).__name__}: {exc}",
                        hint="check the URL and that the host is reachable") from None


def _status_hint(status: int) -> str:
    if status == 404 or status == 410:
        return "the feed has moved or gone; check the URL"
    if status in (401, 403):
        return "the server refuses access to the feed"
    if status >= 500:
        return "the server has a problem; the next poll will try again"
    return "check the feed URL"


def _read_capped(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    too_big = FeedError(f"{url}: the feed is larger than {max_bytes:,} bytes",
                        hint="raise DIGESTBOT_MAX_FEED_BYTES if this feed really is that big")
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise too_big
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def _read_file(url: str, options: FetchOptions, last_modified: str | None) -> FetchResult:
    path = Path(urlsplit(url).path if url.startswith("file:") else url)
    try:
        stat = path.stat()
        # the file's mtime plays the part of Last-Modified
        stamp = formatdate(stat.st_mtime, usegmt=True) + f"; size={stat.st_size}"
        if last_modified == stamp:
            return FetchResult(url, None, last_modified=stamp)
        if stat.st_size > options.max_bytes:
            raise FeedError(f"{url}: the feed is larger than {options.max_bytes:,} bytes",
                            hint="raise DIGESTBOT_MAX_FEED_BYTES if this feed really is that big")
        return FetchResult(url, path.read_bytes(), last_modified=stamp)
    except OSError as exc:
        raise FeedError(f"{url}: cannot read the file: {exc.strerror}",
                        hint="check the path in DIGESTBOT_FEED_URLS") from None


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


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
