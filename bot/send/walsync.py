"""Group commit for the SQLite ledger: commits go on at memory speed, a helper
thread puts them on disk.

With ``synchronous=FULL`` SQLite syncs the write-ahead log at every commit,
and the connection is busy until the disk answers: about 1.5 ms here, as long
as a whole message takes against a fast SMTP server. Instead the ledger's
connection commits with ``synchronous=NORMAL`` -- the commit is written to
the WAL file, so a killed process loses nothing -- and ``WalSync`` fsyncs
that file in a thread of its own, as ``synchronous=FULL`` would have, while
the send goes on. One fsync covers every commit written before it began, so
the disk is synced once per message or less, never more, and ``wait()``
returns once everything committed so far is on disk.

This is safe for SQLite's WAL: a commit is a frame appended to the WAL file,
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


class WalSync:
    """Syncs one SQLite database's WAL file after commits (see the module docstring)."""

    def __init__(self, database: Path) -> None:
        self.wal = Path(f"{database}-wal")
        self._cond = threading.Condition()
        self._written = 0  # commits made (their WAL frames written)
        self._synced = 0  # commits known to be on disk
        self._error: OSError | None = None
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="ledger-walsync", daemon=True)
        self._thread.start()

    def written(self) -> int:
        """Call after each commit: it is to be synced. Returns its number, for ``wait``."""
        with self._cond:
            self._written += 1
            self._cond.notify_all()
            return self._written

    def wait(self, commit: int | None = None) -> None:
        """Return once commit number ``commit`` (default: every commit reported
        so far) is on disk."""
        with self._cond:
            target = self._written if commit is None else commit
            while self._synced < target and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """Stop the thread once what is left is synced (``wait()`` first to
        know that it was)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._synced == self._written and not self._closing:
                    self._cond.wait()
                if self._synced == self._written:  # closing, nothing left
                    return
                target = self._written
            try:
                self._sync()
            except OSError as exc:
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self._synced = target
                self._cond.notify_all()

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
