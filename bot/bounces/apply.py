"""What a finding does to the delivery ledger and the subscriber.

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

Functions take a Session and leave committing to the caller, so the outcome
and the record of the mail (``mailbox_messages``) are one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import subscribers, subscriptions
from bot.bounces.classify import Finding
from bot.mailer import verp
from bot.models import Delivery, Subscriber
from bot.models import SubscriberState as State

RECENT = 50  # deliveries looked at for a run of bounces


@dataclass(frozen=True)
class Outcome:
    """What a finding changed: whom it concerned and what became of them."""

    subscriber: Subscriber | None
    delivery: Delivery | None
    address: str | None
    change: str  # e.g. 'counted 1/3', 'now bounced', 'now complained', 'no subscriber'


def find_delivery(session: Session, finding: Finding, message_domain: str) -> Delivery | None:
    """The delivery a report is about: by VERP token, else by the Message-ID it returned."""
    candidates = [verp.message_id_for(t, message_domain) for t in finding.tokens]
    candidates += list(finding.message_ids)
    for message_id in candidates:
        delivery = session.scalar(select(Delivery).where(Delivery.message_id == message_id)
                                  .order_by(Delivery.id.desc()).limit(1))
        if delivery is not None:
            return delivery
    return None


def find_subscriber(session: Session, finding: Finding,
                    delivery: Delivery | None) -> Subscriber | None:
    if delivery is not None:
        return session.get(Subscriber, delivery.subscriber_id)
    for address in finding.addresses:
        sub = subscribers.subscriber_by_key(session, address.lower())
        if sub is not None:
            return sub
    return None


def apply_finding(session: Session, finding: Finding, *, message_domain: str, max_failures: int,
                  now: datetime) -> Outcome:
    """Record ``finding`` in the ledger and on the subscriber."""
    if finding.kind == "ignored":
        return Outcome(None, None, None, "left in the mailbox")
    delivery = find_delivery(session, finding, message_domain) if finding.kind != "unsubscribe" else None
    sub = find_subscriber(session, finding, delivery)
    address = sub.email if sub else (finding.addresses[0] if finding.addresses else None)
    if sub is None:
        return Outcome(None, None, address, "no such subscriber")
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
