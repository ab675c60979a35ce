"""The queries. Every read and write of the database goes through here.

Functions take a Session and leave committing to the caller (see
``db.transaction``), so one use case can group several of them in one
transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Integer,
    String,
    Table,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from bot.feeds import ParsedEntry
from bot.models import Delivery, Digest, DigestEntry, Entry, Feed, Subscriber, UTCDateTime


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


# --- service and status (used by bot.scheduler and bot.status) ---------------

def weeks_being_sent(session: Session) -> list[str]:
    """Weeks whose digest send started and has not finished (status 'sending')."""
    return list(session.scalars(
        select(Digest.week).where(Digest.status == "sending").order_by(Digest.week)))


def latest_digest(session: Session) -> Digest | None:
    """The digest of the most recent week that has one."""
    return session.scalar(select(Digest).order_by(Digest.week.desc()).limit(1))


def delivery_counts(session: Session, digest_id: int) -> dict[str, int]:
    """Number of ledger rows per delivery status for one digest."""
    rows = session.execute(select(Delivery.status, func.count())
                           .where(Delivery.digest_id == digest_id).group_by(Delivery.status))
    return {status: count for status, count in rows}


def subscriber_counts(session: Session) -> dict[str, int]:
    """Number of subscribers per state (pending, confirmed, unsubscribed, bounced)."""
    rows = session.execute(select(Subscriber.status, func.count()).group_by(Subscriber.status))
    return {status: count for status, count in rows}


# --- subscribers (used by bot.subscriptions, bot.web, the CLI) --------------------

def subscriber_by_key(session: Session, email_key: str) -> Subscriber | None:
    return session.scalar(select(Subscriber).where(Subscriber.email_key == email_key))


def add_subscriber(
    session: Session, *, email: str, status: str, nonce: str, now: datetime
) -> Subscriber:
    """Insert a subscriber and flush (the unique ``email_key`` refuses a duplicate)."""
    sub = Subscriber(email=email, email_key=email.lower(), status=status, token_nonce=nonce,
                     hard_failures=0, created_at=now,
                     confirmed_at=now if status == "confirmed" else None)
    session.add(sub)
    session.flush()
    return sub


def list_subscribers(session: Session, status: str | None = None) -> Sequence[Subscriber]:
    query = select(Subscriber).order_by(Subscriber.id)
    if status:
        query = query.where(Subscriber.status == status)
    return session.scalars(query).all()


def iter_subscribers(session: Session, batch: int = 1000) -> Iterator[Subscriber]:
    """Every subscriber, oldest first, read ``batch`` rows at a time."""
    last = 0
    while True:
        rows = session.scalars(
            select(Subscriber).where(Subscriber.id > last).order_by(Subscriber.id).limit(batch)
        ).all()
        yield from rows
        if len(rows) < batch:
            return
        last = rows[-1].id


def delete_subscriber(session: Session, sub: Subscriber) -> None:
    """Remove a subscriber and (by cascade) their delivery rows."""
    session.execute(delete(Delivery).where(Delivery.subscriber_id == sub.id))
    session.delete(sub)
    session.flush()


# --- the delivery ledger (used by bot.delivery) --------------------------------------
#
# The hot path (claim, finish) uses Core statements on the tables: no ORM
# objects, no identity map, one small UPDATE each.

_DELIVERIES = cast(Table, Delivery.__table__)
_SUBSCRIBERS = cast(Table, Subscriber.__table__)
_DIGESTS = cast(Table, Digest.__table__)
UNFINISHED = ("pending", "sending")


@dataclass(frozen=True)
class LedgerRow:
    """One delivery still to do, with what sending it needs."""

    id: int
    subscriber_id: int
    email: str
    email_key: str
    status: str
    message_id: str | None
    hard_failures: int


def _rowcount(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)


def create_pending_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """One 'pending' row per confirmed subscriber who has none for this digest,
    in a single INSERT ... SELECT; returns how many were added."""
    has_row = (
        select(_DELIVERIES.c.id)
        .where(_DELIVERIES.c.digest_id == digest_id,
               _DELIVERIES.c.subscriber_id == _SUBSCRIBERS.c.id)
        .exists()
    )
    source = select(
        literal(digest_id, Integer), _SUBSCRIBERS.c.id, literal("pending", String),
        literal(0, Integer), literal(now, UTCDateTime()),
    ).where(_SUBSCRIBERS.c.status == "confirmed", ~has_row)
    result = session.execute(
        insert(_DELIVERIES).from_select(
            ["digest_id", "subscriber_id", "status", "attempts", "updated_at"], source)
    )
    return _rowcount(result)


def reset_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """For a deliberate resend: every confirmed subscriber's row back to 'pending',
    with a fresh Message-ID to come (it is a new message, not a retry)."""
    confirmed = (
        select(_SUBSCRIBERS.c.id)
        .where(_SUBSCRIBERS.c.id == _DELIVERIES.c.subscriber_id,
               _SUBSCRIBERS.c.status == "confirmed")
        .exists()
    )
    result = session.execute(
        update(_DELIVERIES)
        .where(_DELIVERIES.c.digest_id == digest_id, confirmed)
        .values(status="pending", message_id=None, last_error=None, sent_at=None,
                updated_at=now)
    )
    return _rowcount(result)


def unfinished_deliveries(
    db: Session | Connection, digest_id: int, after_id: int = 0, limit: int = 500
) -> list[LedgerRow]:
    """The next ``limit`` rows still 'pending' or 'sending' (left by a run that
    stopped mid-message), by id, after ``after_id``: keyset paging, so a big
    list is read in batches."""
    d, s = _DELIVERIES.c, _SUBSCRIBERS.c
    rows = db.execute(
        select(d.id, d.subscriber_id, s.email, s.email_key, d.status, d.message_id,
               s.hard_failures)
        .join_from(_DELIVERIES, _SUBSCRIBERS, s.id == d.subscriber_id)
        .where(d.digest_id == digest_id, d.status.in_(UNFINISHED), d.id > after_id)
        .order_by(d.id)
        .limit(limit)
    )
    return [LedgerRow(*row) for row in rows]


# The per-message statements are built once, with bind parameters, and run
# through _Prepared below: building, cache-keying and executing a statement
# through SQLAlchemy costs more than running it on SQLite.
_D, _S = _DELIVERIES.c, _SUBSCRIBERS.c
_UNFINISHED_ROW = or_(_D.status == "pending", _D.status == "sending")
_CLAIM = (
    update(_DELIVERIES)
    .where(_D.id == bindparam("b_id"), _UNFINISHED_ROW,
           select(_S.id).where(_S.id == _D.subscriber_id, _S.status == "confirmed").exists())
    .values(status="sending", attempts=_D.attempts + 1, message_id=bindparam("b_message_id"),
            updated_at=bindparam("b_now"))
)
_SKIP = (update(_DELIVERIES).where(_D.id == bindparam("b_id"), _UNFINISHED_ROW)
         .values(status="skipped", updated_at=bindparam("b_now")))
_FINISH = (
    update(_DELIVERIES).where(_D.id == bindparam("b_id"))
    .values(status=bindparam("b_status"), updated_at=bindparam("b_now"),
            last_error=bindparam("b_error"), attempts=_D.attempts + bindparam("b_extra", 0),
            sent_at=func.coalesce(bindparam("b_sent_at", type_=UTCDateTime()), _D.sent_at))
)
_COUNT_FAILURE = (update(_SUBSCRIBERS).where(_S.id == bindparam("b_id"))
                  .values(hard_failures=_S.hard_failures + 1))
_BOUNCE = (
    update(_SUBSCRIBERS)
    .where(_S.id == bindparam("b_id"), _S.status == "confirmed",
           _S.hard_failures >= bindparam("b_max"))
    .values(status="bounced", bounced_at=bindparam("b_now"), token_nonce=bindparam("b_nonce"))
)
_CLEAR_FAILURES = update(_SUBSCRIBERS).where(_S.id == bindparam("b_id")).values(hard_failures=0)


class _Prepared:
    """A statement compiled once per dialect and run straight on the DBAPI cursor.

    The two statements of every message cost ~5 us this way instead of ~45 us
    through ``Connection.execute``, and several times that between two SMTP
    transactions (cold caches). Types still apply: each value goes through its
    column type's bind processor (UTCDateTime included), as SQLAlchemy would.
    Changes made this way must be committed with ``raw_commit``.
    """

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._by_dialect: dict[str, tuple[str, list[str] | None, dict[str, Any],
                                          dict[str, Any]]] = {}

    def _prepare(self, dialect: Any) -> tuple[str, list[str] | None, dict[str, Any],
                                              dict[str, Any]]:
        compiled = self.statement.compile(dialect=dialect)
        ours = [name for name in compiled.binds if name.startswith("b_")]
        fixed = compiled.construct_params({name: None for name in ours})
        processors: dict[str, Any] = {}
        for name in fixed:
            processor = compiled.binds[name].type.bind_processor(dialect)
            if processor is None:
                continue
            if name in ours:
                processors[name] = processor
            elif fixed[name] is not None:
                fixed[name] = processor(fixed[name])
        order = list(compiled.positiontup) if compiled.positional else None
        prepared = (compiled.string, order, fixed, processors)
        self._by_dialect[dialect.name] = prepared
        return prepared

    def run(self, conn: Connection, values: dict[str, Any]) -> int:
        sql, order, fixed, processors = (self._by_dialect.get(conn.dialect.name)
                                         or self._prepare(conn.dialect))
        params = dict(fixed)
        for name, value in values.items():
            processor = processors.get(name)
            params[name] = processor(value) if processor and value is not None else value
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, [params[n] for n in order] if order is not None else params)
            return int(cursor.rowcount)
        finally:
            cursor.close()


def raw_commit(conn: Connection) -> None:
    """Commit what ``_Prepared`` statements changed (they bypass the Connection)."""
    conn.connection.dbapi_connection.commit()  # type: ignore[union-attr]


_CLAIM_FAST, _SKIP_FAST, _FINISH_FAST = _Prepared(_CLAIM), _Prepared(_SKIP), _Prepared(_FINISH)


def claim_delivery(db: Connection, delivery_id: int, message_id: str, now: datetime) -> bool:
    """Mark a row 'sending' (one more attempt) if it is unfinished and its
    subscriber is still confirmed; False otherwise. Commit with raw_commit."""
    return _CLAIM_FAST.run(db, {"b_id": delivery_id, "b_message_id": message_id,
                                "b_now": now}) == 1


def skip_delivery(db: Connection, delivery_id: int, now: datetime) -> bool:
    """An unfinished row whose subscriber is no longer confirmed: 'skipped'."""
    return _SKIP_FAST.run(db, {"b_id": delivery_id, "b_now": now}) == 1


def finish_delivery(
    db: Connection, delivery_id: int, status: str, now: datetime, *,
    error: str | None = None, extra_attempts: int = 0,
) -> None:
    """Record how a delivery ended: 'sent', 'failed', or back to 'pending'.
    Commit with raw_commit."""
    _FINISH_FAST.run(db, {"b_id": delivery_id, "b_status": status, "b_now": now,
                          "b_error": error, "b_extra": extra_attempts,
                          "b_sent_at": now if status == "sent" else None})


_COUNT_FAILURE_FAST, _BOUNCE_FAST = _Prepared(_COUNT_FAILURE), _Prepared(_BOUNCE)
_CLEAR_FAILURES_FAST = _Prepared(_CLEAR_FAILURES)


def record_hard_failure(
    db: Connection, subscriber_id: int, max_failures: int, nonce: str, now: datetime
) -> bool:
    """Count a permanent (5xx) failure; at ``max_failures`` the subscriber is
    'bounced'. Returns True if this made them bounced. Commit with raw_commit."""
    _COUNT_FAILURE_FAST.run(db, {"b_id": subscriber_id})
    return _BOUNCE_FAST.run(db, {"b_id": subscriber_id, "b_max": max_failures, "b_now": now,
                                 "b_nonce": nonce}) == 1


def clear_hard_failures(db: Connection, subscriber_id: int) -> None:
    """A delivery went through: failures count in a row, so start again at 0."""
    _CLEAR_FAILURES_FAST.run(db, {"b_id": subscriber_id})


def count_confirmed(session: Session) -> int:
    return session.scalar(
        select(func.count()).select_from(Subscriber).where(Subscriber.status == "confirmed")
    ) or 0


def count_unfinished(db: Session | Connection, digest_id: int) -> int:
    """Rows of one digest still 'pending' or 'sending'."""
    return int(db.execute(
        select(func.count()).select_from(_DELIVERIES)
        .where(_DELIVERIES.c.digest_id == digest_id, _DELIVERIES.c.status.in_(UNFINISHED))
    ).scalar_one())


def mark_digest_sent(db: Session | Connection, digest_id: int, now: datetime) -> None:
    db.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sent", sent_at=now))


def mark_digest_sending(session: Session, digest_id: int) -> None:
    session.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sending"))


def sent_digests(session: Session) -> list[tuple[str, str, datetime | None]]:
    """(week, subject, sent_at) of every sent digest, newest week first."""
    rows = session.execute(
        select(Digest.week, Digest.subject, Digest.sent_at)
        .where(Digest.status == "sent").order_by(Digest.week.desc())
    )
    return [(week, subject, sent_at) for week, subject, sent_at in rows]


# --- the send lock on a digest -------------------------------------------------------

def acquire_digest_lock(
    session: Session, digest_id: int, owner: str, now: datetime, expires: datetime
) -> bool:
    """Take the lock if it is free or its lease ran out: one atomic UPDATE."""
    d = _DIGESTS.c
    result = session.execute(
        update(_DIGESTS)
        .where(d.id == digest_id,
               or_(d.lock_owner.is_(None), d.lock_expires_at < now, d.lock_owner == owner))
        .values(lock_owner=owner, lock_expires_at=expires)
    )
    return _rowcount(result) == 1


def take_over_digest_lock(
    session: Session, digest_id: int, stale_owner: str, owner: str, expires: datetime
) -> bool:
    """Take a lock from an owner known to be dead (only if it still holds it)."""
    d = _DIGESTS.c
    result = session.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == stale_owner)
        .values(lock_owner=owner, lock_expires_at=expires)
    )
    return _rowcount(result) == 1


def renew_digest_lock(
    db: Session | Connection, digest_id: int, owner: str, expires: datetime
) -> bool:
    d = _DIGESTS.c
    result = db.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == owner)
        .values(lock_expires_at=expires)
    )
    return _rowcount(result) == 1


def release_digest_lock(session: Session, digest_id: int, owner: str) -> None:
    d = _DIGESTS.c
    session.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == owner)
        .values(lock_owner=None, lock_expires_at=None)
    )


def digest_lock(session: Session, digest_id: int) -> tuple[str | None, datetime | None]:
    row = session.execute(
        select(Digest.lock_owner, Digest.lock_expires_at).where(Digest.id == digest_id)
    ).one()
    return row[0], row[1]


def count_unfinished_or_new(session: Session, digest_id: int) -> int:
    """How many a resumed send would still deliver to: rows pending or sending,
    plus confirmed subscribers with no row yet."""
    d, s = _DELIVERIES.c, _SUBSCRIBERS.c
    unfinished = session.scalar(
        select(func.count()).select_from(_DELIVERIES)
        .where(d.digest_id == digest_id, d.status.in_(UNFINISHED))) or 0
    has_row = select(d.id).where(d.digest_id == digest_id, d.subscriber_id == s.id).exists()
    new = session.scalar(
        select(func.count()).select_from(_SUBSCRIBERS)
        .where(s.status == "confirmed", ~has_row)) or 0
    return int(unfinished) + int(new)
