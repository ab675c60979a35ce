"""A test copy of a week's digest to one address: nothing recorded, nothing frozen."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from bot import digest, mailer, render, subscribers, subscriptions
from bot.config import Settings
from bot.errors import DeliveryError
from bot.send.report import SendReport, Target
from bot.tokens import Tokens, unsubscribe_url


def send_test_copy(settings: Settings, factory: sessionmaker[Session], target: Target, to: str,
                   *, dry_run: bool = False, sender: Any = None) -> SendReport:
    """The frozen digest if the week has one, else the digest as it stands now,
    with "[TEST] " before its subject."""
    address = subscriptions.normalize_address(to)
    frozen = target.frozen
    if frozen is not None:
        subject, html, text = frozen.subject, frozen.html, frozen.text
    else:
        with factory() as session:
            data = digest.build_digest(session, target.week, settings)
        rendered = render.render_digest(data, settings)
        subject, html, text = rendered.subject, rendered.html, rendered.text
    subject = f"[TEST] {subject}"
    if dry_run:
        return target.report("dry-run", subject=subject, recipients=1, to=address)
    _send_test(settings, factory, sender, address, subject, html, text)
    return target.report("test", subject=subject, recipients=1, to=address)


def _send_test(settings: Settings, factory: sessionmaker[Session], sender: Any, address: str,
               subject: str, html: str, text: str) -> None:
    """One test message: the real unsubscribe link if the address subscribes,
    else a link to the subscribe page."""
    with factory() as session:
        sub = subscribers.subscriber_by_key(session, address.lower())
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
