"""`digestbot draft ...` (the editor's desk on the command line) and
`digestbot admin hash-password`. Each command calls the same function the
admin console calls (``bot.digest.draft``) and prints what it did."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from bot.cli.app import App, LazyModule, console, err_console, pass_app, reports_errors
from bot.errors import BotError
from bot.files import NOTE_CAP, read_regular_text, stdin_bytes
from bot.times import local_iso

if TYPE_CHECKING:
    from bot.digest import draft as drafts
    from bot.digest import schedule
else:  # the grouping and the scheduler's triggers load when a draft command runs, not for --help
    drafts = LazyModule("bot.digest.draft")
    schedule = LazyModule("bot.digest.schedule")

WEEK_HELP = "ISO week such as 2026-W40 (default: the week the next scheduled send covers)."
ENTRY_WEEK_HELP = "ISO week such as 2026-W40 (default: the entry's own week)."


def week_option(help_text: str = WEEK_HELP):  # type: ignore[no-untyped-def]
    return click.option("--week", metavar="YYYY-Www", help=help_text)


@click.group("draft")
def draft_group() -> None:
    """Review and edit a week's digest before it goes out, and approve it.

    ENTRY is an entry's id or its link, as `digestbot preview --format json`
    shows them; SECTION a section's key, its number in `draft show`, or its name."""


@draft_group.command("show")
@week_option()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="For people, or the digest as JSON with the edits.")
@pass_app
@reports_errors
def show(app: App, week: str | None, fmt: str) -> None:
    """Show a week's draft: sections, entries with their ids, the note, approval."""
    from bot import render

    settings = app.settings
    with app.factory() as session:
        found = drafts.load_draft(session, settings, drafts.week_for(session, settings, week))
    if fmt == "json":
        body = render.digest_json(found.data) | {
            # in DIGESTBOT_TIMEZONE, with its offset, like every time the CLI prints (bot.times)
            "approved_at": local_iso(found.edits.approved_at, settings.tz),
            "after_approval": found.data.after_approval, "frozen": found.frozen, "scheduled": found.scheduled}
        click.echo(json.dumps(body, ensure_ascii=False, indent=2))
        return
    state = ("sent" if found.frozen == "sent" else "being sent" if found.frozen else
             "approved" if found.approved else "not approved")
    line = f"{found.week.label} ({found.week.first_day} – {found.week.last_day}): {state}"
    if found.scheduled and not found.frozen:
        at = schedule.next_send_time(settings)
        when = at.isoformat(timespec="minutes")
        if found.week.next().end <= at - timedelta(days=7):  # an old week: no later one has entries yet
            line += (f"; the next scheduled send ({when}) covers it only if no later week "
                     "gets entries before then")
        else:
            line += f"; the next scheduled send ({when}) covers it"
    if settings.require_approval and not found.frozen and not found.approved:
        line += "; DIGESTBOT_REQUIRE_APPROVAL holds its send until it is approved"
    console.print(line, markup=False)
    if found.waiting_note:
        console.print(f"note: {found.waiting_note}", markup=False)
    if found.data.note:
        console.print("\nnote:", style="bold")
        console.print(found.data.note, markup=False)
    console.print()
    for number, theme in enumerate(found.data.themes, 1):
        renamed = " (renamed)" if theme.renamed else ""
        console.print(f"{number}. {theme.name or 'catch-all'}{renamed}  [{theme.key}]", markup=False,
                      style="bold")
        if theme.intro:
            console.print(f"   intro: {theme.intro}", markup=False)
        for entry in theme.entries:
            late = " (late addition)" if entry.late else ""
            console.print(f"   {entry.entry_id:>6}  {entry.title}{late}", markup=False)
    if found.data.excluded:
        console.print("left out:", style="bold")
        for entry in found.data.excluded:
            console.print(f"   {entry.entry_id:>6}  {entry.title}", markup=False)
    if not found.data.themes and not found.data.excluded:
        console.print("no entries in this week yet", markup=False)


def _done(message: str) -> None:
    console.print(message, markup=False)


@draft_group.command("exclude")
@click.argument("entry")
@week_option(ENTRY_WEEK_HELP)
@pass_app
@reports_errors
def exclude(app: App, entry: str, week: str | None) -> None:
    """Leave ENTRY out of its week's digest."""
    _done(drafts.exclude(app.factory, app.settings, entry, week=week))


@draft_group.command("include")
@click.argument("entry")
@week_option(ENTRY_WEEK_HELP)
@pass_app
@reports_errors
def include(app: App, entry: str, week: str | None) -> None:
    """Put an excluded ENTRY back into its week's digest."""
    _done(drafts.include(app.factory, app.settings, entry, week=week))


