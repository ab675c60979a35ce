"""Building a week's digest: choose its entries, group them into themes, shape
them for rendering. Reads only; freezing is ``bot.digest.freeze``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from bot import models
from bot.config import Settings
from bot.digest import draft_queries, queries, theme_fit
from bot.digest.edits import apply_edits
from bot.digest.text import clean_line, safe_link, trim_summary
from bot.digest.views import DigestData, DigestEntryView, ThemeView, section_key
from bot.digest.week import Week, parse_week, week_of
from bot.llm.answer import Reading
from bot.llm.present import attach_intros, tldr_for
from bot.llm.reader import explain, llm_reader, load_readings
from bot.themes import READERS, EditorLabel, Group, Item, group_week, load_themes
from bot.titles import digest_title


def build_digest(session: Session, week: Week, settings: Settings) -> DigestData:
    """The digest of ``week``: its frozen entries if its send started, else the
    entries that belong to it now (once it is approved, those stored before the
    approval: ``_as_approved``)."""
    week = week.with_timezone(settings.timezone)
    frozen = queries.digest_for_week(session, week.label)
    # the editor's edits of the week, over the grouping (bot.digest.edits)
    edits = draft_queries.week_edits(session, week.label)
    waiting = 0
    if frozen is not None:
        chosen = queries.digest_entries(session, frozen.id)
    else:
        chosen = [(entry, False) for entry in
                  queries.unfrozen_entries_between(session, week.start, week.end)]
        chosen += [(entry, True) for entry in _late_entries(session, week)]
        chosen, waiting = _as_approved(_one_per_article(chosen), edits.approved_at)
    # with several feeds, each entry names the feed(s) it came through
    sources = (queries.source_names(session, [entry.id for entry, _ in chosen])
               if queries.active_feed_count(session) > 1 else {})
    # the weeks before tell the grouping how common a word is in this feed
    history = theme_fit.history_items(session, week.start)
    # the editor's placements of earlier weeks, which entries like them follow
    labels = theme_fit.labels_before(session, week.label)
    theme_set = load_themes(settings.themes_file)
    # the language model's cached readings (bot.llm; none when it is off): read after the poll, never here
    readings = load_readings(session, _items(chosen), theme_set, settings)
    data = apply_edits(assemble(week, chosen, settings, sources, history, labels, readings), edits, theme_set)
    data = attach_intros(session, data, settings)
    return replace(data, after_approval=waiting, title=digest_title(settings, session))


def _as_approved(
    chosen: list[tuple[models.Entry, bool]], approved_at: datetime | None
) -> tuple[list[tuple[models.Entry, bool]], int]:
    """An approved week goes out as the editor approved it: entries stored after
    the approval wait, and the next digest takes them as late additions (as it
    does entries that come after a send). Withdrawing the approval and giving it
    again takes them in. Returns the entries kept and how many wait."""
    if approved_at is None:
        return chosen, 0
    kept = [(entry, late) for entry, late in chosen if entry.first_seen_at <= approved_at]
    return kept, len(chosen) - len(kept)


def _one_per_article(chosen: list[tuple[models.Entry, bool]]) -> list[tuple[models.Entry, bool]]:
    """Each article once: entries stored twice before feeds were deduplicated
    (same link key or fingerprint) give their first one only."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for entry, late in chosen:
        marks = {(kind, value) for kind, value in (("l", entry.link_key), ("f", entry.fingerprint))
                 if value}
        if marks & seen:
            continue
        seen |= marks
        kept.append((entry, late))
    return kept


def _late_entries(session: Session, week: Week) -> list[models.Entry]:
    """Unfrozen entries from before ``week`` whose own week's digest is frozen."""
    frozen = set(queries.frozen_weeks(session))
    earlier = sorted(parse_week(label, week.timezone) for label in frozen)
    earlier = [w for w in earlier if w < week]
    if not earlier:
        return _backfill(session, week, set())
    candidates = queries.unfrozen_entries_between(session, earlier[0].start, week.start)
    left_out = draft_queries.excluded_in_weeks(session, frozen)  # the editor said no: not late either
    # a new feed's held-back backlog is never a late addition (it stays in its own week)
    late = [e for e in candidates if e.backlog != "held"
            and week_of(e.published_at, week.tz).label in frozen and e.id not in left_out]
    return late + _backfill(session, week, {e.id for e in late})


def _backfill(session: Session, week: Week, taken: set[int]) -> list[models.Entry]:
    """A feed added with --backfill: its backlog from before ``week``, whatever
    week it was published in, goes into this (the next) digest."""
    return [e for e in queries.backfill_entries_before(session, week.start) if e.id not in taken]


