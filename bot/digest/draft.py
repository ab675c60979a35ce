"""The editor's desk: what a week's draft is, and every change the editor can
make to it. The CLI (``digestbot draft ...``) and the admin console call
these same functions; each change is one transaction of its own.

Rules:

- A draft is the week's digest as the next send would freeze it: the
  grouping with the week's edits over it (``build_digest`` applies them, so
  ``send`` freezes exactly the edited digest).
- Only a week whose send has not started can be edited or approved; once
  frozen, its digest is what was sent.
- Any edit withdraws the week's approval: an approval is of what the editor saw.
- An entry is named by its id or its link (``preview --format json`` shows
  both); a section by its key, its name, or its number in ``draft show``.
- Without ``--week``, edits of an entry go to the entry's own week (a late
  addition's: the week the next send covers), the others to the week the next
  scheduled send covers (``bot.digest.schedule.scheduled_week``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot import models
from bot.config import Settings
from bot.db import transaction
from bot.digest import draft_queries, queries
from bot.digest.build import build_digest
from bot.digest.edits import WeekEdits, new_section
from bot.digest.note import check_note
from bot.digest.schedule import scheduled_week
from bot.digest.text import clean_line
from bot.digest.views import CATCH_ALL, DigestData, DigestEntryView
from bot.digest.week import Week, parse_week, week_of
from bot.errors import BotError
from bot.themes import load_themes

MAX_SECTION_NAME = 200
MAX_SECTION_DESCRIPTION = 500
WITHDRAWN = "; its approval was withdrawn (approve it again)"  # the end of an edit's message


class DraftError(BotError):
    """An edit that cannot be made: a frozen week, an unknown entry or section."""


@dataclass(frozen=True)
class SectionChoice:
    """A section an entry can be moved to: one of the draft's, or a theme of
    the themes file (or the catch-all) that has no section this week."""

    key: str
    name: str
    in_draft: bool


@dataclass(frozen=True)
class Draft:
    """One week's draft, as the editor sees it."""

    week: Week
    data: DigestData  # the digest as it would be sent (edits applied)
    edits: WeekEdits
    frozen: str | None  # None, or the frozen digest's status: sending | sent
    choices: tuple[SectionChoice, ...]
    scheduled: bool  # the week the next scheduled send covers

    @property
    def approved(self) -> bool:
        return self.edits.approved_at is not None

    @property
    def editable(self) -> bool:
        return self.frozen is None

    @property
    def waiting_note(self) -> str | None:
        """What the editor should know of entries stored after the approval (they wait)."""
        waiting = self.data.after_approval
        if not waiting or self.frozen is not None:
            return None
        return (f"{waiting} {'entry' if waiting == 1 else 'entries'} stored since the approval "
                f"{'waits' if waiting == 1 else 'wait'} for the next digest; withdraw the approval "
                "and approve again to take them in")

    def section_of(self, entry_id: int) -> str | None:
        for theme in self.data.themes:
            if any(entry.entry_id == entry_id for entry in theme.entries):
                return theme.key
        return None

    def entry(self, entry_id: int) -> DigestEntryView | None:
        for entry in (*self.data.entries, *self.data.excluded):
            if entry.entry_id == entry_id:
                return entry
        return None


# --- reading ------------------------------------------------------------------------

def load_draft(session: Session, settings: Settings, week: Week | None = None,
               now: datetime | None = None) -> Draft:
    """The draft of ``week`` (default: the week the next scheduled send covers)."""
    now = now or datetime.now(UTC)
    scheduled = scheduled_week(session, settings, now)
    week = (week or scheduled).with_timezone(settings.timezone)
    data = build_digest(session, week, settings)
    edits = draft_queries.week_edits(session, week.label)
    frozen = queries.digest_for_week(session, week.label)
    return Draft(week=week, data=data, edits=edits, frozen=frozen.status if frozen else None,
                 choices=_choices(data, settings), scheduled=week == scheduled)


def _choices(data: DigestData, settings: Settings) -> tuple[SectionChoice, ...]:
    themes = load_themes(settings.themes_file)
    present = [SectionChoice(t.key, t.name or ("catch-all" if t.catch_all else t.key), True)
               for t in data.themes]
    keys = {c.key for c in present}
    absent = [SectionChoice(t.key, t.name, False) for t in themes.themes if t.key not in keys]
    if CATCH_ALL not in keys:
        absent.append(SectionChoice(CATCH_ALL, new_section(CATCH_ALL, themes).name or "catch-all",
                                    False))
    return (*present, *absent)


