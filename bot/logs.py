"""Logging set-up, one for every command: the CLI's -v and `digestbot run`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from bot.terminal import printable

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str) -> None:
    """Log to stderr at ``level``; APScheduler, uvicorn (its start-up lines and
    its access log), Alembic and httpx only say more than warnings at DEBUG,
    so INFO is one line per poll, send and error."""
    level = level.upper()
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format=LOG_FORMAT)
        for handler in root.handlers:
            handler.setFormatter(PrintableFormatter(LOG_FORMAT))
    root.setLevel(level)
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    # "uvicorn" is the parent of uvicorn.error (its "Started server process",
    # "Uvicorn running on ...") and uvicorn.access
    for name in ("apscheduler", "uvicorn", "uvicorn.error", "uvicorn.access", "alembic", "httpx",
                 "httpcore"):
        logging.getLogger(name).setLevel(quiet)


class PrintableFormatter(logging.Formatter):
    """Log lines without control characters: a feed title or a server's reply
    quoted in a message cannot send escape sequences to the admin's terminal
    (tracebacks keep their line breaks)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), keep_newlines=True)


@contextmanager
def reported_by_caller(*names: str) -> Iterator[None]:
    """While the block runs, the loggers ``names`` only pass errors: for a
    command that prints the same per-item lines as its own report (``digestbot
    poll``), so a failing feed is not shown twice. ``-v`` does not use this."""
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, before, strict=True):
            logger.setLevel(level)