def assemble(
    week: Week, chosen: Sequence[tuple[models.Entry, bool]], settings: Settings,
    sources: Mapping[int, str] | None = None, history: Sequence[Item] = (),
    labels: Sequence[EditorLabel] = (), readings: Mapping[str, Reading] | None = None,
) -> DigestData:
    """Group the chosen (entry, late) pairs into themes and shape them for rendering.

    Items are keyed by the entry's feed key, not its row id, so the same
    entries give the same digest in any database, whatever order they came in.
    """
    keys = _item_keys([entry for entry, _ in chosen])
    items = [
        Item(key=keys[entry.id], title=clean_line(entry.title), summary=entry.summary_text or "",
             papers=tuple(entry.papers or ()), feed=str(entry.feed_id))
        for entry, _ in chosen
    ]
    themes_file = load_themes(settings.themes_file)
    # the language model is one more reader (bot.llm.reader), when it has read these entries
    readers = (*READERS, llm_reader) if readings else READERS
    groups = group_week(items, themes_file, history=history, labels=labels, extra={"llm": readings or {}},
                        readers=readers).groups if items else []
    # why each entry is where it is (`digestbot preview --explain`)
    why = {ex.key: ex for group in groups for ex in group.explanations}
    by_key = {keys[entry.id]: (entry, late) for entry, late in chosen}
    themes = tuple(
        ThemeView(
            name=group.name,
            name_en=group.name_en,
            description=group.description,
            catch_all=group.catch_all,
            entries=tuple(_with_reading(replace(_view(*by_key[key], week.tz, settings.summary_length,
                                                      sources or {}), why=why.get(key)),
                                        (readings or {}).get(key), settings.language)
                          for key in group.keys),
            derived=group.theme_key is None and not group.catch_all,
            key=section_key(group.theme_key, group.catch_all, group.name),
            shared=_shared_terms(group),
        )
        for group in groups
    )
    papers = ({paper for theme in themes for entry in theme.entries for paper in entry.papers} if readings
              else {paper for entry, _ in chosen for paper in entry.papers or ()})
    return DigestData(week=week, themes=themes, entry_count=len(chosen), paper_count=len(papers))


def _items(chosen: Sequence[tuple[models.Entry, bool]]) -> list[Item]:
    """The chosen entries' text as the grouping's items hold it (for ``load_readings``)."""
    keys = _item_keys([entry for entry, _ in chosen])
    return [Item(key=keys[entry.id], title=clean_line(entry.title), summary=entry.summary_text or "")
            for entry, _ in chosen]


def _with_reading(view: DigestEntryView, reading: Reading | None, language: str) -> DigestEntryView:
    """An entry's view with what the model read in it: the papers it names, and a TL;DR
    in the digest's language when the summary is written in another."""
    if reading is None:
        return view
    return replace(view, papers=tuple(clean_line(p) for p in reading.papers),
                   tldr=tldr_for(reading, view.title + view.summary, language), llm=explain(reading))


def _shared_terms(group: Group, most: int = 3) -> tuple[str, ...]:
    """A derived section's terms shared by at least two of its entries, besides its name's."""
    if group.kind != "derived":
        return ()
    named = {term.casefold() for term in group.terms}
    counts = Counter(term for why in group.explanations for term in why.shared_terms if term.casefold() not in named)
    return tuple(term for term, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2)[:most]


def _item_keys(entries: Iterable[models.Entry]) -> dict[int, str]:
    """A unique, database-independent key per entry: its feed key, plus the
    feed's URL when two feeds use the same key."""
    entries = list(entries)
    seen: dict[str, int] = {}
    for entry in entries:
        seen[entry.key] = seen.get(entry.key, 0) + 1
    return {entry.id: entry.key if seen[entry.key] == 1 else f"{entry.key} @ {entry.feed.url}"
            for entry in entries}


def _view(entry: models.Entry, late: bool, tz: ZoneInfo, summary_length: int,
          sources: Mapping[int, str]) -> DigestEntryView:
    return DigestEntryView(
        entry_id=entry.id,
        title=clean_line(entry.title) or "(untitled)",
        link=safe_link(entry.link),
        published=entry.published_at.astimezone(tz),
        papers=tuple(clean_line(p) for p in entry.papers or ()),
        summary=trim_summary(entry.summary_text or "", summary_length),
        late=late,
        source=clean_line(sources[entry.id]) if entry.id in sources else None,
    )


def latest_complete_week(
    session: Session, settings: Settings, now: datetime | None = None
) -> Week | None:
    """The last week that has ended and has entries, or None if there is none."""
    now = now or datetime.now(UTC)
    current = week_of(now, settings.tz)
    newest = queries.latest_published_before(session, current.start)
    return week_of(newest, settings.tz) if newest else None
