"""What a finding does to the delivery ledger and the subscriber.

A finding acts only on evidence the bot minted itself (``Trust``):

- the Message-ID of a delivery it recorded, reached through the VERP token
  of the address the report came to, or found in the returned message's
  headers (a DSN's, an ARF report's embedded message);
- a Message-ID it signed (``bot.tokens``: the confirmation mail, which no
  delivery row records), found the same two ways;
- for an unsubscribe mail, the signed unsubscribe token the List-Unsubscribe
  ``mailto:`` put in its subject.

Anything else -- the addresses a report names (``Original-Rcpt-To``, a DSN's
``Final-Recipient``), a From header, an Authentication-Results header -- is
text anyone can write: such a mail is *unmatched*, changes nobody and is left
in the mailbox for a person.

What a matched finding does:

- bounce: the delivery becomes 'failed' (feedback 'bounced', the diagnostic
  in ``last_error``) and counts towards the subscriber's bounce limit
  (``DIGESTBOT_MAX_HARD_FAILURES``): a confirmed subscriber whose latest
  deliveries bounced that many times in a row becomes 'bounced'. A second
  report about the same delivery counts nothing more.
- delayed: recorded on the delivery (feedback 'delayed'); nothing else.
- complaint: the subscriber becomes 'complained' at once, whatever their
  state; the delivery's feedback is 'complained'.
- unsubscribe: a confirmed or pending subscriber becomes 'unsubscribed'
  (reason 'mail').

A token-less unsubscribe mail (the ``mailto:`` of digests sent before it
carried a token) stays unmatched, but when its From: address is a confirmed or
pending subscriber the outcome asks for the signed one-click link to be mailed
to that subscriber's own address (``Outcome.ask``), at most once per
``LINK_INTERVAL``: the old links keep working in two steps, and a forged From:
can do no more than mail the real reader a link they may ignore.

Functions take a Session and leave committing to the caller, so the outcome
and the record of the mail (``mailbox_messages``) are one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import subscriptions
from bot.bounces.classify import Finding
from bot.mailer import verp
from bot.models import Delivery, MailboxMessage, Subscriber
from bot.models import SubscriberState as State
from bot.tokens import TokenError, TokenExpired, Tokens, address_tag

RECENT = 50  # deliveries looked at for a run of bounces
LINK_INTERVAL = timedelta(days=7)  # one mailed unsubscribe link per subscriber in this time
LINK_ASKED = "mailed the signed unsubscribe link to the subscriber's own address"
UNMATCHED = "unmatched, ignored"


@dataclass(frozen=True)
class Trust:
    """What a mail's claims are checked against: the domain of our
    Message-IDs and the secret behind our signatures."""

    message_domain: str
    tokens: Tokens


@dataclass(frozen=True)
class Outcome:
    """What a finding changed: whom it concerned and what became of them."""

    subscriber: Subscriber | None
    delivery: Delivery | None
    address: str | None
    change: str  # e.g. 'counted 1/3', 'now bounced', 'now complained', UNMATCHED
    why: str = ""  # for an unmatched finding: what evidence it lacked
    ask: Subscriber | None = None  # mail this subscriber the signed unsubscribe link

    @property
    def unmatched(self) -> bool:
        return self.change == UNMATCHED


def find_delivery(session: Session, finding: Finding, message_domain: str) -> Delivery | None:
    """The recorded delivery a report is about: by VERP token, else by the Message-ID it returned."""
    for message_id in _candidates(finding, message_domain):
        delivery = session.scalar(select(Delivery).where(Delivery.message_id == message_id)
                                  .order_by(Delivery.id.desc()).limit(1))
        if delivery is not None:
            return delivery
    return None


def _candidates(finding: Finding, message_domain: str) -> list[str]:
    """The Message-IDs a report points at, the VERP tokens' first."""
    ids = [verp.message_id_for(t, message_domain) for t in finding.tokens] + list(finding.message_ids)
    return list(dict.fromkeys(ids))


def signed_subscriber(session: Session, finding: Finding, trust: Trust) -> Subscriber | None:
    """The subscriber a Message-ID we signed names (``Tokens.mail_id``), if the
    report points at one and its signature holds for that subscriber's address."""
    for message_id in _candidates(finding, trust.message_domain):
        claim = trust.tokens.read_mail_id(message_id.strip("<>").rsplit("@", 1)[0])
        if claim is None:
            continue
        sub = session.get(Subscriber, claim.subscriber_id)
        if sub is not None and trust.tokens.mail_id_matches(claim, sub.email_key):
            return sub
    return None


def unsubscriber(session: Session, finding: Finding, tokens: Tokens) -> tuple[Subscriber | None, str]:
    """The subscriber an unsubscribe mail's signed token names, or (None, why not)."""
    if finding.unsubscribe_token is None:
        return None, "it carries no token of our List-Unsubscribe mailto: (a From: proves nothing)"
    try:
        claim = tokens.read_unsubscribe(finding.unsubscribe_token)
    except TokenExpired:
        return None, "its token has expired (DIGESTBOT_UNSUBSCRIBE_TTL_DAYS)"
    except TokenError:
        return None, "its token is not one we signed"
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or address_tag(sub.email_key) != claim.address_tag:
        return None, "its token names nobody subscribed now"
    return sub, ""


