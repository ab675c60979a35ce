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

This module only selects and shapes data; ``bot.render`` turns it into email.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot import models, store
from bot.config import Settings
from bot.errors import BotError
from bot.themes import Item, group_items, load_themes

if TYPE_CHECKING:  # render imports this module's data types
    from bot.render import Rendered

DEFAULT_TIMEZONE = "Asia/Shanghai"
WEEK_HINT = "write an ISO week as YYYY-Www, for example 2026-W40"
_WEEK_RE = re.compile(r"^\s*(\d{4})-?[Ww](\d{1,2})\s*$")


class WeekError(BotError):
    """A week label that is malformed or names a week that does not exist."""


class DigestConflictError(BotError):
    """Another run froze this week or some of its entries first."""


# --- weeks -------------------------------------------------------------------


def iso_weeks_in(year: int) -> int:
    """52 or 53: 28 December always lies in the last ISO week of its year."""
    return date(year, 12, 28).isocalendar()[1]


@dataclass(frozen=True, order=True)
class Week:
    """One ISO week. ``timezone`` only places its start and end in time; two
    weeks with the same label are equal whatever zone they carry."""

    year: int
    number: int
    timezone: str = field(default=DEFAULT_TIMEZONE, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.year <= 9998:
            raise WeekError(f"year {self.year} is out of range", hint=WEEK_HINT)
        weeks = iso_weeks_in(self.year)
        if not 1 <= self.number <= weeks:
            raise WeekError(f"{self.year} has no ISO week {self.number}: it has weeks 1 to {weeks}",
                            hint=WEEK_HINT)

    @property
    def label(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def first_day(self) -> date:
        """Monday."""
        return date.fromisocalendar(self.year, self.number, 1)

    @property
    def last_day(self) -> date:
        """Sunday."""
        return self.first_day + timedelta(days=6)

    @property
    def start(self) -> datetime:
        """Monday 00:00 in the week's time zone."""
        return datetime.combine(self.first_day, time(0), tzinfo=self.tz)

    @property
    def end(self) -> datetime:
        """The next Monday 00:00 (exclusive), so DST weeks are still whole weeks."""
        return datetime.combine(self.first_day + timedelta(days=7), time(0), tzinfo=self.tz)

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def next(self) -> Week:
        return self._shifted(7)

    def previous(self) -> Week:
        return self._shifted(-7)

    def with_timezone(self, timezone: str) -> Week:
        return replace(self, timezone=timezone)

    def _shifted(self, days: int) -> Week:
        year, number, _ = (self.first_day + timedelta(days=days)).isocalendar()
        return Week(year, number, self.timezone)

    def __str__(self) -> str:
        return self.label


def parse_week(text: str, timezone: str = DEFAULT_TIMEZONE) -> Week:
    """``"2026-W40"`` (also ``2026W40``, ``2026-w40``) to a Week, or a WeekError."""
    match = _WEEK_RE.match(text or "")
    if not match:
        raise WeekError(f"{text!r} is not an ISO week", hint=WEEK_HINT)
    return Week(int(match[1]), int(match[2]), timezone)


def week_of(moment: datetime, tz: ZoneInfo | str = DEFAULT_TIMEZONE) -> Week:
    """The week containing an aware moment, as seen in ``tz``."""
    if moment.tzinfo is None:
        raise ValueError("week_of needs a timezone-aware datetime")
    zone = ZoneInfo(tz) if isinstance(tz, str) else tz
    year, number, _ = moment.astimezone(zone).isocalendar()
    return Week(year, number, zone.key)


# --- the digest's data ---------------------------------------------------------


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
    frozen = store.digest_for_week(session, week.label)
    if frozen is not None:
        chosen = store.digest_entries(session, frozen.id)
    else:
        chosen = [(entry, False) for entry in
                  store.unfrozen_entries_between(session, week.start, week.end)]
        chosen += [(entry, True) for entry in _late_entries(session, week)]
    return assemble(week, chosen, settings)


def _late_entries(session: Session, week: Week) -> list[models.Entry]:
    """Unfrozen entries from before ``week`` whose own week's digest is frozen."""
    frozen = set(store.frozen_weeks(session))
    earlier = sorted(parse_week(label, week.timezone) for label in frozen)
    earlier = [w for w in earlier if w < week]
    if not earlier:
        return []
    candidates = store.unfrozen_entries_between(session, earlier[0].start, week.start)
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


# --- text helpers ----------------------------------------------------------------

# A sentence ends at 。！？ (plus closing quotes or brackets), or at .!? followed
# by a space or the end, so "91.0%" and "e.g." inside a word do not count.
_SENTENCE_END = re.compile(r"[。！？][”’」』）)\"']*|[.!?][\"'”’)\]]*(?=\s|$)")
# Failing that, a clause ends at ；; (Chinese summaries run long sentences).
_CLAUSE_END = re.compile(r"[；;]")
_MIN_SENTENCE_SHARE = 0.3  # a cut at a sentence end must keep this much of the limit
_MIN_CLAUSE_SHARE = 0.6


def clean_line(text: str) -> str:
    """One line of plain text: any run of whitespace (CR/LF included) becomes a space."""
    return " ".join((text or "").split())


def trim_summary(text: str, limit: int) -> str:
    """Shorten plain text to at most ``limit`` characters.

    Prefer the last sentence end that keeps a fair share of the limit (the
    reader gets whole sentences); else the last clause end, else a word or
    character boundary, both marked with an ellipsis.
    """
    text = clean_line(text)
    if len(text) <= limit:
        return text
    sentence = _last_end(_SENTENCE_END, text, limit)
    if sentence >= limit * _MIN_SENTENCE_SHARE:
        return text[:sentence]
    clause = _last_end(_CLAUSE_END, text, limit - 1)
    if clause >= limit * _MIN_CLAUSE_SHARE:
        return text[: clause - 1] + "…"
    cut = text[: limit - 1]
    if text[limit - 1].isascii() and text[limit - 1].isalnum() and " " in cut[-25:]:
        cut = cut.rsplit(" ", 1)[0]  # do not split an English word
    return cut.rstrip(" ,;:，、；：-—") + "…"


def _last_end(pattern: re.Pattern[str], text: str, limit: int) -> int:
    """End offset of the last match of ``pattern`` within ``text[:limit]``, or 0."""
    ends = [m.end() for m in pattern.finditer(text, 0, limit + 1) if m.end() <= limit]
    return ends[-1] if ends else 0


def safe_link(link: str | None) -> str | None:
    """Only absolute http(s) links reach the email; anything else is dropped."""
    link = (link or "").strip()
    parts = urlsplit(link)
    if parts.scheme.lower() in ("http", "https") and parts.netloc and not any(
        ch.isspace() for ch in link
    ):
        return link
    return None


# --- choosing and freezing weeks -------------------------------------------------


def latest_complete_week(
    session: Session, settings: Settings, now: datetime | None = None
) -> Week | None:
    """The last week that has ended and has entries, or None if there is none."""
    now = now or datetime.now(UTC)
    current = week_of(now, settings.tz)
    newest = store.latest_published_before(session, current.start)
    return week_of(newest, settings.tz) if newest else None


def freeze_digest(session: Session, data: DigestData, rendered: Rendered) -> models.Digest:
    """Record that this digest's send starts: the Digest row (status 'sending')
    plus one DigestEntry per entry. From then on ``build_digest`` returns exactly
    these entries for the week. If the week is frozen already, its row is
    returned unchanged, so a resumed send keeps the digest it started with.

    ``rendered`` holds the subject, HTML (CSS already inlined, once) and text
    that every recipient gets, with personal links still placeholders.
    """
    existing = store.digest_for_week(session, data.week.label)
    if existing is not None:
        return existing
    taken = store.frozen_entry_ids(session, data.entry_ids)
    if taken:
        raise DigestConflictError(
            f"{data.week.label}: {len(taken)} of its entries already belong to another digest",
            hint="build the digest again (it was built before another week was frozen) and retry",
        )
    late = {entry.entry_id: entry.late for entry in data.entries}
    try:
        return store.add_digest(
            session, week=data.week.label, subject=rendered.subject,
            html=rendered.html, text=rendered.text,
            entry_count=data.entry_count, paper_count=data.paper_count,
            entries=sorted(late.items()),
        )
    except IntegrityError as exc:
        raise DigestConflictError(
            f"{data.week.label}: another run froze this week or its entries at the same time",
            hint="roll back and retry: the digest that run froze will be used",
        ) from exc
