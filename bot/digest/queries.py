"""Digests in the database: which entries a week holds, frozen digests and
their state. Functions take a Session (or Connection) and leave committing to
the caller."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import ColumnElement, Connection, Table, func, insert, or_, select, update
from sqlalchemy.orm import Session, aliased

from bot.digest.week import week_of
from bot.models import Digest, DigestEntry, Entry, EntrySource, Feed, FeedState

_DIGESTS = cast(Table, Digest.__table__)


def digest_for_week(session: Session, week: str) -> Digest | None:
    """The frozen digest of a week ("2026-W40"), if its send has started."""
    return session.scalar(select(Digest).where(Digest.week == week))


def frozen_weeks(session: Session) -> list[str]:
    """Labels of every week whose digest has been frozen (sending or sent)."""
    return list(session.scalars(select(Digest.week).order_by(Digest.week)))


def held_backlog(session: Session, feed_id: int, tz: str) -> tuple[int, int, str | None]:
    """A feed's held-back backlog (bot.ingest.feeds) as (posts of weeks up to
    the last week mailed, never mailed: the schedule never goes back to a week
    before it; posts of later weeks, part of their own week's digest; that last
    week's label), weeks counted in the time zone ``tz``."""
    frozen = frozen_weeks(session)
    last = max(frozen) if frozen else None  # ISO labels (2026-W40) sort as the weeks do
    published = list(session.scalars(select(Entry.published_at).where(
        Entry.feed_id == feed_id, Entry.backlog == "held")))
    later = sum(when is not None and last is not None and week_of(when, tz).label > last
                for when in published)
    return len(published) - later, later, last


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
    """Entries with start <= published_at < end that no frozen digest holds yet
    and that may be mailed (see ``mailable``)."""
    frozen = select(DigestEntry.entry_id)
    return session.scalars(
        select(Entry)
        .where(Entry.published_at >= start, Entry.published_at < end, Entry.id.not_in(frozen),
               *mailable())
        .order_by(Entry.published_at, Entry.id)
    ).all()


def backfill_entries_before(session: Session, moment: datetime) -> Sequence[Entry]:
    """The backlog a feed was added with ``--backfill``, published before ``moment``
    and not yet in a digest: it goes into the next digest, as late additions."""
    frozen = select(DigestEntry.entry_id)
    return session.scalars(
        select(Entry)
        .where(Entry.published_at < moment, Entry.backlog == "backfill",
               Entry.id.not_in(frozen), *mailable())
        .order_by(Entry.published_at, Entry.id)
    ).all()


def mailable() -> list[ColumnElement[bool]]:
    """Conditions an entry must meet to go into a digest (issue 11): its
    article -- the same link key or the same fingerprint (``bot.ingest.urls``)
    -- is in no frozen digest yet, so an article mailed once is never mailed
    again, whatever feed brings it back."""
    mailed = aliased(Entry)
    in_digest = select(DigestEntry.entry_id).where(DigestEntry.entry_id == mailed.id)
    links = select(mailed.link_key).where(mailed.link_key.is_not(None), in_digest.exists())
    prints = select(mailed.fingerprint).where(mailed.fingerprint.is_not(None), in_digest.exists())
    return [
        or_(Entry.link_key.is_(None), Entry.link_key.not_in(links)),
        or_(Entry.fingerprint.is_(None), Entry.fingerprint.not_in(prints)),
    ]


def active_feed_count(session: Session) -> int:
    """How many feeds are polled: with more than one, each entry names its source."""
    return session.scalar(select(func.count()).select_from(Feed)
                          .where(Feed.status == FeedState.ACTIVE.value)) or 0


def source_names(session: Session, entry_ids: Iterable[int]) -> dict[int, str]:
    """entry id -> the names of the feeds that brought it, in the order the
    feeds were added (not the order their polls happened to store it), each
    name once (``Feed.display_name``; removed feeds left out unless they are
    all there is)."""
    names: dict[int, list[tuple[bool, str]]] = {}
    for chunk in _chunks(sorted(set(entry_ids))):
        primary = select(Entry.id, Feed.id.label("feed_id"), Feed.name, Feed.title, Feed.url,
                         Feed.status).join(Feed, Feed.id == Entry.feed_id).where(Entry.id.in_(chunk))
        others = select(EntrySource.entry_id, Feed.id.label("feed_id"), Feed.name, Feed.title,
                        Feed.url, Feed.status).join(Feed, Feed.id == EntrySource.feed_id) \
            .where(EntrySource.entry_id.in_(chunk))
        rows = session.execute(primary.union_all(others).order_by("feed_id"))
        for entry_id, _feed_id, name, title, url, status in rows:
            names.setdefault(entry_id, []).append(
                (status == FeedState.REMOVED.value, name or title or url))
    shown = {}
    for entry_id, found in names.items():
        live = [name for removed, name in found if not removed] or [name for _, name in found]
        shown[entry_id] = " · ".join(dict.fromkeys(live))
    return shown


