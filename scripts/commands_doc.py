"""The command reference of docs/commands.md, written from the click commands themselves.

Walks ``bot.cli.cli`` (every group, every command, in the order ``--help``
lists them) and writes each one's usage, help text and options. mkdocs runs
this file as a hook (``hooks:`` in mkdocs.yml): when the site is built, the
page's marker is replaced by the reference, so the page names every command
there is, with the help the commands print, and nothing can go stale.

    .venv/bin/python scripts/commands_doc.py     # the reference as Markdown, to stdout
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

PAGE = Path(__file__).resolve().parent.parent / "docs" / "commands.md"
MARKER = "<!-- every command: written here by scripts/commands_doc.py when the site is built -->"


def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``command`` with its path (``("feeds", "add")``), groups first."""
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=" ".join(path))
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name))


def section(path: tuple[str, ...], command: click.Command) -> str:
    """One command's part of the page: heading, usage, help, options."""
    ctx = click.Context(command, info_name=" ".join(path))
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"{'#' * (3 if len(path) <= 2 else 4)} `{' '.join(path)}`", "",
             "```text", f"{' '.join(path)} {usage}".rstrip(), "```", ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines += [click.unstyle(help_text).replace("\b\n", ""), ""]
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if options:
        lines += ["| option | what it does |", "|---|---|"]
        for option in options:
            record = option.get_help_record(ctx)
            if record is None:
                continue
            names, text = record
            escaped = text.replace("|", "\\|")
            lines.append(f"| `{names}` | {escaped} |")
        lines.append("")
    return "\n".join(lines)


def reference() -> str:
    from bot.cli import cli

    return "\n".join(section(path, command) for path, command in walk(cli, ("digestbot",)))


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """mkdocs' hook: the commands page gets the reference where its marker is."""
    if page.file.src_path == PAGE.name and MARKER in markdown:
        return markdown.replace(MARKER, reference())
    return markdown


if __name__ == "__main__":
    sys.path.insert(0, str(PAGE.parent.parent))
    print(reference())
