"""Fetching a feed: a URL or local path in, bytes out. No parsing, no database.

httpx rather than feedparser's own fetcher, so that we control what an
unattended poller needs: timeouts, a size cap, a redirect limit, a descriptive
User-Agent, conditional GET, and the fetch policy (``bot.ingest.netpolicy``:
which addresses a connection may go to, checked at every redirect hop on the
address actually connected to).

Every fetch has a **total deadline** (``FetchOptions.timeout``): a read
timeout only bounds the wait for the next byte, so a server that trickles one
byte a second, in its headers or its body, would hold a poll for as long as it
likes. The HTTP exchange runs as a task on an event loop of the ``Fetcher``'s
own thread, and the caller waits for it at most that long, or until its
``stop`` event is set; then the task is cancelled wherever it is (connecting,
reading headers, reading the body) and the connection dropped.

Local paths are read only if they are regular files (not ``/dev/zero``, a
FIFO or a directory), and never more than ``max_bytes`` of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import stat
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from bot.errors import FeedError
from bot.files import file_kind
from bot.ingest.netpolicy import CHAIN, AddressRefused, Chain, FetchPolicy, PolicyTransport
from bot.ingest.urls import is_local  # noqa: F401 (where it was first defined; callers import it from here)

T = TypeVar("T")

WAIT_STEP = 0.1  # seconds between two looks at the stop event while a fetch runs


@dataclass(frozen=True)
class FetchOptions:
    timeout: float = 20.0  # the whole fetch, connect to last byte
    max_bytes: int = 10_000_000
    max_redirects: int = 5
    user_agent: str = "digestbot"
    policy: FetchPolicy = FetchPolicy()  # which addresses a connection may go to (bot.ingest.netpolicy)


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


class FetchStopped(Exception):
    """The fetch was abandoned because the process is stopping: not the feed's fault."""


def fetch(
    url: str,
    options: FetchOptions,
    etag: str | None = None,
    last_modified: str | None = None,
    client: Fetcher | None = None,
    stop: threading.Event | None = None,
) -> FetchResult:
    """Fetch a feed by URL or local path, using the validators of the last fetch.

    Raises FeedError (the feed's problem, with a hint) or FetchStopped (``stop``
    was set while waiting)."""
    if is_local(url):
        return _read_file(url, options, last_modified)
    if client is not None:
        return client.get(url, etag, last_modified, stop)
    with make_client(options) as own:
        return own.get(url, etag, last_modified, stop)


def make_client(options: FetchOptions) -> Fetcher:
    """One HTTP client for a poll run (use it in a ``with``): TLS verified,
    redirects capped, connections reused, every fetch under a total deadline."""
    return Fetcher(options)


class Fetcher:
    """An ``httpx.AsyncClient`` on an event loop in a thread of its own.

    ``get`` may be called from several threads at once (a poll fetches feeds
    in parallel); each call waits for its own fetch, at most ``options.timeout``
    seconds in all.
    """

    def __init__(self, options: FetchOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._started = False  # the loop and client start with the first HTTP fetch
        self._closed = False

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="digestbot-fetch",
                                            daemon=True)
            self._thread.start()
            self._client = self._run(self._make_client(), timeout=30)
            self._started = True

    async def _make_client(self) -> httpx.AsyncClient:
        timeout = self.options.timeout
        return httpx.AsyncClient(
            transport=PolicyTransport(self.options.policy),
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
            max_redirects=self.options.max_redirects,
            headers={"User-Agent": self.options.user_agent,
                     "Accept": "application/rss+xml, application/atom+xml, application/xml;q=0.9, "
                               "*/*;q=0.5"},
        )

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def get(self, url: str, etag: str | None = None, last_modified: str | None = None,
            stop: threading.Event | None = None) -> FetchResult:
        """One conditional GET under the total deadline; FeedError on any failure."""
        if stop is not None and stop.is_set():
            raise FetchStopped(url)
        self._start()
        future = asyncio.run_coroutine_threadsafe(
            _fetch_http(self._client, url, self.options, etag, last_modified), self._loop)
        deadline = time.monotonic() + self.options.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return future.result(timeout=max(0.0, min(WAIT_STEP, left)))
            except concurrent.futures.TimeoutError:
                pass
            if stop is not None and stop.is_set():
                future.cancel()
                raise FetchStopped(url)
            if time.monotonic() >= deadline:
                future.cancel()
                raise FeedError(f"{url}: no answer within {self.options.timeout:g} s "
                                "(the limit for the whole fetch)",
                                hint="the server is slow or down (or sends its feed a trickle at a "
                                     "time); raise DIGESTBOT_HTTP_TIMEOUT if it is just slow") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        with contextlib.suppress(Exception):  # closing what may already be broken
            self._run(self._client.aclose(), timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


async def _fetch_http(
    client: httpx.AsyncClient, url: str, options: FetchOptions, etag: str | None,
    last_modified: str | None,
) -> FetchResult:
    CHAIN.set(Chain(feed=url))  # this task's redirect chain, for the fetch policy
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    try:
        async with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304:
                return FetchResult(url, None, etag, last_modified)
            if response.status_code >= 400:
                raise FeedError(f"{url}: HTTP {response.status_code} {response.reason_phrase}",
                                hint=_status_hint(response.status_code))
            body = await _read_capped(response, url, options.max_bytes)
            return FetchResult(
                url, body,
                etag=response.headers.get("etag"),
                last_modified=response.headers.get("last-modified"),
                content_type=response.headers.get("content-type"),
            )
    except AddressRefused as exc:
        raise AddressRefused(f"{url}: {exc.message}", hint=exc.hint) from None
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


def _too_big(url: str, max_bytes: int) -> FeedError:
    return FeedError(f"{url}: the feed is larger than {max_bytes:,} bytes",
                     hint="raise DIGESTBOT_MAX_FEED_BYTES if this feed really is that big")


async def _read_capped(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _too_big(url, max_bytes)
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise _too_big(url, max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _read_file(url: str, options: FetchOptions, last_modified: str | None) -> FetchResult:
    """A local feed file: a regular file only, read up to the size cap.

    Opened without blocking (a FIFO would wait for a writer) and checked on
    the open descriptor, so what is read is what was checked."""
    path = Path(urlsplit(url).path if url.startswith("file:") else url)
    hint = "check the path in DIGESTBOT_FEED_URLS"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise FeedError(f"{url}: cannot read the file: {exc.strerror}", hint=hint) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise FeedError(f"{url}: not a regular file ({file_kind(info.st_mode)})",
                            hint="a local feed must be a file of RSS or Atom; " + hint)
        with os.fdopen(fd, "rb") as fh:
            # the file's mtime plays the part of Last-Modified
            stamp = formatdate(info.st_mtime, usegmt=True) + f"; size={info.st_size}"
            if last_modified == stamp:
                return FetchResult(url, None, last_modified=stamp)
            body = fh.read(options.max_bytes + 1)  # no more, whatever the size said
    except OSError as exc:
        raise FeedError(f"{url}: cannot read the file: {exc.strerror}", hint=hint) from None
    if len(body) > options.max_bytes:
        raise _too_big(url, options.max_bytes)
    return FetchResult(url, body, last_modified=stamp)


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
