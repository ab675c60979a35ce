"""The database schema as SQLAlchemy 2.x typed models.

The schema itself is created only by the Alembic migrations under
``migrations/``; a test checks that these models and the migrations agree.
Everything here is portable SQL (SQLite and PostgreSQL): no SQLite-only types,
timestamps stored timezone-aware in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
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
    false,
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
    # managed feeds (issue 11): the operator's name for it, and one of FeedState;
    # a removed feed keeps its row so the entries already mailed keep their source
    name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="active", server_default="active",
                                        index=True)
    # entries published before this are the feed's backlog: set when the feed is
    # added after a digest went out; None means it has no backlog to hold back
    backlog_before: Mapped[datetime | None] = mapped_column(UTCDateTime)
    backfill: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # the first failed poll of the current streak, and when the admin was told of it
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    alerted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    entries: Mapped[list[Entry]] = relationship(back_populates="feed")

    @property
    def display_name(self) -> str:
        """What a person calls the feed: its given name, else its own title, else its URL."""
        return self.name or self.title or self.url


class FeedState(StrEnum):
    """``feeds.status``: polled, not polled for now, or gone (kept for its history)."""

    ACTIVE = "active"
    PAUSED = "paused"
    REMOVED = "removed"


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
    # one article, one entry (issue 11): the link reduced to the article
    # (bot.ingest.urls.article_key) and a hash of title + summary; a second feed
    # bringing the same article only adds an EntrySource row
    link_key: Mapped[str | None] = mapped_column(String(1000), index=True)
    fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)
    # None, or "held" (a new feed's backlog: never mailed) or "backfill" (a new
    # feed's backlog the operator asked for: goes into the next digest)
    backlog: Mapped[str | None] = mapped_column(String(10))

    feed: Mapped[Feed] = relationship(back_populates="entries")


class EntrySource(Base):
    """Another feed that carries an entry (the first one is ``Entry.feed``),
    under that feed's own key for it, so its next poll knows the item."""

    __tablename__ = "entry_sources"

    feed_id: Mapped[int] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    entry_id: Mapped[int] = mapped_column(ForeignKey("entries.id", ondelete="CASCADE"), index=True)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EditorLabel(Base):
    """A placement the editor made by hand (``draft move`` or ``exclude``, from the CLI or the
    console): a label for that feed, which the grouping's editor reader follows in later weeks
    (``bot.themes.readers.editor``). The entry's text is kept, so the label outlives the entry.

    ``theme_key`` is the theme the entry was moved to; None for an exclusion or a move to a
    section that is not a theme (the catch-all, a section from shared terms)."""

    __tablename__ = "editor_labels"

    id: Mapped[int] = mapped_column(primary_key=True)
    feed_id: Mapped[int | None] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"), index=True)
    entry_id: Mapped[int | None] = mapped_column(ForeignKey("entries.id", ondelete="SET NULL"))
    week: Mapped[str] = mapped_column(String(10))
    action: Mapped[str] = mapped_column(String(10))  # "move" or "exclude"
    section: Mapped[str] = mapped_column(String(300))  # the section key it was put in ("" for exclude)
    theme_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    title: Mapped[str] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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
    # the web copy with every entry, when the email shows fewer (DIGESTBOT_MAX_ENTRIES)
    archive_html: Mapped[str | None] = mapped_column(Text)
    entry_count: Mapped[int] = mapped_column(Integer, default=0)
    paper_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

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


class SubscriberState(StrEnum):
    """Where a subscriber stands (``subscribers.status``), in life-cycle order.

    pending (asked, not confirmed) -> confirmed -> unsubscribed, or bounced
    after too many permanent failures. Members are plain strings in the database.
    """

    PENDING = "pending"
    CONFIRMED = "confirmed"
    UNSUBSCRIBED = "unsubscribed"
    BOUNCED = "bounced"
    # marked the digest as spam (an ARF report from a feedback loop): never mailed again
    COMPLAINED = "complained"


SUBSCRIBER_STATES: tuple[str, ...] = tuple(state.value for state in SubscriberState)


class Subscriber(Base):
    """A reader's address and where it stands: one of ``SubscriberState``."""

    __tablename__ = "subscribers"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320))  # normalised by email-validator
    # lower-cased address: uniqueness is case-insensitive on every backend
    email_key: Mapped[str] = mapped_column(String(320), unique=True)
    status: Mapped[str] = mapped_column(String(20), default=SubscriberState.PENDING.value, index=True)
    # rotated on every state change, so a used confirm link can't be used again
    token_nonce: Mapped[str] = mapped_column(String(64))
    hard_failures: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unsubscribed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    bounced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    complained_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # how the current state came about when the state alone doesn't say:
    # "mail" (unsubscribed by a mail to the List-Unsubscribe mailto: address),
    # "bounce" (bounced by bounce mails, not SMTP replies); None otherwise
    status_reason: Mapped[str | None] = mapped_column(String(20))
    # the sections this reader chose (issue 36): theme keys of the themes file,
    # sorted and comma-joined (bot.choices); None: every section
    themes: Mapped[str | None] = mapped_column(Text)
    # what to call them (a CSV import's ``name`` column, the console): optional
    name: Mapped[str | None] = mapped_column(String(200))


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
    # indexed: a bounce names its message (VERP, or the returned headers)
    message_id: Mapped[str | None] = mapped_column(String(300), index=True)
    # what came back after the relay took it (bot.bounces): bounced | delayed |
    # complained | unsubscribed; a bounce also makes ``status`` 'failed'
    feedback: Mapped[str | None] = mapped_column(String(20))
    feedback_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # which send worker holds this row, until when: several workers (threads,
    # processes, machines) share one digest, and a dead one's rows free up
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the reader's theme choice when this row was made (bot.choices): the copy
    # this row gets is fixed with the row, so a resend carries the same content
    themes: Mapped[str | None] = mapped_column(Text)


