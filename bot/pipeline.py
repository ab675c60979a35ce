"""The only place that joins the stages: feeds -> store -> digest -> render -> deliver.

The CLI, the web app and the scheduler call these functions and nothing
lower, so every way of running the bot does the same thing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from bot import feeds, store
from bot.config import Settings
from bot.db import transaction
from bot.errors import DeliveryError, FeedError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PollResult:
    """What one feed's poll did; ``status`` is ok, not-modified or error."""

    url: str
    status: str
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    error: str | None = None
    warning: str | None = None

    def summary(self) -> str:
        if self.status == "error":
            return f"error         {self.url}: {self.error}"
        if self.status == "not-modified":
            return f"not modified  {self.url}"
        line = (f"ok            {self.url}: {self.new} new, {self.updated} updated, "
                f"{self.unchanged} unchanged")
        return line + (f" (warning: {self.warning})" if self.warning else "")


def fetch_options(settings: Settings) -> feeds.FetchOptions:
    return feeds.FetchOptions(
        timeout=settings.http_timeout,
        max_bytes=settings.max_feed_bytes,
        max_redirects=settings.max_redirects,
        user_agent=settings.user_agent,
    )


def poll_feeds(
    settings: Settings,
    factory: sessionmaker[Session],
    urls: Sequence[str] | None = None,
    on_result: Callable[[PollResult], None] | None = None,
) -> list[PollResult]:
    """Poll each feed in turn; a failing feed is recorded and the others go on."""
    options = fetch_options(settings)
    results = []
    with feeds.make_client(options) as client:
        for url in urls or settings.feed_urls:
            result = poll_feed(url, options, factory, client)
            log.log(logging.WARNING if result.status == "error" else logging.INFO,
                    "poll %s", result.summary())
            results.append(result)
            if on_result:
                on_result(result)
    return results


def poll_feed(
    url: str, options: feeds.FetchOptions, factory: sessionmaker[Session],
    client: httpx.Client | None = None,
) -> PollResult:
    """Fetch, parse and store one feed; errors end up in the feed's health record."""
    now = datetime.now(UTC)
    try:
        with factory() as session:
            known = store.feed_by_url(session, url)
            etag = known.etag if known else None
            last_modified = known.last_modified if known else None
            old_hash = known.body_hash if known else None
        fetched = feeds.fetch(url, options, etag, last_modified, client)
        with transaction(factory) as session:
            feed = store.get_or_create_feed(session, url)
            if fetched.not_modified:
                store.record_success(feed, now)
                return PollResult(url, "not-modified")
            assert fetched.body is not None
            digest = feeds.body_hash(fetched.body)
            if digest == old_hash:  # same bytes as last time: nothing to parse
                store.record_success(feed, now, etag=fetched.etag,
                                     last_modified=fetched.last_modified)
                return PollResult(url, "not-modified")
            parsed = feeds.parse(fetched.body, url, fetched.content_type)
            counts = store.save_entries(session, feed, parsed.entries, now)
            store.record_success(feed, now, title=parsed.title, etag=fetched.etag,
                                 last_modified=fetched.last_modified, body_hash=digest)
            return PollResult(url, "ok", counts.new, counts.updated, counts.unchanged,
                              warning=parsed.warning)
    except FeedError as exc:
        message = exc.message.removeprefix(f"{url}: ")
        with transaction(factory) as session:
            store.record_failure(session, url, now, message)
        return PollResult(url, "error", error=message)


# --- send (bot.digest -> bot.render -> bot.delivery) ---------------------------------------

