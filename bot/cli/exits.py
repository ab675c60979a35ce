"""The exit codes of every ``digestbot`` command, for cron, systemd timers and scripts.

======  ====================================================================
code    meaning
======  ====================================================================
0       done
1       an error: nothing (or not all that was asked) was done; the message
        and its hint say what to check
2       a usage mistake: an unknown option, a missing argument (click's own)
3       done, but some feeds failed: the other feeds were polled and stored,
        the failing ones are named in the output (``poll``, ``feeds add``,
        ``feeds import``)
130     stopped by Ctrl-C or SIGTERM before the end (``send``)
======  ====================================================================

docs/operating-notes.md carries the same table for operators.
"""

from __future__ import annotations

OK = 0
ERROR = 1
USAGE = 2
FEEDS_FAILED = 3
INTERRUPTED = 130


def after_polls(polled: int, failed: int) -> int:
    """The code for a command that polled ``polled`` feeds of which ``failed``
    failed: every one failing is an error, some failing is ``FEEDS_FAILED``."""
    if failed == 0:
        return OK
    return ERROR if failed == polled else FEEDS_FAILED
