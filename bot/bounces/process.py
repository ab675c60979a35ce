"""``process_bounces``: read the bounce mailbox once and act on what is there.

For each mail not yet marked in the mailbox:

1. Its key (a hash of its Message-ID, else of its bytes) is looked up in
   ``mailbox_messages``: a mail handled before is only marked again (a crash
   between the commit and the marking, or a mailbox without flags).
2. It is classified (``classify``) and its outcome applied (``apply``), and
   the mail is recorded -- in one transaction.
3. Then it is marked in the mailbox: understood mail flagged or moved,
   anything else -- mail not understood, and mail *unmatched* (a bounce,
   complaint or unsubscribe that carries no evidence the bot minted, see
   ``apply``) -- flagged for a person and left where it is.

A crash anywhere leaves either nothing done for that mail (it is read again
next time) or its outcome committed (it is only marked next time): never
processed twice, and nothing is deleted that was not understood.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot import subscriptions
from bot.bounces.apply import UNMATCHED, Trust, apply_finding
from bot.bounces.classify import MAX_DETAIL, Finding, classify, header_text, parse
from bot.bounces.mailboxes import TRANSPORT_ERRORS, Mailbox, MailboxError, MailItem, open_mailbox
from bot.config import Settings
from bot.errors import ConfigError
from bot.mailer import Sender, sender_domain
from bot.mailer.outgoing import bounce_address, make_sender
from bot.models import MailboxMessage, Subscriber
from bot.tokens import Tokens

log = logging.getLogger(__name__)

LABELS = {"unmatched": UNMATCHED}  # how a kind reads in the summary
NOUNS = {"bounce": "a bounce", "delayed": "a delay notice", "complaint": "a complaint",
         "unsubscribe": "an unsubscribe mail"}
LEFT_FOR_A_PERSON = ("ignored", "unmatched")  # kinds left in the mailbox, unread


@dataclass(frozen=True)
class Handled:
    """One mail and what became of it (the CLI lists these)."""

    kind: str  # a classify.KINDS value, 'unmatched' (acted on nothing), or 'seen before'
    subject: str
    address: str | None
    change: str
    detail: str


@dataclass
class BounceReport:
    mailbox: str
    handled: list[Handled] = field(default_factory=list)
    dry_run: bool = False

    @property
    def counts(self) -> Counter[str]:
        return Counter(h.kind for h in self.handled)

    def summary(self) -> str:
        counts = self.counts
        order = ("bounce", "delayed", "complaint", "unsubscribe", "ignored", "unmatched", "seen before")
        parts = [f"{counts[k]} {LABELS.get(k, k)}" for k in order if counts[k]]
        newly = sum(1 for h in self.handled if h.change.startswith("now "))
        text = (f"{self.mailbox}: {len(self.handled)} mail(s) read"
                + (f" ({', '.join(parts)})" if parts else "")
                + (f"; {newly} subscriber(s) changed state" if newly else ""))
        return text + ("; dry run: nothing recorded or marked" if self.dry_run else "")


def mail_key(head: bytes) -> str | None:
    """A mail's identity: its Message-ID with its Date, From and Subject (the
    same mail delivered twice is one mail; two that share an ID by a sender's
    mistake are not), hashed; None if it has no Message-ID."""
    headers = parse(head + b"\r\n\r\n")
    message_id = header_text(headers, "Message-ID")
    if not message_id:
        return None
    identity = "\n".join([message_id] + [header_text(headers, h) for h in ("Date", "From", "Subject")])
    return hashlib.sha256(b"mid:" + identity.encode("utf-8", "replace")).hexdigest()


def process_bounces(settings: Settings, factory: sessionmaker[Session], *,
                    mailbox: Mailbox | None = None, dry_run: bool = False,
                    now: datetime | None = None, sender: Sender | None = None) -> BounceReport:
    """Read ``DIGESTBOT_BOUNCE_MAILBOX`` (or ``mailbox``) once; see the module docstring.
    ``sender`` mails the signed unsubscribe links that token-less unsubscribe mails
    ask for (default: the configured transport, opened when first needed)."""
    if mailbox is None:
        if not settings.bounce_mailbox:
            raise ConfigError("no bounce mailbox is set",
                              hint="set DIGESTBOT_BOUNCE_MAILBOX to an imaps:// or pop3s:// URL "
                                   "or a Maildir path (see README, Deliverability)")
        mailbox = open_mailbox(settings.bounce_mailbox)
    report = BounceReport(mailbox.description, dry_run=dry_run)
    verp_base = bounce_address(settings) if settings.verp else None
    clock = (lambda: now.timestamp()) if now else time.time
    trust = Trust(sender_domain(settings.from_addr), Tokens.from_settings(settings, clock=clock))
    links = _LinkMailer(settings, trust.tokens, sender)
    try:
        for item in mailbox.unmarked():
            handled, understood = _handle(factory, item, verp_base, trust, settings,
                                          now or datetime.now(UTC), dry_run, links)
            report.handled.append(handled)
            if not dry_run and understood is not None:
                mailbox.mark(item, understood)
    except TRANSPORT_ERRORS as exc:
        raise MailboxError(f"lost the connection to {mailbox.description}: {exc}",
                           hint="run again: every mail handled so far is recorded and is "
                                "not handled twice") from None
    finally:
        mailbox.close()
        links.close()
    log.info("%s", report.summary())
    return report


def _handle(factory: sessionmaker[Session], item: MailItem, verp_base: str | None,
            trust: Trust, settings: Settings, now: datetime,
            dry_run: bool, links: _LinkMailer) -> tuple[Handled, bool | None]:
    """Classify, apply and record one mail; (what happened, understood?)."""
    key = mail_key(item.head)
    raw = None
    if key is None:
        raw = item.load()
        key = hashlib.sha256(b"raw:" + raw).hexdigest()
    subject = header_text(parse(item.head + b"\r\n\r\n"), "Subject")
    with factory() as session:
        seen = session.scalar(select(MailboxMessage).where(MailboxMessage.key == key))
        if seen is not None:
            return (Handled("seen before", subject, seen.address, "nothing (handled before)",
                            seen.detail or ""), seen.kind not in LEFT_FOR_A_PERSON)
    raw = raw if raw is not None else item.load()
    msg = parse(raw)
    try:
        finding = classify(msg, verp_base)
    except Exception as exc:  # a mail no parser expected: leave it for a person
        log.warning("could not read a mail (%s): %s", subject, exc)
        finding = Finding("ignored", detail=f"could not be read: {exc}")
    with factory() as session:
        try:
            outcome = apply_finding(session, finding, trust=trust,
                                    max_failures=settings.max_hard_failures, now=now)
            kind, detail = _verdict(finding, outcome.why if outcome.unmatched else None)
            session.add(MailboxMessage(
                key=key, kind=kind, message_id=header_text(msg, "Message-ID")[:300] or None,
                sender=header_text(msg, "From")[:320] or None, subject=subject[:500] or None,
                address=outcome.address,
                subscriber_id=_named(outcome.subscriber or outcome.ask),
                digest_id=outcome.delivery.digest_id if outcome.delivery else None,
                detail=detail or None, processed_at=now))
            session.flush()
            handled = Handled(kind, subject, outcome.address, outcome.change, detail)
            if dry_run:
                session.rollback()
            else:
                session.commit()  # recorded before the link is mailed: at most one link
                if outcome.ask is not None:
                    links.send(outcome.ask)
        except IntegrityError:  # another reader recorded it first
            session.rollback()
            return Handled("seen before", subject, None, "nothing (handled meanwhile)", ""), None
    if kind == "unmatched":
        log.warning("%s: %s", UNMATCHED, detail)
    elif kind != "ignored":
        log.info("%s for %s: %s (%s)", kind, outcome.address, outcome.change, detail)
    return handled, kind not in LEFT_FOR_A_PERSON


def _named(sub: Subscriber | None) -> int | None:
    return sub.id if sub is not None else None


class _LinkMailer:
    """Mails signed unsubscribe links, opening the transport when first needed."""

    def __init__(self, settings: Settings, tokens: Tokens, sender: Sender | None) -> None:
        self.settings, self.tokens, self.sender = settings, tokens, sender
        self._opened = False

    def send(self, sub: Subscriber) -> None:
        if self.sender is None:
            self.sender, self._opened = make_sender(self.settings), True
        try:
            subscriptions.send_unsubscribe_link(self.settings, self.tokens, self.sender, sub)
        except Exception as exc:  # the mail is recorded; a lost link is logged, not retried
            log.warning("could not mail the unsubscribe link to subscriber %s: %s", sub.id, exc)

    def close(self) -> None:
        if self._opened and self.sender is not None:
            self.sender.close()


def _verdict(finding: Finding, unmatched_because: str | None) -> tuple[str, str]:
    """(kind recorded, detail): an unmatched finding is kind 'unmatched', its
    detail saying what it claimed, whom it named and what it lacked."""
    if unmatched_because is None:
        return finding.kind, finding.detail
    named = f" naming {', '.join(finding.addresses[:3])}" if finding.addresses else ""
    said = f" ({finding.detail})" if finding.detail else ""
    text = f"{NOUNS.get(finding.kind, finding.kind)}{named}{said}: {unmatched_because}"
    return "unmatched", " ".join(text.split())[:MAX_DETAIL]
