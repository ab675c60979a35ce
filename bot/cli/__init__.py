"""The admin command line: ``digestbot``. Each command is a thin shell over the
library; its job is arguments in, a readable report out, and BotErrors turned
into a clean message and exit code 1 (``app.reports_errors``).

One module per command group: ``database``, ``feeds`` (poll, feeds),
``digest`` (preview, send), ``subscribers``, ``service`` (run, web, status),
``themes`` (suggest).
"""

from __future__ import annotations

import click

from bot.cli import bounces, database, digest, dkim, draft, feeds, service, subscribers, themes
from bot.cli.app import App


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              envvar="DIGESTBOT_CONFIG", help="TOML settings file (or DIGESTBOT_CONFIG).")
@click.option("-v", "--verbose", is_flag=True, help="Log at DIGESTBOT_LOG_LEVEL to stderr.")
@click.version_option(package_name="digestbot")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """digestbot: a research feed in, a weekly themed email digest out."""
    ctx.obj = App(config_file, verbose)
    ctx.call_on_close(ctx.obj.close)



for command in (database.db_group, feeds.poll, feeds.feeds_command, digest.preview,
                digest.send_command, service.run_command, service.status_command,
                service.web_command, subscribers.subscribers_group, draft.draft_group,
                draft.admin_group, dkim.dkim_group, bounces.bounces_group,
                themes.themes_group):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="digestbot")

