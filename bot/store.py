"""The queries. Every read and write of the database goes through here.

Functions take a Session and leave committing to the caller (see
``db.transaction``), so one use case can group several of them in one
transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from bot.feeds import ParsedEntry
from bot.models import Digest, DigestEntry, Entry, Feed


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


def entries_published_between(session: Session, start: datetime, end: datetime) -> Sequence[Entry]:
    """Entries with start <= published_at < end, oldest first."""
    return session.scalars(
        select(Entry)
        .where(Entry.published_at >= start, Entry.published_at < end)
        .order_by(Entry.published_at, Entry.id)
    ).all()


def count_entries(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Entry)) or 0


# --- digests (used by bot.digest) -------------------------------------------

def digest_for_week(session: Session, week: str) -> Digest | None:
    """The frozen digest of a week ("2026-W40"), if its send has started."""
    return session.scalar(select(Digest).where(Digest.week == week))


def frozen_weeks(session: Session) -> list[str]:
    """Labels of every week whose digest has been frozen (sending or sent)."""
    return list(session.scalars(select(Digest.week).order_by(Digest.week)))


def digest_entries(session: Session, digest_id: int) -> list[tuple[Entry, bool]]:
    """The entries a frozen digest holds, each with its ``late`` flag."""
    rows = session.execute(
        select(Entry, DigestEntry.late)
        .join(DigestEntry, DigestEntry.entry_id == Entry.id)
        .where(DigestEntry.digest_id == digest_id)
        .order_by(Entry.published_at, Entry.id)
    )
    return [(entry, bool(late)) for entry, late in rows]


def unfrozen_entries_between(session: Session, start: datetime, end: datetime) -> Sequence[Entry]:
    """Entries with start <= published_at < end that no frozen digest holds yet."""
    frozen = select(DigestEntry.entry_id)
    return session.scalars(
        select(Entry)
        .where(Entry.published_at >= start, Entry.published_at < end, Entry.id.not_in(frozen))
        .order_by(Entry.published_at, Entry.id)
    ).all()


def frozen_entry_ids(session: Session, entry_ids: Iterable[int]) -> set[int]:
    """Which of these entries already belong to a frozen digest."""
    ids = list(entry_ids)
    if not ids:
        return set()
    return set(session.scalars(select(DigestEntry.entry_id).where(DigestEntry.entry_id.in_(ids))))


def latest_published_before(session: Session, moment: datetime) -> datetime | None:
    """The newest publication time earlier than ``moment``, or None."""
    return session.scalar(select(func.max(Entry.published_at)).where(Entry.published_at < moment))


def add_digest(
    session: Session, *, week: str, subject: str, html: str, text: str,
    entry_count: int, paper_count: int, entries: Iterable[tuple[int, bool]],
) -> Digest:
    """Create a digest row (status 'sending') and its entry rows, then flush.

    The unique constraints on ``digests.week`` and ``digest_entries.entry_id``
    make the flush fail if another run froze the week or one of its entries first.
    """
    digest = Digest(week=week, status="sending", subject=subject, html=html, text=text,
                    entry_count=entry_count, paper_count=paper_count)
    session.add(digest)
    session.flush()
    rows = [{"digest_id": digest.id, "entry_id": entry_id, "late": late}
            for entry_id, late in entries]
    if rows:
        session.execute(insert(DigestEntry), rows)
    session.flush()
    return digest
