"""`digestbot poll` and `digestbot feeds`: the ingest stage from the command line."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.table import Table

from bot import ingest
from bot.cli.app import App, console, pass_app, reports_errors
from bot.ingest import queries as feed_queries


@click.command()
@click.argument("feeds", nargs=-1)
@pass_app
@reports_errors
def poll(app: App, feeds: tuple[str, ...]) -> None:
    """Fetch feeds and store new entries: all configured feeds, or the FEEDS given."""
    results = ingest.poll_feeds(
        app.settings, app.factory, list(feeds) or None,
        on_result=lambda r: console.print(r.summary(), markup=False),
    )
    total = sum(r.new for r in results)
    failed = sum(r.status == "error" for r in results)
    console.print(f"{len(results)} feed(s) polled, {total} new entries, {failed} failed")
    if failed == len(results):
        sys.exit(1)


@click.command("feeds")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="A table for people or JSON for scripts.")
@pass_app
@reports_errors
def feeds_command(app: App, fmt: str) -> None:
    """Show each feed's health: last success, last error, failures in a row."""
    with app.factory() as session:
        rows = feed_queries.all_feeds(session)
        counts = feed_queries.entry_counts(session)
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
