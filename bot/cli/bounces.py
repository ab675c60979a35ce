"""`digestbot bounces`: read the bounce mailbox."""

from __future__ import annotations

import click
from rich.table import Table

from bot.cli.app import App, console, pass_app, reports_errors


@click.group("bounces")
def bounces_group() -> None:
    """Bounces, complaints and unsubscribe mails from the bounce mailbox."""


@bounces_group.command("process")
@click.option("--dry-run", is_flag=True, help="Show what each new mail would do; record and mark nothing.")
@pass_app
@reports_errors
def process_command(app: App, dry_run: bool) -> None:
    """Read the new mail in DIGESTBOT_BOUNCE_MAILBOX once: a permanent bounce
    fails its delivery and counts towards the bounce limit, a complaint or an
    unsubscribe mail unsubscribes at once; mail not understood is left for you.
    Only the bot's own evidence counts (a VERP token, a Message-ID it sent, the
    signed token of the List-Unsubscribe mailto:): mail without it is
    'unmatched, ignored', changes nobody and is left for you too.
    `digestbot run` does this every DIGESTBOT_BOUNCE_INTERVAL minutes."""
    from bot.bounces import process_bounces

    report = process_bounces(app.settings, app.factory, dry_run=dry_run)
    new = [h for h in report.handled if h.kind != "seen before"]
    if new:
        table = Table("kind", "subscriber", "outcome", "detail", title="mail read", title_justify="left")
        for h in new:
            table.add_row(h.kind, h.address or "", h.change, h.detail or h.subject)
        console.print(table)
    console.print(report.summary(), markup=False)
