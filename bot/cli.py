"""The admin command line: ``digestbot``. Each command is a thin shell over
the library (mostly ``bot.pipeline``); its job is arguments in, a readable
report out, and BotErrors turned into a clean message and exit code 1.
"""

from __future__ import annotations

import json
import logging
import sys
import webbrowser
from collections.abc import Callable
from functools import cached_property, wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import db, digest, pipeline, render, store
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


def listen_options(func: F) -> F:
    """--host and --port, for the commands that serve the web app."""
    func = click.option("--port", type=click.IntRange(1, 65535),
                        help="Port (default: DIGESTBOT_PORT, 8000).")(func)
    return click.option("--host", help="Address to listen on (default: DIGESTBOT_HOST, 127.0.0.1).")(func)


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


# --- digest ----------------------------------------------------------------------

@cli.command()
@click.option("--week", "week_text", metavar="YYYY-Www",
              help="ISO week such as 2026-W40 (default: the latest complete week with entries).")
@click.option("--format", "fmt", type=click.Choice(["html", "text", "json"]), default="html",
              show_default=True, help="The email's HTML or text part, or the digest as JSON.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write here (default: HTML to <var>/preview-<week>.html, text and JSON to stdout).")
@click.option("--open", "open_it", is_flag=True, help="Open the HTML in a web browser.")
@pass_app
@reports_errors
def preview(app: App, week_text: str | None, fmt: str, out: str | None, open_it: bool) -> None:
    """Render a week's digest as it would be emailed, without sending anything."""
    if open_it and fmt != "html":
        raise click.UsageError("--open needs --format html")
    settings = app.settings
    with app.factory() as session:
        week = (digest.parse_week(week_text, settings.timezone) if week_text
                else digest.latest_complete_week(session, settings))
        if week is None:
            err_console.print("no complete week with entries yet: run `digestbot poll` first")
            return
        data = digest.build_digest(session, week, settings)
    if data.is_empty and not settings.send_empty:
        err_console.print(f"{week.label} has no entries, so no digest would be sent "
                          "(set DIGESTBOT_SEND_EMPTY=true to send one anyway)", markup=False)
        return
    if fmt == "json":
        body = json.dumps(render.digest_json(data), ensure_ascii=False, indent=2) + "\n"
    else:
        rendered = render.render_digest(data, settings)
        body = rendered.html if fmt == "html" else rendered.text
    if out is None and fmt != "html":
        click.echo(body, nl=False)
        return
    path = Path(out) if out else settings.var_dir / f"preview-{week.label}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    console.print(str(path), markup=False)
    if open_it:
        webbrowser.open(path.resolve().as_uri())


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "never"


# --- service (bot.service, bot.status) -----------------------------------------

@cli.command("run")
@listen_options
@pass_app
@reports_errors
def run_command(app: App, host: str | None, port: int | None) -> None:
    """Run the web app and the scheduler (polls, weekly send) until SIGTERM or Ctrl-C."""
    from bot import service

    service.configure_logging(app.settings.log_level)
    service.run(app.settings, app.engine, app.factory, host=host, port=port)


@cli.command("status")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Tables for people or JSON for scripts.")
@pass_app
@reports_errors
def status_command(app: App, fmt: str) -> None:
    """Show feeds, the next scheduled send, the last digest and subscriber counts."""
    from bot import status

    data = status.gather(app.settings, app.engine, app.factory)
    if fmt == "json":
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        status.render(data, console)


# --- subscribers, send, web (bot.subscriptions, bot.delivery, bot.web) ---------------

@cli.group("subscribers")
def subscribers_group() -> None:
    """Add, list, remove, import and export subscribers."""


