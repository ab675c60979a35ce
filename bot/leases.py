"""Who holds what: worker ids that tell whether their process still runs, and
named leases in the database: at most one holder at a time, across processes
and machines that share the database.

Used where several ``digestbot run`` instances must not all do the same
thing, such as the weekly send: the first instance to take the lease does it,
the others see it taken and skip. A lease runs out by itself (``ttl``), so an
instance that dies does not block the others for longer than that.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import delete, insert, or_, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot.models import Lease

log = logging.getLogger(__name__)


def worker_id() -> str:
    """``host:pid:random``: unique per worker, and telling whether it still runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def is_dead(owner: str) -> bool:
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


def _rowcount(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)


def acquire(factory: sessionmaker[Session], name: str, owner: str, ttl: timedelta,
            now: datetime | None = None) -> bool:
    """Take the lease ``name`` for ``ttl`` if it is free, ran out, or ``owner``
    holds it already; True if ``owner`` holds it now."""
    now = now or datetime.now(UTC)
    with factory() as session:
        taken = _rowcount(session.execute(
            update(Lease).where(Lease.name == name,
                                or_(Lease.expires_at < now, Lease.owner == owner))
            .values(owner=owner, expires_at=now + ttl)))
        if not taken:
            holder = session.get(Lease, name)
            if holder is not None and is_dead(holder.owner):  # killed on this machine
                taken = _rowcount(session.execute(
                    update(Lease).where(Lease.name == name, Lease.owner == holder.owner)
                    .values(owner=owner, expires_at=now + ttl)))
            elif holder is None:
                try:
                    session.execute(insert(Lease).values(name=name, owner=owner,
                                                         expires_at=now + ttl))
                    taken = 1
                except IntegrityError:  # another instance inserted it first
                    session.rollback()
                    return False
        session.commit()
        return bool(taken)


def clear_abandoned(factory: sessionmaker[Session], name: str,
                    now: datetime | None = None) -> bool:
    """Remove ``name`` if its holder is gone (its lease ran out, or its process
    no longer runs on this machine); True if this call removed it. A lease
    given up normally is deleted already (``release``), so False means free,
    or held by a holder that may still run. Of several callers at once, one
    removes it."""
    now = now or datetime.now(UTC)
    with factory() as session:
        holder = session.get(Lease, name)
        if holder is None or not (holder.expires_at < now or is_dead(holder.owner)):
            return False
        removed = _rowcount(session.execute(
            delete(Lease).where(Lease.name == name, Lease.owner == holder.owner,
                                Lease.expires_at == holder.expires_at)))
        session.commit()
        return removed == 1


def release(factory: sessionmaker[Session], name: str, owner: str) -> None:
    """Give the lease up if ``owner`` holds it."""
    with factory() as session:
        session.execute(delete(Lease).where(Lease.name == name, Lease.owner == owner))
        session.commit()


@contextmanager
def held(factory: sessionmaker[Session], name: str, ttl: timedelta) -> Iterator[bool]:
    """``with held(...) as mine:`` -- ``mine`` says whether this process got the
    lease; it is released on leaving the block if it did."""
    owner = worker_id()
    mine = acquire(factory, name, owner, ttl)
    try:
        yield mine
    finally:
        if mine:
            release(factory, name, owner)
