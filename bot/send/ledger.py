"""The delivery ledger: one ``Delivery`` row per (digest, subscriber), its
queries, and ``DbLedger``, the ``Ledger`` the send loop works through.

The hot path (claim, finish) uses Core statements on the tables: no ORM
objects, no identity map, one small UPDATE each.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from sqlalchemy import Connection, Engine, Integer, String, Table, bindparam, func, insert, literal, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from bot import leases
from bot.digest.queries import mark_digest_sent
from bot.errors import DeliveryError
from bot.models import Delivery, Subscriber, UTCDateTime
from bot.send import claims
from bot.send.loop import LedgerRow, Outcome
from bot.send.prepared import _Prepared, raw_commit, rowcount
from bot.send.walsync import WalSync

_DELIVERIES = cast(Table, Delivery.__table__)
_SUBSCRIBERS = cast(Table, Subscriber.__table__)
UNFINISHED = claims.UNFINISHED
CLAIM_SIZE = 50  # rows a worker takes at a time: small, so several workers share the work


def create_pending_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """One 'pending' row per confirmed subscriber who has none for this digest,
    in a single INSERT ... SELECT; returns how many were added."""
    has_row = (
        select(_DELIVERIES.c.id)
        .where(_DELIVERIES.c.digest_id == digest_id,
               _DELIVERIES.c.subscriber_id == _SUBSCRIBERS.c.id)
        .exists()
    )
    source = select(
        literal(digest_id, Integer), _SUBSCRIBERS.c.id, literal("pending", String),
        literal(0, Integer), literal(now, UTCDateTime()),
    ).where(_SUBSCRIBERS.c.status == "confirmed", ~has_row)
    result = session.execute(
        insert(_DELIVERIES).from_select(
            ["digest_id", "subscriber_id", "status", "attempts", "updated_at"], source)
    )
    return rowcount(result)


def reset_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """For a deliberate resend: every confirmed subscriber's row back to 'pending',
    with a fresh Message-ID to come (it is a new message, not a retry)."""
    confirmed = (
        select(_SUBSCRIBERS.c.id)
        .where(_SUBSCRIBERS.c.id == _DELIVERIES.c.subscriber_id,
               _SUBSCRIBERS.c.status == "confirmed")
        .exists()
    )
    result = session.execute(
        update(_DELIVERIES)
        .where(_DELIVERIES.c.digest_id == digest_id, confirmed)
        .values(status="pending", message_id=None, last_error=None, sent_at=None,
                updated_at=now, claimed_by=None, lease_until=None)
    )
    return rowcount(result)


# The per-message statements are built once, with bind parameters, and run
# through _Prepared below: building, cache-keying and executing a statement
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
_GIVE_MESSAGE_ID = (update(_DELIVERIES)
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


def count_unfinished(db: Session | Connection, digest_id: int) -> int:
    """Rows of one digest still 'pending' or 'sending'."""
    return int(db.execute(
        select(func.count()).select_from(_DELIVERIES)
        .where(_DELIVERIES.c.digest_id == digest_id, _DELIVERIES.c.status.in_(UNFINISHED))
    ).scalar_one())


def count_unfinished_or_new(session: Session, digest_id: int) -> int:
    """How many a resumed send would still deliver to: rows pending or sending,
    plus confirmed subscribers with no row yet."""
    d, s = _DELIVERIES.c, _SUBSCRIBERS.c
    unfinished = session.scalar(
        select(func.count()).select_from(_DELIVERIES)
        .where(d.digest_id == digest_id, d.status.in_(UNFINISHED))) or 0
    has_row = select(d.id).where(d.digest_id == digest_id, d.subscriber_id == s.id).exists()
    new = session.scalar(
        select(func.count()).select_from(_SUBSCRIBERS)
        .where(s.status == "confirmed", ~has_row)) or 0
    return int(unfinished) + int(new)


def held_by_others(session: Session, digest_id: int, now: datetime) -> int:
    """Unfinished rows of this digest under a live worker's lease (workers
    hand back what they did not send, so after a run ends these are others')."""
    d = _DELIVERIES.c
    return int(session.scalar(
        select(func.count()).select_from(_DELIVERIES)
        .where(d.digest_id == digest_id, d.status.in_(UNFINISHED), d.claimed_by.is_not(None),
               d.lease_until >= now)) or 0)


