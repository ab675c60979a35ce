"""`digestbot poll` and `digestbot feeds ...`: the ingest stage from the command line.

``feeds`` is a group: ``add``, ``list`` (also what plain ``digestbot feeds``
shows), ``remove``, ``pause``, ``resume``, ``import``, ``export``. Each is a
thin shell over ``bot.ingest.feeds`` and ``bot.ingest.opml``.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot import ingest, logs
from bot.cli import exits
from bot.cli.app import App, LazyModule, console, err_console, pass_app, reports_errors, write_out
from bot.cli.output import chosen_format, emit_rows, format_option
from bot.errors import BotError
from bot.terminal import printable

if TYPE_CHECKING:
    from bot import db, titles
    from bot.ingest import feeds as managed
    from bot.ingest import opml
    from bot.ingest import queries as feed_queries
else:  # the database layer loads when a command runs, not for --help
    db, titles = LazyModule("bot.db"), LazyModule("bot.titles")
    managed, feed_queries = LazyModule("bot.ingest.feeds"), LazyModule("bot.ingest.queries")
    opml = LazyModule("bot.ingest.opml")


@click.command()
@click.argument("feeds", nargs=-1)
@pass_app
@reports_errors
def poll(app: App, feeds: tuple[str, ...]) -> None:
    """Fetch feeds and store new entries: every active feed (the ones in
    DIGESTBOT_FEED_URLS are added first), or just the FEEDS given (URLs or ids)."""
    settings = app.settings
    with _poll_reported_here(app):
        results = ingest.poll_feeds(
            settings, app.factory, list(feeds) or None,
            on_result=_show_result,
        )
    if not results:
        console.print("no active feeds to poll: add one with `digestbot feeds add URL` "
                      "(or resume a paused one)")
        return
    total = sum(r.new for r in results)
    failed = sum(r.status == "error" for r in results)
    console.print(f"{len(results)} feed(s) polled, {total} new entries, {failed} failed")
    _read_with_llm(app)
    code = exits.after_polls(len(results), failed)
    if code != exits.OK:
        sys.exit(code)


def _read_with_llm(app: App) -> None:
    """The language model reads the entries not read yet (nothing when it is off: DIGESTBOT_LLM_*)."""
    from bot.llm.reading import read_new_entries

    result = read_new_entries(app.settings, app.factory)
    if result.status != "off":
        console.print(printable(result.summary()), markup=False)


def _show_result(result: ingest.PollResult) -> None:
    """One feed's poll, and for a failure what to do about it ("the page names
    its feed: ..." for a web page given instead of its feed)."""
    console.print(printable(result.summary()), markup=False)
    if result.status == "error" and result.hint:
        console.print(printable(f"              hint: {result.hint}"), markup=False, style="dim")


def _poll_reported_here(app: App) -> contextlib.AbstractContextManager[None]:
    """The command prints each poll result itself; the poll's own log line would
    show a failing feed twice (-v keeps both)."""
    return contextlib.nullcontext() if app.verbose else logs.reported_by_caller("bot.ingest.poll")


