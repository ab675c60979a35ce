"""The delivery ledger: one ``Delivery`` row per (digest, subscriber), its
queries, and ``DbLedger``, the ``Ledger`` the send loop works through.

The hot path (claim, finish) uses Core statements on the tables, built once
(``bot.send.updates``): no ORM objects, no identity map, one small UPDATE each.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Engine, Integer, String, Table, func, insert, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from bot import leases
from bot.digest.queries import mark_digest_sent
from bot.errors import DeliveryError
from bot.models import Delivery, Subscriber, UTCDateTime
from bot.send import claims
from bot.send.loop import LedgerRow, Outcome
from bot.send.prepared import raw_commit, rowcount
from bot.send.updates import (
    GIVE_MESSAGE_ID,
    claim_delivery,
    clear_hard_failures,
    finish_delivery,
    record_hard_failure,
    skip_delivery,
)
from bot.send.walsync import WalSync

_DELIVERIES = cast(Table, Delivery.__table__)
_SUBSCRIBERS = cast(Table, Subscriber.__table__)
UNFINISHED = claims.UNFINISHED
CLAIM_SIZE = 50  # rows a worker takes at a time: small, so several workers share the work
# INSERTs that can skip rows already there (ON CONFLICT DO NOTHING), by dialect
_UPSERT: dict[str, Callable[[Table], Any]] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def create_pending_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """One 'pending' row per confirmed subscriber who has none for this digest,
    in a single INSERT ... SELECT; returns how many were added.

    Two sends starting together both find the rows missing: on PostgreSQL the
    second INSERT waits for the first's rows, then hits the (digest, subscriber)
    key. ON CONFLICT DO NOTHING lets it add nothing instead of failing the send."""
    has_row = (
        select(_DELIVERIES.c.id)
        .where(_DELIVERIES.c.digest_id == digest_id,
               _DELIVERIES.c.subscriber_id == _SUBSCRIBERS.c.id)
        .exists()
    )
    # the reader's theme choice goes with the row: the copy it gets is fixed with it
    source = select(
        literal(digest_id, Integer), _SUBSCRIBERS.c.id, literal("pending", String),
        literal(0, Integer), literal(now, UTCDateTime()), _SUBSCRIBERS.c.themes,
    ).where(_SUBSCRIBERS.c.status == "confirmed", ~has_row)
    columns = ["digest_id", "subscriber_id", "status", "attempts", "updated_at", "themes"]
    dialect = session.get_bind().dialect.name
    if dialect in _UPSERT:
        statement: Any = _UPSERT[dialect](_DELIVERIES).from_select(columns, source).on_conflict_do_nothing(
            index_elements=["digest_id", "subscriber_id"])
    else:
        statement = insert(_DELIVERIES).from_select(columns, source)
    return rowcount(session.execute(statement))


def reset_deliveries(session: Session, digest_id: int, now: datetime) -> int:
    """For a deliberate resend: every confirmed subscriber's row back to 'pending',
    with a fresh Message-ID to come (it is a new message, not a retry) and the
    reader's theme choice as it is now."""
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
                updated_at=now, claimed_by=None, lease_until=None,
                themes=select(_SUBSCRIBERS.c.themes)
                .where(_SUBSCRIBERS.c.id == _DELIVERIES.c.subscriber_id).scalar_subquery())
    )
    return rowcount(result)


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
    (``bot.send.updates``): per message, two small UPDATEs and one commit.
    Where the commit has to reach the server or the disk (PostgreSQL; SQLite
    without WAL) the whole step -- both UPDATEs and the commit, three round
    trips to a server -- runs in a helper thread (``begin_step``) while the
    message is composed and its SMTP commands exchanged; what the claim found
    (``settle``) is known before the message's data may go out, and the send
    hands nothing over unless it is 'claimed' (``bot.send.loop``). Every
    other use of the connection waits for the step first, so the connection
    is never used by two threads at once. On SQLite with WAL the step runs
    at once: its commit is a write to the log (~0.1 ms), cheaper than the
    thread switch.

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
        self._committer = ThreadPoolExecutor(1, thread_name_prefix="ledger-step")
        self._step: Future[tuple[str, bool]] | None = None  # the step running in the helper
        self._settled: tuple[str, bool] = ("none", False)  # what the step begun last did
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

    def _step_and_commit(self, done: Outcome | None,
                         claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        """One step's UPDATEs and its commit, or nothing of them (rolled back)."""
        conn = self._conn
        try:
            result = self._updates(done, claim)
            raw_commit(conn)
        except BaseException as exc:
            with contextlib.suppress(Exception):  # the error that matters is ``exc``
                conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            if isinstance(exc, Exception):
                raise _ledger_error(exc) from exc
            raise
        if self._wal is not None:
            self._stepped = self._wal.written()  # WalSync's number of this commit
        return result

    def _free(self) -> None:
        """Wait for the step running in the helper thread, if any (its error
        is raised here, once)."""
        step, self._step = self._step, None
        if step is not None:
            self._settled = step.result()

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
            self._conn.execute(GIVE_MESSAGE_ID, [
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
        self.begin_step(done, claim)
        return self.settle()

    def begin_step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> bool:
        """Start the step; where a commit has to reach the server or the disk
        (PostgreSQL; SQLite without WAL) the whole step -- UPDATEs and commit
        -- runs in the helper thread while the message is composed and its
        commands go out (see the class docstring and ``bot.send.loop``).
        False if the step ran here and did not claim the row."""
        self._free()
        self._settled = ("none", False)  # what a step that fails leaves: nothing
        if self._wal is None:
            self._step = self._committer.submit(self._step_and_commit, done, claim)
            return True
        # WAL: a commit is only a write to the log (~0.1 ms), cheaper than a thread switch
        self._settled = self._step_and_commit(done, claim)
        return self._settled[0] == "claimed"

    def settle(self) -> tuple[str, bool]:
        self._free()
        return self._settled

    def _updates(self, done: Outcome | None,
                 claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        now = datetime.now(UTC)
        conn = self._conn
        bounced = False
        state = "none"
        if done is not None:
            row = done.row
            finish_delivery(conn, row.id, done.status, now, error=done.error,
                            extra_attempts=done.retries)
            if done.hard:
                bounced = record_hard_failure(conn, row.subscriber_id, self.max_hard_failures,
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
