"""The database schema as SQLAlchemy 2.x typed models.

The schema itself is created only by the Alembic migrations under
``migrations/``; a test checks that these models and the migrations agree.
Everything here is portable SQL (SQLite and PostgreSQL): no SQLite-only types,
timestamps stored timezone-aware in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Named constraints make migrations deterministic on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that always comes back timezone-aware in UTC.

    SQLite has no time zones and drops them; PostgreSQL keeps them. Storing
    naive UTC and re-attaching UTC on the way out gives the same behaviour on
    both, and refuses naive datetimes on the way in so local times can't sneak
    into the database.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC).replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Feed(Base):
    """A feed we poll, with what conditional GET and health reporting need."""

    __tablename__ = "feeds"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(String(2000), unique=True)
    title: Mapped[str | None] = mapped_column(String(500))
    etag: Mapped[str | None] = mapped_column(String(500))
    last_modified: Mapped[str | None] = mapped_column(String(100))
    # sha256 of the last body parsed: an unchanged 200 skips parsing entirely
    body_hash: Mapped[str | None] = mapped_column(String(64))
    last_polled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    entries: Mapped[list[Entry]] = relationship(back_populates="feed")


class Entry(Base):
    """One feed item, stored once per feed under a stable identity key."""

    __tablename__ = "entries"
    __table_args__ = (UniqueConstraint("feed_id", "key", name="uq_entries_feed_id_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    feed_id: Mapped[int] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"), index=True)
    # guid, else link, else a content hash (see feeds.entry_key)
    key: Mapped[str] = mapped_column(String(512))
    link: Mapped[str | None] = mapped_column(String(2000))
    title: Mapped[str] = mapped_column(Text)  # plain text, unescaped: escape on output
    summary_html: Mapped[str] = mapped_column(Text, default="")  # sanitised with nh3
    summary_text: Mapped[str] = mapped_column(Text, default="")  # plain text
    papers: Mapped[list[str]] = mapped_column(JSON, default=list)
    published_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # False when the feed gave no date and published_at is the first-seen time
    dated: Mapped[bool] = mapped_column(Boolean, default=True)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    content_hash: Mapped[str] = mapped_column(String(64))

    feed: Mapped[Feed] = relationship(back_populates="entries")


class Digest(Base):
    """The digest of one ISO week, frozen when its send starts.

    ``html`` and ``text`` are rendered and CSS-inlined once; personal links
    are filled in per recipient at send time. The lock columns stop two send
    runs (the scheduler and an admin, say) from working on it at once.
    """

    __tablename__ = "digests"

    id: Mapped[int] = mapped_column(primary_key=True)
    week: Mapped[str] = mapped_column(String(10), unique=True)  # "2026-W40"
    status: Mapped[str] = mapped_column(String(20), default="sending")  # sending | sent
    subject: Mapped[str] = mapped_column(String(500))
    html: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    entry_count: Mapped[int] = mapped_column(Integer, default=0)
    paper_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lock_owner: Mapped[str | None] = mapped_column(String(100))
    lock_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    entries: Mapped[list[DigestEntry]] = relationship(back_populates="digest")


class DigestEntry(Base):
    """Which entries a frozen digest holds.

    ``entry_id`` is unique: an entry can be in at most one frozen digest, so
    the database itself guarantees no entry is ever sent twice.
    """

    __tablename__ = "digest_entries"

    digest_id: Mapped[int] = mapped_column(
        ForeignKey("digests.id", ondelete="CASCADE"), primary_key=True
    )
    entry_id: Mapped[int] = mapped_column(
        ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True, unique=True
    )
    late: Mapped[bool] = mapped_column(Boolean, default=False)

    digest: Mapped[Digest] = relationship(back_populates="entries")
    entry: Mapped[Entry] = relationship()


class Subscriber(Base):
    """A reader's address and where it stands: pending, confirmed, unsubscribed, bounced."""

    __tablename__ = "subscribers"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320))  # normalised by email-validator
    # lower-cased address: uniqueness is case-insensitive on every backend
    email_key: Mapped[str] = mapped_column(String(320), unique=True)
    status: Mapped[str] = mapped_column(String(20), default="pending", index=True)
    # rotated on every state change, so a used confirm link can't be used again
    token_nonce: Mapped[str] = mapped_column(String(64))
    hard_failures: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unsubscribed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    bounced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Delivery(Base):
    """The delivery ledger: one row per (digest, subscriber)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("digest_id", "subscriber_id", name="uq_deliveries_digest_id_subscriber_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    digest_id: Mapped[int] = mapped_column(ForeignKey("digests.id", ondelete="CASCADE"), index=True)
    subscriber_id: Mapped[int] = mapped_column(
        ForeignKey("subscribers.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(String(20), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    message_id: Mapped[str | None] = mapped_column(String(300))
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
