"""A test copy of a week's digest to one address: nothing recorded, nothing
frozen, and the message says it is a test (see ``mark_as_test``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape
from sqlalchemy.orm import Session, sessionmaker

from bot import digest, mailer, render, subscriptions
from bot.config import Settings
from bot.digest import clean_line
from bot.errors import DeliveryError
from bot.send.report import SendReport, Target
from bot.templating import language


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
    written = _send_test(settings, sender, address, subject, html, text)
    return target.report("test", subject=subject, recipients=1, to=address,
                         written=str(written) if written else None)


def _send_test(settings: Settings, sender: Any, address: str, subject: str, html: str,
               text: str) -> Path | None:
    """One test message, marked as such; the outbox file it went to, if any.

    It goes to no subscriber, so it carries no List-Unsubscribe headers (a
    mail client's unsubscribe button would point nowhere true) and its footer
    link is the marked sample of a preview, not anyone's own link."""
    html, text = mark_as_test(settings, html, text)
    link = render.sample_unsubscribe_url(settings.base_url)
    message = mailer.DigestMessage(settings, subject, html, text, list_unsubscribe=False)
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
        path_for = getattr(sender, "path_for", None)  # the outbox names its files
        return path_for(message_id) if path_for else None
    finally:
        if own:
            sender.close()


def mark_as_test(settings: Settings, html: str, text: str) -> tuple[str, str]:
    """Both parts with a notice at the top, and the footer's "you subscribed
    and confirmed" (untrue here) replaced by the same notice where it is found
    (a digest frozen under another title keeps it, under the notice)."""
    lang = language(settings.language)
    notice = lang.gettext("Test copy, sent with “digestbot send --to” to this address only: "
                          "no subscriber got it, and its unsubscribe link is a sample.")
    reason = lang.gettext("You get this email because you subscribed to “%(title)s” and "
                          "confirmed your address. One email a week; unsubscribe any time.")
    title = clean_line(settings.title)
    text = text.replace(reason % {"title": title}, notice)
    html = html.replace(str(Markup(reason) % {"title": title}), str(escape(notice)))
    banner = (f'<div style="{_BANNER_STYLE}">{escape(notice)}</div>')
    html = _BODY_TAG.sub(lambda m: m.group(0) + banner, html, count=1)
    return html, f"{notice}\n\n{text}"


_BODY_TAG = re.compile(r"<body[^>]*>", re.IGNORECASE)


_BANNER_STYLE = ("margin:0;padding:12px 16px;background-color:#fdf0dc;color:#8f4a00;"
                 "font-family:sans-serif;font-size:14px;line-height:1.5;font-weight:600;"
                 "text-align:center;overflow-wrap:anywhere")
