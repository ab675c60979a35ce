"""Telling the admin when a feed breaks, and when it works again.

After ``DIGESTBOT_FEED_ALERT_AFTER`` failed polls in a row (default 3: about
three hours at the default interval) the admin (``DIGESTBOT_ADMIN_EMAIL``)
gets one mail naming the feed, the start of the streak, the last error and a
hint; when a poll of that feed succeeds again, one more. Never one per failed
poll: ``Feed.alerted_at`` marks a streak already reported, and is claimed with
a conditional UPDATE so two polls running at once (the service and a
`digestbot poll`) cannot both mail.

Without an admin address the same words go to the log (once per streak), and
`digestbot status` lists the failing feeds first.

A mail that cannot be handed over is logged; the claim is given back so the
next failed poll tries again.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from bot import mailer
from bot.config import Settings
from bot.db import transaction
from bot.errors import BotError
from bot.ingest import queries
from bot.models import Feed

if TYPE_CHECKING:
    from bot.ingest.result import PollResult

log = logging.getLogger(__name__)


def after_poll(settings: Settings, factory: sessionmaker[Session], result: PollResult,
               now: datetime | None = None) -> str | None:
    """Report a failure streak that reached the threshold, or the end of one
    that was reported. Returns "alert", "recovery", or None (nothing to say);
    never raises for a mail problem."""
    if result.feed_id is None:
        return None
    now = now or datetime.now(UTC)
    if result.status == "error":
        if result.failures < settings.feed_alert_after or not _claim(factory, result.feed_id, now):
            return None
        subject, text = alert_mail(settings, result)
        if not _tell(settings, subject, text, logging.WARNING):
            _claim(factory, result.feed_id, None)  # give it back: the next failure tries again
            return None
        return "alert"
    if not _claim(factory, result.feed_id, None):
        return None  # no streak was reported (or another poll already said it recovered)
    subject, text = recovery_mail(settings, result, now)
    _tell(settings, subject, text, logging.INFO)
    return "recovery"


def feed_health(factory: sessionmaker[Session]) -> tuple[bool, dict[str, int]]:
    """For /healthz: always healthy (one broken feed does not stop the bot, and
    a restart would not mend a remote server), with the counts for a monitor:
    active feeds, and how many of them failed their last poll."""
    with factory() as session:
        active = [feed.consecutive_failures for feed in queries.active_feeds(session)]
    return True, {"active": len(active), "failing": sum(1 for n in active if n)}


def _claim(factory: sessionmaker[Session], feed_id: int, when: datetime | None) -> bool:
    """Set ``alerted_at`` (when it is unset) or clear it (when it is set);
    True if this call made the change."""
    with transaction(factory) as session:
        condition = Feed.alerted_at.is_(None) if when is not None else Feed.alerted_at.is_not(None)
        done = session.execute(update(Feed).where(Feed.id == feed_id, condition)
                               .values(alerted_at=when))
        return bool(getattr(done, "rowcount", 0))


def _tell(settings: Settings, subject: str, text: str, level: int) -> bool:
    """Mail the admin, or log when there is no admin address. False if the mail failed."""
    if not settings.admin_email:
        log.log(level, "%s\n%s\n(set DIGESTBOT_ADMIN_EMAIL to get this by mail)", subject, text)
        return True
    to = settings.admin_email
    sender = None
    try:
        message_id, data = mailer.simple_message(settings, to, subject, text)
        sender = mailer.make_sender(settings)
        sender.send(mailer.envelope_address(settings.from_addr), to, data, message_id)
    except (mailer.SendFailure, BotError, OSError) as exc:
        log.error("could not mail %s about a feed (%s): %s", to, subject, exc)
        return False
    finally:
        if sender is not None:
            sender.close()
    log.info("mailed %s: %s", to, subject)
    return True


def _when(moment: datetime | None, settings: Settings) -> str:
    if moment is None:
        return "unknown"
    return moment.astimezone(settings.tz).strftime(f"%Y-%m-%d %H:%M ({settings.timezone})")


def alert_mail(settings: Settings, result: PollResult) -> tuple[str, str]:
    """(subject, text) of the mail saying a feed broke."""
    name = result.name or result.url
    subject = f"[digestbot] feed failing: {name}"
    lines = [
        f"The feed \u201c{name}\u201d has failed its last {result.failures} polls in a row.",
        "",
        f"  feed:           {result.url}",
        f"  failing since:  {_when(result.failing_since, settings)}",
        f"  last error:     {result.error}",
    ]
    if result.hint:
        lines.append(f"  hint:           {result.hint}")
    lines += [
        "",
        f"digestbot keeps polling it every {settings.poll_interval} minutes with the other feeds,",
        "which are not affected, and mails you once more when it works again;",
        "not after every failed poll.",
        "",
        "  digestbot feeds list             every feed's health",
        f"  digestbot feeds pause {result.feed_id:<10} stop polling it for now",
        f"  digestbot feeds remove {result.feed_id:<9} stop for good",
    ]
    return subject, "\n".join(lines) + "\n"


def recovery_mail(settings: Settings, result: PollResult, now: datetime) -> tuple[str, str]:
    """(subject, text) of the mail saying a feed works again."""
    name = result.name or result.url
    subject = f"[digestbot] feed working again: {name}"
    text = (f"The feed \u201c{name}\u201d works again: its poll at {_when(now, settings)} "
            f"succeeded after {result.failures} failed polls since "
            f"{_when(result.failing_since, settings)}.\n\n  feed: {result.url}\n")
    return subject, text
