"""Feeds and entries in the database: the ingest stage's own queries.

Functions take a Session and leave committing to the caller (see
``db.transaction``), so one poll can group several of them in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from bot.ingest.parse import ParsedEntry
from bot.models import Entry, Feed


@dataclass(frozen=True)
class SaveCounts:
    new: int = 0
    updated: int = 0
    unchanged: int = 0


# --- feeds -----------------------------------------------------------------

def feed_by_url(session: Session, url: str) -> Feed | None:
    return session.scalar(select(Feed).where(Feed.url == url))


def get_or_create_feed(session: Session, url: str) -> Feed:
    feed = feed_by_url(session, url)
    if feed is None:
        feed = Feed(url=url, consecutive_failures=0)
        session.add(feed)
        session.flush()
    return feed


def all_feeds(session: Session) -> Sequence[Feed]:
    return session.scalars(select(Feed).order_by(Feed.id)).all()


def entry_counts(session: Session) -> dict[int, int]:
    """Number of stored entries per feed id."""
    rows = session.execute(select(Entry.feed_id, func.count()).group_by(Entry.feed_id))
    return {feed_id: count for feed_id, count in rows}


def record_success(
    feed: Feed, now: datetime, *, title: str | None = None, etag: str | None = None,
    last_modified: str | None = None, body_hash: str | None = None,
) -> None:
    """Note a good poll: reset the failure count, keep the validators for next time."""
    feed.last_polled_at = now
    feed.last_success_at = now
    feed.consecutive_failures = 0
    if title:
        feed.title = title[:500]
    if etag is not None or last_modified is not None:
        feed.etag, feed.last_modified = etag, last_modified
    if body_hash is not None:
        feed.body_hash = body_hash


def record_failure(session: Session, url: str, now: datetime, error: str) -> None:
    feed = get_or_create_feed(session, url)
    feed.last_polled_at = now
    feed.last_error = error
    feed.last_error_at = now
    feed.consecutive_failures = (feed.consecutive_failures or 0) + 1


# --- entries ---------------------------------------------------------------

def save_entries(
    session: Session, feed: Feed, parsed: Iterable[ParsedEntry], now: datetime
) -> SaveCounts:
    """Insert new entries and update changed ones, keyed by (feed, entry key).

    One query loads what the feed already has, so a poll costs one read plus
    one bulk insert however many entries the feed carries.
    """
    known = {
        key: (entry_id, content_hash)
        for entry_id, key, content_hash in session.execute(
            select(Entry.id, Entry.key, Entry.content_hash).where(Entry.feed_id == feed.id)
        )
    }
    new_rows: list[dict[str, object]] = []
    seen: set[str] = set()
    updated = unchanged = 0
    for item in parsed:
        if item.key in seen:  # a feed listing one item twice
            continue
        seen.add(item.key)
        if item.key not in known:
            new_rows.append(_new_row(feed.id, item, now))
        elif known[item.key][1] != item.content_hash:
            _update_entry(session, known[item.key][0], item, now)
            updated += 1
        else:
            unchanged += 1
    if new_rows:
        session.execute(insert(Entry), new_rows)
    return SaveCounts(new=len(new_rows), updated=updated, unchanged=unchanged)


def _new_row(feed_id: int, item: ParsedEntry, now: datetime) -> dict[str, object]:
    return {
        "feed_id": feed_id,
        "key": item.key,
        "link": item.link,
        "title": item.title,
        "summary_html": item.summary_html,
        "summary_text": item.summary_text,
        "papers": list(item.papers),
        "published_at": item.published or now,
        "dated": item.published is not None,
        "first_seen_at": now,
        "content_hash": item.content_hash,
    }


def _update_entry(session: Session, entry_id: int, item: ParsedEntry, now: datetime) -> None:
    # The publication date is kept as first stored: moving an entry to another
    # week after its digest went out would hide or repeat it.
    session.execute(
        update(Entry).where(Entry.id == entry_id).values(
            link=item.link,
            title=item.title,
            summary_html=item.summary_html,
            summary_text=item.summary_text,
            papers=list(item.papers),
            content_hash=item.content_hash,
            updated_at=now,
        )
    )


def count_entries(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Entry)) or 0