def link_request(session: Session, finding: Finding, now: datetime) -> Subscriber | None:
    """The subscriber to mail the signed unsubscribe link, for a token-less
    unsubscribe mail from their address; None when nobody is subscribed under
    it or they were mailed the link within ``LINK_INTERVAL`` (an unmatched
    mail records a subscriber only when it asked for the link)."""
    if finding.kind != "unsubscribe" or finding.unsubscribe_token or not finding.claimed_sender:
        return None
    try:
        key = subscriptions.normalize_address(finding.claimed_sender).lower()
    except subscriptions.AddressError:
        return None
    sub = session.scalar(select(Subscriber).where(Subscriber.email_key == key))
    if sub is None or sub.status not in (State.CONFIRMED, State.PENDING):
        return None
    recent = session.scalar(select(MailboxMessage.id).where(
        MailboxMessage.subscriber_id == sub.id, MailboxMessage.kind == "unmatched",
        MailboxMessage.processed_at >= now - LINK_INTERVAL).limit(1))
    return None if recent is not None else sub


def match(session: Session, finding: Finding,
          trust: Trust) -> tuple[Subscriber | None, Delivery | None, str]:
    """Whom the bot's own evidence in ``finding`` names: (subscriber, delivery,
    why nobody) -- never an address the mail merely names."""
    if finding.kind == "unsubscribe":
        sub, why = unsubscriber(session, finding, trust.tokens)
        return sub, None, why
    delivery = find_delivery(session, finding, trust.message_domain)
    if delivery is not None:
        return session.get(Subscriber, delivery.subscriber_id), delivery, ""
    sub = signed_subscriber(session, finding, trust)
    if sub is not None:
        return sub, None, ""
    return None, None, "no VERP token or Message-ID of a mail we sent"


def apply_finding(session: Session, finding: Finding, *, trust: Trust, max_failures: int,
                  now: datetime) -> Outcome:
    """Record ``finding`` in the ledger and on the subscriber, if our own evidence names them."""
    if finding.kind == "ignored":
        return Outcome(None, None, None, "left in the mailbox")
    sub, delivery, why = match(session, finding, trust)
    if sub is None:
        ask = link_request(session, finding, now)
        if ask is not None:
            why = f"{why}; {LINK_ASKED}"
        return Outcome(None, None, None, UNMATCHED, why, ask=ask)
    address = str(sub.email)
    if finding.kind == "bounce":
        change = _bounce(session, sub, delivery, finding, max_failures, now)
    elif finding.kind == "delayed":
        if delivery is not None and delivery.feedback is None:
            _feedback(delivery, "delayed", finding.detail, now)
        change = "recorded"
    elif finding.kind == "complaint":
        if delivery is not None:
            _feedback(delivery, "complained", finding.detail, now)
        if sub.status == State.COMPLAINED:
            change = "already complained"
        else:
            subscriptions.set_state(sub, State.COMPLAINED, now)
            change = "now complained"
    else:  # unsubscribe
        if sub.status in (State.CONFIRMED, State.PENDING):
            subscriptions.set_state(sub, State.UNSUBSCRIBED, now, reason="mail")
            change = "now unsubscribed"
        else:
            change = f"already {sub.status}"
    return Outcome(sub, delivery, address, change)


def _feedback(delivery: Delivery, feedback: str, detail: str, now: datetime) -> None:
    delivery.feedback = feedback
    delivery.feedback_at = now
    if detail:
        delivery.last_error = detail
    delivery.updated_at = now


def _bounce(session: Session, sub: Subscriber, delivery: Delivery | None, finding: Finding,
            max_failures: int, now: datetime) -> str:
    if delivery is not None:
        if delivery.feedback == "bounced":
            return "already counted"
        _feedback(delivery, "bounced", finding.detail, now)
        if delivery.status in ("sent", "failed"):
            delivery.status = "failed"
        session.flush()
        # the send clears the count at every 250 from the relay, which comes
        # before the bounce: a run of bounced deliveries counts instead
        sub.hard_failures = max((sub.hard_failures or 0) + 1, _failed_run(session, sub.id))
    else:
        sub.hard_failures = (sub.hard_failures or 0) + 1
    if sub.status == State.CONFIRMED and sub.hard_failures >= max_failures:
        subscriptions.set_state(sub, State.BOUNCED, now, reason="bounce")
        return "now bounced"
    return f"counted {sub.hard_failures}/{max_failures}"


def _failed_run(session: Session, subscriber_id: int) -> int:
    """How many of the subscriber's latest deliveries failed in a row."""
    statuses = session.scalars(
        select(Delivery.status).where(Delivery.subscriber_id == subscriber_id,
                                      Delivery.status.in_(("sent", "failed")))
        .order_by(Delivery.digest_id.desc()).limit(RECENT))
    run = 0
    for status in statuses:
        if status != "failed":
            break
        run += 1
    return run
