"""What every command shares: the lazily built App (settings, engine,
sessions), the consoles, and turning a BotError into a message and exit 1."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cached_property, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from bot.errors import BotError
from bot.terminal import StepProgress, markup

if TYPE_CHECKING:  # imported when first used: `--help` and light commands never load them
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from bot.config import Settings

F = TypeVar("F", bound=Callable[..., Any])


console = Console(highlight=False, soft_wrap=True)


err_console = Console(stderr=True, highlight=False, soft_wrap=True)



class LazyModule:
    """A module imported on first use of one of its names: a command module
    names the library it calls at the top, as usual, and ``--help`` (or
    another command of the same group) does not pay for importing it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), attribute)


class App:
    """What every command needs, built lazily so `--help` works without a database."""

    def __init__(self, config_file: str | None, verbose: bool = False) -> None:
        self.config_file = config_file
        # commands print their own report; log lines are for `run` and -v
        self.verbose = verbose

    @cached_property
    def settings(self) -> Settings:
        from bot import logs
        from bot.config import load_settings

        settings = load_settings(config_file=self.config_file)
        logs.configure(settings.log_level if self.verbose else "WARNING")
        return settings

    @cached_property
    def engine(self) -> Engine:
        from bot import db

        return db.make_engine(self.settings.database_url)

    @cached_property
    def factory(self) -> sessionmaker[Session]:
        """Sessions on a database known to be at the newest migration."""
        from bot import db

        db.check_current(self.engine)
        return db.session_factory(self.engine)

    def close(self) -> None:
        """Close the engine's pooled connections when the command ends: a
        PostgreSQL connection left to the garbage collector warns, and a
        command run in-process (tests, `run`) should not hold it open."""
        if "engine" in self.__dict__:
            self.engine.dispose()


pass_app = click.make_pass_decorator(App)


def listen_options(func: F) -> F:
    """--host and --port, for the commands that serve the web app."""
    func = click.option("--port", type=click.IntRange(1, 65535),
                        help="Port (default: DIGESTBOT_PORT, 8000).")(func)
    return click.option("--host", help="Address to listen on (default: DIGESTBOT_HOST, 127.0.0.1).")(func)


def reports_errors(func: F) -> F:
    """Print a BotError as a message with its hint, exit 1, no traceback."""
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            error = _as_bot_error(exc)
            if error is None:
                raise
            # escaped, controls dropped: a message may quote a feed or a server
            # (``[/]``, escape sequences) or hold brackets (pip install 'digestbot[postgres]')
            err_console.print(f"[bold red]error:[/] {markup(error.message, keep_newlines=True)}")
            if error.hint:
                err_console.print(f"  [dim]hint:[/] {markup(error.hint, keep_newlines=True)}")
            sys.exit(1)
    return wrapper  # type: ignore[return-value]


def _as_bot_error(exc: Exception) -> BotError | None:
    """A BotError, or a database failure in words (a read-only, damaged or
    unreachable database is a message too); None for anything else."""
    if isinstance(exc, BotError):
        return exc
    if "sqlalchemy" not in sys.modules:  # no database was touched: it is not one of its errors
        return None
    from sqlalchemy.exc import SQLAlchemyError

    from bot import db

    return db.explain(exc) if isinstance(exc, SQLAlchemyError) else None


def write_out(path: Path, data: str | bytes, *, parents: bool = False) -> None:
    """Write a command's ``--out`` file, or say plainly why it cannot be
    written (a folder that is not there, no permission, a full disk) instead
    of a traceback. ``parents`` creates missing folders first."""
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise BotError(f"cannot write {path}: {exc.strerror or exc}",
                       hint="check that its folder exists and is writable, or give another --out") from None


class LazyBar(StepProgress):
    """A long step's progress on the commands' console: a bar on a terminal
    that appears with the first report, a line every 10 s or 10 % in a log
    (``bot.terminal.StepProgress``)."""

    def __init__(self, description: str, *, transient: bool = False) -> None:
        super().__init__(description, console, transient=transient)
