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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from bot.errors import DeliveryError
from bot.mailer import Sender
from bot.send.loop import Composer, DeliveryReport, Ledger, Pacer, Progress, RetryPolicy, deliver


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
    pacer = Pacer(rate)
    shared = _SharedProgress(total, progress)
    results: dict[int, DeliveryReport] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            worker = start_worker()
        except BaseException as exc:
            errors.append(exc)
            stop.set()
            return
        try:
            results[index] = deliver(worker.ledger, worker.sender, worker.composer, envelope_from,
                                     retry=retry, stop=stop, progress=shared.callback(index),
                                     pacer=pacer)
        except BaseException as exc:
            errors.append(exc)
            stop.set()  # the others finish the message in flight, then stop
        finally:
            worker.close()

    if connections <= 1:
        run(0)
    else:
        threads = [threading.Thread(target=run, args=(i,), name=f"send-{i}", daemon=True)
                   for i in range(connections)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        first = next((e for e in errors if isinstance(e, DeliveryError)), errors[0])
        raise first
    shared.reports.update(results)
    report = shared.sum()
    report.complete = any(part.complete for part in results.values())
    report.interrupted = stop.is_set() and not report.complete
    return report
