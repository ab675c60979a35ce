"""Freezing a digest: the moment its send starts, its entries and rendered
email are recorded, so every later run sees exactly that digest."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot import models
from bot.digest import queries
from bot.digest.build import DigestData
from bot.errors import BotError


class RenderedEmail(Protocol):
    """What freezing keeps of the rendered email (``bot.render.Rendered`` has it)."""

    @property
    def subject(self) -> str: ...
    @property
    def html(self) -> str: ...
    @property
    def text(self) -> str: ...


class DigestConflictError(BotError):
    """Another run froze this week or some of its entries first."""


def freeze_digest(session: Session, data: DigestData, rendered: RenderedEmail) -> models.Digest:
    """Record that this digest's send starts: the Digest row (status 'sending')
    plus one DigestEntry per entry. From then on ``build_digest`` returns exactly
    these entries for the week. If the week is frozen already, its row is
    returned unchanged, so a resumed send keeps the digest it started with.

    ``rendered`` holds the subject, HTML (CSS already inlined, once) and text
    that every recipient gets, with personal links still placeholders.
    """
    existing = queries.digest_for_week(session, data.week.label)
    if existing is not None:
        return existing
    taken = queries.frozen_entry_ids(session, data.entry_ids)
    if taken:
        raise DigestConflictError(
            f"{data.week.label}: {len(taken)} of its entries already belong to another digest",
            hint="build the digest again (it was built before another week was frozen) and retry",
        )
    late = {entry.entry_id: entry.late for entry in data.entries}
    try:
        return queries.add_digest(
            session, week=data.week.label, subject=rendered.subject,
            html=rendered.html, text=rendered.text,
            archive_html=getattr(rendered, "archive_html", None),  # the web copy, if the email is capped
            entry_count=data.entry_count, paper_count=data.paper_count,
            entries=sorted(late.items()),
        )
    except IntegrityError as exc:
        raise DigestConflictError(
            f"{data.week.label}: another run froze this week or its entries at the same time",
            hint="roll back and retry: the digest that run froze will be used",
        ) from exc