@dataclass(frozen=True)
class SendReport:
    """What ``send_digest`` did. ``outcome`` is one of: sent (all delivered),
    incomplete (stopped early, rows still pending), already-sent, empty,
    dry-run, test."""

    week: str
    outcome: str
    subject: str = ""
    recipients: int = 0
    sent: int = 0
    failed: int = 0
    skipped: int = 0
    bounced: int = 0
    transport: str = ""
    resumed: bool = False
    to: str | None = None
    errors: tuple[tuple[str, str], ...] = ()
    other_unfinished: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.outcome == "already-sent":
            return f"{self.week} was sent already (use --resend to send it again)"
        if self.outcome == "empty":
            return (f"{self.week} has no entries: nothing to send "
                    "(DIGESTBOT_SEND_EMPTY=true sends an empty digest)")
        if self.outcome == "dry-run":
            return (f"dry run: would send {self.week} ({self.subject!r}) to "
                    f"{self.recipients} recipient(s) via {self.transport}; nothing was sent")
        if self.outcome == "test":
            return f"test message of {self.week} sent to {self.to} via {self.transport}"
        state = "done" if self.outcome == "sent" else "stopped early, run again to finish"
        return (f"{self.week}: {self.sent} sent, {self.failed} failed, {self.skipped} skipped"
                f"{f', {self.bounced} now bounced' if self.bounced else ''} ({state})")


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
      ``progress`` is called with a ``delivery.DeliveryReport`` after each message.
    """
    from bot import delivery, digest, mailer, render, subscriptions
    from bot.tokens import Tokens

    with factory() as session:
        if week:
            wk = digest.parse_week(week, settings.timezone)
        else:
            found = digest.latest_complete_week(session, settings)
            if found is None:
                raise DeliveryError("there is no complete week with entries yet",
                                    hint="run `digestbot poll` first, or name a week with --week")
            wk = found
        frozen = store.digest_for_week(session, wk.label)
        others = tuple(w for w in store.weeks_being_sent(session) if w != wk.label)
    transport = (mailer.SmtpSender.from_settings(settings).description if settings.smtp_host
                 else f"outbox folder {settings.outbox_dir}")

    if to is not None:
        address = subscriptions.normalize_address(to)
        if frozen is not None:
            subject, html, text = frozen.subject, frozen.html, frozen.text
        else:
            with factory() as session:
                data = digest.build_digest(session, wk, settings)
            rendered = render.render_digest(data, settings)
            subject, html, text = rendered.subject, rendered.html, rendered.text
        report = SendReport(wk.label, "test", subject=f"[TEST] {subject}", recipients=1,
                            transport=transport, to=address, other_unfinished=others)
        if dry_run:
            return SendReport(wk.label, "dry-run", subject=report.subject, recipients=1,
                              transport=transport, to=address, other_unfinished=others)
        _send_test(settings, factory, sender, address, report.subject, html, text)
        return report

    resumed = frozen is not None and frozen.status == "sending"
    if frozen is not None and frozen.status == "sent" and not resend:
        return SendReport(wk.label, "already-sent", subject=frozen.subject,
                          transport=transport, other_unfinished=others)
    if resumed and resend:
        raise DeliveryError(
            f"the send of {wk.label} has not finished yet, so it cannot be resent",
            hint=f"run `digestbot send --week {wk.label}` (without --resend) to finish it first")

    if frozen is None:
        with factory() as session:
            data = digest.build_digest(session, wk, settings)
        if data.is_empty and not settings.send_empty:
            return SendReport(wk.label, "empty", transport=transport, other_unfinished=others)
        rendered = render.render_digest(data, settings)
        if dry_run:
            with factory() as session:
                count = store.count_confirmed(session)
            return SendReport(wk.label, "dry-run", subject=rendered.subject, recipients=count,
                              transport=transport, other_unfinished=others)
        with transaction(factory) as session:
            frozen = digest.freeze_digest(session, data, rendered)
    elif dry_run:
        with factory() as session:
            count = (store.count_confirmed(session) if resend
                     else store.count_unfinished_or_new(session, frozen.id))
        return SendReport(wk.label, "dry-run", subject=frozen.subject, recipients=count,
                          transport=transport, resumed=resumed, other_unfinished=others)

    digest_id, subject = frozen.id, frozen.subject
    lock = delivery.DigestLock(factory, digest_id, wk.label)
    lock.acquire()
    try:
        now = datetime.now(UTC)
        with transaction(factory) as session:
            if resend:
                store.reset_deliveries(session, digest_id, now)
                store.mark_digest_sending(session, digest_id)
            added = store.create_pending_deliveries(session, digest_id, now)
            log.info("send %s: %d new ledger rows", wk.label, added)
        with factory() as session:
            row = store.digest_for_week(session, wk.label)
            assert row is not None
            message = mailer.DigestMessage(settings, row.subject, row.html, row.text)
        composer = delivery.DigestComposer(message, Tokens.from_settings(settings),
                                           settings.base_url)
        ledger = delivery.DbLedger(factory, digest_id, lock, settings.max_hard_failures)
        own_sender = sender is None
        sender = sender or mailer.make_sender(settings)
        try:
            result = delivery.deliver(
                ledger, sender, composer, message.envelope_from,
                retry=delivery.RetryPolicy(settings.smtp_max_retries, retry_base_delay),
                rate=settings.send_rate, stop=stop, progress=progress)
        finally:
            if own_sender:
                sender.close()
            ledger.close()
    finally:
        lock.release()
    return SendReport(
        wk.label, "sent" if result.complete else "incomplete", subject=subject,
        recipients=result.total, sent=result.sent, failed=result.failed,
        skipped=result.skipped, bounced=result.bounced, transport=sender.description,
        resumed=resumed, errors=tuple(result.errors), other_unfinished=others)


def _send_test(settings: Settings, factory: sessionmaker[Session], sender: Any, address: str,
               subject: str, html: str, text: str) -> None:
    """One test message: the real unsubscribe link if the address subscribes,
    else a link to the subscribe page."""
    from bot import mailer
    from bot.tokens import Tokens, unsubscribe_url

    with factory() as session:
        sub = store.subscriber_by_key(session, address.lower())
        if sub is not None:
            token = Tokens.from_settings(settings).unsubscribe_token(sub.id, sub.email_key)
            link = unsubscribe_url(settings.base_url, token)
        else:
            link = settings.base_url.rstrip("/") + "/"
    message = mailer.DigestMessage(settings, subject, html, text)
    own = sender is None
    sender = sender or mailer.make_sender(settings)
    try:
        message_id = mailer.new_message_id(message.domain)
        try:
            sender.send(message.envelope_from, address, message.render(address, message_id, link),
                        message_id)
        except mailer.SendFailure as exc:
            raise DeliveryError(f"the test message to {address} was not accepted: {exc}",
                                hint=f"sent through {sender.description}; check that it runs and "
                                     "the DIGESTBOT_SMTP_* settings") from None
    finally:
        if own:
            sender.close()
