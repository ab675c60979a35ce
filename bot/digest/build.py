"""Building a week's digest: choose its entries, group them into themes, shape
them for rendering. Reads only; freezing is ``bot.digest.freeze``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from bot import models
from bot.config import Settings
from bot.digest import queries
from bot.digest.text import clean_line, safe_link, trim_summary
from bot.digest.week import Week, parse_week, week_of
from bot.themes import Item, group_items, load_themes


@dataclass(frozen=True)
class DigestEntryView:
    """One entry as the email shows it: plain text, a safe link, a trimmed summary."""

    entry_id: int
    title: str
    link: str | None
    published: datetime  # in the digest's time zone
    papers: tuple[str, ...]
    summary: str
    late: bool


@dataclass(frozen=True)
class ThemeView:
    name: str
    name_en: str | None
    description: str
    catch_all: bool
    entries: tuple[DigestEntryView, ...]


@dataclass(frozen=True)
class DigestData:
    week: Week
    themes: tuple[ThemeView, ...]
    entry_count: int
    paper_count: int

    @property
    def entries(self) -> tuple[DigestEntryView, ...]:
        return tuple(entry for theme in self.themes for entry in theme.entries)

    @property
    def entry_ids(self) -> tuple[int, ...]:
        return tuple(sorted(entry.entry_id for entry in self.entries))

    @property
    def late_count(self) -> int:
        return sum(entry.late for entry in self.entries)

    @property
    def is_empty(self) -> bool:
        return self.entry_count == 0


def build_digest(session: Session, week: Week, settings: Settings) -> DigestData:
    """The digest of ``week``: its frozen entries if its send started, else the
    entries that belong to it now (see the module docstring)."""
    week = week.with_timezone(settings.timezone)
    frozen = queries.digest_for_week(session, week.label)
    if frozen is not None:
        chosen = queries.digest_entries(session, frozen.id)
    else:
        chosen = [(entry, False) for entry in
                  queries.unfrozen_entries_between(session, week.start, week.end)]
        chosen += [(entry, True) for entry in _late_entries(session, week)]
    return assemble(week, chosen, settings)


def _late_entries(session: Session, week: Week) -> list[models.Entry]:
    """Unfrozen entries from before ``week`` whose own week's digest is frozen."""
    frozen = set(queries.frozen_weeks(session))
    earlier = sorted(parse_week(label, week.timezone) for label in frozen)
    earlier = [w for w in earlier if w < week]
    if not earlier:
        return []
    candidates = queries.unfrozen_entries_between(session, earlier[0].start, week.start)
    return [e for e in candidates if week_of(e.published_at, week.tz).label in frozen]


def assemble(
    week: Week, chosen: Sequence[tuple[models.Entry, bool]], settings: Settings
) -> DigestData:
    """Group the chosen (entry, late) pairs into themes and shape them for rendering.

    Items are keyed by the entry's feed key, not its row id, so the same
    entries give the same digest in any database, whatever order they came in.
    """
    keys = _item_keys([entry for entry, _ in chosen])
    items = [
        Item(key=keys[entry.id], title=clean_line(entry.title), summary=entry.summary_text or "",
             papers=tuple(entry.papers or ()))
        for entry, _ in chosen
    ]
    groups = group_items(items, load_themes(settings.themes_file)) if items else []
    by_key = {keys[entry.id]: (entry, late) for entry, late in chosen}
    themes = tuple(
        ThemeView(
            name=group.name,
            name_en=group.name_en,
            description=group.description,
            catch_all=group.catch_all,
            entries=tuple(_view(*by_key[key], week.tz, settings.summary_length)
                          for key in group.keys),
        )
        for group in groups
    )
    papers = {paper for entry, _ in chosen for paper in entry.papers or ()}
    return DigestData(week=week, themes=themes, entry_count=len(chosen), paper_count=len(papers))


def _item_keys(entries: Iterable[models.Entry]) -> dict[int, str]:
    """A unique, database-independent key per entry: its feed key, plus the
    feed's URL when two feeds use the same key."""
    entries = list(entries)
    seen: dict[str, int] = {}
    for entry in entries:
        seen[entry.key] = seen.get(entry.key, 0) + 1
    return {entry.id: entry.key if seen[entry.key] == 1 else f"{entry.key} @ {entry.feed.url}"
            for entry in entries}


def _view(entry: models.Entry, late: bool, tz: ZoneInfo, summary_length: int) -> DigestEntryView:
    return DigestEntryView(
        entry_id=entry.id,
        title=clean_line(entry.title) or "(untitled)",
        link=safe_link(entry.link),
        published=entry.published_at.astimezone(tz),
        papers=tuple(clean_line(p) for p in entry.papers or ()),
        summary=trim_summary(entry.summary_text or "", summary_length),
        late=late,
    )


def latest_complete_week(
    session: Session, settings: Settings, now: datetime | None = None
) -> Week | None:
    """The last week that has ended and has entries, or None if there is none."""
    now = now or datetime.now(UTC)
    current = week_of(now, settings.tz)
    newest = queries.latest_published_before(session, current.start)
    return week_of(newest, settings.tz) if newest else None
