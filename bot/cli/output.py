"""How list commands print: one ``--format`` option and one writer for all of them.

``subscribers list``, ``feeds`` and ``status`` (and any new list command) take
``--format table|tsv|csv|json``. Without it the output is a table on a
terminal and tab-separated lines into a pipe or a file, so ``| grep`` and
``| cut -f2`` see every value whole: no column is ever cut short, in a
table either (long values fold onto the next line).

Times follow ``bot.times``: in the configured zone, ``2026-10-05 09:00
+08:00`` in a table (which says the zone in its caption), ISO 8601 with the
offset in tsv, csv and json. Notes for a person (counts, "no feeds yet") go
to stdout under a table and to stderr otherwise, so the data stays clean.

Use it like this::

    @click.command()
    @format_option
    def things(app, fmt):
        fmt = chosen_format(fmt)
        emit_rows(fmt, [("name", "name"), ("seen_at", "last seen")], rows, tz=app.settings.tz)
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, tzinfo
from typing import Any, TypeVar

import click
from rich.table import Column, Table
from rich.text import Text

from bot.cli.app import console, err_console
from bot.terminal import printable
from bot.times import local_iso, local_short

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "tsv", "csv", "json")


def format_option(func: F) -> F:
    """``--format table|tsv|csv|json`` as ``fmt`` (None: see ``chosen_format``)."""
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default=None,
        help="table (the default on a terminal), tsv (the default into a pipe or file: "
             "tab-separated, a header line first, nothing cut), csv or json.")(func)


def chosen_format(fmt: str | None) -> str:
    """The format asked for, else a table on a terminal and tsv elsewhere."""
    if fmt:
        return fmt
    return "table" if sys.stdout.isatty() else "tsv"


def zone_name(tz: tzinfo) -> str:
    return str(getattr(tz, "key", None) or tz)


def _cell(value: Any, fmt: str, tz: tzinfo) -> Any:
    if isinstance(value, datetime):
        return local_short(value, tz) if fmt == "table" else local_iso(value, tz)
    if fmt == "json":
        return value
    if value is None:
        return ""
    # no control characters: an escape sequence in a feed title never reaches the terminal
    text = printable(value, keep_newlines=fmt != "tsv")
    if fmt == "tsv":  # one record per line, one field per tab, whatever a feed says
        text = " ".join(text.replace("\t", " ").splitlines())
    return text


def emit_rows(fmt: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]], *,
              tz: tzinfo, empty: str = "nothing to show", title: str | None = None,
              table_keys: Sequence[str] | None = None) -> int:
    """Print ``rows`` (one value per column; datetimes, numbers, None or text)
    in ``fmt``. ``columns`` are (key, header) pairs: the key names the field
    in tsv, csv and json, the header is what a table shows. ``table_keys``
    picks the columns a table shows (default: all); the other formats always
    carry every column. Returns the number of rows."""
    rows = list(rows)
    keys = [key for key, _ in columns]
    out = click.get_text_stream("stdout")
    if fmt == "json":
        records = [{k: _cell(v, fmt, tz) for k, v in zip(keys, row, strict=True)} for row in rows]
        click.echo(json.dumps(records, ensure_ascii=False, indent=2))
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(keys)
        writer.writerows([_cell(v, fmt, tz) for v in row] for row in rows)
    elif fmt == "tsv":
        click.echo("\t".join(keys))
        for row in rows:
            click.echo("\t".join(_cell(v, fmt, tz) for v in row))
    elif not rows:
        console.print(empty, markup=False)
    else:
        shown = [i for i, key in enumerate(keys) if table_keys is None or key in table_keys]
        table = Table(*(Column(columns[i][1], overflow="fold") for i in shown),
                      title=title, title_justify="left",
                      caption=f"times in {zone_name(tz)}", caption_justify="left")
        for row in rows:
            # Text, not markup: a feed title like "[RL] ..." is shown as written
            table.add_row(*(Text(_cell(row[i], fmt, tz)) for i in shown))
        console.print(table)
    return len(rows)


def note(fmt: str, text: str) -> None:
    """A line for a person: under a table on stdout, else on stderr."""
    (console if fmt == "table" else err_console).print(text, markup=False, highlight=False)


def flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts and lists as (dotted.key, value) pairs, lists numbered from 1:
    ``{"feeds": [{"url": u}]}`` -> ``[("feeds.1.url", u)]``. For reports
    that are not one table (``status``) in tsv and csv."""
    if isinstance(data, dict):
        pairs: list[tuple[str, Any]] = []
        for key, value in data.items():
            pairs += flatten(value, f"{prefix}{key}.")
        return pairs
    if isinstance(data, list):
        pairs = []
        for number, value in enumerate(data, 1):
            pairs += flatten(value, f"{prefix}{number}.")
        return pairs
    if isinstance(data, bool):
        data = "true" if data else "false"
    return [(prefix.rstrip("."), data)]
