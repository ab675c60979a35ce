"""One ``digestbot send``: choose the week, then a dry run, a test copy, or the
real send (first run or resume) of its frozen digest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from bot import choices, digest, mailer, render, subscribers
from bot.config import Settings
from bot.db import transaction
from bot.digest import draft
from bot.digest import queries as digest_queries
from bot.digest.week import Week
from bot.errors import DeliveryError, ThemesError
from bot.send import ledger, variants
from bot.send.compose import DigestComposer
from bot.send.loop import DeliveryReport, RetryPolicy
from bot.send.report import SendReport, Target
from bot.send.testcopy import send_test_copy
from bot.send.workers import Worker, deliver_parallel
from bot.stopping import Stopped, until_stopped
from bot.themes import load_themes
from bot.titles import titled
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
    - ``stop`` (a threading.Event) ends the run after the message in flight
      (or releases it, if its server stalls: ``bot.send.workers``), and
      abandons a grouping in progress: nothing is frozen then ("stopped");
      ``progress`` is called with a ``loop.DeliveryReport`` after each message.
    """
    settings = titled(settings, factory)  # the test copy's notice and the mail name the digest alike
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
        try:  # grouping and rendering compute only: a stop need not wait for them
            data, waiting, rendered = until_stopped(
                partial(_build, settings, factory, target.week), stop, name="build-digest")
        except Stopped:
            return target.report("stopped")
        if data.is_empty and not settings.send_empty:
            return target.report("empty")
        if waiting:  # DIGESTBOT_REQUIRE_APPROVAL: nothing goes out before the editor approves
            return target.report("awaiting-approval")
        assert rendered is not None  # rendered whenever it goes out
        if dry_run:
            with factory() as session:
                count = subscribers.count_confirmed(session)
            return target.report("dry-run", subject=rendered.subject, recipients=count)
        with transaction(factory) as session:
            frozen = digest.freeze_digest(session, data, rendered)
        built: digest.DigestData | None = data  # what readers' copies are rendered from
    elif dry_run:
        with factory() as session:
            count = (subscribers.count_confirmed(session) if resend
                     else ledger.count_unfinished_or_new(session, frozen.id))
        return target.report("dry-run", subject=frozen.subject, recipients=count, resumed=resumed)
    else:
        built = None
    result, transport = deliver_frozen(
        settings, factory, frozen.id, target.week.label, resend=resend, progress=progress,
        stop=stop, retry_base_delay=retry_base_delay, sender=sender, data=built)
    held = 0
    if not result.complete:
        with factory() as session:
            held = ledger.held_by_others(session, frozen.id, datetime.now(UTC))
    return SendReport(
        target.week.label, "sent" if result.complete else "incomplete", subject=frozen.subject,
        recipients=result.total, sent=result.sent, failed=result.failed,
        skipped=result.skipped, bounced=result.bounced, transport=transport,
        resumed=resumed, errors=tuple(result.errors), other_unfinished=target.others,
        held_elsewhere=held)


def _build(settings: Settings, factory: sessionmaker[Session],
           week: Week) -> tuple[digest.DigestData, bool, render.Rendered | None]:
    """The week's digest, whether it waits for approval, and its rendering
    (None when it will not go out: empty, or waiting)."""
    with factory() as session:
        data = digest.build_digest(session, week, settings)
        waiting = draft.awaiting_approval(session, settings, week.label)
    if waiting or (data.is_empty and not settings.send_empty):
        return data, waiting, None
    return data, waiting, render.render_digest(data, settings)


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
    return Target(wk, frozen, others, _transport(settings))


def deliver_frozen(
    settings: Settings, factory: sessionmaker[Session], digest_id: int, week: str, *,
    resend: bool = False, progress: Callable[..., None] | None = None, stop: Any = None,
    retry_base_delay: float = 1.0, sender: Any = None, data: digest.DigestData | None = None,
) -> tuple[DeliveryReport, str]:
    """Give every confirmed subscriber a ledger row, then work through the rows
    still to send over ``DIGESTBOT_SMTP_CONNECTIONS`` connections (one, with a
    ``sender`` given). Other workers may be sending the same digest: rows are
    shared through claims. Returns the report and the transport's description.

    A row carries its reader's theme choice (pruned first of themes that left
    the themes file: ``bot.choices.prune``); each distinct choice's copy is
    rendered once (``bot.send.variants``; from ``data`` when given, the digest
    as frozen) and built into a message once, shared by every connection."""
    now = datetime.now(UTC)
    with transaction(factory) as session:
        _prune_choices(settings, session)
        if resend:
            ledger.reset_deliveries(session, digest_id, now)
            digest_queries.mark_digest_sending(session, digest_id)
        added = ledger.create_pending_deliveries(session, digest_id, now)
        log.info("send %s: %d new ledger rows", week, added)
        total = ledger.count_unfinished(session, digest_id)
    with factory() as session:
        row = digest_queries.digest_for_week(session, week)
        assert row is not None
        message = mailer.DigestMessage(settings, row.subject, row.html, row.text)
    copies = variants.CopyBook(settings, factory, digest_id, week, data)
    tokens = Tokens.from_settings(settings)
    description = sender.description if sender is not None else _transport(settings)

    connections = 1 if sender is not None else settings.smtp_connections
    # small claims while there is little to share, so every connection gets some
    claim_size = max(1, min(ledger.CLAIM_SIZE, total // (connections * 4)))

    def start_worker() -> Worker:
        own = sender is None
        worker_sender = sender or mailer.make_sender(settings)
        composer = DigestComposer(message, tokens, settings.base_url, copies)
        # Message-IDs are given as rows are claimed, durable in the claim's commit
        db_ledger = ledger.DbLedger(factory, digest_id, settings.max_hard_failures,
                                    claim_size=claim_size, new_message_id=composer.new_message_id)

        def close() -> None:
            try:
                if own:
                    worker_sender.close()
            finally:
                db_ledger.close()
        return Worker(db_ledger, worker_sender, composer, close)

    result = deliver_parallel(
        start_worker, message.envelope_from, connections, total=total,
        retry=RetryPolicy(settings.smtp_max_retries, retry_base_delay),
        rate=settings.send_rate, stop=stop, progress=progress)
    return result, description


def _prune_choices(settings: Settings, session: Session) -> None:
    """Drop themes that left the themes file from readers' choices; a themes
    file that cannot be read now does not stop a frozen digest's send (the
    choices are then taken as they are)."""
    try:
        themes = load_themes(settings.themes_file)
    except ThemesError as exc:
        log.warning("readers' theme choices not checked against the themes file: %s", exc)
        return
    choices.prune(session, themes)


def _transport(settings: Settings) -> str:
    if settings.smtp_host:
        return mailer.SmtpSender.from_settings(settings).description
    return f"outbox folder {settings.outbox_dir}"