def week_for(session: Session, settings: Settings, text: str | None,
             now: datetime | None = None) -> Week:
    """``--week`` if given, else the week the next scheduled send covers."""
    if text:
        return parse_week(text, settings.timezone)
    return scheduled_week(session, settings, now)


def find_entry(session: Session, text: str) -> models.Entry:
    """An entry by its id (``12``, ``#12``) or its link."""
    key = (text or "").strip()
    if key.lstrip("#").isdigit():
        entry = session.get(models.Entry, int(key.lstrip("#")))
        if entry is None:
            raise DraftError(f"there is no entry {key}",
                             hint="`digestbot preview --format json` shows each entry's id and link")
        return entry
    found = session.scalars(select(models.Entry).where(models.Entry.link == key)
                            .order_by(models.Entry.id)).all()
    if not found:
        raise DraftError(f"no entry has the link {key!r}",
                         hint="give the entry's id or its link exactly as "
                              "`digestbot preview --format json` shows it")
    if len(found) > 1:
        ids = ", ".join(str(e.id) for e in found)
        raise DraftError(f"{len(found)} entries have the link {key!r} (ids {ids})",
                         hint="name the entry by its id instead")
    return found[0]


def entry_week(session: Session, settings: Settings, entry: models.Entry,
               now: datetime | None = None) -> Week:
    """The week whose draft holds ``entry``: its own week, unless that week's
    digest went out without it (a late addition), then the next send's week."""
    own = week_of(entry.published_at, settings.tz)
    if queries.digest_for_week(session, own.label) is None or queries.frozen_entry_ids(
            session, [entry.id]):
        return own
    return scheduled_week(session, settings, now)


# --- changes ------------------------------------------------------------------------

def exclude(factory: sessionmaker[Session], settings: Settings, entry: str, *,
            week: str | None = None, now: datetime | None = None) -> str:
    """Leave an entry out of its week's digest."""
    return _entry_edit(factory, settings, entry, week, now, excluded=True)


def include(factory: sessionmaker[Session], settings: Settings, entry: str, *,
            week: str | None = None, now: datetime | None = None) -> str:
    """Put an excluded entry back."""
    return _entry_edit(factory, settings, entry, week, now, excluded=False)


def move(factory: sessionmaker[Session], settings: Settings, entry: str, section: str, *,
         week: str | None = None, now: datetime | None = None) -> str:
    """Move an entry to another section (one of the draft's, a theme of the
    themes file, or the catch-all) for its week."""
    return _entry_edit(factory, settings, entry, week, now, section=section)


def _entry_edit(factory: sessionmaker[Session], settings: Settings, text: str, week_text: str | None,
                now: datetime | None, *, excluded: bool | None = None,
                section: str | None = None) -> str:
    now = now or datetime.now(UTC)
    with transaction(factory) as session:
        row = find_entry(session, text)
        week = week_for(session, settings, week_text, now) if week_text else \
            entry_week(session, settings, row, now)
        draft = _editable(session, settings, week, now)
        view = draft.entry(row.id)
        if view is None:
            raise DraftError(f"entry {row.id} is not in the draft of {week.label}",
                             hint=f"it belongs to {entry_week(session, settings, row, now).label}; "
                                  "leave out --week to edit it there")
        if excluded is not None:
            draft_queries.set_entry(session, week.label, row.id, now, excluded=excluded)
            draft_queries.record_label(session, row, week.label, now, action="exclude" if excluded else "include")
            what = "left out of" if excluded else "put back into"
            done = f"{week.label}: entry {row.id} “{view.title}” {what} the digest"
        else:
            choice = _resolve_section(draft, section or "")
            if row.id in draft.edits.excluded:
                raise DraftError(f"entry {row.id} is left out of {week.label}",
                                 hint=f"put it back first: `digestbot draft include {row.id}`")
            # kept even where the grouping puts it now: the editor placed it there
            draft_queries.set_entry(session, week.label, row.id, now, section=choice.key)
            themes = {theme.key for theme in load_themes(settings.themes_file).themes}
            draft_queries.record_label(session, row, week.label, now, action="move", section=choice.key,
                                       theme_key=choice.key if choice.key in themes else None)
            done = f"{week.label}: entry {row.id} “{view.title}” moved to “{choice.name}”"
        return done + _withdraw(session, draft, now)


