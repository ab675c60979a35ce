"""Feeds and entries in the database: the ingest stage's own queries.

Functions take a Session and leave committing to the caller (see
``db.transaction``), so one poll can group several of them in one transaction.

One article, one entry: an item is first looked up under its feed's own key
(the entry's, or an ``EntrySource`` row's); a new item whose article is
already stored -- the same ``link_key`` or the same ``fingerprint``, see
``bot.ingest.urls`` -- only adds an ``EntrySource`` row to that entry. So a
second feed carrying the same posts stores nothing twice, and whatever digest
holds the entry holds the article, once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from bot.ingest.urls import article_key, fingerprint, normalise_feed_url
from bot.models import Entry, EntrySource, Feed, FeedState

if TYPE_CHECKING:  # feedparser loads with the parser, not with the queries
    from bot.ingest.parse import ParsedEntry


@dataclass(frozen=True)
class SaveCounts:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    # items that are an article already stored (through another feed, or this one twice)
    merged: int = 0
    # of the new ones: the feed's backlog, never a late addition (see Feed.backlog_before)
    backlog: int = 0


# --- feeds -----------------------------------------------------------------

def feed_by_url(session: Session, url: str) -> Feed | None:
    """The feed stored under this address, however it is spelled (see normalise_feed_url)."""
    return session.scalar(select(Feed).where(Feed.url == normalise_feed_url(url)))


def feed_by_id(session: Session, feed_id: int) -> Feed | None:
    return session.get(Feed, feed_id)


def get_or_create_feed(session: Session, url: str) -> Feed:
    """The feed at ``url``; a new one (active, no backlog held) if there is none."""
    feed = feed_by_url(session, url)
    if feed is None:
        feed = Feed(url=normalise_feed_url(url), consecutive_failures=0,
                    status=FeedState.ACTIVE.value, backfill=False)
        session.add(feed)
        session.flush()
    return feed


def all_feeds(session: Session, *, include_removed: bool = False) -> Sequence[Feed]:
    """Every feed in the order added; removed ones only when asked."""
    query = select(Feed).order_by(Feed.id)
    if not include_removed:
        query = query.where(Feed.status != FeedState.REMOVED.value)
    return session.scalars(query).all()


def first_feed_title(session: Session) -> str | None:
    """The own title of the first feed added that has one (removed feeds
    aside): what the digest is called when DIGESTBOT_TITLE is not set."""
    return session.scalar(
        select(Feed.title).where(Feed.status != FeedState.REMOVED.value, Feed.title.is_not(None),
                                 Feed.title != "").order_by(Feed.id).limit(1))


def active_feeds(session: Session) -> Sequence[Feed]:
    """The feeds a poll fetches."""
    return session.scalars(
        select(Feed).where(Feed.status == FeedState.ACTIVE.value).order_by(Feed.id)).all()


def entry_counts(session: Session) -> dict[int, int]:
    """Number of stored entries per feed id, counting the entries a feed shares with others."""
    counts: Counter[int] = Counter()
    for table_feed in (Entry.feed_id, EntrySource.feed_id):
        rows = session.execute(select(table_feed, func.count()).group_by(table_feed))
        counts.update({feed_id: count for feed_id, count in rows})
    return dict(counts)


def record_success(
    feed: Feed, now: datetime, *, title: str | None = None, etag: str | None = None,
    last_modified: str | None = None, body_hash: str | None = None,
) -> None:
    """Note a good poll: reset the failure streak, keep the validators for next time."""
    feed.last_polled_at = now
    feed.last_success_at = now
    feed.consecutive_failures = 0
    feed.failing_since = None
    if title:
        feed.title = title[:500]
    if etag is not None or last_modified is not None:
        feed.etag, feed.last_modified = etag, last_modified
    if body_hash is not None:
        feed.body_hash = body_hash


def record_failure(session: Session, url: str, now: datetime, error: str) -> Feed:
    """Note a failed poll: one more in the streak, which started now if it is the first."""
    feed = get_or_create_feed(session, url)
    feed.last_polled_at = now
    feed.last_error = error
    feed.last_error_at = now
    feed.consecutive_failures = (feed.consecutive_failures or 0) + 1
    if feed.failing_since is None:
        feed.failing_since = now
    return feed


# --- entries ---------------------------------------------------------------

def save_entries(
    session: Session, feed: Feed, parsed: Iterable[ParsedEntry], now: datetime
) -> SaveCounts:
    """Insert new articles, update changed ones, and note known articles this
    feed brings as one more source of theirs.

    A handful of queries per poll however many items the feed carries: what
    the feed already has, which of its new items are stored articles, one
    bulk insert.
    """
    known = _known_keys(session, feed.id)
    items: list[ParsedEntry] = []
    seen: set[str] = set()
    updated = unchanged = 0
    for item in parsed:
        if item.key in seen:  # a feed listing one item twice
            continue
        seen.add(item.key)
        if item.key not in known:
            items.append(item)
            continue
        entry_id, content_hash = known[item.key]
        if content_hash is None or content_hash == item.content_hash:
            unchanged += 1  # unchanged, or an article another feed owns the text of
        else:
            _update_entry(session, entry_id, item, now)
            updated += 1
    new_rows, merges = _new_or_merged(session, feed, items, now)
    if new_rows:
        session.execute(insert(Entry), new_rows)
    if merges:
        _add_sources(session, feed.id, merges, now)
    backlog = sum(row["backlog"] is not None for row in new_rows)
    return SaveCounts(new=len(new_rows), updated=updated, unchanged=unchanged,
                      merged=len(merges), backlog=backlog)


def _known_keys(session: Session, feed_id: int) -> dict[str, tuple[int, str | None]]:
    """This feed's keys -> (entry id, content hash if the feed owns the entry's text)."""
    known: dict[str, tuple[int, str | None]] = {
        key: (entry_id, content_hash)
        for entry_id, key, content_hash in session.execute(
            select(Entry.id, Entry.key, Entry.content_hash).where(Entry.feed_id == feed_id))
    }
    for key, entry_id in session.execute(
            select(EntrySource.key, EntrySource.entry_id).where(EntrySource.feed_id == feed_id)):
        known.setdefault(key, (entry_id, None))
    return known


def _new_or_merged(
    session: Session, feed: Feed, items: list[ParsedEntry], now: datetime
) -> tuple[list[dict[str, object]], dict[str, int | str]]:
    """Split unknown items into rows to insert and merges: key -> the stored
    entry's id, or the key of an item of this same batch that is the same article."""
    if not items:
        return [], {}
    links = {item.key: article_key(item.link) for item in items}
    # a link several different items share (a feed pointing every item at one
    # page, say) says nothing about which article an item is
    shared = {link for link, n in Counter(links.values()).items() if n > 1}
    links = {key: (None if link in shared else link) for key, link in links.items()}
    prints = {item.key: fingerprint(item.title, item.summary_text) for item in items}
    stored_links = _lookup(session, Entry.link_key, {v for v in links.values() if v})
    stored_prints = _lookup(session, Entry.fingerprint, {v for v in prints.values() if v})
    batch: dict[tuple[str, str], str] = {}
    rows: list[dict[str, object]] = []
    merges: dict[str, int | str] = {}
    unhold: set[int] = set()
    first_poll = feed.last_success_at is None
    for item in items:
        link, print_ = links[item.key], prints[item.key]
        target: int | str | None = (stored_links.get(link) if link else None) or \
            (stored_prints.get(print_) if print_ else None)
        if target is None:
            target = (batch.get(("l", link)) if link else None) or \
                (batch.get(("f", print_)) if print_ else None)
        if target is not None:
            merges[item.key] = target
            if isinstance(target, int) and backlog_of(feed, item.published, first_poll) is None:
                unhold.add(target)  # news for this feed: not only another feed's backlog
            continue
        for ident in (("l", link), ("f", print_)):
            if ident[1]:
                batch.setdefault((ident[0], ident[1]), item.key)
        rows.append(_new_row(feed, item, now, link, print_, first_poll))
    if unhold:
        session.execute(update(Entry).where(Entry.id.in_(sorted(unhold)), Entry.backlog == "held")
                        .values(backlog=None))
    return rows, merges


