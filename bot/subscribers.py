"""Subscriber rows: the queries every subscriber flow uses (subscriptions, the
send's recipient count, the CLI lists). Functions take a Session and leave
committing to the caller."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from bot.models import Delivery, Digest, Subscriber


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


def subscriber_counts(session: Session) -> dict[str, int]:
    """Number of subscribers per state (pending, confirmed, unsubscribed, bounced)."""
    rows = session.execute(select(Subscriber.status, func.count()).group_by(Subscriber.status))
    return {status: count for status, count in rows}


def count_confirmed(session: Session) -> int:
    return session.scalar(
        select(func.count()).select_from(Subscriber).where(Subscriber.status == "confirmed")
    ) or 0


def search_subscribers(session: Session, text: str = "", status: str | None = None,
                       limit: int = 100) -> Sequence[Subscriber]:
    """Subscribers whose address or name contains ``text`` (any case), newest first (the admin console)."""
    query = select(Subscriber).order_by(Subscriber.id.desc()).limit(limit)
    if text.strip():
        escaped = text.strip().lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(or_(Subscriber.email_key.like(f"%{escaped}%", escape="\\"),
                                func.lower(Subscriber.name).like(f"%{escaped}%", escape="\\")))
    if status:
        query = query.where(Subscriber.status == status)
    return session.scalars(query).all()


def deliveries_of(session: Session, subscriber_id: int) -> list[tuple[str, Delivery]]:
    """(week, delivery row) of every digest sent, or being sent, to one subscriber, newest first."""
    rows = session.execute(
        select(Digest.week, Delivery).join(Digest, Digest.id == Delivery.digest_id)
        .where(Delivery.subscriber_id == subscriber_id).order_by(Digest.week.desc()))
    return [(week, delivery) for week, delivery in rows]
