"""`digestbot themes suggest`: a starter themes file from the feed's own entries.

A thin shell over ``bot.digest.theme_fit.suggest_from_store``: it reads the
stored entries of the last weeks, and writes the suggested TOML to a file or
to stdout. The operator edits it and points DIGESTBOT_THEMES_FILE at it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.cli.app import App, LazyModule, console, err_console, pass_app, reports_errors, write_out
from bot.errors import ThemesError
from bot.terminal import printable

if TYPE_CHECKING:
    from bot.digest import theme_fit
else:  # the grouping loads when `themes suggest` runs, not for --help
    theme_fit = LazyModule("bot.digest.theme_fit")


@click.group("themes")
def themes_group() -> None:
    """The themes a week's entries are grouped into (DIGESTBOT_THEMES_FILE)."""


@themes_group.command("suggest")
@click.option("--weeks", type=click.IntRange(min=1), default=12, show_default=True,
              help="Suggest from the entries of this many recent weeks.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write the themes file here (default: print it to stdout).")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@click.option("--llm", "use_llm", is_flag=True,
              help="Ask the language model (DIGESTBOT_LLM_*) for names, descriptions and keywords.")
@pass_app
@reports_errors
def suggest_command(app: App, weeks: int, out: str | None, force: bool, use_llm: bool) -> None:
    """Write a starter themes file from the stored entries' own distinctive terms."""
    if out and Path(out).exists() and not force:
        raise ThemesError(f"{out} exists and may hold your edits",
                          hint="choose another --out, or pass --force to overwrite it")
    with app.factory() as session:
        suggestion = (_suggest_with_llm(app, session, weeks) if use_llm
                      else theme_fit.suggest_from_store(session, app.settings, weeks))
    if suggestion.entries == 0:
        raise ThemesError(f"no stored entries in the last {weeks} week(s) to suggest themes from",
                          hint="run `digestbot poll` first, or raise --weeks")
    if out is None:
        click.echo(suggestion.text, nl=False)
    else:
        write_out(Path(out), suggestion.text)
    where = "" if out is None else f" to {out}"
    err_console.print(
        f"{suggestion.themes} theme(s) suggested from {suggestion.entries} entries{where}. "
        "Name them and write their descriptions, then set DIGESTBOT_THEMES_FILE to the file.",
        markup=False, highlight=False)


def _suggest_with_llm(app: App, session: Any, weeks: int) -> theme_fit.Suggestion:
    """The language model's starter file from the same entries `themes suggest` reads."""
    from bot.llm.suggest import suggest_with_llm

    items = theme_fit.recent_items(session, app.settings, weeks)
    if not items:
        return theme_fit.Suggestion(text="", entries=0, themes=0)
    text = suggest_with_llm(app.settings, app.factory, list(reversed(items)))
    count = sum(1 for line in text.splitlines() if line.startswith("[themes."))
    return theme_fit.Suggestion(text=text, entries=len(items), themes=count)


@themes_group.command("reread")
@click.option("--week", metavar="YYYY-Www", help="Only the entries of this ISO week (default: every entry a "
              "digest may still show).")
@pass_app
@reports_errors
def reread_command(app: App, week: str | None) -> None:
    """Have the language model read entries again (after a change of model or themes file)."""
    from bot.digest.week import parse_week
    from bot.llm.reading import reread

    if not app.settings.llm_enabled:
        raise ThemesError("no language model is set", hint="set DIGESTBOT_LLM_BASE_URL and DIGESTBOT_LLM_MODEL")
    chosen = parse_week(week, app.settings.timezone) if week else None
    console.print(printable(reread(app.settings, app.factory, chosen).summary()), markup=False)
