"""What the bounce mailbox did, for `digestbot status`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.bounces.mailboxes import safe_location
from bot.config import Settings
from bot.models import Delivery, MailboxMessage


def bounce_status(session: Session, settings: Settings, digest_id: int | None) -> dict[str, Any]:
    """The mailbox (no password), when mail was last handled, how many of each
    kind so far (``unmatched``: claims nothing we minted backs, ignored), and
    what came back for the last digest (delivery feedback)."""
    kinds = dict(session.execute(select(MailboxMessage.kind, func.count())
                                 .group_by(MailboxMessage.kind)).tuples().all())
    last = session.scalar(select(func.max(MailboxMessage.processed_at)))
    feedback: dict[str, int] = {}
    if digest_id is not None:
        rows = session.execute(
            select(Delivery.feedback, func.count())
            .where(Delivery.digest_id == digest_id, Delivery.feedback.is_not(None))
            .group_by(Delivery.feedback)).tuples().all()
        feedback = {str(what): count for what, count in rows}
    return {
        "mailbox": safe_location(settings.bounce_mailbox) if settings.bounce_mailbox else None,
        "interval_minutes": settings.bounce_interval,
        "last_processed": last.isoformat(timespec="seconds") if last else None,
        "processed": kinds,
        # bounces, complaints and unsubscribe mails without the bot's own evidence: acted on nothing
        "unmatched_ignored": kinds.get("unmatched", 0),
        "last_digest_feedback": feedback,
    }