def frozen_entry_ids(session: Session, entry_ids: Iterable[int]) -> set[int]:
    """Which of these entries already belong to a frozen digest."""
    ids = list(entry_ids)
    if not ids:
        return set()
    return set(session.scalars(select(DigestEntry.entry_id).where(DigestEntry.entry_id.in_(ids))))


def latest_published_before(session: Session, moment: datetime) -> datetime | None:
    """The newest publication time earlier than ``moment``, or None."""
    return session.scalar(select(func.max(Entry.published_at)).where(Entry.published_at < moment))


def entries_published_between(session: Session, start: datetime, end: datetime) -> Sequence[Entry]:
    """Entries with start <= published_at < end, oldest first."""
    return session.scalars(
        select(Entry)
        .where(Entry.published_at >= start, Entry.published_at < end)
        .order_by(Entry.published_at, Entry.id)
    ).all()


def add_digest(
    session: Session, *, week: str, subject: str, html: str, text: str,
    entry_count: int, paper_count: int, entries: Iterable[tuple[int, bool]],
    archive_html: str | None = None,
) -> Digest:
    """Create a digest row (status 'sending') and its entry rows, then flush.

    The unique constraints on ``digests.week`` and ``digest_entries.entry_id``
    make the flush fail if another run froze the week or one of its entries first.
    """
    digest = Digest(week=week, status="sending", subject=subject, html=html, text=text,
                    archive_html=archive_html, entry_count=entry_count, paper_count=paper_count)
    session.add(digest)
    session.flush()
    rows = [{"digest_id": digest.id, "entry_id": entry_id, "late": late}
            for entry_id, late in entries]
    if rows:
        session.execute(insert(DigestEntry), rows)
    session.flush()
    return digest


def weeks_being_sent(session: Session) -> list[str]:
    """Weeks whose digest send started and has not finished (status 'sending')."""
    return list(session.scalars(
        select(Digest.week).where(Digest.status == "sending").order_by(Digest.week)))


def latest_digest(session: Session) -> Digest | None:
    """The digest of the most recent week that has one."""
    return session.scalar(select(Digest).order_by(Digest.week.desc()).limit(1))


def sent_digests(session: Session) -> list[tuple[str, str, datetime | None]]:
    """(week, subject, sent_at) of every sent digest, newest week first."""
    rows = session.execute(
        select(Digest.week, Digest.subject, Digest.sent_at)
        .where(Digest.status == "sent").order_by(Digest.week.desc())
    )
    return [(week, subject, sent_at) for week, subject, sent_at in rows]


def latest_sent_digests(session: Session, limit: int) -> list[Digest]:
    """The newest ``limit`` sent digests, newest week first (the archive feed)."""
    return list(session.scalars(
        select(Digest).where(Digest.status == "sent").order_by(Digest.week.desc()).limit(limit)))


def sent_digest_html(session: Session, week: str) -> str | None:
    """The HTML of a week's digest once it has been sent (the web archive), else
    None: the copy with every entry when the email showed fewer."""
    html = session.scalar(select(func.coalesce(Digest.archive_html, Digest.html))
                          .where(Digest.week == week, Digest.status == "sent"))
    return None if html is None else str(html)


def mark_digest_sent(db: Session | Connection, digest_id: int, now: datetime) -> None:
    db.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sent", sent_at=now))


def mark_digest_sending(session: Session, digest_id: int) -> None:
    session.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sending"))


def frozen_digests(session: Session, limit: int | None = None) -> list[Digest]:
    """Every frozen digest (sending or sent), newest week first (the admin console's archive)."""
    query = select(Digest).order_by(Digest.week.desc())
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def _chunks(ids: Sequence[int], size: int = 500) -> Iterable[list[int]]:
    """``ids`` in lists of ``size``: an IN list stays within every backend's limit on parameters."""
    for start in range(0, len(ids), size):
        yield list(ids[start:start + size])
