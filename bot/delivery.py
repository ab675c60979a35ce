"""The send manager: works through a frozen digest's delivery ledger.

The ledger is one ``Delivery`` row per (digest, subscriber)::

    pending --claim--> sending --250 OK------------> sent
                          |----5xx-----------------> failed  (subscriber.hard_failures + 1)
                          |----4xx, retries used up-> failed
                          |----server gone----------> pending (the run stops: DeliveryError)
    pending/sending --subscriber no longer confirmed--> skipped

How a send survives being interrupted (Ctrl-C, kill -9, power loss)
--------------------------------------------------------------------
1. Every confirmed subscriber gets a 'pending' row, in one transaction,
   before the first message goes out (``store.create_pending_deliveries``).
2. A row is marked 'sending' -- together with its Message-ID -- and that is
   committed before the server can accept its message. When the server
   answers 250 the row is marked 'sent' in the very next commit, which also
   claims the following row (one commit per message). That commit runs while
   the next message's MAIL, RCPT and DATA commands are exchanged; its data
   goes out only once the commit is done (``Ledger.durable``).
3. On SQLite the ledger's connection commits with ``synchronous=FULL``, so a
   recorded state survives power loss, not only a killed process.
4. A run only ever sends rows that are 'pending' or 'sending'; a 'sent' row
   is never sent again. A row still 'sending' when a run starts was in flight
   when the previous run died: it is sent again (at-least-once for that one
   message) under the *same* Message-ID, so clients and archives that
   deduplicate by Message-ID show it once, and the outbox (files named by
   Message-ID) holds one file either way.
5. In the CLI, Ctrl-C and SIGTERM only set a stop flag: the message in flight
   finishes and is recorded, so a graceful stop never leaves a row 'sending'.

The one window that remains: the server has accepted the message (its 250
reply to DATA) and our commit of 'sent' is not on disk yet -- about a
millisecond: two small UPDATEs and the commit's disk sync. A hard kill or
power loss exactly there gives that recipient a second copy, with the same
Message-ID. A kill before or during DATA is no delivery yet and the message
is simply sent on the next run.

The core loop (``deliver``) depends only on narrow interfaces: a ``Ledger``
(backed by ``bot.store`` queries in ``DbLedger``), a ``Sender``
(``bot.mailer``) and a ``Composer`` that turns a ledger row into bytes.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import store
from bot.errors import DeliveryError
from bot.mailer import DigestMessage, PermanentFailure, Sender, TemporaryFailure, new_message_id
from bot.store import LedgerRow
from bot.tokens import Tokens, unsubscribe_url

log = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)  # a sender that died on another host blocks a digest this long
RENEW_EVERY = 60.0  # seconds between lease renewals
BATCH = 500  # ledger rows read at a time
MAX_ERRORS_KEPT = 20


# --- interfaces -------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """How one delivery ended, recorded together with the next claim."""

    row: LedgerRow
    status: str  # sent | failed | pending
    error: str | None = None
    retries: int = 0
    hard: bool = False  # a 5xx: counts towards the subscriber's bounce


class Ledger(Protocol):
    def unfinished(self, after_id: int, limit: int) -> Sequence[LedgerRow]: ...

    def count_unfinished(self) -> int: ...

    def step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        """In one commit: record ``done``, and claim the next row with its Message-ID.
        Returns (claimed | skipped | gone | none, whether ``done`` made a bounce)."""
        ...

    def durable(self) -> None:
        """Return once everything ``step`` recorded is on disk (it may commit in
        the background while the next message is being transferred)."""
        ...

    def renew(self) -> None: ...

    def finish_digest(self) -> bool:
        """Mark the digest sent if no row is pending or sending; True if it is."""
        ...


class Composer(Protocol):
    def new_message_id(self) -> str: ...

    def prepare(self, rows: Sequence[LedgerRow]) -> None:
        """Called with each batch before its rows are composed (to precompute)."""
        ...

    def compose(self, row: LedgerRow, message_id: str) -> bytes: ...


@dataclass
class DeliveryReport:
    """What a delivery run did; also what the progress callback is given."""

    total: int = 0
    sent: int = 0
    failed: int = 0
    skipped: int = 0
    bounced: int = 0
    retried: int = 0
    complete: bool = False
    interrupted: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def done(self) -> int:
        return self.sent + self.failed + self.skipped

    def note_error(self, address: str, error: str) -> None:
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append((address, error))


Progress = Callable[[DeliveryReport], None]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 1.0  # seconds; doubles with each retry

    def delay(self, retry: int) -> float:
        return self.base_delay * (2 ** retry)


# --- the loop ------------------------------------------------------------------------------

def deliver(
    ledger: Ledger,
    sender: Sender,
    composer: Composer,
    envelope_from: str,
    *,
    retry: RetryPolicy | None = None,
    rate: float = 0.0,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    batch: int = BATCH,
    clock: Callable[[], float] = time.monotonic,
) -> DeliveryReport:
    """Send every unfinished ledger row once. Raises DeliveryError, with the
    row in flight put back to 'pending', when the transport is gone for good."""
    retry = retry or RetryPolicy()
    stop = stop or threading.Event()
    report = DeliveryReport(total=ledger.count_unfinished())
    interval = 1.0 / rate if rate > 0 else 0.0
    next_send = last_renew = clock()
    done: Outcome | None = None
    after = 0
    if progress:
        progress(report)
    try:
        while not stop.is_set():
            rows = ledger.unfinished(after, batch)
            if not rows:
                break
            composer.prepare(rows)
            for row in rows:
                after = row.id
                if stop.is_set():
                    break
                if clock() - last_renew >= RENEW_EVERY:
                    ledger.renew()
                    last_renew = clock()
                message_id = row.message_id or composer.new_message_id()
                state, bounced = ledger.step(done, (row, message_id))
                done = None
                report.bounced += bounced
                if state == "skipped":
                    report.skipped += 1
                    if progress:
                        progress(report)
                if state != "claimed":
                    continue
                data = composer.compose(row, message_id)
                if interval:
                    wait = next_send - clock()
                    if wait > 0 and stop.wait(wait):
                        done = Outcome(row, "pending", "stopped before sending")
                        break
                    next_send = max(next_send, clock()) + interval
                done = _send_one(sender, envelope_from, row, message_id, data, retry, stop,
                                 ledger, report)
                if done.status == "sent":
                    report.sent += 1
                elif done.status == "failed":
                    report.failed += 1
                    report.note_error(row.email, done.error or "")
                if progress:
                    progress(report)
                if done.status == "pending":  # stopped while waiting to retry
                    break
    finally:
        # record the last outcome however we leave: done, error, or Ctrl-C
        if done is not None:
            _, bounced = ledger.step(done, None)
            report.bounced += bounced
    report.complete = ledger.finish_digest()
    report.interrupted = stop.is_set() and not report.complete
    return report


def _send_one(
    sender: Sender, envelope_from: str, row: LedgerRow, message_id: str, data: bytes,
    retry: RetryPolicy, stop: threading.Event, ledger: Ledger, report: DeliveryReport,
) -> Outcome:
    """Hand one message over, retrying 4xx replies and lost connections with
    exponential backoff. A permanent failure or used-up retries become an
    outcome; a transport that stays unreachable becomes a DeliveryError."""
    attempt = 0
    while True:
        try:
            # the server may accept this message only once the previous one's
            # 'sent' is on disk: ledger.durable() runs before the data goes out
            sender.send(envelope_from, row.email, data, message_id, ready=ledger.durable)
            return Outcome(row, "sent", retries=attempt)
        except PermanentFailure as exc:
            log.warning("delivery to %s failed for good: %s", row.email, exc)
            return Outcome(row, "failed", str(exc), retries=attempt, hard=True)
        except DeliveryError:
            ledger.step(Outcome(row, "pending", "stopped: transport error", retries=attempt),
                        None)
            raise
        except TemporaryFailure as exc:
            if attempt >= retry.max_retries:
                if exc.connection:
                    ledger.step(Outcome(row, "pending", str(exc), retries=attempt), None)
                    raise DeliveryError(
                        f"{sender.description} is not accepting mail: {exc}",
                        hint=f"gave up after {attempt + 1} attempts; every undelivered message "
                             "is still pending: fix the server or the DIGESTBOT_SMTP_* "
                             "settings and run `digestbot send` again to finish") from None
                log.warning("delivery to %s failed after %d attempts: %s", row.email,
                            attempt + 1, exc)
                return Outcome(row, "failed", str(exc), retries=attempt)
            delay = retry.delay(attempt)
            log.info("%s: %s; retrying in %.2fs", row.email, exc, delay)
            attempt += 1
            report.retried += 1
            if delay >= 1:
                ledger.renew()
            if stop.wait(delay):
                return Outcome(row, "pending", f"stopped while retrying: {exc}", retries=attempt)


# --- the database ledger and the digest composer ---------------------------------------

class DbLedger:
    """The ledger of one digest on one dedicated connection: one commit per step.

    It works on the Connection directly, with statements built once
    (``bot.store``): per message, two small UPDATEs and one commit. The
    UPDATEs run at once (their row counts decide what happens next); the
    commit -- an fsync with ``synchronous=FULL`` -- runs in a helper thread
    while the next message is composed and transferred, and ``durable()``
    waits for it before the server may accept that message. Every other use
    of the connection waits for it first, so it is never used by two threads.
    """

    def __init__(
        self, factory: sessionmaker[Session], digest_id: int, lock: DigestLock,
        max_hard_failures: int,
    ) -> None:
        self.digest_id = digest_id
        self.lock = lock
        self.max_hard_failures = max_hard_failures
        engine = factory.kw["bind"]
        assert isinstance(engine, Engine)
        self._conn = engine.connect()
        self._committer = ThreadPoolExecutor(1, thread_name_prefix="ledger-commit")
        self._commit: Future[None] | None = None
        self._sqlite = engine.dialect.name == "sqlite"
        if self._sqlite:
            # what is committed must survive power loss, not only a kill:
            # this connection syncs the WAL at every commit
            self._conn.exec_driver_sql("PRAGMA synchronous=FULL")
            self._conn.commit()

    def durable(self) -> None:
        commit, self._commit = self._commit, None
        if commit is not None:
            try:
                commit.result()
            except Exception as exc:
                raise _ledger_error(exc) from exc

    def close(self) -> None:
        try:
            try:
                self.durable()
            finally:
                self._committer.shutdown(wait=True)
            self._conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            self._conn.rollback()
            if self._sqlite:  # back to the engine's default before the pool reuses it
                self._conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
                self._conn.commit()
        finally:
            self._conn.close()

    def unfinished(self, after_id: int, limit: int) -> list[LedgerRow]:
        self.durable()
        rows = store.unfinished_deliveries(self._conn, self.digest_id, after_id, limit)
        self._conn.commit()
        return rows

    def count_unfinished(self) -> int:
        self.durable()
        count = store.count_unfinished(self._conn, self.digest_id)
        self._conn.commit()
        return count

    def step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        self.durable()
        now = datetime.now(UTC)
        conn = self._conn
        bounced = False
        state = "none"
        try:
            if done is not None:
                row = done.row
                store.finish_delivery(conn, row.id, done.status, now, error=done.error,
                                      extra_attempts=done.retries)
                if done.hard:
                    bounced = store.record_hard_failure(
                        conn, row.subscriber_id, self.max_hard_failures,
                        secrets.token_urlsafe(16), now)
                elif done.status == "sent" and row.hard_failures:
                    store.clear_hard_failures(conn, row.subscriber_id)
            if claim is not None:
                row, message_id = claim
                if store.claim_delivery(conn, row.id, message_id, now):
                    state = "claimed"
                elif store.skip_delivery(conn, row.id, now):
                    state = "skipped"
                else:
                    state = "gone"
        except BaseException as exc:
            conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
            if isinstance(exc, Exception):
                raise _ledger_error(exc) from exc
            raise
        if state == "claimed":
            # see the class docstring: committed while the next message is on its way
            self._commit = self._committer.submit(store.raw_commit, conn)
        else:
            store.raw_commit(conn)
        return state, bounced

    def renew(self) -> None:
        self.durable()
        self.lock.renew(self._conn)

    def finish_digest(self) -> bool:
        self.durable()
        finished = store.count_unfinished(self._conn, self.digest_id) == 0
        if finished:
            store.mark_digest_sent(self._conn, self.digest_id, datetime.now(UTC))
        self._conn.commit()
        return finished


def _ledger_error(exc: Exception) -> DeliveryError:
    return DeliveryError(f"cannot write the delivery ledger: {exc}",
                         hint="check the database (DIGESTBOT_DATABASE_URL); `digestbot send` "
                              "resumes where this run stopped")


class DigestComposer:
    """Personalises a ``DigestMessage``: the recipient's unsubscribe link and Message-ID."""

    def __init__(self, message: DigestMessage, tokens: Tokens, base_url: str) -> None:
        self.message = message
        self.tokens = tokens
        self.base_url = base_url

        self._links: dict[int, str] = {}

    def new_message_id(self) -> str:
        return new_message_id(self.message.domain)

    def prepare(self, rows: Sequence[LedgerRow]) -> None:
        # signing a batch in one go is several times cheaper per token than
        # signing between two SMTP transactions (warm caches)
        self._links = {row.id: self._link(row) for row in rows}

    def _link(self, row: LedgerRow) -> str:
        token = self.tokens.unsubscribe_token(row.subscriber_id, row.email_key)
        return unsubscribe_url(self.base_url, token)

    def compose(self, row: LedgerRow, message_id: str) -> bytes:
        link = self._links.pop(row.id, None) or self._link(row)
        return self.message.render(row.email, message_id, link)


