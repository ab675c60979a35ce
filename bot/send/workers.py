"""Several SMTP connections at once: one send loop per connection, in threads.

A relay answers each message after tens of milliseconds, so one connection
tops out at a few dozen messages a second. ``deliver_parallel`` runs
``connections`` copies of ``loop.deliver``, each with its own ``Sender``
(connection), ``Ledger`` (database connection and worker id) and ``Composer``;
they share the digest's rows through claims (``bot.send.claims``), one
``Pacer`` (the rate limit is for the whole send), one stop flag and one
progress report. The guarantees of the single loop hold for each row: a row
is sent only by the worker that holds it, after its 'sending' is committed.

If one connection's server is gone for good, the others are stopped after
the message in flight, every undelivered row is left 'pending', and the
first error is raised.

A stop request (the caller's ``stop``: SIGTERM) stops every loop after its
message in flight. A message still in flight ``STOP_GRACE`` seconds later is
waiting on a stalled server: its connection is cut (``Sender.abort``), which
puts its row back to 'pending' (no server takes a message it has not
answered with 250), so a stop never waits out DIGESTBOT_SMTP_TIMEOUT.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from bot.errors import DeliveryError
from bot.mailer import Sender
from bot.send.loop import Composer, DeliveryReport, Ledger, Pacer, Progress, RetryPolicy, deliver

STOP_GRACE = 1.0  # seconds the messages in flight have to finish after a stop request
LOOK_EVERY = 0.05  # seconds between two looks at the stop request while the loops run


@dataclass(frozen=True)
class Worker:
    """What one connection's loop works with; ``close`` runs when it ends."""

    ledger: Ledger
    sender: Sender
    composer: Composer
    close: Callable[[], None]


class _SharedProgress:
    """Adds the workers' reports up for the one progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.progress = progress
        self.reports: dict[int, DeliveryReport] = {}
        self.lock = threading.Lock()

    def sum(self) -> DeliveryReport:
        parts = list(self.reports.values())
        combined = DeliveryReport(total=self.total)
        for part in parts:
            combined.sent += part.sent
            combined.failed += part.failed
            combined.skipped += part.skipped
            combined.bounced += part.bounced
            combined.retried += part.retried
            combined.errors.extend(part.errors)
        return combined

    def callback(self, index: int) -> Progress:
        def update(report: DeliveryReport) -> None:
            with self.lock:
                self.reports[index] = report
                if self.progress:
                    self.progress(self.sum())
        return update


def deliver_parallel(
    start_worker: Callable[[], Worker],
    envelope_from: str,
    connections: int,
    *,
    total: int,
    retry: RetryPolicy | None = None,
    rate: float = 0.0,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
) -> DeliveryReport:
    """Run ``connections`` send loops until the digest's rows are done (or
    ``stop``), and return their combined report."""
    stop = stop or threading.Event()
    halt = _Halt(stop)  # the loops stop at this: a stop request, or another loop's failure
    pacer = Pacer(rate)
    shared = _SharedProgress(total, progress)
    results: dict[int, DeliveryReport] = {}
    errors: list[BaseException] = []
    senders: list[Sender] = []

    def run(index: int) -> None:
        try:
            worker = start_worker()
        except BaseException as exc:
            errors.append(exc)
            halt.set()
            return
        senders.append(worker.sender)
        try:
            results[index] = deliver(worker.ledger, worker.sender, worker.composer, envelope_from,
                                     retry=retry, stop=halt, progress=shared.callback(index),
                                     pacer=pacer)
        except BaseException as exc:
            errors.append(exc)
            halt.set()  # the others finish the message in flight, then stop
        finally:
            worker.close()

    finished = threading.Event()
    watcher = threading.Thread(target=_on_stop_request, args=(stop, halt, finished, senders),
                               name="send-stop", daemon=True)
    watcher.start()
    try:
        if connections <= 1:
            run(0)
        else:
            threads = [threading.Thread(target=run, args=(i,), name=f"send-{i}", daemon=True)
                       for i in range(connections)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        finished.set()
        watcher.join()
    if errors:
        first = next((e for e in errors if isinstance(e, DeliveryError)), errors[0])
        raise first
    shared.reports.update(results)
    report = shared.sum()
    report.complete = any(part.complete for part in results.values())
    report.interrupted = halt.is_set() and not report.complete
    return report


class _Halt(threading.Event):
    """Set by a loop that failed, or (seen at once) by the caller's stop
    request; setting it leaves the caller's event alone: a failed send is no
    reason for the service around it to stop. Waiters on it are woken by
    ``_on_stop_request`` within LOOK_EVERY of a stop request."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self._request = stop

    def is_set(self) -> bool:
        return super().is_set() or self._request.is_set()


def _on_stop_request(stop: threading.Event, halt: threading.Event, finished: threading.Event,
                     senders: list[Sender]) -> None:
    """Until the loops end: on a stop request, halt them, and cut the
    connections of any still in flight ``STOP_GRACE`` seconds later."""
    while not finished.wait(LOOK_EVERY):
        if stop.is_set():
            halt.set()
            if finished.wait(STOP_GRACE):
                return
            for sender in list(senders):
                abort = getattr(sender, "abort", None)  # the outbox has nothing to wait for
                if abort is not None:
                    abort()
            return