@click.group("feeds", invoke_without_command=True)
@format_option
@click.pass_context
def feeds_command(ctx: click.Context, fmt: str | None) -> None:
    """Manage the feeds: add, list, remove, pause, resume, import, export.

    Without a command, the same as `feeds list`."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(feeds_list, fmt=fmt, show_all=False)


@feeds_command.command("list")
@format_option
@click.option("--all", "show_all", is_flag=True, help="Also list removed feeds.")
@pass_app
@reports_errors
def feeds_list(app: App, fmt: str | None, show_all: bool) -> None:
    """Show each feed's health: status, last success, failures in a row, last error.

    Times are in DIGESTBOT_TIMEZONE; into a pipe the output is tab-separated."""
    fmt = chosen_format(fmt)
    with app.factory() as session:
        rows = feed_queries.all_feeds(session, include_removed=show_all)
        counts = feed_queries.entry_counts(session)
    emit_rows(fmt, FEED_COLUMNS, [_feed_row(feed, counts.get(feed.id, 0)) for feed in rows],
              tz=app.settings.tz,
              empty="no feeds yet: `digestbot feeds add URL`, or `digestbot poll` for "
                    "the feeds of DIGESTBOT_FEED_URLS",
              table_keys=("id", "name", "url", "status", "entries", "last_success_at",
                          "consecutive_failures", "last_error"))


# (key in tsv/csv/json, header in the table)
FEED_COLUMNS = [("id", "id"), ("name", "name"), ("url", "feed"), ("status", "status"),
                ("title", "title"), ("entries", "entries"),
                ("last_polled_at", "last poll"), ("last_success_at", "last success"),
                ("consecutive_failures", "failures"), ("failing_since", "failing since"),
                ("last_error", "last error"), ("last_error_at", "last error at"),
                ("added_at", "added")]


def _feed_row(feed: Any, entries: int) -> list[Any]:
    return [feed.id, feed.display_name, feed.url, feed.status, feed.title, entries,
            feed.last_polled_at, feed.last_success_at, feed.consecutive_failures,
            feed.failing_since, feed.last_error if feed.consecutive_failures else None,
            feed.last_error_at, feed.created_at]


@feeds_command.command("add")
@click.argument("url")
@click.option("--name", help="What the feed is called in the email and in `feeds list` "
                             "(default: the feed's own title).")
@click.option("--backfill", is_flag=True,
              help="Mail its earlier posts in the next digest (default: posts of weeks "
                   "already mailed are stored but never mailed).")
@pass_app
@reports_errors
def feeds_add(app: App, url: str, name: str | None, backfill: bool) -> None:
    """Add the feed at URL (http(s) or a file path) and poll it once.

    Its posts from before now are its backlog: stored and searchable, never a
    late addition to a later digest, unless --backfill. Adding a feed that is
    already there changes nothing and is not an error."""
    with db.transaction(app.factory) as session:
        added = managed.add_feed(session, url, datetime.now(UTC), name=name, backfill=backfill)
        feed_id, normal, held = added.feed.id, added.feed.url, added.feed.backlog_before
    if added.outcome == "exists":
        console.print(printable(f"feed {feed_id} is already there: {normal}"
                                + (" (name updated)" if name else "")), markup=False)
        return
    console.print(printable(f"{added.outcome} feed {feed_id}: {normal}"), markup=False)
    if managed.local_path_missing(normal):
        err_console.print(printable(f"warning: {normal} does not exist (yet)"), markup=False)
    with _poll_reported_here(app):
        [result] = ingest.poll_feeds(app.settings, app.factory, [normal])
    _show_result(result)
    if result.status == "error":
        err_console.print("warning: the first poll failed; the feed stays added and is polled "
                          f"with the others (`digestbot feeds remove {feed_id}` if it was a typo)",
                          markup=False)
        sys.exit(exits.FEEDS_FAILED)
    if held is None:
        console.print("no digest has gone out yet, so nothing is held back: its posts belong "
                      "to their own weeks")
    elif backfill:
        console.print("its earlier posts go into the next digest (--backfill)")
    else:
        _show_backlog(app, feed_id)


def _show_backlog(app: App, feed_id: int) -> None:
    """Which of a new feed's earlier posts are mailed: by the design
    (bot.ingest.feeds), those of a week already mailed never are, those of a
    week not mailed yet are part of that week's digest."""
    from bot.digest.queries import held_backlog

    with app.factory() as session:
        held, later, last = held_backlog(session, feed_id, app.settings.timezone)
    console.print(f"its posts from before it was added: {held} of weeks up to {last}, the last "
                  f"week mailed: stored, never mailed; {later} of later weeks: in their week's "
                  "digest (add with --backfill to mail them all in the next digest)", markup=False)


@feeds_command.command("remove")
@click.argument("feed")
@pass_app
@reports_errors
def feeds_remove(app: App, feed: str) -> None:
    """Stop polling FEED (its URL or id) for good. Entries a digest already
    holds stay in the archive; the others go, unless another feed carries them."""
    with db.transaction(app.factory) as session:
        done = managed.remove_feed(session, feed)
        feed_id, url = done.feed.id, done.feed.url
    console.print(printable(
        f"removed feed {feed_id}: {url}\n  {done.kept} entries already mailed stay in the "
        f"archive, {done.handed_over} now belong to another feed that carries them, "
        f"{done.deleted} deleted"), markup=False)