class _Adder:
    """Adds addresses one by one, sending confirmation mails over one connection."""

    def __init__(self, app: App, confirmed: bool) -> None:
        self.app, self.confirmed = app, confirmed
        self.counts: dict[str, int] = {}
        self._sender: Any = None
        self._tokens: Any = None

    def add(self, address: str) -> str:
        from bot import mailer, subscriptions
        from bot.tokens import Tokens

        change = subscriptions.subscribe(self.app.factory, address, confirmed=self.confirmed)
        status = change.subscriber.status
        if change.confirm_mail:
            if self._sender is None:
                self._sender = mailer.make_sender(self.app.settings)
                self._tokens = Tokens.from_settings(self.app.settings)
            try:
                subscriptions.send_confirmation(self.app.settings, self._tokens, self._sender,
                                                change.subscriber)
                note = "pending, confirmation mail sent"
            except mailer.SendFailure as exc:
                note = f"pending, but the confirmation mail failed: {exc}"
        else:
            note = {"created": "added, confirmed", "confirmed": "confirmed",
                    "already": f"already {status}",
                    "kept": f"left {status}: they opted out (remove, then add, to override)",
                    }.get(change.action, status)
        key = note.split(",")[0].split(":")[0]
        self.counts[key] = self.counts.get(key, 0) + 1
        return note

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()


@subscribers_group.command("add")
@click.argument("addresses", nargs=-1, required=True)
@click.option("--confirmed", is_flag=True,
              help="Add as confirmed, no confirmation mail (you vouch for their consent).")
@pass_app
@reports_errors
def subscribers_add(app: App, addresses: tuple[str, ...], confirmed: bool) -> None:
    """Add ADDRESSES; without --confirmed each gets a confirmation mail, like the web form.
    Adding an address that is already there changes nothing and is not an error."""
    from bot import subscriptions

    adder = _Adder(app, confirmed)
    bad = 0
    try:
        for text in addresses:
            try:
                address = subscriptions.normalize_address(text)
            except subscriptions.AddressError as exc:
                err_console.print(f"[red]error:[/] {exc.message}", markup=True, highlight=False)
                bad += 1
                continue
            console.print(f"{address}: {adder.add(address)}", markup=False)
    finally:
        adder.close()
    if bad:
        sys.exit(1)


@subscribers_group.command("list")
@click.option("--status", type=click.Choice(["pending", "confirmed", "unsubscribed", "bounced"]),
              help="Only subscribers in this state.")
@pass_app
@reports_errors
def subscribers_list(app: App, status: str | None) -> None:
    """Show subscribers with their state and dates (UTC)."""
    from rich.table import Column

    with app.factory() as session:
        rows = store.list_subscribers(session, status)
        counts = store.subscriber_counts(session)
    table = Table("status", "subscribed", "confirmed", "left", "fails")
    table.columns.insert(0, Column("email", no_wrap=True))
    for sub in rows:
        left = sub.unsubscribed_at if sub.status == "unsubscribed" else sub.bounced_at
        table.add_row(sub.email, sub.status, _day(sub.created_at), _day(sub.confirmed_at),
                      _day(left) if sub.status in ("unsubscribed", "bounced") else "",
                      str(sub.hard_failures or ""))
    if rows:
        console.print(table)
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in
                        ("confirmed", "pending", "unsubscribed", "bounced"))
    console.print(f"{len(rows)} shown; {summary}" if rows or counts else "no subscribers yet")