def _lookup(session: Session, column: InstrumentedAttribute[str | None],
            values: set[str]) -> dict[str, int]:
    """value -> the earliest entry stored with it, for link keys or fingerprints."""
    if not values:
        return {}
    found: dict[str, int] = {}
    for chunk in _chunks(sorted(values), 500):
        rows = session.execute(
            select(column, func.min(Entry.id)).where(column.in_(chunk)).group_by(column))
        found.update({value: entry_id for value, entry_id in rows})
    return found


def _chunks(values: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _add_sources(session: Session, feed_id: int, merges: dict[str, int | str],
                 now: datetime) -> None:
    """Record this feed as a source of the entries its items turned out to be."""
    batch_keys = [target for target in merges.values() if isinstance(target, str)]
    inserted: dict[str, int] = {}
    if batch_keys:
        inserted = {key: entry_id for entry_id, key in session.execute(
            select(Entry.id, Entry.key).where(Entry.feed_id == feed_id, Entry.key.in_(batch_keys)))}
    rows = [{"feed_id": feed_id, "key": key, "first_seen_at": now,
             "entry_id": inserted[target] if isinstance(target, str) else target}
            for key, target in merges.items()]
    session.execute(insert(EntrySource), rows)


def _new_row(feed: Feed, item: ParsedEntry, now: datetime, link_key: str | None,
             print_: str | None, first_poll: bool) -> dict[str, object]:
    return {
        "feed_id": feed.id,
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
        "link_key": link_key,
        "fingerprint": print_,
        "backlog": backlog_of(feed, item.published, first_poll),
    }


def backlog_of(feed: Feed, published: datetime | None, first_poll: bool) -> str | None:
    """None for an entry digests take as usual; "held" (never a late addition)
    or "backfill" (into the next digest) for the backlog of a feed added after
    a digest went out: what it had published before it was added (an undated
    item counts when it is there at the first poll)."""
    cutoff = feed.backlog_before
    if cutoff is None:
        return None
    old = published < cutoff if published is not None else first_poll
    if not old:
        return None
    return "backfill" if feed.backfill else "held"


def _update_entry(session: Session, entry_id: int, item: ParsedEntry, now: datetime) -> None:
    # The publication date is kept as first stored: moving an entry to another
    # week after its digest went out would hide or repeat it. The link key and
    # fingerprint stay too: they are how the article was first recognised.
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
