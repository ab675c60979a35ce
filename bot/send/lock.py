"""The send lock on a digest: one sender at a time, a lease that a dead
sender's successor can take over."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from datetime import UTC, datetime, timedelta
from typing import cast

from sqlalchemy import Connection, Table, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from bot.errors import DeliveryError
from bot.models import Digest
from bot.send.prepared import rowcount

log = logging.getLogger(__name__)

_DIGESTS = cast(Table, Digest.__table__)
LEASE = timedelta(minutes=5)  # a sender that died on another host blocks a digest this long


def acquire_digest_lock(
    session: Session, digest_id: int, owner: str, now: datetime, expires: datetime
) -> bool:
    """Take the lock if it is free or its lease ran out: one atomic UPDATE."""
    d = _DIGESTS.c
    result = session.execute(
        update(_DIGESTS)
        .where(d.id == digest_id,
               or_(d.lock_owner.is_(None), d.lock_expires_at < now, d.lock_owner == owner))
        .values(lock_owner=owner, lock_expires_at=expires)
    )
    return rowcount(result) == 1


def take_over_digest_lock(
    session: Session, digest_id: int, stale_owner: str, owner: str, expires: datetime
) -> bool:
    """Take a lock from an owner known to be dead (only if it still holds it)."""
    d = _DIGESTS.c
    result = session.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == stale_owner)
        .values(lock_owner=owner, lock_expires_at=expires)
    )
    return rowcount(result) == 1


def renew_digest_lock(
    db: Session | Connection, digest_id: int, owner: str, expires: datetime
) -> bool:
    d = _DIGESTS.c
    result = db.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == owner)
        .values(lock_expires_at=expires)
    )
    return rowcount(result) == 1


def release_digest_lock(session: Session, digest_id: int, owner: str) -> None:
    d = _DIGESTS.c
    session.execute(
        update(_DIGESTS).where(d.id == digest_id, d.lock_owner == owner)
        .values(lock_owner=None, lock_expires_at=None)
    )


def digest_lock(session: Session, digest_id: int) -> tuple[str | None, datetime | None]:
    row = session.execute(
        select(Digest.lock_owner, Digest.lock_expires_at).where(Digest.id == digest_id)
    ).one()
    return row[0], row[1]



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
            if acquire_digest_lock(session, self.digest_id, self.owner, now, now + LEASE):
                session.commit()
                return
            holder, expires = digest_lock(session, self.digest_id)
            if holder and _owner_is_dead(holder) and take_over_digest_lock(
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
                ok = renew_digest_lock(own, self.digest_id, self.owner, expires)
                own.commit()
        else:
            ok = renew_digest_lock(conn, self.digest_id, self.owner, expires)
            conn.commit()
        if not ok:
            raise DeliveryError(f"lost the send lock of {self.week} to another run",
                                hint="the other run carries on with the remaining messages")

    def release(self) -> None:
        with self.factory() as session:
            release_digest_lock(session, self.digest_id, self.owner)
            session.commit()

    def __enter__(self) -> DigestLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
