"""Logging set-up, one for every command: the CLI's -v and `digestbot run`."""

from __future__ import annotations

import logging

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str) -> None:
    """Log to stderr at ``level``; APScheduler, uvicorn's access log, Alembic
    and httpx only say more than warnings at DEBUG, so INFO is one line per
    poll, send and error."""
    level = level.upper()
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format=LOG_FORMAT)
    root.setLevel(level)
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in ("apscheduler", "uvicorn.access", "alembic", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(quiet)
