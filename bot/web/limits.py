"""Rate-limit counters kept in the database, so every web instance shares them.

Two ``digestbot web`` processes behind one proxy (on one machine or several)
must enforce one limit together: a limit held in each process's memory would
let a client through once per instance. So each counted request is a row in
``rate_hits`` (bucket, time), and ``SharedWindow.allow`` decides with one
INSERT and one COUNT:

1. INSERT this request's hit and COMMIT it, so every other instance sees it;
2. COUNT the bucket's committed hits in the window, this one included;
3. over the limit: the request is refused and its own hit deleted again
   (refused requests do not count, as with a limit in memory).

Why no request gets through over the limit, however the instances race: take
the allowed request that counted last. Every other allowed request had
committed its hit before counting, so before that last count, and allowed
hits are never deleted -- so the last count saw them all, and it was within
the limit. Racing requests can only be refused together (each sees the
other's hit), never allowed together over the limit.

Keys are stored hashed: a bucket has a fixed length whatever the key (an
address may be long), and the table does not keep addresses readable.
Hits older than the window are pruned now and then (at most once a minute
per window and process), with one DELETE.

Times are the instances' wall clocks (UTC): machines that share a database
are expected to keep their clocks in step (NTP); a skew of a second or two
only moves the window's edge by that much.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, cast

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, sessionmaker

from bot.models import RateHit

PRUNE_INTERVAL = 60.0  # seconds between one process's prunes of one window


def utcnow() -> datetime:
    return datetime.now(UTC)


class Window(Protocol):
    """At most ``limit`` allowed hits per key in any ``seconds``-long window."""

    def allow(self, key: str) -> bool:
        """Count a hit for ``key``; False (and not counted) if over the limit."""
        ...


class SharedWindow:
    """A ``Window`` whose hits live in the ``rate_hits`` table (see the module
    docstring). ``allow`` does database I/O: call it off the event loop."""

    def __init__(self, factory: sessionmaker[Session], name: str, limit: int, seconds: float,
                 clock: Callable[[], datetime] = utcnow) -> None:
        if ":" in name or ";" in name:
            raise ValueError(f"a window name has no ':' or ';': {name!r}")
        self.factory, self.name = factory, name
        self.limit, self.seconds, self.clock = limit, seconds, clock
        self._pruned_at = -PRUNE_INTERVAL - 1.0  # process-local; the first call prunes
        self._prune_lock = threading.Lock()

    def bucket(self, key: str) -> str:
        return f"{self.name}:{hashlib.sha256(key.encode('utf-8')).hexdigest()[:40]}"

    def allow(self, key: str) -> bool:
        now = self.clock()
        bucket = self.bucket(key)
        with self.factory() as session:
            self._maybe_prune(session, now)
            hit = cast(CursorResult[Any], session.execute(insert(RateHit).values(bucket=bucket, at=now)))
            hit_id = hit.inserted_primary_key[0]
            session.commit()  # step 1: visible to every instance before we count
            since = now - timedelta(seconds=self.seconds)
            count = session.scalar(select(func.count()).select_from(RateHit)
                                   .where(RateHit.bucket == bucket, RateHit.at > since)) or 0
            if count <= self.limit:
                session.commit()
                return True
            session.execute(delete(RateHit).where(RateHit.id == hit_id))
            session.commit()
            return False

    def _maybe_prune(self, session: Session, now: datetime) -> None:
        tick = time.monotonic()
        with self._prune_lock:
            if tick - self._pruned_at < PRUNE_INTERVAL:
                return
            self._pruned_at = tick
        # this window's buckets are exactly those between "name:" and "name;"
        session.execute(delete(RateHit).where(
            RateHit.bucket > f"{self.name}:", RateHit.bucket < f"{self.name};",
            RateHit.at <= now - timedelta(seconds=self.seconds)))


class FailureLog:
    """Failed attempts per key (a client address, an account) in ``rate_hits``,
    shared by every instance like ``SharedWindow``'s hits, forgotten after
    ``seconds``. It only counts: what to do with the count is the caller's
    (the admin login waits longer the more failures there are). Database I/O:
    call it off the event loop."""

    def __init__(self, factory: sessionmaker[Session], name: str, seconds: float,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.window = SharedWindow(factory, name, 0, seconds, clock)

    def recent(self, key: str) -> tuple[int, datetime | None]:
        """The failures within the window, and when the last one was."""
        window = self.window
        since = window.clock() - timedelta(seconds=window.seconds)
        with window.factory() as session:
            count, last = session.execute(
                select(func.count(), func.max(RateHit.at))
                .where(RateHit.bucket == window.bucket(key), RateHit.at > since)).one()
        return int(count or 0), last

    def record(self, key: str) -> None:
        window = self.window
        now = window.clock()
        with window.factory() as session:
            window._maybe_prune(session, now)
            session.execute(insert(RateHit).values(bucket=window.bucket(key), at=now))
            session.commit()

    def clear(self, key: str) -> None:
        with self.window.factory() as session:
            session.execute(delete(RateHit).where(RateHit.bucket == self.window.bucket(key)))
            session.commit()
