"""Which entries make up a week's digest, grouped into themes.

A week is an ISO week (Monday to Sunday) in ``settings.timezone``, labelled
``2026-W40``. An entry belongs to the week containing its publication time.
The database decides the rest, so every run (preview, scheduler, admin resend)
sees the same digest:

- A week whose digest is frozen (a ``Digest`` row exists: its send started)
  holds exactly the entries recorded in ``DigestEntry``; a resend or a resumed
  send shows the same digest.
- An unfrozen week holds the entries published in it that no frozen digest
  holds, plus *late* entries: published in an earlier week whose digest was
  already frozen when they turned up. They go into the next digest that is
  frozen, marked as late additions, so none is silently skipped.
- ``DigestEntry.entry_id`` is unique, so no entry is ever in two frozen digests.
- One article, one appearance (issue 11): an entry whose article (link key or
  fingerprint, see ``bot.ingest.urls``) is in a frozen digest never goes into
  another. A new feed's backlog (``Entry.backlog == "held"``) belongs to its
  own week if that week's digest is not frozen yet, and is never a late
  entry; a ``"backfill"`` backlog goes into the next digest, as late entries.

This module only selects and shapes data; ``bot.render`` turns it into email.

Modules: ``week`` (ISO weeks), ``build`` (choose and group a week's entries),
``text`` (titles, summaries, links), ``freeze`` (record a digest as its send
starts), ``queries`` (the digest tables); ``views`` (the shaped digest);
the editor's desk: ``edits`` (a week's edits over the grouping, pure),
``draft`` (every change and the approval; the CLI and the console call it),
``draft_queries``, ``note`` (the editor's note, Markdown to safe HTML),
``schedule`` (the next send, and the week it covers).
"""

from bot.digest.build import (
    DigestData,
    DigestEntryView,
    ThemeView,
    assemble,
    build_digest,
    latest_complete_week,
)
from bot.digest.freeze import DigestConflictError, freeze_digest
from bot.digest.text import clean_line, safe_link, trim_summary
from bot.digest.week import DEFAULT_TIMEZONE, Week, WeekError, iso_weeks_in, parse_week, week_of

__all__ = [
    "DEFAULT_TIMEZONE", "DigestConflictError", "DigestData", "DigestEntryView", "ThemeView", "Week",
    "WeekError", "assemble", "build_digest", "clean_line", "freeze_digest", "iso_weeks_in",
    "latest_complete_week", "parse_week", "safe_link", "trim_summary", "week_of",
]