def delivery_counts(session: Session, digest_id: int) -> dict[str, int]:
    """Number of ledger rows per delivery status for one digest."""
    rows = session.execute(select(Delivery.status, func.count())
                           .where(Delivery.digest_id == digest_id).group_by(Delivery.status))
    return {status: count for status, count in rows}


class DbLedger:
    """The ledger of one digest on one dedicated connection: one commit per step.

    It works on the Connection directly, with statements built once
    (``bot.send.ledger``): per message, two small UPDATEs and one commit. The
    UPDATEs run at once (their row counts decide what happens next). A
    commit that has to reach the disk or the server (PostgreSQL; SQLite
    without WAL) runs in a helper thread while the message is composed and
    its SMTP commands exchanged, and every other use of the connection waits
    for it first, so the connection is never used by two threads; on SQLite
    with WAL the commit is a write to the log, made at once.

    Message-IDs: with ``new_message_id``, ``unfinished`` gives every claimed
    row that has none a new one, in the claim's own commit. ``durable()``,
    which the send calls before a message's data goes out, waits for that
    step's commit and for the row's Message-ID to be on disk -- the batch's
    one disk sync, done by then in all but the first message of a batch.

    On disk: on SQLite (WAL) commits are made with ``synchronous=NORMAL`` and
    ``WalSync`` syncs the log from a second helper thread right after each
    one (``bot.send.walsync``), so no message waits for a disk sync; without
    WAL the connection commits with ``synchronous=FULL``; on PostgreSQL a
    commit is durable when it returns.
    """

    def __init__(
        self, factory: sessionmaker[Session], digest_id: int, max_hard_failures: int,
        owner: str | None = None, claim_size: int = CLAIM_SIZE,
        new_message_id: Callable[[], str] | None = None,
    ) -> None:
        self.digest_id = digest_id
        self.new_message_id = new_message_id
        self.owner = owner or leases.worker_id()
        self.claim_size = claim_size
        self.max_hard_failures = max_hard_failures
        engine = factory.kw["bind"]
        assert isinstance(engine, Engine)
        self._conn = engine.connect()
        self._committer = ThreadPoolExecutor(1, thread_name_prefix="ledger-commit")
        self._commit: Future[int] | None = None
        self._wal: WalSync | None = None
        self._claimed = 0  # WalSync's number of the last batch claim's commit
        self._stepped = 0  # ... and of the last step's commit
        self._fresh_id = False  # the row claimed last got its Message-ID in that step
        self._full_sync = False
        if engine.dialect.name == "sqlite":
            # what is committed must survive power loss, not only a kill
            database = engine.url.database
            mode = self._conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            if database and database != ":memory:" and str(mode).lower() == "wal":
                self._wal = WalSync.open(Path(database))  # shared by the process's ledgers
            else:
                self._conn.exec_driver_sql("PRAGMA synchronous=FULL")  # synced at each commit
                self._full_sync = True
            self._conn.commit()

    # --- commits and the disk --------------------------------------------------------------

    def _commit_step(self) -> int:
        """Commit (in the helper thread); WalSync's number of the commit, or 0."""
        raw_commit(self._conn)
        return self._wal.written() if self._wal is not None else 0

    def _free(self) -> None:
        """Wait for the commit running in the helper thread, if any."""
        commit, self._commit = self._commit, None
        if commit is not None:
            try:
                self._stepped = commit.result()
            except Exception as exc:
                raise _ledger_error(exc) from exc

    def _on_disk(self, commit: int | None = None) -> None:
        """Wait until WalSync has synced commit number ``commit`` (default: all)."""
        if self._wal is not None:
            try:
                self._wal.wait(commit)
            except OSError as exc:
                raise _ledger_error(exc) from exc

    def _commit_now(self, durable: bool = False) -> None:
        """Commit here; with ``durable``, return only once everything is on disk."""
        self._conn.commit()
        if self._wal is not None:
            self._wal.written()
            if durable:
                self._on_disk()

    def durable(self) -> None:
        self._free()
        self._on_disk(self._stepped if self._fresh_id else self._claimed)

    # --- the Ledger ------------------------------------------------------------------------

    def unfinished(self, after_id: int, limit: int) -> list[LedgerRow]:
        """Claim the next rows (at most ``limit``, fewer while others share the
        digest), giving Message-IDs to those without (if ``new_message_id``)."""
        self._free()
        rows = claims.claim_batch(self._conn, self.digest_id, self.owner, datetime.now(UTC),
                                  after_id=after_id, limit=min(limit, self.claim_size))
        fresh = {row.id: self.new_message_id() for row in rows
                 if row.message_id is None} if self.new_message_id else {}
        if fresh:
            self._conn.execute(_GIVE_MESSAGE_ID, [
                {"b_id": row_id, "b_owner": self.owner, "b_message_id": message_id}
                for row_id, message_id in fresh.items()])
            rows = [replace(row, message_id=fresh.get(row.id, row.message_id)) for row in rows]
        self._conn.commit()
        if self._wal is not None:
            self._claimed = self._wal.written()  # synced meanwhile; durable() checks
        return rows

    def count_unfinished(self) -> int:
        self._free()
        count = count_unfinished(self._conn, self.digest_id)
        self._conn.commit()
        return count

    def step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        self._free()
        now = datetime.now(UTC)
        conn = self._conn
        bounced = False
        state = "none"
        try:
            if done is not None:
                row = done.row
                finish_delivery(conn, row.id, done.status, now, error=done.error,
                                extra_attempts=done.retries)
                if done.hard:
                    bounced = record_hard_failure(
                        conn, row.subscriber_id, self.max_hard_failures,
                        secrets.token_urlsafe(16), now)
                elif done.status == "sent" and row.hard_failures:
                    clear_hard_failures(conn, row.subscriber_id)
            if claim is not None:
                row, message_id = claim
                if claim_delivery(conn, row.id, self.owner, message_id, now,
                                  recorded=row.message_id == message_id):
                    state = "claimed"
                    self._fresh_id = row.message_id is None
                elif skip_delivery(conn, row.id, self.owner, now):
                    state = "skipped"
                else:
                    state = "gone"
        except BaseException as exc:
            conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            if isinstance(exc, Exception):
                raise _ledger_error(exc) from exc
            raise
        if state == "claimed" and self._wal is None:
            # see the class docstring: committed while the message is on its way
            self._commit = self._committer.submit(self._commit_step)
        else:  # WAL: a commit is only a write to the log (~0.1 ms), cheaper than a thread switch
            try:
                self._stepped = self._commit_step()
            except Exception as exc:
                # nothing of this step holds; the loop records ``done`` again on its way out
                conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
                raise _ledger_error(exc) from exc
        return state, bounced

    def renew(self) -> None:
        self._free()
        claims.renew_claims(self._conn, self.digest_id, self.owner, datetime.now(UTC))
        self._commit_now()

    def finish_digest(self) -> bool:
        self._free()
        finished = count_unfinished(self._conn, self.digest_id) == 0
        if finished:
            mark_digest_sent(self._conn, self.digest_id, datetime.now(UTC))
        self._commit_now(durable=True)
        return finished

    def close(self) -> None:
        """Hand back the rows not sent and end. Raises DeliveryError if what was
        recorded may not be on disk -- after handing the rows back all the same,
        so that another run can take them at once."""
        failed: DeliveryError | None = None
        try:
            try:
                self._free()
            except DeliveryError as exc:
                failed = exc
            finally:
                self._committer.shutdown(wait=True)
            self._conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            self._conn.rollback()
            claims.release_claims(self._conn, self.digest_id, self.owner)
            self._commit_now(durable=failed is None)
            if self._full_sync:  # back to the engine's default before the pool reuses it
                self._conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
                self._conn.commit()
        finally:
            if self._wal is not None:
                self._wal.close()
            self._conn.close()
        if failed is not None:
            raise failed


def _ledger_error(exc: Exception) -> DeliveryError:
    return DeliveryError(f"cannot write the delivery ledger: {exc}",
                         hint="check the database (DIGESTBOT_DATABASE_URL); `digestbot send` "
                              "resumes where this run stopped")
