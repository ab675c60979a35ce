"""One poll: fetch each feed, parse it, store what is new, record the feed's health."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings
from bot.db import transaction
from bot.errors import FeedError
from bot.ingest import fetch as fetching
from bot.ingest import queries
from bot.ingest.parse import parse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PollResult:
    """What one feed's poll did; ``status`` is ok, not-modified or error."""

    url: str
    status: str
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    error: str | None = None
    warning: str | None = None

    def summary(self) -> str:
        if self.status == "error":
            return f"error         {self.url}: {self.error}"
        if self.status == "not-modified":
            return f"not modified  {self.url}"
        line = (f"ok            {self.url}: {self.new} new, {self.updated} updated, "
                f"{self.unchanged} unchanged")
        return line + (f" (warning: {self.warning})" if self.warning else "")


def fetch_options(settings: Settings) -> fetching.FetchOptions:
    return fetching.FetchOptions(
        timeout=settings.http_timeout,
        max_bytes=settings.max_feed_bytes,
        max_redirects=settings.max_redirects,
        user_agent=settings.user_agent,
    )


def poll_feeds(
    settings: Settings,
    factory: sessionmaker[Session],
    urls: Sequence[str] | None = None,
    on_result: Callable[[PollResult], None] | None = None,
) -> list[PollResult]:
    """Poll each feed in turn; a failing feed is recorded and the others go on."""
    options = fetch_options(settings)
    results = []
    with fetching.make_client(options) as client:
        for url in urls or settings.feed_urls:
            result = poll_feed(url, options, factory, client)
            log.log(logging.WARNING if result.status == "error" else logging.INFO,
                    "poll %s", result.summary())
            results.append(result)
            if on_result:
                on_result(result)
    return results


def poll_feed(
    url: str, options: fetching.FetchOptions, factory: sessionmaker[Session],
    client: httpx.Client | None = None,
) -> PollResult:
    """Fetch, parse and store one feed; errors end up in the feed's health record."""
    now = datetime.now(UTC)
    try:
        with factory() as session:
            known = queries.feed_by_url(session, url)
            etag = known.etag if known else None
            last_modified = known.last_modified if known else None
            old_hash = known.body_hash if known else None
        fetched = fetching.fetch(url, options, etag, last_modified, client)
        with transaction(factory) as session:
            feed = queries.get_or_create_feed(session, url)
            if fetched.not_modified:
                queries.record_success(feed, now)
                return PollResult(url, "not-modified")
            assert fetched.body is not None
            digest = fetching.body_hash(fetched.body)
            if digest == old_hash:  # same bytes as last time: nothing to parse
                queries.record_success(feed, now, etag=fetched.etag,
                                     last_modified=fetched.last_modified)
                return PollResult(url, "not-modified")
            parsed = parse(fetched.body, url, fetched.content_type)
            counts = queries.save_entries(session, feed, parsed.entries, now)
            queries.record_success(feed, now, title=parsed.title, etag=fetched.etag,
                                 last_modified=fetched.last_modified, body_hash=digest)
            return PollResult(url, "ok", counts.new, counts.updated, counts.unchanged,
                              warning=parsed.warning)
    except FeedError as exc:
        message = exc.message.removeprefix(f"{url}: ")
        with transaction(factory) as session:
            queries.record_failure(session, url, now, message)
        return PollResult(url, "error", error=message)
