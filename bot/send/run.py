"""One ``digestbot send``: choose the week, then a dry run, a test copy, or the
real send (first run or resume) of its frozen digest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from bot import digest, mailer, render, subscribers
from bot.config import Settings
from bot.db import transaction
from bot.digest import queries as digest_queries
from bot.errors import DeliveryError
from bot.send import ledger
from bot.send.compose import DigestComposer
from bot.send.lock import DigestLock
from bot.send.loop import DeliveryReport, RetryPolicy, deliver
from bot.send.report import SendReport, Target
from bot.send.testcopy import send_test_copy
from bot.tokens import Tokens

log = logging.getLogger(__name__)


def send_digest(
    settings: Settings,
    factory: sessionmaker[Session],
    week: str | None = None,
    *,
    dry_run: bool = False,
    to: str | None = None,
    resend: bool = False,
    progress: Callable[..., None] | None = None,
    stop: Any = None,
    retry_base_delay: float = 1.0,
    sender: Any = None,
) -> SendReport:
    """Build, render, freeze and deliver a week's digest (default: the latest
    complete week) to every confirmed subscriber.

    - A week already sent is reported, not sent again, unless ``resend``: then
      every confirmed subscriber's ledger row goes back to pending with a new
      Message-ID and the digest goes out to all of them again.
    - A week whose send was interrupted is resumed: only rows not yet 'sent'.
    - ``to`` sends one test message ("[TEST] " subject) to that address; it is
      not recorded in the ledger and does not freeze the digest.
    - ``dry_run`` sends nothing and reports what would happen.
    - ``stop`` (a threading.Event) ends the run after the message in flight;
      ``progress`` is called with a ``loop.DeliveryReport`` after each message.
    """
    target = choose_target(settings, factory, week)
    if to is not None:
        return send_test_copy(settings, factory, target, to, dry_run=dry_run, sender=sender)
    frozen = target.frozen
    resumed = frozen is not None and frozen.status == "sending"
    if frozen is not None and frozen.status == "sent" and not resend:
        return target.report("already-sent", subject=frozen.subject)
    if resumed and resend:
        raise DeliveryError(
            f"the send of {target.week.label} has not finished yet, so it cannot be resent",
            hint=f"run `digestbot send --week {target.week.label}` (without --resend) to finish it first")
    if frozen is None:
        with factory() as session:
            data = digest.build_digest(session, target.week, settings)
        if data.is_empty and not settings.send_empty:
            return target.report("empty")
        rendered = render.render_digest(data, settings)
        if dry_run:
            with factory() as session:
                count = subscribers.count_confirmed(session)
            return target.report("dry-run", subject=rendered.subject, recipients=count)
        with transaction(factory) as session:
            frozen = digest.freeze_digest(session, data, rendered)
    elif dry_run:
        with factory() as session:
            count = (subscribers.count_confirmed(session) if resend
                     else ledger.count_unfinished_or_new(session, frozen.id))
        return target.report("dry-run", subject=frozen.subject, recipients=count, resumed=resumed)
    result, transport = deliver_frozen(
        settings, factory, frozen.id, target.week.label, resend=resend, progress=progress,
        stop=stop, retry_base_delay=retry_base_delay, sender=sender)
    return SendReport(
        target.week.label, "sent" if result.complete else "incomplete", subject=frozen.subject,
        recipients=result.total, sent=result.sent, failed=result.failed,
        skipped=result.skipped, bounced=result.bounced, transport=transport,
        resumed=resumed, errors=tuple(result.errors), other_unfinished=target.others)


def choose_target(settings: Settings, factory: sessionmaker[Session], week: str | None) -> Target:
    """The named week, else the latest complete week with entries."""
    with factory() as session:
        if week:
            wk = digest.parse_week(week, settings.timezone)
        else:
            found = digest.latest_complete_week(session, settings)
            if found is None:
                raise DeliveryError("there is no complete week with entries yet",
                                    hint="run `digestbot poll` first, or name a week with --week")
            wk = found
        frozen = digest_queries.digest_for_week(session, wk.label)
        others = tuple(w for w in digest_queries.weeks_being_sent(session) if w != wk.label)
    transport = (mailer.SmtpSender.from_settings(settings).description if settings.smtp_host
                 else f"outbox folder {settings.outbox_dir}")
    return Target(wk, frozen, others, transport)


def deliver_frozen(
    settings: Settings, factory: sessionmaker[Session], digest_id: int, week: str, *,
    resend: bool = False, progress: Callable[..., None] | None = None, stop: Any = None,
    retry_base_delay: float = 1.0, sender: Any = None,
) -> tuple[DeliveryReport, str]:
    """Under the digest's lock: give every confirmed subscriber a ledger row,
    then work through the rows still to send. Returns the loop's report and
    the transport's description."""
    lock = DigestLock(factory, digest_id, week)
    with lock:
        now = datetime.now(UTC)
        with transaction(factory) as session:
            if resend:
                ledger.reset_deliveries(session, digest_id, now)
                digest_queries.mark_digest_sending(session, digest_id)
            added = ledger.create_pending_deliveries(session, digest_id, now)
            log.info("send %s: %d new ledger rows", week, added)
        with factory() as session:
            row = digest_queries.digest_for_week(session, week)
            assert row is not None
            message = mailer.DigestMessage(settings, row.subject, row.html, row.text)
        composer = DigestComposer(message, Tokens.from_settings(settings), settings.base_url)
        db_ledger = ledger.DbLedger(factory, digest_id, lock, settings.max_hard_failures)
        own_sender = sender is None
        sender = sender or mailer.make_sender(settings)
        try:
            result = deliver(
                db_ledger, sender, composer, message.envelope_from,
                retry=RetryPolicy(settings.smtp_max_retries, retry_base_delay),
                rate=settings.send_rate, stop=stop, progress=progress)
        finally:
            if own_sender:
                sender.close()
            db_ledger.close()
    return result, sender.description
