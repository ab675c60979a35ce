"""Which send worker holds which ledger rows: claims with a lease.

Several workers may send one digest at once: the threads of one
``digestbot send`` (one per SMTP connection, ``DIGESTBOT_SMTP_CONNECTIONS``)
and other ``digestbot send`` or ``digestbot run`` processes, on this machine
or others, sharing one database. A worker takes a small batch of unfinished
rows with one atomic UPDATE (``claimed_by``, ``lease_until``), renews the
lease while it works, and hands back what it did not send when it stops.

- No row is claimed by two workers: the UPDATE re-checks that a row is free
  (unclaimed, lease run out, or held by a dead worker) as it writes. On
  PostgreSQL the candidate rows are picked with ``FOR UPDATE SKIP LOCKED``,
  so workers never wait on each other; SQLite has one writer at a time.
- A worker killed on this machine frees its rows at once (its process is
  gone); one that died on another machine frees them when the lease runs out.
- Rows a dead worker left 'sending' are sent again by whoever takes them,
  under the same Message-ID (see ``bot.send.loop``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Table, and_, bindparam, or_, select, update

from bot.leases import is_dead
from bot.models import Delivery, Subscriber
from bot.send.loop import LedgerRow
from bot.send.prepared import rowcount

LEASE = timedelta(minutes=5)  # a worker that died on another host holds its rows this long
UNFINISHED = ("pending", "sending")

_DELIVERIES = cast(Table, Delivery.__table__)
_SUBSCRIBERS = cast(Table, Subscriber.__table__)
_D, _S = _DELIVERIES.c, _SUBSCRIBERS.c


def dead_holders(conn: Connection, digest_id: int, owner: str, now: datetime) -> list[str]:
    """Workers holding unexpired claims on this digest whose process is gone."""
    holders = conn.execute(
        select(_D.claimed_by).distinct()
        .where(_D.digest_id == digest_id, _D.status.in_(UNFINISHED),
               _D.claimed_by.is_not(None), _D.claimed_by != owner, _D.lease_until >= now)
    ).scalars()
    return [holder for holder in holders if holder and is_dead(holder)]


def _free(with_dead: bool) -> ColumnElement[bool]:
    """A row this worker may take: unclaimed, its lease over, its holder dead, or ours."""
    options = [_D.claimed_by.is_(None), _D.lease_until < bindparam("c_now"),
               _D.claimed_by == bindparam("c_owner")]
    if with_dead:
        options.append(_D.claimed_by.in_(bindparam("c_dead", expanding=True)))
    return or_(*options)


def _claim_statements(with_dead: bool) -> tuple[Any, Any]:
    """(pick, take): built once, so that running them costs no more than the
    SQL (building and cache-keying them again for every batch cost more)."""
    unfinished = and_(_D.digest_id == bindparam("c_digest"), _D.status.in_(UNFINISHED))
    free = _free(with_dead)
    # on PostgreSQL the picked rows stay locked until the commit, and rows
    # other workers are picking right now are skipped, not waited for
    pick = (select(_D.id).where(unfinished, _D.id > bindparam("c_after"), free)
            .order_by(_D.id).limit(bindparam("c_limit")).with_for_update(skip_locked=True))
    # the UPDATE checks again that each row is free as it writes it
    take = (update(_DELIVERIES).where(_D.id.in_(bindparam("c_ids", expanding=True)), unfinished, free)
            .values(claimed_by=bindparam("c_owner"), lease_until=bindparam("c_until"))
            .returning(_D.id))
    return pick, take


_CLAIM = {with_dead: _claim_statements(with_dead) for with_dead in (False, True)}
_CLAIMED_ROWS = (
    select(_D.id, _D.subscriber_id, _S.email, _S.email_key, _D.status, _D.message_id,
           _S.hard_failures, _D.themes)
    .join_from(_DELIVERIES, _SUBSCRIBERS, _S.id == _D.subscriber_id)
    .where(_D.id.in_(bindparam("c_ids", expanding=True))).order_by(_D.id)
)


def claim_batch(
    conn: Connection, digest_id: int, owner: str, now: datetime, *, after_id: int = 0,
    limit: int = 50, lease: timedelta = LEASE,
) -> list[LedgerRow]:
    """Claim up to ``limit`` unfinished rows with ids above ``after_id``, by id,
    and return them with what sending needs. The caller commits.

    Rows held by dead workers are looked for only once no free row is left
    (finding them scans all the digest's unfinished rows: once per batch,
    that made a send quadratic in its size)."""
    dead: list[str] = []
    params: dict[str, Any] = {"c_digest": digest_id, "c_owner": owner, "c_now": now,
                              "c_after": after_id, "c_limit": limit, "c_until": now + lease}
    while True:
        pick, take = _CLAIM[bool(dead)]
        picked = list(conn.execute(pick, params).scalars())
        if not picked:
            if dead:
                return []
            dead = dead_holders(conn, digest_id, owner, now)
            if not dead:
                return []
            params["c_dead"] = dead
            continue
        # on SQLite another worker may have taken them all since: pick again
        ids = list(conn.execute(take, params | {"c_ids": picked}).scalars())
        if ids:
            break
    return [LedgerRow(*row) for row in conn.execute(_CLAIMED_ROWS, {"c_ids": ids})]


def renew_claims(conn: Connection, digest_id: int, owner: str, now: datetime,
                 lease: timedelta = LEASE) -> int:
    """Extend the lease on every unfinished row this worker holds. The caller commits."""
    return rowcount(conn.execute(
        update(_DELIVERIES)
        .where(_D.digest_id == digest_id, _D.claimed_by == owner, _D.status.in_(UNFINISHED))
        .values(lease_until=now + lease)))


def release_claims(conn: Connection, digest_id: int, owner: str) -> int:
    """Hand back the rows this worker holds but did not send ('pending' ones;
    a row left 'sending' stays claimed until its lease runs out, so nobody
    sends it while its fate is unknown). The caller commits."""
    return rowcount(conn.execute(
        update(_DELIVERIES)
        .where(_D.digest_id == digest_id, _D.claimed_by == owner, _D.status == "pending")
        .values(claimed_by=None, lease_until=None)))