def rename(factory: sessionmaker[Session], settings: Settings, section: str, name: str, *,
           week: str | None = None, keep_description: bool = False,
           now: datetime | None = None) -> str:
    """Give a section a name for this week ("" gives it back its own).

    A new name drops the theme's description, whose words belong to the old
    name; ``keep_description`` keeps the description shown now as the
    section's own for the week (``describe`` changes it later)."""
    now = now or datetime.now(UTC)
    name = clean_line(name)
    if len(name) > MAX_SECTION_NAME:
        raise DraftError(f"a section name has at most {MAX_SECTION_NAME} characters")
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        choice = _resolve_section(draft, section, present_only=True)
        draft_queries.set_section_name(session, draft.week.label, choice.key, name or None, now)
        kept = ""
        if name and keep_description and choice.key not in draft.edits.descriptions:
            shown = shown_description(draft, settings, choice.key)
            if shown:
                draft_queries.set_section_description(session, draft.week.label, choice.key,
                                                      shown, now)
                kept = ", its description kept"
        done = (f"{draft.week.label}: section “{choice.name}” renamed to “{name}”{kept}" if name else
                f"{draft.week.label}: section {choice.key} has its own name again")
        return done + _withdraw(session, draft, now)


def set_intro(factory: sessionmaker[Session], settings: Settings, section: str, text: str | None, *,
              week: str | None = None, now: datetime | None = None) -> str:
    """Write a section's introduction for this week ("" shows none; None gives back the
    language model's). Plain text, one paragraph, capped like the model's."""
    from bot.llm.answer import MAX_INTRO, plain
    from bot.llm.store import set_intro as store_intro

    now = now or datetime.now(UTC)
    cleaned = plain(text, MAX_INTRO + 1) if text is not None else None
    if cleaned is not None and len(cleaned) > MAX_INTRO:
        raise DraftError(f"a section introduction has at most {MAX_INTRO} characters")
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        choice = _resolve_section(draft, section, present_only=True)
        store_intro(session, draft.week.label, choice.key, cleaned, now)
        done = (f"{draft.week.label}: section {choice.key} has its generated introduction again" if cleaned is None
                else f"{draft.week.label}: section {choice.key} shows no introduction" if not cleaned
                else f"{draft.week.label}: section {choice.key} introduced as “{cleaned}”")
        return done + _withdraw(session, draft, now)


def describe(factory: sessionmaker[Session], settings: Settings, section: str, text: str | None, *,
             week: str | None = None, now: datetime | None = None) -> str:
    """Write a section's description for this week: a text, "" for none, or
    None to give it back its theme's own (none after a rename)."""
    now = now or datetime.now(UTC)
    text = None if text is None else clean_line(text)
    if text is not None and len(text) > MAX_SECTION_DESCRIPTION:
        raise DraftError(f"a section description has at most {MAX_SECTION_DESCRIPTION} characters",
                         hint=f"this one has {len(text)}")
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        choice = _resolve_section(draft, section, present_only=True)
        draft_queries.set_section_description(session, draft.week.label, choice.key, text, now)
        label = draft.week.label
        done = (f"{label}: section “{choice.name}” described as “{text}”" if text else
                f"{label}: section “{choice.name}” has no description" if text == "" else
                f"{label}: section “{choice.name}” is renamed: its theme's description stays off"
                if choice.key in draft.edits.renames else
                f"{label}: section “{choice.name}” has its theme's description again")
        return done + _withdraw(session, draft, now)


def shown_description(draft: Draft, settings: Settings, key: str) -> str:
    """The description the email shows now under the section ``key``, in the digest's language."""
    from bot import render
    from bot.templating import language

    for theme, shown in zip(draft.data.themes, render.sections(draft.data, language(settings.language)),
                            strict=True):
        if theme.key == key:
            return shown.description
    return ""


def reorder(factory: sessionmaker[Session], settings: Settings, sections: Sequence[str], *,
            week: str | None = None, now: datetime | None = None) -> str:
    """Put sections in this order (sections not named follow where the grouping puts them)."""
    now = now or datetime.now(UTC)
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        keys = [_resolve_section(draft, text, present_only=True).key for text in sections]
        if len(set(keys)) != len(keys):
            raise DraftError("a section is named twice in the new order")
        draft_queries.set_order(session, draft.week.label, keys, now)
        return f"{draft.week.label}: sections reordered" + _withdraw(session, draft, now)


