"""Fetching a feed: a URL or local path in, bytes out. No parsing, no database.

httpx rather than feedparser's own fetcher, so that we control what an
unattended poller needs: timeouts, a size cap, a redirect limit, a descriptive
User-Agent and conditional GET.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bot.errors import FeedError


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
