"""The themes file against the feed's stored entries: history, fit, suggestion.

``bot.themes`` is pure (no database); this module feeds it stored entries:

- ``history_items``: the weeks before a digest's week, which tell the
  grouping how common a word is in this feed (for sections made from the
  week's own terms);
- ``fit_report``: how many recent entries clearly fit the themes file, for
  ``digestbot status`` ("the themes file does not fit this feed");
- ``suggest_from_store``: a starter themes file from the recent entries, for
  ``digestbot themes suggest``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from bot import embedding, models
from bot.config import Settings
from bot.digest import queries
from bot.digest.text import clean_line
from bot.digest.week import week_of
from bot.errors import ThemesError
from bot.themes import DEFAULT_THEMES_LABEL, Item, ThemeSet, load_themes, suggest_themes, theme_fit
from bot.themes.learned import model_for

HISTORY_WEEKS = 12  # how far back the grouping looks to learn how common a word is
FIT_WEEKS = 4  # the recent weeks `digestbot status` checks the themes file against
_END_OF_TIME = datetime(9000, 1, 1, tzinfo=UTC)


def entry_items(entries: Iterable[models.Entry]) -> list[Item]:
    """Stored entries as the grouping's items (keyed by row id: only for statistics)."""
    return [Item(key=str(entry.id), title=clean_line(entry.title), summary=entry.summary_text or "")
            for entry in entries]


def history_items(session: Session, before: datetime, weeks: int = HISTORY_WEEKS) -> list[Item]:
    """The entries published in the ``weeks`` weeks before ``before``."""
    return entry_items(queries.entries_published_between(session, before - timedelta(weeks=weeks), before))


def recent_items(session: Session, settings: Settings, weeks: int, now: datetime | None = None) -> list[Item]:
    """The entries of the last ``weeks`` weeks that have entries: the week of the
    newest entry (published by ``now``, if given) and the weeks before it: a
    feed that went quiet is still judged on what it published."""
    newest = queries.latest_published_before(session, (now or _END_OF_TIME) + timedelta(days=1))
    if newest is None:
        return []
    start = week_of(newest, settings.tz).start - timedelta(weeks=weeks - 1)
    return entry_items(queries.entries_published_between(session, start, newest + timedelta(seconds=1)))


def fit_report(session: Session, settings: Settings, weeks: int = FIT_WEEKS,
               now: datetime | None = None) -> dict[str, Any]:
    """How well the themes file fits the last ``weeks`` weeks of entries (plain data)."""
    label = settings.themes_file or DEFAULT_THEMES_LABEL
    try:
        themes = load_themes(settings.themes_file)
    except ThemesError as exc:
        return {"file": label, "error": str(exc), "fits": False, "entries": 0, "matched": 0, "weeks": weeks}
    items = recent_items(session, settings, weeks, now)
    fit = theme_fit(items, themes)
    return {"file": label, "weeks": weeks, "entries": fit.entries, "matched": fit.matched,
            "share": round(fit.share, 3), "min_fit": fit.min_fit, "fits": fit.fits,
            "learned": _learned_report(session, settings, themes, [int(item.key) for item in items])}


def _learned_report(session: Session, settings: Settings, themes: ThemeSet, entry_ids: list[int]) -> dict[str, Any]:
    """What the learned model reads for these themes: words (the shipped word model
    knows them), sentences (``on``, ``off`` by setting, ``unavailable`` without the
    encoder) and how many of the recent entries have a sentence vector."""
    words = model_for(themes) is not None
    if not settings.embed_entries:
        sentences = "off"
    elif not embedding.available():
        sentences = "unavailable"
    else:
        sentences = "on"
    embedded = queries.count_entry_vectors(session, entry_ids, embedding.ENCODER)
    return {"words": words, "sentences": sentences if words else "off", "embedded": embedded,
            "entries": len(entry_ids)}


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