def set_note(factory: sessionmaker[Session], settings: Settings, markdown: str, *,
             week: str | None = None, now: datetime | None = None) -> str:
    """Write the editor's note (Markdown; "" removes it)."""
    now = now or datetime.now(UTC)
    text = check_note(markdown)
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        draft_queries.set_note(session, draft.week.label, text, now)
        done = (f"{draft.week.label}: note saved ({len(text)} characters)" if text
                else f"{draft.week.label}: note removed")
        return done + _withdraw(session, draft, now)


def approve(factory: sessionmaker[Session], settings: Settings, *, week: str | None = None,
            by: str = "cli", now: datetime | None = None) -> str:
    """Approve a week's draft as it stands: with DIGESTBOT_REQUIRE_APPROVAL its
    send may go out (a send the schedule held goes out within a minute)."""
    now = now or datetime.now(UTC)
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        draft_queries.set_approval(session, draft.week.label, now, by)
        held = " (its scheduled send was held: `digestbot run` sends it within a minute)" \
            if draft.edits.held_at else ""
        return (f"{draft.week.label}: approved, {draft.data.entry_count} entries in "
                f"{len(draft.data.themes)} sections{held}")


def withdraw_approval(factory: sessionmaker[Session], settings: Settings, *,
                      week: str | None = None, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    with transaction(factory) as session:
        draft = _editable(session, settings, week_for(session, settings, week, now), now)
        draft_queries.set_approval(session, draft.week.label, now, None)
        return f"{draft.week.label}: approval withdrawn"


def _editable(session: Session, settings: Settings, week: Week, now: datetime) -> Draft:
    draft = load_draft(session, settings, week, now)
    if not draft.editable:
        state = "has been sent" if draft.frozen == "sent" else "is being sent"
        raise DraftError(f"{week.label} {state}: its digest was frozen when its send started",
                         hint="edits change only a week whose send has not started")
    return draft


def _withdraw(session: Session, draft: Draft, now: datetime) -> str:
    """An edit withdraws the approval of what the editor saw before it."""
    if not draft.approved:
        return ""
    draft_queries.set_approval(session, draft.week.label, now, None)
    return WITHDRAWN


def _resolve_section(draft: Draft, text: str, *, present_only: bool = False) -> SectionChoice:
    """A section by key, by number in the draft (1, 2, ...), or by name (any case)."""
    wanted = (text or "").strip()
    choices = [c for c in draft.choices if c.in_draft or not present_only]
    for choice in choices:
        if choice.key == wanted:
            return choice
    present = [c for c in draft.choices if c.in_draft]
    if wanted.isdigit() and 1 <= int(wanted) <= len(present):
        return present[int(wanted) - 1]
    named = [c for c in choices if c.name.casefold() == wanted.casefold()]
    named += [c for c in choices for t in draft.data.themes
              if t.key == c.key and (t.name_en or "").casefold() == wanted.casefold() and c not in named]
    if len(named) == 1:
        return named[0]
    listing = "; ".join(f"{c.key} ({c.name})" for c in choices)
    raise DraftError(f"{draft.week.label} has no section {wanted!r}" if not named else
                     f"{wanted!r} names more than one section of {draft.week.label}",
                     hint=f"name one by key, number or name: {listing}")


# --- approval -----------------------------------------------------------------------

def awaiting_approval(session: Session, settings: Settings, week: str) -> bool:
    """With DIGESTBOT_REQUIRE_APPROVAL, is ``week`` still to be approved before
    its send may start? (Always False without it: sends go out on schedule.)"""
    if not settings.require_approval:
        return False
    row = draft_queries.week_row(session, week)
    return row is None or row.approved_at is None


def hold(factory: sessionmaker[Session], week: str, now: datetime | None = None) -> None:
    """Record that a scheduled send found ``week`` unapproved, so the service
    sends it once it is approved (``sendable_held_weeks``)."""
    with transaction(factory) as session:
        draft_queries.mark_held(session, week, now or datetime.now(UTC))


def sendable_held_weeks(session: Session) -> list[str]:
    """Weeks a scheduled send held that have been approved since and are still unsent."""
    return [row.week for row in draft_queries.held_weeks(session) if row.approved_at is not None]


def waiting_weeks(session: Session) -> list[str]:
    """Weeks a scheduled send held that still wait for approval."""
    return [row.week for row in draft_queries.held_weeks(session) if row.approved_at is None]
