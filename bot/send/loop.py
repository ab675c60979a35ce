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
2. A worker claims rows a small batch at a time (``bot.send.claims``) and,
   in the claim's own commit, gives each row without one a Message-ID
   (``Ledger.unfinished``). That commit is on disk before the batch's first
   message can go out (``Ledger.durable``, which runs before each message's
   data), so every Message-ID is fixed and durable before the server sees
   its data; a row sent again (4.) carries the same one.
3. Per message, one step in one commit: the previous row 'sent' (the
   server answered 250) or 'failed', and this row 'sending' (if it is still
   unfinished, still this worker's, and its subscriber still confirmed).
   The message's data waits for that commit, and goes out only if the step
   claimed the row. On SQLite the step runs before the message's commands
   and its commit is written to the write-ahead log at once
   (``synchronous=NORMAL``: a killed process loses nothing); a helper thread
   syncs the log to disk right after (``bot.send.walsync``; one per
   database, so one sync may cover the commits of several connections), as
   ``synchronous=FULL`` would, so it survives power loss too. On PostgreSQL
   the whole step -- two UPDATEs and the commit, three round trips to the
   server, durable when the commit returns -- runs in a helper thread while
   the message is composed and its MAIL, RCPT and DATA go out (below).
4. A run only ever sends rows that are 'pending' or 'sending'; a 'sent' row
   is never sent again. A row still 'sending' when a run starts was in flight
   when the previous run died: it is sent again (at-least-once for that one
   message) under the *same* Message-ID, so clients and archives that
   deduplicate by Message-ID show it once, and the outbox (files named by
   Message-ID) holds one file either way. A 'pending' row with a Message-ID
   was claimed but not sent: it goes out once, with that Message-ID.
5. Ctrl-C and SIGTERM (CLI and service) only set a stop flag: the message in
   flight finishes and is recorded, so a graceful stop never leaves a row
   'sending'. A message still in flight a moment later (a stalled server) has
   its connection cut and its row put back to 'pending' (``bot.send.workers``).

The one window that remains runs from the end of the message data (the
final "." of DATA) to our commit of 'sent' after the server's 250: the
server's own processing before it answers (queueing, content checks: from
milliseconds to seconds, however long the server takes), the reply's way
back, then two small UPDATEs and the commit -- and, for power loss, the
sync of that commit, which the helper thread starts at once (one disk sync,
about 1.5 ms here). A hard kill or power loss in that window gives that
recipient a second copy, with the same Message-ID; SMTP gives a client that
never saw the answer no way to learn whether the message was taken. A kill
before the end of DATA is no delivery yet and the message is simply sent on
the next run.

What is no longer paid per message (issue 16), and why that is safe
------------------------------------------------------------------------
Profiled against Postfix's ``smtp-sink`` (a server with no latency of its
own), one connection reached about half the rate of a plain smtplib loop
(3,000 messages). Part of that was no per-message cost at all: the one-off
building, rendering and freezing of the digest (about a second in a fresh
process) counted against 3,000 messages, while the floor built its message
before its clock started; ``bench/send_parallel.py`` now times the delivery
as the floor is timed, and shows the whole send next to it. Per message the
send also waited for or paid:

- a disk sync (``synchronous=FULL``, ~1.5 ms here: as long as a whole
  message) before the message's data could go out, because that commit
  also held the message's new Message-ID. Now Message-IDs are given when a
  batch of rows is claimed, with one sync per batch (2.), so no message
  waits for a sync; each message's own commit is still synced to disk, by
  the helper thread, right after it is made (3.). What must be durable
  before DATA (the Message-ID) still is; 'sent' still becomes durable one
  sync after the 250, as before.
- three round trips for MAIL, RCPT and DATA: a server that offers
  PIPELINING (RFC 2920) gets them in one write, and its replies are read
  after; the data still goes out only after the 354 (``bot.mailer.senders``).
- a regular-expression pass over the whole message for dot-stuffing (0.45
  ms for a 48 KB digest): now only when a line starts with a dot (the base64
  bodies never do), and smtplib's parsing of the two addresses: plain ones
  are bracketed directly.
