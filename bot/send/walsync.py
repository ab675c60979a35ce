"""Group commit for the SQLite ledger: commits go on at memory speed, a helper
thread puts them on disk.

With ``synchronous=FULL`` SQLite syncs the write-ahead log at every commit,
and the connection is busy until the disk answers: about 1.5 ms here, as long
as a whole message takes against a fast SMTP server. Instead the ledger's
connections commit with ``synchronous=NORMAL`` -- the commit is written to
the WAL file, so a killed process loses nothing -- and ``WalSync`` syncs that
file in a thread of its own, as ``synchronous=FULL`` would have, while the
send goes on. One sync covers every commit written before it began, by any
of the process's ledger connections to that database (one ``WalSync`` per
database file, shared: ``WalSync.open``), so the disk is synced once per
commit or less, never more, and ``wait()`` returns once a given commit (by
default: every commit so far) is on disk.

This is safe for SQLite's WAL: a commit is frames appended to the WAL file,
and syncing that file is exactly what FULL adds to NORMAL at a commit.
Frames a checkpoint copies into the database file are synced there by the
checkpoint itself (NORMAL syncs the WAL before a checkpoint and the database
after it), and the WAL file is never removed while a connection (ours) is
open, so the file we sync is the one SQLite writes. Syncing a file through
another descriptor than the writer's is what fsync(2) promises: it flushes
the file, whoever wrote it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import ClassVar


class WalSync:
    """Syncs one SQLite database's WAL file after commits (see the module docstring)."""

    _shared: ClassVar[dict[Path, WalSync]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, database: Path) -> None:
        self.database = database
        self.wal = Path(f"{database}-wal")
        lock = threading.Lock()
        self._work = threading.Condition(lock)  # the thread waits here for commits
        self._done = threading.Condition(lock)  # users wait here for syncs
        self._written = 0  # commits made (their WAL frames written)
        self._synced = 0  # commits known to be on disk
        self._error: OSError | None = None
        self._users = 1
        self._thread = threading.Thread(target=self._run, name="ledger-walsync", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, database: Path) -> WalSync:
        """The process's WalSync for ``database`` (started on first use); ``close`` when done."""
        key = database.resolve()
        with cls._shared_lock:
            sync = cls._shared.get(key)
            if sync is not None and sync._error is None:
                with sync._work:
                    sync._users += 1
                return sync
            sync = cls._shared[key] = cls(key)
            return sync

    def written(self) -> int:
        """Call after each commit: it is to be synced. Returns its number, for ``wait``."""
        with self._work:
            self._written += 1
            self._work.notify()
            return self._written

    def wait(self, commit: int | None = None) -> None:
        """Return once commit number ``commit`` (default: every commit reported
        so far) is on disk."""
        with self._done:
            target = self._written if commit is None else commit
            while self._synced < target and self._error is None:
                self._done.wait()
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """One user less; the last one stops the thread once what is left is
        synced (``wait()`` first to know that it was)."""
        with self._shared_lock:
            with self._work:
                self._users -= 1
                last = self._users <= 0
                self._work.notify()
            if last and WalSync._shared.get(self.database) is self:
                del WalSync._shared[self.database]
        if last:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._work:
                while self._synced == self._written and self._users > 0:
                    self._work.wait()
                if self._synced == self._written:  # the last user closed, nothing left
                    return
                target = self._written
            try:
                self._sync()
            except OSError as exc:
                with self._done:
                    self._error = exc
                    self._done.notify_all()
                return
            with self._done:
                self._synced = target
                self._done.notify_all()

    def _sync(self) -> None:
        # opened afresh each time: always the file SQLite writes now
        fd = os.open(self.wal, os.O_RDONLY)
        try:
            # the file's data, and its size if it grew; not its times (what
            # SQLite itself uses on Linux: a plain fsync would also log mtime)
            if hasattr(os, "fdatasync"):
                os.fdatasync(fd)
            else:  # macOS
                os.fsync(fd)
        finally:
            os.close(fd)