@feeds_command.command("pause")
@click.argument("feed")
@pass_app
@reports_errors
def feeds_pause(app: App, feed: str) -> None:
    """Stop polling FEED (its URL or id) until `feeds resume`; its entries stay."""
    with db.transaction(app.factory) as session:
        found, changed = managed.set_paused(session, feed, True)
        feed_id, url = found.id, found.url
    state = "paused" if changed else "already paused"
    console.print(printable(f"{state}: feed {feed_id} {url}; `digestbot feeds resume {feed_id}` "
                            "polls it again"), markup=False)


@feeds_command.command("resume")
@click.argument("feed")
@pass_app
@reports_errors
def feeds_resume(app: App, feed: str) -> None:
    """Poll FEED (its URL or id) again after `feeds pause`."""
    with db.transaction(app.factory) as session:
        found, changed = managed.set_paused(session, feed, False)
        feed_id, url = found.id, found.url
    state = "resumed" if changed else "already active"
    console.print(printable(f"{state}: feed {feed_id} {url}"), markup=False)


@feeds_command.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--backfill", is_flag=True,
              help="Mail the new feeds' earlier posts in the next digest.")
@click.option("--no-poll", is_flag=True,
              help="Only add the feeds; the next `digestbot poll` (or the service) checks them.")
@pass_app
@reports_errors
def feeds_import(app: App, file: str, backfill: bool, no_poll: bool = False) -> None:
    """Add every feed listed in an OPML FILE (from any feed reader; categories
    and nesting are fine) and poll the new ones once, naming each whose first
    poll fails (exit 3). Feeds already there are left as they are; local file
    paths in the file are skipped (add those with `feeds add PATH`)."""
    listed = opml.read_opml_file(file)
    counts = {"added": 0, "restored": 0, "exists": 0, "skipped": 0}
    new_urls: list[str] = []
    now = datetime.now(UTC)
    with db.transaction(app.factory) as session:
        for item in listed:
            try:
                added = managed.add_feed(session, item.url, now, name=item.name,
                                         backfill=backfill, rename=False, typed=False)
            except BotError as exc:
                err_console.print(printable(f"skipped: {exc.message}"), markup=False)
                counts["skipped"] += 1
                continue
            counts[added.outcome] += 1
            if added.outcome != "exists":
                new_urls.append(added.feed.url)
                console.print(printable(f"{added.outcome} feed {added.feed.id}: {added.feed.url}"),
                              markup=False)
    console.print(f"{len(listed)} feed(s) in {Path(file).name}: {counts['added']} added, "
                  f"{counts['restored']} restored, {counts['exists']} already there, "
                  f"{counts['skipped']} skipped", markup=False)
    if not new_urls:
        return
    if no_poll:
        console.print("not polled yet (--no-poll): the next `digestbot poll` checks the new feeds")
        return
    failed = _first_polls(app, new_urls)
    if failed:
        err_console.print(f"warning: {failed} of the {len(new_urls)} new feeds failed their first "
                          "poll (the lines starting with `error` above); they stay added and are "
                          "polled with the others: fix or `digestbot feeds remove` them",
                          markup=False)
        sys.exit(exits.FEEDS_FAILED)


def _first_polls(app: App, urls: list[str]) -> int:
    """Poll the feeds just added, printing each result; the number that failed."""
    with _poll_reported_here(app):
        results = ingest.poll_feeds(app.settings, app.factory, urls, on_result=_show_result)
    _read_with_llm(app)
    return sum(r.status == "error" for r in results)


@feeds_command.command("export")
@click.option("--out", type=click.Path(dir_okay=False), help="Write here instead of to stdout.")
@pass_app
@reports_errors
def feeds_export(app: App, out: str | None) -> None:
    """Write the feeds (active and paused) as OPML 2.0, for any feed reader or `feeds import`."""
    with app.factory() as session:
        listed = [opml.ExportFeed(url=feed.url, name=feed.display_name)
                  for feed in feed_queries.all_feeds(session)]
    data = opml.write_opml(listed, title=f"{titles.titled(app.settings, app.factory).title}: feeds")
    if out is None:
        click.get_binary_stream("stdout").write(data)
        return
    write_out(Path(out), data)
    err_console.print(f"{len(listed)} feed(s) written to {out}", markup=False)