- per claimed batch, a scan of all the digest's unfinished rows for workers
  that died (quadratic in the digest's size): now only once no free row is
  left (``bot.send.claims``); and the claim statements are built once.
- the per-message claim rewrote the row's Message-ID (and so its index
  entry) with the value it already held: now it checks it instead.

Still per message, because they differ per recipient or are the ledger's
guarantee: the unsubscribe token (an HMAC, ~40 us, signed a batch at a time:
``Composer.prepare``), splicing the personal headers and the base64 tail
that holds the link into the message built once per run (~15 us,
``bot.mailer.message``), and two UPDATEs and a commit (~160 us of CPU, the
largest share of the bot's own cost).

The claim while the commands go out (PostgreSQL), and why that is safe
------------------------------------------------------------------------
On PostgreSQL the two UPDATEs used to run before the message's commands,
two round trips to a server whose backends share the cores with the
sending threads. Now the step runs in the ledger's helper thread
(``DbLedger.begin_step``) while the message is composed and its commands
go out; what it found (``settle``) is waited for where the data would go
out, and everywhere an outcome would be recorded:

- the data (and so any delivery) still goes out only after the row is
  claimed and that commit made: ``ready`` below raises if the step did not
  claim the row (finished meanwhile, another worker's, its subscriber no
  longer confirmed), and the sender then drops the connection without the
  final "." -- a server takes a message only at that "." (RFC 5321,
  4.1.1.4), so nothing is delivered, as when a ledger commit fails there
  (``bot.mailer.senders``); the next message opens a new connection. A
  server that offers PIPELINING has answered DATA with 354 by then, and
  without it the commands were exchanged one by one: either way no data.
- nothing is recorded on a row the step did not claim: a refusal (4xx,
  5xx) that came before the step was known is ignored for such a row (no
  'failed', no hard failure counted; the row is another's or skipped), and
  a dead server leaves it as it was.
- the previous row's 'sent' is committed by the same step, as before: the
  window after the 250 is the same two UPDATEs and commit, begun at once.
- the Message-ID was given and synced when the batch was claimed (2.), so
  it is durable before DATA whichever thread makes the step's commit.
On SQLite with WAL the step still runs first, in the sending thread: its
commit is a write to the log, cheaper than handing it to another thread.
What it costs: a row found not ours was composed for nothing and costs a
reconnect (rare: an unsubscribe during the send, a row taken over after a
lease ran out). What it gave (8 connections, 50 ms sink, PostgreSQL): 89.9
-> 93.1 % of 8 x the one-connection floor (bench/RESULTS.md). Sending the
two UPDATEs as one statement or in psycopg's pipeline mode would save
server round trips in the helper thread, no longer on the message's path;
not done, not measured.

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
    themes: str | None = None  # the reader's theme choice when the row was made (bot.choices)


@dataclass(frozen=True)
class Outcome:
    """How one delivery ended, recorded together with the next claim."""

    row: LedgerRow
    status: str  # sent | failed | pending
    error: str | None = None
    retries: int = 0
    hard: bool = False  # a 5xx: counts towards the subscriber's bounce


class Ledger(Protocol):
    def unfinished(self, after_id: int, limit: int) -> Sequence[LedgerRow]:
        """The next rows to send (with the Message-ID each will carry, if it has one)."""
        ...

    def count_unfinished(self) -> int: ...

    def step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> tuple[str, bool]:
        """In one commit: record ``done``, and claim the next row with its Message-ID.
        Returns (claimed | skipped | gone | none, whether ``done`` made a bounce)."""
        ...

    def begin_step(self, done: Outcome | None, claim: tuple[LedgerRow, str] | None) -> bool:
        """``step``, which may go on in the background until ``settle``. False
        if it is known already that the step did not claim the row."""
        ...

    def settle(self) -> tuple[str, bool]:
        """What the step begun last returned (waits for it; ("none", False) if it failed)."""
        ...

    def durable(self) -> None:
        """Return once the row claimed last may be handed over: that step's
        commit is made (it may run in the background while the message's SMTP
        commands are exchanged) and the row's Message-ID is on disk."""
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
    gone: set[int] = set()  # rows another worker finished or holds: never looked at again
    if progress:
        progress(report)
    try:
        while not stop.is_set():
            rows = ledger.unfinished(after, batch)
            if not rows and after:
                # rows freed behind us (a dead worker's) are ours to send too; record
                # the last outcome first, so the message just sent is not among them
                if done is not None:
                    _, bounced = ledger.step(done, None)
                    report.bounced += bounced
                    done = None
                after = 0
                rows = [r for r in ledger.unfinished(after, batch) if r.id not in gone]
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
                # the claim runs while the message is composed and its commands go out;
                # its data goes out only once the claim is known and committed (_send_one)
                may_claim = ledger.begin_step(done, (row, message_id))
                done = None
                stopped = False
                if may_claim:
                    data = composer.compose(row, message_id)
                    stopped = not pacer.wait(stop)
                    if not stopped:
                        done = _send_one(sender, envelope_from, row, message_id, data, retry,
                                         stop, ledger, report)
                state, bounced = ledger.settle()
                report.bounced += bounced
                if state == "gone":  # finished or taken by another worker meanwhile
                    gone.add(row.id)
                if state == "skipped":
                    report.skipped += 1
                    if progress:
                        progress(report)
                if state != "claimed":  # nothing was handed over
                    if stopped:
                        break
                    continue
                if done is None:  # stopped before sending
                    done = Outcome(row, "pending", "stopped before sending")
                    break
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


class _NotOurs(Exception):
    """The row's claim found it finished, taken by another worker, or its
    subscriber no longer confirmed: its message must not be handed over."""


def _send_one(
    sender: Sender, envelope_from: str, row: LedgerRow, message_id: str, data: bytes,
    retry: RetryPolicy, stop: threading.Event, ledger: Ledger, report: DeliveryReport,
) -> Outcome | None:
    """Hand one message over, retrying 4xx replies and lost connections with
    exponential backoff. A permanent failure or used-up retries become an
    outcome; a transport that stays unreachable becomes a DeliveryError.
    None if the row's claim (begun before, see ``deliver``) did not claim
    it: then nothing was handed over and nothing is recorded on the row."""

    def ready() -> None:
        # the server may accept this message only once its claim is committed
        # and its Message-ID on disk; a row not claimed is never handed over
        # (the sender drops the unfinished transaction with the connection)
        if ledger.settle()[0] != "claimed":
            raise _NotOurs
        ledger.durable()

    attempt = 0
    while True:
        try:
            sender.send(envelope_from, row.email, data, message_id, ready=ready)
            return Outcome(row, "sent", retries=attempt)
        except _NotOurs:
            return None
        except DeliveryError:
            if ledger.settle()[0] == "claimed":
                ledger.step(Outcome(row, "pending", "stopped: transport error",
                                    retries=attempt), None)
            raise
        except (PermanentFailure, TemporaryFailure) as exc:
            failure = exc
        # the refusal may have come before the step was known: an outcome is
        # recorded only on a row the step claimed
        if ledger.settle()[0] != "claimed":
            return None
        if stop.is_set() and isinstance(failure, TemporaryFailure) and failure.connection:
            # the connection was cut to stop (``bot.send.workers``): the row goes back to pending
            return Outcome(row, "pending", f"stopped: {failure}", retries=attempt)
        if isinstance(failure, PermanentFailure):
            log.warning("delivery to %s failed for good: %s", row.email, failure)
            return Outcome(row, "failed", str(failure), retries=attempt, hard=True)
        if attempt >= retry.max_retries:
            if failure.connection:
                ledger.step(Outcome(row, "pending", str(failure), retries=attempt), None)
                raise DeliveryError(
                    f"{sender.description} is not accepting mail: {failure}",
                    hint=f"gave up after {attempt + 1} attempts; every undelivered message "
                         "is still pending: fix the server or the DIGESTBOT_SMTP_* "
                         "settings and run `digestbot send` again to finish") from None
            log.warning("delivery to %s failed after %d attempts: %s", row.email,
                        attempt + 1, failure)
            return Outcome(row, "failed", str(failure), retries=attempt)
        delay = retry.delay(attempt)
        log.info("%s: %s; retrying in %.2fs", row.email, failure, delay)
        attempt += 1
        report.retried += 1
        if delay >= 1:
            ledger.renew()
        if stop.wait(delay):
            return Outcome(row, "pending", f"stopped while retrying: {failure}", retries=attempt)
