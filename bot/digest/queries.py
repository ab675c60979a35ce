"""Digests in the database: which entries a week holds, frozen digests and
their state. Functions take a Session (or Connection) and leave committing to
the caller."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, func, insert, select, update
from sqlalchemy.orm import Session

from bot.models import Digest, DigestEntry, Entry

_DIGESTS = cast(Table, Digest.__table__)


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


def mark_digest_sent(db: Session | Connection, digest_id: int, now: datetime) -> None:
    db.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sent", sent_at=now))


def mark_digest_sending(session: Session, digest_id: int) -> None:
    session.execute(update(_DIGESTS).where(_DIGESTS.c.id == digest_id)
                    .values(status="sending"))