def _day(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d") if moment else ""


@subscribers_group.command("remove")
@click.argument("addresses", nargs=-1, required=True)
@pass_app
@reports_errors
def subscribers_remove(app: App, addresses: tuple[str, ...]) -> None:
    """Delete ADDRESSES and their delivery records (unsubscribing keeps the record)."""
    from bot import subscriptions
    from bot.db import transaction

    bad = 0
    for text in addresses:
        try:
            address = subscriptions.normalize_address(text)
        except subscriptions.AddressError as exc:
            err_console.print(f"[red]error:[/] {exc.message}", highlight=False)
            bad += 1
            continue
        with transaction(app.factory) as session:
            removed = subscriptions.remove(session, address)
        console.print(f"{address}: {'removed' if removed else 'not a subscriber'}", markup=False)
    if bad:
        sys.exit(1)


@subscribers_group.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8-sig"))
@click.option("--confirmed", is_flag=True,
              help="Add as confirmed, no confirmation mails (you vouch for their consent).")
@pass_app
@reports_errors
def subscribers_import(app: App, file: Any, confirmed: bool) -> None:
    """Add the addresses in a CSV FILE: its `email` column, else its first column.
    Bad rows are reported with their line numbers; the good ones are added."""
    from bot import subscriptions

    adder = _Adder(app, confirmed)
    bad = 0
    try:
        for row in subscriptions.read_csv(file.read()):
            if row.address is None:
                err_console.print(f"line {row.line}: {row.error}", markup=False, highlight=False)
                bad += 1
                continue
            note = adder.add(row.address)
            if "failed" in note or note.startswith("left"):
                err_console.print(f"line {row.line}: {row.address}: {note}", markup=False)
    finally:
        adder.close()
    done = ", ".join(f"{n} {what}" for what, n in sorted(adder.counts.items())) or "nothing added"
    console.print(f"{done}; {bad} bad row(s) skipped", markup=False)


@subscribers_group.command("export")
@pass_app
@reports_errors
def subscribers_export(app: App) -> None:
    """Write every subscriber as CSV to stdout (email, status, dates, hard_failures)."""
    import csv

    from bot import subscriptions

    writer = csv.writer(click.get_text_stream("stdout"), lineterminator="\n")
    with app.factory() as session:
        for fields in subscriptions.export_rows(store.iter_subscribers(session)):
            writer.writerow(fields)


@cli.command("send")
@click.option("--week", metavar="YYYY-Www", help="ISO week (default: the latest complete week).")
@click.option("--dry-run", is_flag=True, help="Send nothing; say what would be sent to whom.")
@click.option("--to", "to", metavar="ADDRESS",
              help="Send one test copy ([TEST] subject) to ADDRESS only; nothing is recorded.")
@click.option("--resend", is_flag=True,
              help="Send an already sent week again, to every confirmed subscriber.")
@pass_app
@reports_errors
def send_command(app: App, week: str | None, dry_run: bool, to: str | None, resend: bool) -> None:
    """Freeze a week's digest and send it to every confirmed subscriber.

    Safe to run again at any time: an interrupted send resumes where it stopped
    and nobody gets a second copy (see README, "Subscribers and delivery")."""
    import signal
    import threading

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    if to and resend:
        raise click.UsageError("--to sends a test copy; it cannot be combined with --resend")
    stop = threading.Event()
    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), console=console, transient=False)
    task: list[Any] = []

    def on_progress(report: Any) -> None:
        if not task:
            bar.start()
            task.append(bar.add_task("sending", total=report.total))
        bar.update(task[0], total=report.total, completed=report.done)

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        err_console.print("stopping after the message in flight (press Ctrl-C again to stop now)")

    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, on_signal)
    try:
        report = pipeline.send_digest(app.settings, app.factory, week, dry_run=dry_run, to=to,
                                      resend=resend, progress=on_progress, stop=stop)
    finally:
        if task:
            bar.stop()
        for sig, old in handlers.items():
            signal.signal(sig, old)
    console.print(report.summary(), markup=False)
    if report.outcome in ("sent", "incomplete"):
        console.print(f"subject: {report.subject}\ntransport: {report.transport}", markup=False)
    for address, error in report.errors:
        err_console.print(f"  failed: {address}: {error}", markup=False, highlight=False)
    for other in report.other_unfinished:
        err_console.print(f"note: the send of {other} is unfinished; "
                          f"run `digestbot send --week {other}` to finish it", markup=False)
    if report.outcome == "incomplete":
        sys.exit(130 if stop.is_set() else 1)


@cli.command("web")
@listen_options
@pass_app
@reports_errors
def web_command(app: App, host: str | None, port: int | None) -> None:
    """Serve the subscribe/confirm/unsubscribe pages and the archive (no scheduler)."""
    import uvicorn

    from bot import web

    settings = app.settings
    application = web.create_app(settings, app.factory)
    host, port = host or settings.host, port or settings.port
    console.print(f"serving on http://{host}:{port} (public address {settings.base_url})",
                  markup=False)
    uvicorn.run(application, host=host, port=port, log_level=settings.log_level.lower(),
                proxy_headers=True, server_header=False)


def main() -> None:
    cli(prog_name="digestbot")


if __name__ == "__main__":
    main()