class DigestVariant(Base):
    """A frozen digest's copy for one theme choice (issue 36), rendered once per
    (digest, choice) and kept, so a resumed send mails exactly what it began with.
    Personal links are placeholders, as in ``Digest.html``."""

    __tablename__ = "digest_variants"

    digest_id: Mapped[int] = mapped_column(ForeignKey("digests.id", ondelete="CASCADE"),
                                           primary_key=True)
    themes: Mapped[str] = mapped_column(String(1000), primary_key=True)  # a canonical choice
    subject: Mapped[str] = mapped_column(String(500))
    html: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    # choices that give the same sections this week share one copy: this row's
    # is that choice's row (subject, html and text are then empty)
    copy_of: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Lease(Base):
    """A named lease: at most one holder at a time (e.g. the weekly send job
    when several `digestbot run` instances share one database)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RateHit(Base):
    """One counted request for a web rate limit, shared by every web instance."""

    __tablename__ = "rate_hits"

    id: Mapped[int] = mapped_column(primary_key=True)
    bucket: Mapped[str] = mapped_column(String(300), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class DraftWeek(Base):
    """The editor's desk for one week's digest before its send starts: the
    editor's note, the order of its sections, and its approval.

    ``held_at`` is set when a scheduled send found the week unapproved (with
    ``DIGESTBOT_REQUIRE_APPROVAL``), so the service sends it once it is approved;
    ``reminded_at`` when the admin was mailed a reminder, so it goes once.
    """

    __tablename__ = "draft_weeks"

    week: Mapped[str] = mapped_column(String(10), primary_key=True)  # "2026-W40"
    note: Mapped[str] = mapped_column(Text, default="")  # Markdown, sanitised on output
    section_order: Mapped[list[str]] = mapped_column(JSON, default=list)  # section keys
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    approved_by: Mapped[str | None] = mapped_column(String(100))
    held_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reminded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DraftEntry(Base):
    """One entry's edit in one week's draft: left out, or moved to a section."""

    __tablename__ = "draft_entries"

    week: Mapped[str] = mapped_column(String(10), primary_key=True)
    entry_id: Mapped[int] = mapped_column(
        ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True, index=True)
    excluded: Mapped[bool] = mapped_column(Boolean, default=False)
    section: Mapped[str | None] = mapped_column(String(200))  # a section key (bot.digest.views)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DraftSection(Base):
    """A section's name and description for one week, as the editor set them.

    ``name`` "" leaves the section its own name; ``description`` None leaves it
    its theme's description (unless renamed: a new name drops the old theme's
    words), "" shows none."""

    __tablename__ = "draft_sections"

    week: Mapped[str] = mapped_column(String(10), primary_key=True)
    section: Mapped[str] = mapped_column(String(200), primary_key=True)  # a section key
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MailboxMessage(Base):
    """One mail read from the bounce mailbox, and what it was taken for.

    ``key`` (a hash of its Message-ID, else of its bytes) is unique, so a mail
    is processed once even if the mailbox could not be marked (POP3 has no
    flags) or two readers ran at once. ``kind`` is bounce | delayed |
    complaint | unsubscribe | ignored (not understood: left in the mailbox) |
    unmatched (a bounce, complaint or unsubscribe without evidence the bot
    minted: it changed nobody and is left in the mailbox; ``subscriber_id`` is
    set only when the subscriber was mailed the signed unsubscribe link).
    """

    __tablename__ = "mailbox_messages"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(20), index=True)
    message_id: Mapped[str | None] = mapped_column(String(300))
    sender: Mapped[str | None] = mapped_column(String(320))
    subject: Mapped[str | None] = mapped_column(String(500))
    address: Mapped[str | None] = mapped_column(String(320))  # the subscriber it named
    subscriber_id: Mapped[int | None] = mapped_column(
        ForeignKey("subscribers.id", ondelete="SET NULL"), index=True)
    digest_id: Mapped[int | None] = mapped_column(ForeignKey("digests.id", ondelete="SET NULL"))
    detail: Mapped[str | None] = mapped_column(Text)  # the diagnostic, or why it was ignored
    processed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LlmReading(Base):
    """A language model's answer to one request (``bot.llm``), cached: an entry's
    reading (``kind`` "entry") or a section's introduction ("intro").

    ``key`` is the hash of the request body (``bot.llm.prompt.body_hash``), which
    holds the entry's text, the themes as the prompt shows them, the model and the
    prompt, so a change in any of them asks again. ``answer`` is the validated
    answer; ``error`` says why an answer was refused (it is kept, so a bad answer
    is not asked for at every poll; ``digestbot themes reread`` asks again).
    """

    __tablename__ = "llm_readings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    model: Mapped[str] = mapped_column(String(200))
    answer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LlmUsage(Base):
    """The language model's calls on one UTC day, for the daily budget and `digestbot status`."""

    __tablename__ = "llm_usage"

    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # "2026-12-02"
    calls: Mapped[int] = mapped_column(Integer, default=0)
    cache_hits: Mapped[int] = mapped_column(Integer, default=0)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_failure_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_failure: Mapped[str | None] = mapped_column(String(300))


class DraftIntro(Base):
    """A section's introduction for one week, as the editor wrote it (empty: none)."""

    __tablename__ = "draft_intros"

    week: Mapped[str] = mapped_column(String(10), primary_key=True)
    section: Mapped[str] = mapped_column(String(200), primary_key=True)  # a section key
    text: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
