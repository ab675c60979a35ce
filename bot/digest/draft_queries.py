"""The editor's desk in the database: ``draft_weeks``, ``draft_entries``,
``draft_sections`` (see ``bot.models``). Functions take a Session and leave
committing to the caller; ``bot.digest.draft`` holds the rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot.digest.edits import WeekEdits
from bot.models import Digest, DraftEntry, DraftSection, DraftWeek, EditorLabel, Entry


def week_row(session: Session, week: str, now: datetime | None = None) -> DraftWeek | None:
    """A week's draft row; with ``now``, created (and flushed) if missing."""
    row = session.get(DraftWeek, week)
    if row is None and now is not None:
        row = DraftWeek(week=week, note="", section_order=[], updated_at=now)
        session.add(row)
        session.flush()
    return row


def week_edits(session: Session, week: str) -> WeekEdits:
    """Every edit of a week, as ``bot.digest.edits`` applies them."""
    row = session.get(DraftWeek, week)
    entries = session.scalars(select(DraftEntry).where(DraftEntry.week == week)).all()
    sections = session.scalars(select(DraftSection).where(DraftSection.week == week)).all()
    return WeekEdits(
        week=week,
        excluded=frozenset(e.entry_id for e in entries if e.excluded),
        moves={e.entry_id: e.section for e in entries if e.section},
        renames={s.section: s.name for s in sections if s.name},
        descriptions={s.section: s.description for s in sections if s.description is not None},
        order=tuple(row.section_order or ()) if row else (),
        note=row.note if row else "",
        approved_at=row.approved_at if row else None,
        approved_by=row.approved_by if row else None,
        held_at=row.held_at if row else None,
        reminded_at=row.reminded_at if row else None,
    )


def set_entry(session: Session, week: str, entry_id: int, now: datetime, *,
              excluded: bool | None = None, section: str | None = None) -> None:
    """Change an entry's edit: ``excluded`` and ``section`` (a section key)
    where given. A row left with no edit goes."""
    row = session.get(DraftEntry, (week, entry_id))
    if row is None:
        row = DraftEntry(week=week, entry_id=entry_id, excluded=False, section=None, updated_at=now)
        session.add(row)
    if excluded is not None:
        row.excluded = excluded
    if section is not None:
        row.section = section
    row.updated_at = now
    if not row.excluded and not row.section:
        session.delete(row)
    session.flush()


def set_section_name(session: Session, week: str, section: str, name: str | None,
                     now: datetime) -> None:
    """Rename a section for a week; None or "" gives it back its own name."""
    row = _section_row(session, week, section, now)
    row.name, row.updated_at = name or "", now
    _drop_if_unedited(session, row)


def set_section_description(session: Session, week: str, section: str, text: str | None,
                            now: datetime) -> None:
    """A section's description for a week: a text, "" for none, None for its theme's own."""
    row = _section_row(session, week, section, now)
    row.description, row.updated_at = text, now
    _drop_if_unedited(session, row)


def _section_row(session: Session, week: str, section: str, now: datetime) -> DraftSection:
    row = session.get(DraftSection, (week, section))
    if row is None:
        row = DraftSection(week=week, section=section, name="", description=None, updated_at=now)
        session.add(row)
    return row


def _drop_if_unedited(session: Session, row: DraftSection) -> None:
    """A row left with neither a name nor a description goes."""
    if not row.name and row.description is None:
        if row in session.new:
            session.expunge(row)
        else:
            session.delete(row)
    session.flush()


def set_order(session: Session, week: str, keys: Sequence[str], now: datetime) -> None:
    row = week_row(session, week, now)
    assert row is not None
    row.section_order, row.updated_at = list(keys), now
    session.flush()


def set_note(session: Session, week: str, note: str, now: datetime) -> None:
    row = week_row(session, week, now)
    assert row is not None
    row.note, row.updated_at = note, now
    session.flush()


def set_approval(session: Session, week: str, now: datetime, by: str | None) -> None:
    """Approve a week (``by`` who), or withdraw its approval (``by`` None)."""
    row = week_row(session, week, now)
    assert row is not None
    row.approved_at, row.approved_by = (now, by) if by else (None, None)
    row.updated_at = now
    session.flush()


def mark_held(session: Session, week: str, now: datetime) -> None:
    """A scheduled send found the week unapproved: send it once it is approved."""
    row = week_row(session, week, now)
    assert row is not None
    if row.held_at is None:
        row.held_at = now
    session.flush()


def mark_reminded(session: Session, week: str, now: datetime) -> None:
    row = week_row(session, week, now)
    assert row is not None
    row.reminded_at = now
    session.flush()


def held_weeks(session: Session) -> list[DraftWeek]:
    """Weeks a scheduled send held for approval and that nobody has sent yet, oldest first."""
    frozen = select(Digest.week)
    return list(session.scalars(
        select(DraftWeek).where(DraftWeek.held_at.is_not(None), DraftWeek.week.not_in(frozen))
        .order_by(DraftWeek.week)))


def excluded_in_weeks(session: Session, weeks: Iterable[str]) -> set[int]:
    """Entries the editor left out of any of these weeks."""
    labels = list(weeks)
    if not labels:
        return set()
    return set(session.scalars(select(DraftEntry.entry_id).where(
        DraftEntry.week.in_(labels), DraftEntry.excluded.is_(True))))


def forget_week(session: Session, week: str) -> None:
    """Drop every edit of a week (tests, and a future "discard edits" button)."""
    for table in (DraftEntry, DraftSection, DraftWeek):
        session.execute(delete(table).where(table.week == week))
    session.flush()


def record_label(session: Session, entry: Entry, week: str, now: datetime, *, action: str,
                 section: str = "", theme_key: str | None = None) -> None:
    """Keep an editor's placement of ``entry`` in ``week`` as a label for its feed (``editor_labels``):
    a move to ``section`` (``theme_key`` when that section is a theme) or an exclusion. The entry's
    latest placement in a week is its label there; ``action`` "include" (put back) only clears it."""
    session.execute(delete(EditorLabel).where(EditorLabel.entry_id == entry.id, EditorLabel.week == week))
    if action != "include":
        session.add(EditorLabel(feed_id=entry.feed_id, entry_id=entry.id, week=week, action=action, section=section,
                                theme_key=theme_key, title=entry.title, summary=entry.summary_text or "",
                                created_at=now))
    session.flush()


def editor_labels(session: Session, before_week: str) -> list[EditorLabel]:
    """Every label of the weeks before ``before_week`` (ISO labels sort by time), oldest first."""
    return list(session.scalars(select(EditorLabel).where(EditorLabel.week < before_week)
                                .order_by(EditorLabel.week, EditorLabel.id)))
