"""The themes file against the feed's stored entries: history, fit per feed, labels, suggestion.

``bot.themes`` is pure (no database); this module feeds it stored entries:

- ``history_items``: the weeks before a digest's week, which tell the grouping how common a
  word is in each feed and whether the themes fit it;
- ``fit_report``: for ``digestbot status``, each feed judged on its newest week by the same
  function the grouping uses (``bot.themes.feed_fit``);
- ``labels_before``: the editor's placements of earlier weeks, for the editor reader;
- ``suggest_from_store``: a starter themes file from the recent entries, for
  ``digestbot themes suggest``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import models
from bot.config import Settings
from bot.digest import draft_queries, queries
from bot.digest.text import clean_line
from bot.digest.week import week_of
from bot.errors import ThemesError
from bot.themes import DEFAULT_THEMES_LABEL, EditorLabel, Item, feed_fit, load_themes, suggest_themes
from bot.themes.readers import model_for

HISTORY_WEEKS = 12  # how far back the grouping looks to learn how common a word is
_END_OF_TIME = datetime(9000, 1, 1, tzinfo=UTC)


def entry_items(entries: Iterable[models.Entry]) -> list[Item]:
    """Stored entries as the grouping's items (keyed by row id: only for statistics), each
    with its feed: the themes' fit is judged per feed."""
    return [Item(key=str(entry.id), title=clean_line(entry.title), summary=entry.summary_text or "",
                 feed=str(entry.feed_id)) for entry in entries]


def history_items(session: Session, before: datetime, weeks: int = HISTORY_WEEKS) -> list[Item]:
    """The entries published in the ``weeks`` weeks before ``before``."""
    return entry_items(queries.entries_published_between(session, before - timedelta(weeks=weeks), before))


def recent_items(session: Session, settings: Settings, weeks: int, now: datetime | None = None) -> list[Item]:
    """The entries of the last ``weeks`` weeks that have entries: the week of the
    newest entry (published by ``now``, if given) and the weeks before it: a
    feed that went quiet is still judged on what it published."""
    return entry_items(_recent_entries(session, settings, weeks, now))


def _recent_entries(session: Session, settings: Settings, weeks: int, now: datetime | None) -> list[models.Entry]:
    newest = queries.latest_published_before(session, (now or _END_OF_TIME) + timedelta(days=1))
    if newest is None:
        return []
    start = week_of(newest, settings.tz).start - timedelta(weeks=weeks - 1)
    return list(queries.entries_published_between(session, start, newest + timedelta(seconds=1)))


def labels_before(session: Session, week: str) -> list[EditorLabel]:
    """The editor's placements of the weeks before ``week``, as the editor reader reads them."""
    return [EditorLabel(title=clean_line(row.title), summary=row.summary, theme_key=row.theme_key, week=row.week,
                        feed=str(row.feed_id) if row.feed_id is not None else "")
            for row in draft_queries.editor_labels(session, week)]


def fit_report(session: Session, settings: Settings, now: datetime | None = None) -> dict[str, Any]:
    """How well the themes file fits each feed (plain data): each feed's newest week and the
    entries before it, judged by ``bot.themes.feed_fit`` as the grouping judges them."""
    label = settings.themes_file or DEFAULT_THEMES_LABEL
    try:
        themes = load_themes(settings.themes_file)
    except ThemesError as exc:
        return {"file": label, "error": str(exc), "fits": False, "entries": 0, "matched": 0, "feeds": []}
    entries = _recent_entries(session, settings, HISTORY_WEEKS + 1, now)
    items = entry_items(entries)
    weeks = {str(entry.id): week_of(entry.published_at, settings.tz).label for entry in entries}
    names = {str(feed.id): feed.display_name for feed in session.scalars(select(models.Feed))}
    feeds: list[dict[str, Any]] = []
    fits: list[bool] = []
    for feed in sorted({item.feed for item in items}, key=int):
        own = [item for item in items if item.feed == feed]
        newest = max(weeks[item.key] for item in own)
        fit = feed_fit([i for i in own if weeks[i.key] == newest], [i for i in own if weeks[i.key] < newest], themes)
        feeds.append({"feed": names.get(feed, feed), "week": newest, "entries": fit.entries,
                      "matched": fit.matched, "share": round(fit.share, 3), "fits": fit.fits})
        fits.append(fit.fits)
    counted, matched = sum(f["entries"] for f in feeds), sum(f["matched"] for f in feeds)
    return {"file": label, "entries": counted, "matched": matched, "min_fit": themes.min_fit,
            "share": round(matched / counted, 3) if counted else 1.0,
            "fits": all(fits), "feeds": feeds,
            "learned": {"words": model_for(themes) is not None}}


@dataclass(frozen=True)
class Suggestion:
    """A suggested themes file and what it was made from."""

    text: str
    entries: int
    themes: int


def suggest_from_store(session: Session, settings: Settings, weeks: int,
                       now: datetime | None = None) -> Suggestion:
    """A starter themes file (TOML text) from the last ``weeks`` weeks of entries."""
    items = recent_items(session, settings, weeks, now)
    text = suggest_themes(items, source=f"the last {weeks} week(s) of stored entries")
    count = sum(1 for line in text.splitlines() if line.startswith("[themes.") and line != "[themes.example]")
    return Suggestion(text=text, entries=len(items), themes=count)