@draft_group.command("move")
@click.argument("entry")
@click.argument("section")
@week_option(ENTRY_WEEK_HELP)
@pass_app
@reports_errors
def move(app: App, entry: str, section: str, week: str | None) -> None:
    """Move ENTRY to SECTION (a section of the draft, a theme, or catch-all)."""
    _done(drafts.move(app.factory, app.settings, entry, section, week=week))


@draft_group.command("rename")
@click.argument("section")
@click.argument("name")
@click.option("--keep-description", is_flag=True,
              help="Keep the description shown now (a new name drops its theme's description).")
@week_option()
@pass_app
@reports_errors
def rename(app: App, section: str, name: str, keep_description: bool, week: str | None) -> None:
    """Call SECTION NAME in this week's digest ("" gives it back its own name).

    The theme's description goes with the old name unless --keep-description;
    `draft describe` writes another."""
    _done(drafts.rename(app.factory, app.settings, section, name, week=week,
                        keep_description=keep_description))


@draft_group.command("describe")
@click.argument("section")
@click.argument("text", required=False)
@click.option("--own", is_flag=True, help="Give SECTION back its theme's own description.")
@week_option()
@pass_app
@reports_errors
def describe(app: App, section: str, text: str | None, own: bool, week: str | None) -> None:
    """Write the description shown under SECTION's name this week ("" shows none)."""
    if own == (text is not None):
        raise click.UsageError("give either TEXT (\"\" for none) or --own")
    _done(drafts.describe(app.factory, app.settings, section, None if own else text, week=week))


@draft_group.command("intro")
@click.argument("section")
@click.argument("text", required=False)
@click.option("--generated", is_flag=True, help="Drop the edit: show the language model's introduction again.")
@week_option()
@pass_app
@reports_errors
def intro(app: App, section: str, text: str | None, generated: bool, week: str | None) -> None:
    """Introduce SECTION with TEXT in this week's digest ("" shows no introduction)."""
    if text is None and not generated:
        raise BotError("give the introduction's TEXT, \"\" for none, or --generated",
                       hint='digestbot draft intro SECTION "One or two sentences on what its entries share."')
    _done(drafts.set_intro(app.factory, app.settings, section, None if generated else text, week=week))


@draft_group.command("order")
@click.argument("sections", nargs=-1, required=True)
@week_option()
@pass_app
@reports_errors
def order(app: App, sections: tuple[str, ...], week: str | None) -> None:
    """Put SECTIONS first, in this order; the others follow as grouped."""
    _done(drafts.reorder(app.factory, app.settings, sections, week=week))


@draft_group.command("note")
@click.option("--file", "path", required=True, metavar="F",
              help="A Markdown file with the note (- reads standard input; an empty file removes it).")
@week_option()
@pass_app
@reports_errors
def note(app: App, path: str, week: str | None) -> None:
    """Write the editor's note shown above the table of contents (Markdown)."""
    text = read_regular_text(path, cap=NOTE_CAP, what="the note", stdin=stdin_bytes(),
                             hint="give a UTF-8 text file, or - for standard input")
    _done(drafts.set_note(app.factory, app.settings, text, week=week))


@draft_group.command("approve")
@week_option()
@click.option("--withdraw", is_flag=True, help="Withdraw the week's approval instead.")
@pass_app
@reports_errors
def approve(app: App, week: str | None, withdraw: bool) -> None:
    """Approve a week's draft as it stands (DIGESTBOT_REQUIRE_APPROVAL waits for this)."""
    if withdraw:
        _done(drafts.withdraw_approval(app.factory, app.settings, week=week))
    else:
        _done(drafts.approve(app.factory, app.settings, week=week, by="cli"))


# --- digestbot admin -----------------------------------------------------------------

@click.group("admin")
def admin_group() -> None:
    """The admin console's login (the manual's page "The editor's desk")."""


@admin_group.command("hash-password")
@reports_errors
def hash_password() -> None:
    """Ask for a password (twice) and print its argon2 hash for
    DIGESTBOT_ADMIN_PASSWORD_HASH or DIGESTBOT_ADMIN_PASSWORD_FILE."""
    from bot.passwords import hash_password as make_hash

    password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    digest = make_hash(password)
    click.echo(digest)
    if sys.stdout.isatty():
        err_console.print("set DIGESTBOT_ADMIN_PASSWORD_HASH to this value (in single quotes in a shell), "
                          "or write it into the file DIGESTBOT_ADMIN_PASSWORD_FILE names", markup=False)
