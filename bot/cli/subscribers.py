"""`digestbot subscribers`: add, list, remove, themes, import, export."""

from __future__ import annotations

import sys
from typing import Any

import click

from bot import subscribers
from bot.cli.app import App, console, err_console, pass_app, reports_errors
from bot.cli.output import chosen_format, emit_rows, format_option, note
from bot.files import CSV_CAP, read_regular_file, stdin_bytes
from bot.models import SUBSCRIBER_STATES
from bot.terminal import markup, printable


@click.group("subscribers")
def subscribers_group() -> None:
    """Add, list, remove, import and export subscribers; choose a reader's themes."""


class _Adder:
    """Adds addresses one by one, sending confirmation mails over one connection."""

    def __init__(self, app: App, confirmed: bool) -> None:
        self.app, self.confirmed = app, confirmed
        self.counts: dict[str, int] = {}
        self._sender: Any = None
        self._tokens: Any = None

    def add(self, address: str) -> str:
        from bot import subscriptions

        change = subscriptions.subscribe(self.app.factory, address, confirmed=self.confirmed)
        return self.tally(subscriptions.import_verdict(0, change, self.confirm).note)

    def tally(self, note: str) -> str:
        key = note.split(",")[0].split(":")[0]
        self.counts[key] = self.counts.get(key, 0) + 1
        return note

    def confirm(self, subscriber: Any) -> None:
        """Send a pending subscriber's confirmation mail (SendFailure if it fails)."""
        from bot import mailer, subscriptions
        from bot.titles import titled
        from bot.tokens import Tokens

        if self._sender is None:
            self._sender = mailer.make_sender(self.app.settings)
            self._tokens = Tokens.from_settings(self.app.settings)
        # the mail names the digest: DIGESTBOT_TITLE, else the first feed's title
        subscriptions.send_confirmation(titled(self.app.settings, self.app.factory),
                                        self._tokens, self._sender, subscriber)

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
                err_console.print(f"[red]error:[/] {markup(exc.message)}", highlight=False)
                bad += 1
                continue
            console.print(f"{address}: {adder.add(address)}", markup=False)
    finally:
        adder.close()
    if bad:
        sys.exit(1)


@subscribers_group.command("list")
@click.option("--status", type=click.Choice(SUBSCRIBER_STATES),
              help="Only subscribers in this state.")
@format_option
@pass_app
@reports_errors
def subscribers_list(app: App, status: str | None, fmt: str | None) -> None:
    """Show subscribers with their state and dates (in DIGESTBOT_TIMEZONE).
    Into a pipe the output is tab-separated, one subscriber a line."""
    fmt = chosen_format(fmt)
    with app.factory() as session:
        rows = subscribers.list_subscribers(session, status)
        counts = subscribers.subscriber_counts(session)
    emit_rows(fmt, SUBSCRIBER_COLUMNS, [_subscriber_row(sub) for sub in rows], tz=app.settings.tz,
              empty="no subscribers yet" if not counts else "no subscribers in that state")
    order = ("confirmed", *(s for s in SUBSCRIBER_STATES if s != "confirmed"))
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in order)
    if counts:
        note(fmt, f"{len(rows)} shown; {summary}")


# (key in tsv/csv/json, header in the table)
SUBSCRIBER_COLUMNS = [("email", "email"), ("status", "status"), ("created_at", "subscribed"),
                      ("confirmed_at", "confirmed"), ("left_at", "left"),
                      ("hard_failures", "fails"), ("reason", "how")]


def _subscriber_row(sub: Any) -> list[Any]:
    left = {"unsubscribed": sub.unsubscribed_at, "bounced": sub.bounced_at,
            "complained": sub.complained_at}.get(sub.status)
    # how they left when the state alone doesn't say: "mail" (an unsubscribe
    # mail), "bounce" (bounce mails, not SMTP replies); see bot.bounces
    return [sub.email, sub.status, sub.created_at, sub.confirmed_at, left, sub.hard_failures,
            sub.status_reason or ""]


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
            err_console.print(f"[red]error:[/] {markup(exc.message)}", highlight=False)
            bad += 1
            continue
        with transaction(app.factory) as session:
            removed = subscriptions.remove(session, address)
        console.print(f"{address}: {'removed' if removed else 'not a subscriber'}", markup=False)
    if bad:
        sys.exit(1)