# --- the send lock ------------------------------------------------------------------------------

def lock_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _owner_is_dead(owner: str) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    try:
        host, pid_text, _ = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class DigestLock:
    """A lease on one digest's send (``Digest.lock_owner`` / ``lock_expires_at``).

    Taken with one atomic UPDATE (lock free, or its lease ran out), renewed
    while the send runs, released in ``finally``. A lock left behind by a
    process on this host that no longer exists (kill -9) is taken over at
    once; one left by another host frees itself when its lease runs out.
    """

    def __init__(self, factory: sessionmaker[Session], digest_id: int, week: str,
                 owner: str | None = None) -> None:
        self.factory = factory
        self.digest_id = digest_id
        self.week = week
        self.owner = owner or lock_owner_id()

    def acquire(self) -> None:
        now = datetime.now(UTC)
        with self.factory() as session:
            if store.acquire_digest_lock(session, self.digest_id, self.owner, now, now + LEASE):
                session.commit()
                return
            holder, expires = store.digest_lock(session, self.digest_id)
            if holder and _owner_is_dead(holder) and store.take_over_digest_lock(
                    session, self.digest_id, holder, self.owner, now + LEASE):
                session.commit()
                log.warning("took over the send lock of %s from %s, which is no longer running",
                            self.week, holder)
                return
            session.rollback()
        until = expires.strftime("%H:%M:%S UTC") if expires else "?"
        raise DeliveryError(
            f"another send of {self.week} is running ({holder}, lock held until {until})",
            hint="wait for it to finish; if it died on another machine, its lock frees itself "
                 f"{int(LEASE.total_seconds() // 60)} minutes after its last renewal")

    def renew(self, conn: Connection | None = None) -> None:
        expires = datetime.now(UTC) + LEASE
        if conn is None:
            with self.factory() as own:
                ok = store.renew_digest_lock(own, self.digest_id, self.owner, expires)
                own.commit()
        else:
            ok = store.renew_digest_lock(conn, self.digest_id, self.owner, expires)
            conn.commit()
        if not ok:
            raise DeliveryError(f"lost the send lock of {self.week} to another run",
                                hint="the other run carries on with the remaining messages")

    def release(self) -> None:
        with self.factory() as session:
            store.release_digest_lock(session, self.digest_id, self.owner)
            session.commit()

    def __enter__(self) -> DigestLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
