"""The send's per-message UPDATEs on the delivery ledger (and on the
subscriber's count of hard failures): claim a row, skip it, record how it
ended. Built once with bind parameters and run through ``_Prepared``
(``bot.send.prepared``); ``DbLedger`` (``bot.send.ledger``) commits them.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, bindparam, func, or_, select, update

from bot.models import Delivery, Subscriber, UTCDateTime
from bot.send.prepared import _Prepared

_DELIVERIES = cast(Table, Delivery.__table__)
_SUBSCRIBERS = cast(Table, Subscriber.__table__)


# The per-message statements are built once, with bind parameters, and run
# through _Prepared (bot.send.prepared): building, cache-keying and executing a statement
# through SQLAlchemy costs more than running it on SQLite.
_D, _S = _DELIVERIES.c, _SUBSCRIBERS.c


_UNFINISHED_ROW = or_(_D.status == "pending", _D.status == "sending")


_CLAIM = (
    update(_DELIVERIES)
    .where(_D.id == bindparam("b_id"), _UNFINISHED_ROW, _D.claimed_by == bindparam("b_owner"),
           select(_S.id).where(_S.id == _D.subscriber_id, _S.status == "confirmed").exists())
    .values(status="sending", attempts=_D.attempts + 1, message_id=bindparam("b_message_id"),
            updated_at=bindparam("b_now"))
)


# the same for a row whose Message-ID is recorded already: checked, not written again
# (writing the same value still rewrites its index entry: a page more per commit)
_CLAIM_RECORDED = (
    update(_DELIVERIES)
    .where(_D.id == bindparam("b_id"), _UNFINISHED_ROW, _D.claimed_by == bindparam("b_owner"),
           _D.message_id == bindparam("b_message_id"),
           select(_S.id).where(_S.id == _D.subscriber_id, _S.status == "confirmed").exists())
    .values(status="sending", attempts=_D.attempts + 1, updated_at=bindparam("b_now"))
)


_SKIP = (update(_DELIVERIES).where(_D.id == bindparam("b_id"), _UNFINISHED_ROW,
                                   _D.claimed_by == bindparam("b_owner"))
         .values(status="skipped", updated_at=bindparam("b_now")))


_FINISH = (
    update(_DELIVERIES).where(_D.id == bindparam("b_id"))
    .values(status=bindparam("b_status"), updated_at=bindparam("b_now"),
            last_error=bindparam("b_error"), attempts=_D.attempts + bindparam("b_extra", 0),
            sent_at=func.coalesce(bindparam("b_sent_at", type_=UTCDateTime()), _D.sent_at))
)


_COUNT_FAILURE = (update(_SUBSCRIBERS).where(_S.id == bindparam("b_id"))
                  .values(hard_failures=_S.hard_failures + 1))


_BOUNCE = (
    update(_SUBSCRIBERS)
    .where(_S.id == bindparam("b_id"), _S.status == "confirmed",
           _S.hard_failures >= bindparam("b_max"))
    .values(status="bounced", bounced_at=bindparam("b_now"), token_nonce=bindparam("b_nonce"))
)


_CLEAR_FAILURES = update(_SUBSCRIBERS).where(_S.id == bindparam("b_id")).values(hard_failures=0)


# a claimed row's Message-ID, given when the batch is claimed (see DbLedger.unfinished)
GIVE_MESSAGE_ID = (update(_DELIVERIES)
                    .where(_D.id == bindparam("b_id"), _D.message_id.is_(None),
                           _D.claimed_by == bindparam("b_owner"))
                    .values(message_id=bindparam("b_message_id")))


_CLAIM_FAST, _SKIP_FAST, _FINISH_FAST = _Prepared(_CLAIM), _Prepared(_SKIP), _Prepared(_FINISH)
_CLAIM_RECORDED_FAST = _Prepared(_CLAIM_RECORDED)


def claim_delivery(db: Connection, delivery_id: int, owner: str, message_id: str,
                   now: datetime, *, recorded: bool = False) -> bool:
    """Mark a row 'sending' (one more attempt) if it is unfinished, ``owner``
    holds it, and its subscriber is still confirmed; False otherwise. With
    ``recorded``, the row already holds ``message_id`` (and must). Commit
    with raw_commit."""
    statement = _CLAIM_RECORDED_FAST if recorded else _CLAIM_FAST
    return statement.run(db, {"b_id": delivery_id, "b_owner": owner,
                              "b_message_id": message_id, "b_now": now}) == 1


def skip_delivery(db: Connection, delivery_id: int, owner: str, now: datetime) -> bool:
    """An unfinished row ``owner`` holds whose subscriber is no longer confirmed: 'skipped'."""
    return _SKIP_FAST.run(db, {"b_id": delivery_id, "b_owner": owner, "b_now": now}) == 1


def finish_delivery(
    db: Connection, delivery_id: int, status: str, now: datetime, *,
    error: str | None = None, extra_attempts: int = 0,
) -> None:
    """Record how a delivery ended: 'sent', 'failed', or back to 'pending'.
    Commit with raw_commit."""
    _FINISH_FAST.run(db, {"b_id": delivery_id, "b_status": status, "b_now": now,
                          "b_error": error, "b_extra": extra_attempts,
                          "b_sent_at": now if status == "sent" else None})


_COUNT_FAILURE_FAST, _BOUNCE_FAST = _Prepared(_COUNT_FAILURE), _Prepared(_BOUNCE)


_CLEAR_FAILURES_FAST = _Prepared(_CLEAR_FAILURES)


def record_hard_failure(
    db: Connection, subscriber_id: int, max_failures: int, nonce: str, now: datetime
) -> bool:
    """Count a permanent (5xx) failure; at ``max_failures`` the subscriber is
    'bounced'. Returns True if this made them bounced. Commit with raw_commit."""
    _COUNT_FAILURE_FAST.run(db, {"b_id": subscriber_id})
    return _BOUNCE_FAST.run(db, {"b_id": subscriber_id, "b_max": max_failures, "b_now": now,
                                 "b_nonce": nonce}) == 1


def clear_hard_failures(db: Connection, subscriber_id: int) -> None:
    """A delivery went through: failures count in a row, so start again at 0."""
    _CLEAR_FAILURES_FAST.run(db, {"b_id": subscriber_id})
