"""The admin command line: ``digestbot``. Each command is a thin shell over
the library (mostly ``bot.pipeline``); its job is arguments in, a readable
report out, and BotErrors turned into a clean message and exit code 1.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import cached_property, wraps
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import db, pipeline, store
from bot.config import Settings, load_settings
from bot.errors import BotError

F = TypeVar("F", bound=Callable[..., Any])
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class App:
    """What every command needs, built lazily so `--help` works without a database."""

    def __init__(self, config_file: str | None, verbose: bool = False) -> None:
        self.config_file = config_file
        # commands print their own report; log lines are for `run` and -v
        self.verbose = verbose

    @cached_property
    def settings(self) -> Settings:
        settings = load_settings(config_file=self.config_file)
        setup_logging(settings.log_level if self.verbose else "WARNING")
        return settings

    @cached_property
    def engine(self) -> Engine:
        return db.make_engine(self.settings.database_url)

    @cached_property
    def factory(self) -> sessionmaker[Session]:
        """Sessions on a database known to be at the newest migration."""
        db.check_current(self.engine)
        return db.session_factory(self.engine)


pass_app = click.make_pass_decorator(App)


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def reports_errors(func: F) -> F:
    """Print a BotError as a message with its hint, exit 1, no traceback."""
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BotError as exc:
            err_console.print(f"[bold red]error:[/] {exc.message}")
            if exc.hint:
                err_console.print(f"  [dim]hint:[/] {exc.hint}")
            sys.exit(1)
    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              envvar="DIGESTBOT_CONFIG", help="TOML settings file (or DIGESTBOT_CONFIG).")
@click.option("-v", "--verbose", is_flag=True, help="Log at DIGESTBOT_LOG_LEVEL to stderr.")
@click.version_option(package_name="digestbot")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """digestbot: a research feed in, a weekly themed email digest out."""
    ctx.obj = App(config_file, verbose)


# --- database ----------------------------------------------------------------

@cli.group("db")
def db_group() -> None:
    """Create or update the database schema."""


@db_group.command("upgrade")
@pass_app
@reports_errors
def db_upgrade(app: App) -> None:
    """Migrate the database to the newest schema (safe to run any time)."""
    before, after = db.upgrade(app.engine)
    if before == after:
        console.print(f"database already at revision {after}")
    else:
        console.print(f"database migrated from {before or 'empty'} to {after}")


@db_group.command("current")
@pass_app
@reports_errors
def db_current(app: App) -> None:
    """Show the database's schema revision and the newest one."""
    console.print(f"current {db.current_revision(app.engine) or 'none'}, "
                  f"newest {db.head_revision(app.engine)}")


# --- feeds ---------------------------------------------------------------------

@cli.command()
@click.argument("feeds", nargs=-1)
@pass_app
@reports_errors
def poll(app: App, feeds: tuple[str, ...]) -> None:
    """Fetch feeds and store new entries: all configured feeds, or the FEEDS given."""
    results = pipeline.poll_feeds(
        app.settings, app.factory, list(feeds) or None,
        on_result=lambda r: console.print(r.summary(), markup=False),
    )
    total = sum(r.new for r in results)
    failed = sum(r.status == "error" for r in results)
    console.print(f"{len(results)} feed(s) polled, {total} new entries, {failed} failed")
    if failed == len(results):
        sys.exit(1)


@cli.command("feeds")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="A table for people or JSON for scripts.")
@pass_app
@reports_errors
def feeds_command(app: App, fmt: str) -> None:
    """Show each feed's health: last success, last error, failures in a row."""
    with app.factory() as session:
        rows = store.all_feeds(session)
        counts = store.entry_counts(session)
    if fmt == "json":
        click.echo(json.dumps([_feed_json(feed, counts.get(feed.id, 0)) for feed in rows],
                              ensure_ascii=False, indent=2))
        return
    table = Table("feed", "entries", "last success", "failures", "last error")
    for feed in rows:
        table.add_row(
            feed.title and f"{feed.title}\n[dim]{feed.url}[/]" or feed.url,
            str(counts.get(feed.id, 0)),
            _when(feed.last_success_at),
            str(feed.consecutive_failures),
            feed.last_error if feed.consecutive_failures else "",
        )
    console.print(table if rows else "no feeds polled yet: run `digestbot poll`")


def _feed_json(feed: Any, entries: int) -> dict[str, Any]:
    def iso(moment: Any) -> str | None:
        return moment.isoformat() if moment else None
    return {"url": feed.url, "title": feed.title, "entries": entries,
            "last_polled_at": iso(feed.last_polled_at), "last_success_at": iso(feed.last_success_at),
            "last_error": feed.last_error, "last_error_at": iso(feed.last_error_at),
            "consecutive_failures": feed.consecutive_failures}


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "never"


def main() -> None:
    cli(prog_name="digestbot")


if __name__ == "__main__":
    main()
