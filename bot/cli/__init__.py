"""The admin command line: ``digestbot``. Each command is a thin shell over the
library; its job is arguments in, a readable report out, and BotErrors turned
into a clean message and an exit code (``app.reports_errors``, ``exits``).

One module per command group: ``database``, ``feeds`` (poll, feeds),
``digest`` (preview, send), ``subscribers``, ``service`` (run, web, status),
``draft`` (draft, admin), ``dkim``, ``bounces``, ``themes`` (suggest).

A command's module is imported only when that command runs (``LazyGroup``):
``digestbot --help`` and the light commands never load Alembic, the renderer,
the web stack or the encoder. ``--help`` lists each command's first line from
its module's source (``ast``), without importing it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from functools import cache

import click

from bot.cli.app import App

# command name -> (module, attribute); the order does not matter (click sorts the listing)
COMMANDS: dict[str, tuple[str, str]] = {
    "db": ("bot.cli.database", "db_group"),
    "poll": ("bot.cli.feeds", "poll"),
    "feeds": ("bot.cli.feeds", "feeds_command"),
    "preview": ("bot.cli.digest", "preview"),
    "send": ("bot.cli.digest", "send_command"),
    "run": ("bot.cli.service", "run_command"),
    "status": ("bot.cli.service", "status_command"),
    "web": ("bot.cli.service", "web_command"),
    "subscribers": ("bot.cli.subscribers", "subscribers_group"),
    "draft": ("bot.cli.draft", "draft_group"),
    "admin": ("bot.cli.draft", "admin_group"),
    "dkim": ("bot.cli.dkim", "dkim_group"),
    "bounces": ("bot.cli.bounces", "bounces_group"),
    "themes": ("bot.cli.themes", "themes_group"),
}


@cache
def _docstrings(module: str) -> dict[str, str]:
    """Each top-level function's docstring in ``module``'s source, read without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return {}
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    return {node.name: ast.get_docstring(node) or "" for node in tree.body
            if isinstance(node, ast.FunctionDef)}


class LazyGroup(click.Group):
    """A group whose subcommands (``COMMANDS``) are imported when they are used
    (click's "lazy loading subcommands" pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attribute = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}.{attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing of ``--help``: each command's first line, from its source."""
        rows = []
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            rows.append((name, short_help(name, limit) if name in COMMANDS
                         else self.commands[name].get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def short_help(name: str, limit: int = 45) -> str:
    """What ``--help`` lists for the command ``name``: its help shortened as click does."""
    module, attribute = COMMANDS[name]
    text = _docstrings(module).get(attribute)
    if text is None:  # not a plain function in its module's source: ask the command itself
        command = cli.get_command(click.Context(cli), name)
        return command.get_short_help_str(limit) if command else ""
    return click.utils.make_default_short_help(inspect.cleandoc(text).split("\f", 1)[0], limit)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              envvar="DIGESTBOT_CONFIG", help="TOML settings file (or DIGESTBOT_CONFIG).")
@click.option("-v", "--verbose", is_flag=True, help="Log at DIGESTBOT_LOG_LEVEL to stderr.")
@click.version_option(package_name="digestbot")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """digestbot: a research feed in, a weekly themed email digest out."""
    ctx.obj = App(config_file, verbose)
    ctx.call_on_close(ctx.obj.close)


def main() -> None:
    cli(prog_name="digestbot")
