"""One poll: fetch each feed, parse it, store what is new, record the feed's health."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings
from bot.db import transaction
from bot.errors import FeedError
from bot.ingest import alerts, feeds, queries
from bot.ingest import fetch as fetching
from bot.ingest.netpolicy import FetchPolicy
from bot.ingest.parse import parse
from bot.ingest.result import PollResult

log = logging.getLogger(__name__)

_STORING = threading.Lock()  # see poll_feed

POLL_WORKERS = 8  # feeds fetched and parsed at once


def fetch_options(settings: Settings) -> fetching.FetchOptions:
    return fetching.FetchOptions(
        timeout=settings.http_timeout,
        max_bytes=settings.max_feed_bytes,
        max_redirects=settings.max_redirects,
        user_agent=settings.user_agent,
        policy=FetchPolicy(private=settings.feed_private),
    )


def poll_feeds(
    settings: Settings,
    factory: sessionmaker[Session],
    urls: Sequence[str] | None = None,
    on_result: Callable[[PollResult], None] | None = None,
    stop: threading.Event | None = None,
) -> list[PollResult]:
    """Poll every active feed (the configured ones added first), or the feeds
    named; a failing feed is recorded and the others go on. After each feed,
    the admin hears of a failure streak or its end (``alerts.after_poll``).

    Feeds are fetched in parallel (``POLL_WORKERS`` at a time), each under the
    total deadline of ``DIGESTBOT_HTTP_TIMEOUT``, so one slow feed delays no
    other. ``stop`` (set when the service stops) abandons the fetches in flight
    at once; their feeds are reported 'stopped', not failed. Results come back
    in the order of the feeds, and are logged, alerted on and passed to
    ``on_result`` in that order too (a fast feed is stored at once; only its
    report waits for the feeds before it)."""
    options = fetch_options(settings)
    with transaction(factory) as session:
        targets = feeds.polled_urls(session, settings, urls, datetime.now(UTC))
    results: list[PollResult] = []
    with fetching.make_client(options) as client, \
            ThreadPoolExecutor(max(1, min(POLL_WORKERS, len(targets))), "digestbot-poll") as pool:
        futures = [pool.submit(poll_feed, url, options, factory, client, stop) for url in targets]
        for future in futures:
            result = future.result()
            results.append(result)
            if result.status == "stopped":
                continue
            log.log(logging.WARNING if result.status == "error" else logging.INFO,
                    "poll %s", result.summary())
            alerts.after_poll(settings, factory, result)
            if on_result:
                on_result(result)
    return results


def poll_feed(
    url: str, options: fetching.FetchOptions, factory: sessionmaker[Session],
    client: fetching.Fetcher | None = None, stop: threading.Event | None = None,
) -> PollResult:
    """Fetch, parse and store one feed; errors end up in the feed's health record
    (a fetch abandoned because the process stops is no error of the feed's)."""
    now = datetime.now(UTC)
    try:
        with factory() as session:
            known = queries.feed_by_url(session, url)
            etag = known.etag if known else None
            last_modified = known.last_modified if known else None
            old_hash = known.body_hash if known else None
            streak = (known.consecutive_failures or 0, known.failing_since) if known else (0, None)
        try:
            fetched = fetching.fetch(url, options, etag, last_modified, client, stop)
        except fetching.FetchStopped:
            return PollResult(url, "stopped")
        # fetches run in parallel, stores one at a time: an article two feeds
        # carry must see the other feed's committed entry to be stored once
        with _STORING, transaction(factory) as session:
            feed = queries.get_or_create_feed(session, url)
            base = PollResult(url, "not-modified", feed_id=feed.id, name=feed.display_name,
                              failures=streak[0], failing_since=streak[1])
            if fetched.not_modified:
                queries.record_success(feed, now)
                return base
            assert fetched.body is not None
            digest = fetching.body_hash(fetched.body)
            if digest == old_hash:  # same bytes as last time: nothing to parse
                queries.record_success(feed, now, etag=fetched.etag,
                                     last_modified=fetched.last_modified)
                return base
            parsed = parse(fetched.body, url, fetched.content_type)
            counts = queries.save_entries(session, feed, parsed.entries, now)
            queries.record_success(feed, now, title=parsed.title, etag=fetched.etag,
                                 last_modified=fetched.last_modified, body_hash=digest)
            return replace(base, status="ok", new=counts.new, updated=counts.updated,
                           unchanged=counts.unchanged, warning=parsed.warning,
                           merged=counts.merged, backlog=counts.backlog,
                           backfill=feed.backfill, name=feed.display_name)
    except FeedError as exc:
        message = exc.message.removeprefix(f"{url}: ")
        with transaction(factory) as session:
            feed = queries.record_failure(session, url, now, message)
            return PollResult(url, "error", error=message, hint=exc.hint, feed_id=feed.id,
                              name=feed.display_name, failures=feed.consecutive_failures,
                              failing_since=feed.failing_since)
