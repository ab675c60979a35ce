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
   before the first message goes out (``ledger.create_pending_deliveries``).
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

The one window that remains runs from the end of the message data (the
final "." of DATA) to our commit of 'sent' after the server's 250: the
server's own processing before it answers (queueing, content checks: from
milliseconds to seconds, however long the server takes), the reply's way
back, then two small UPDATEs and the commit's disk sync. A hard kill or power
loss in that window gives that recipient a second copy, with the same
Message-ID; SMTP gives a client that never saw the answer no way to learn
whether the message was taken. A kill before the end of DATA is no delivery
yet and the message is simply sent on the next run.

The core loop (``deliver``) depends only on narrow interfaces: a ``Ledger``
(``bot.send.ledger.DbLedger``), a ``Sender``
(``bot.mailer``) and a ``Composer`` that turns a ledger row into bytes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bot.errors import DeliveryError
from bot.mailer import PermanentFailure, Sender, TemporaryFailure

log = logging.getLogger(__name__)

RENEW_EVERY = 60.0  # seconds between lease renewals
BATCH = 500  # ledger rows read at a time
MAX_ERRORS_KEPT = 20


@dataclass(frozen=True)
class LedgerRow:
    """One delivery still to do, with what sending it needs."""

    id: int
    subscriber_id: int
    email: str
    email_key: str
    status: str
    message_id: str | None
    hard_failures: int


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


class Pacer:
    """Spaces messages ``1 / rate`` seconds apart, however many connections
    share it (``DIGESTBOT_SEND_RATE`` limits the whole send, not each one)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.clock = clock
        self._next = clock()
        self._lock = threading.Lock()

    def wait(self, stop: threading.Event) -> bool:
        """Wait for this message's slot; False if ``stop`` was set meanwhile."""
        if not self.interval:
            return True
        with self._lock:
            slot = max(self._next, self.clock())
            self._next = slot + self.interval
        wait = slot - self.clock()
        return not (wait > 0 and stop.wait(wait))


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 1.0  # seconds; doubles with each retry

    def delay(self, retry: int) -> float:
        return self.base_delay * (2 ** retry)


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
    pacer: Pacer | None = None,
) -> DeliveryReport:
    """Send every unfinished ledger row once. Raises DeliveryError, with the
    row in flight put back to 'pending', when the transport is gone for good."""
    retry = retry or RetryPolicy()
    stop = stop or threading.Event()
    report = DeliveryReport(total=ledger.count_unfinished())
    pacer = pacer or Pacer(rate, clock)
    last_renew = clock()
    done: Outcome | None = None
    after = 0
    if progress:
        progress(report)
    try:
        while not stop.is_set():
            rows = ledger.unfinished(after, batch)
            if not rows and after:
                after = 0  # rows freed behind us (a dead worker's) are ours to send too
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
                if not pacer.wait(stop):
                    done = Outcome(row, "pending", "stopped before sending")
                    break
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
