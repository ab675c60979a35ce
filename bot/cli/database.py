"""`digestbot db`: create or update the schema."""

from __future__ import annotations

import click

from bot import db
from bot.cli.app import App, console, pass_app, reports_errors


@click.group("db")
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
