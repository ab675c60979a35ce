"""The approval reminder: with DIGESTBOT_REQUIRE_APPROVAL, one mail to
DIGESTBOT_ADMIN_EMAIL ``approval_reminder_hours`` before a send whose week is
not approved yet. ``digestbot run`` asks every minute (``remind_if_due``).

At most one reminder per week: ``draft_weeks.reminded_at`` is set before the
mail goes out, so a failing mail server gives a logged error, not a mail a minute.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from bot import digest, mailer
from bot.config import Settings
from bot.db import transaction
from bot.digest import draft_queries
from bot.digest import queries as digest_queries
from bot.digest.schedule import next_send_time, scheduled_week
from bot.errors import BotError
from bot.times import local_short

log = logging.getLogger(__name__)


def remind_if_due(settings: Settings, factory: sessionmaker[Session], now: datetime | None = None,
                  *, sender: Any = None) -> str | None:
    """Mail the reminder if it is due; the week it was about, or None."""
    if not (settings.require_approval and settings.admin_email):
        return None
    now = now or datetime.now(UTC)
    at = next_send_time(settings, now)
    if now < at - timedelta(hours=settings.approval_reminder_hours):
        return None
    with transaction(factory) as session:
        week = scheduled_week(session, settings, now)
        if digest_queries.digest_for_week(session, week.label) is not None:
            return None  # its send started (by hand): nothing to approve
        row = draft_queries.week_row(session, week.label)
        if row is not None and (row.approved_at is not None or row.reminded_at is not None):
            return None
        data = digest.build_digest(session, week, settings)
        if data.is_empty and not settings.send_empty:
            return None  # nothing would be sent anyway
        draft_queries.mark_reminded(session, week.label, now)
    subject, text = reminder_mail(settings, week.label, at, data.entry_count, len(data.themes))
    to = settings.admin_email
    own = sender is None
    try:
        message_id, raw = mailer.simple_message(settings, to, subject, text)
        sender = sender or mailer.make_sender(settings)
        sender.send(mailer.envelope_address(settings.from_addr), to, raw, message_id)
    except (mailer.SendFailure, BotError, OSError) as exc:
        log.error("could not mail the approval reminder for %s to %s: %s", week.label, to, exc)
        return None
    finally:
        if own and sender is not None:
            sender.close()
    log.info("mailed %s: %s", to, subject)
    return week.label


def reminder_mail(settings: Settings, week: str, at: datetime, entries: int,
                  sections: int) -> tuple[str, str]:
    """(subject, text) of the reminder; for the operator, like the CLI, in English."""
    when = local_short(at, settings.tz)
    base = settings.base_url.rstrip("/")
    subject = f"{week} waits for your approval: it goes out {when} only once approved"
    text = (
        f"The digest of {week} ({entries} entries in {sections} sections) is due to go out "
        f"at {when} ({settings.timezone}).\n"
        "DIGESTBOT_REQUIRE_APPROVAL is on, so it is sent only after you approve it.\n\n"
        f"Review and approve it in the console:\n  {base}/admin/draft?week={week}\n\n"
        "or on the command line:\n"
        f"  digestbot draft show --week {week}\n"
        f"  digestbot draft approve --week {week}\n\n"
        "If it is approved after the send time, `digestbot run` sends it within a minute.\n"
    )
    return subject, text