@subscribers_group.command("themes")
@click.argument("address")
@click.argument("keys", nargs=-1)
@click.option("--all", "everything", is_flag=True,
              help="Every section again (the same as giving no KEY).")
@pass_app
@reports_errors
def subscribers_themes(app: App, address: str, keys: tuple[str, ...], everything: bool) -> None:
    """Send ADDRESS only the sections of the themes KEYS (theme keys of the
    themes file, `digestbot themes list`), plus a short "also this week" list
    of the others. --all, or no KEY, gives every section."""
    from bot import choices, subscriptions
    from bot.db import transaction
    from bot.themes import load_themes

    if everything and keys:
        raise click.UsageError("give theme KEYs or --all, not both")
    normal = subscriptions.normalize_address(address)
    themes = load_themes(app.settings.themes_file)
    with transaction(app.factory) as session:
        choice = subscriptions.choose_themes(session, normal, keys, themes)
    chosen = ", ".join(sorted(choices.decode(choice)))
    console.print(f"{normal}: " + (f"themes {chosen}" if chosen else "every section"), markup=False)


def _themes_of(app: App) -> Any:
    """The themes file, read when a line of the import first has a `themes` cell."""
    from functools import cache

    from bot.themes import load_themes

    return cache(lambda: load_themes(app.settings.themes_file))


@subscribers_group.command("import")
@click.argument("file", metavar="FILE")
@click.option("--confirmed", is_flag=True,
              help="Add as confirmed, no confirmation mails (you vouch for their consent).")
@pass_app
@reports_errors
def subscribers_import(app: App, file: str, confirmed: bool) -> None:
    """Add the addresses in a CSV FILE (- reads standard input): its `email`
    column, else its first column (and a `name` column's names, if it has one).

    Every line gets a verdict: added, already there, a repeat of an earlier
    line (one subscriber, one confirmation mail), or rejected with its line
    number and the reason. The summary's counts add up to the lines read.
    A `themes` column (theme keys separated by spaces) sets each reader's
    themes; a blank cell leaves them as they are."""
    from bot import subscriptions

    data = read_regular_file(file, cap=CSV_CAP, what="the subscriber CSV", stdin=stdin_bytes(),
                             hint="give a CSV file of addresses (one a line), or - for standard input")
    adder = _Adder(app, confirmed)
    try:
        report = subscriptions.import_csv(app.factory, data, confirmed=confirmed,
                                          send_confirmation=adder.confirm, themes=_themes_of(app))
    finally:
        adder.close()
    for line in report.lines:
        if line.verdict == "rejected":
            err_console.print(f"line {line.line}: rejected: {printable(line.note)}",
                              markup=False, highlight=False)
        elif line.verdict != "repeated":
            adder.tally(line.note)
            if "failed" in line.note or line.note.startswith("left"):
                err_console.print(f"line {line.line}: {line.address}: {printable(line.note)}",
                                  markup=False)
    done = ", ".join(f"{n} {what}" for what, n in sorted(adder.counts.items()))
    rows, imported = len(report.lines), report.imported
    console.print(f"{rows} line(s) read: {imported} address(es)" + (f" ({done})" if done else "")
                  + f", {report.count('repeated')} repeated line(s) skipped, "
                  f"{report.count('rejected')} rejected", markup=False)
    if rows and not imported:
        sys.exit(1)


@subscribers_group.command("export")
@pass_app
@reports_errors
def subscribers_export(app: App) -> None:
    """Write every subscriber as CSV to stdout (email, status, dates, hard_failures, name)."""
    import csv

    from bot import subscriptions

    writer = csv.writer(click.get_text_stream("stdout"), lineterminator="\n")
    with app.factory() as session:
        for fields in subscriptions.export_rows(subscribers.iter_subscribers(session)):
            writer.writerow(fields)
