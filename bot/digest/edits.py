"""The editor's edits of one week, laid over the grouping. Pure: no I/O.

``build_digest`` groups a week's entries into themes as always, then
``apply_edits`` lays the week's edits over the result, so an entry that
arrives after an edit joins the draft where the grouping puts it while every
edit stays as it was:

- an *excluded* entry leaves its section (``DigestData.excluded`` keeps it,
  so the editor can restore it); the counts and the subject follow;
- a *moved* entry goes to the end of the section its edit names, which is
  made if the grouping did not make it this week (a theme of the themes
  file, the catch-all, or a section named after the week's own terms);
- a *renamed* section carries its new name in every language, and drops
  its theme's description (the old theme's words would sit under a new
  name) unless the editor kept or wrote one;
- a *described* section carries the editor's description in every
  language ("" shows none);
- sections named in the *order* come first, in that order, then the others
  in the grouping's order (a section new since the edit among them), the
  catch-all last unless the order places it;
- a section left empty is dropped.

Sections are named by key (``views.section_key``), never by their position
or their name this week, so edits survive regrouping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from bot.digest.views import (
    CATCH_ALL,
    DERIVED_PREFIX,
    DigestData,
    DigestEntryView,
    ThemeView,
)
from bot.themes import ThemeSet


@dataclass(frozen=True)
class WeekEdits:
    """Everything the editor changed in one week's draft."""

    week: str
    excluded: frozenset[int] = frozenset()
    moves: Mapping[int, str] = field(default_factory=dict)  # entry id -> section key
    renames: Mapping[str, str] = field(default_factory=dict)  # section key -> name
    descriptions: Mapping[str, str] = field(default_factory=dict)  # section key -> text ("" none)
    order: tuple[str, ...] = ()  # section keys
    note: str = ""  # Markdown
    approved_at: datetime | None = None
    approved_by: str | None = None
    held_at: datetime | None = None
    reminded_at: datetime | None = None

    @property
    def is_empty(self) -> bool:
        """No edit at all (approval aside): the draft is the grouping as it stands."""
        return not (self.excluded or self.moves or self.renames or self.descriptions
                    or self.order or self.note.strip())


def apply_edits(data: DigestData, edits: WeekEdits, themes: ThemeSet) -> DigestData:
    """``data`` (the grouping of a week) with ``edits`` laid over it."""
    if edits.is_empty:
        return data
    sections: dict[str, list[DigestEntryView]] = {}
    views: dict[str, ThemeView] = {}
    for theme in data.themes:
        views[theme.key] = theme
        sections[theme.key] = []
    excluded: list[DigestEntryView] = []
    moved: list[tuple[str, DigestEntryView]] = []
    for theme in data.themes:
        for entry in theme.entries:
            target = edits.moves.get(entry.entry_id, theme.key)
            if entry.entry_id in edits.excluded:
                excluded.append(entry)
            elif target == theme.key:
                sections[theme.key].append(entry)
            else:
                moved.append((target, entry))
    for target, entry in moved:
        if target not in views:
            views[target] = new_section(target, themes)
            sections[target] = []
        sections[target].append(entry)
    grouped = [key for key in views if sections[key]]
    ordered = _order(grouped, edits.order)
    shown = tuple(_named(replace(views[key], entries=tuple(sections[key])), edits)
                  for key in ordered)
    kept = [entry for theme in shown for entry in theme.entries]
    papers = {paper for entry in kept for paper in entry.papers}
    changed = bool(excluded) or bool(moved)
    return replace(
        data, themes=shown, entry_count=len(kept),
        paper_count=len(papers) if changed else data.paper_count,
        note=edits.note.strip(), excluded=tuple(excluded))


def new_section(key: str, themes: ThemeSet) -> ThemeView:
    """The section a move names when the grouping did not make it this week."""
    if key == CATCH_ALL:
        # no name when the themes file gives none: the renderer words it
        return ThemeView(name=themes.catch_all_name or "", name_en=themes.catch_all_name_en,
                         description=themes.catch_all_description, catch_all=True, entries=(),
                         key=key)
    for theme in themes.themes:
        if theme.key == key:
            return ThemeView(name=theme.name, name_en=theme.name_en, description=theme.description,
                             catch_all=False, entries=(), key=key)
    # a section named after an earlier grouping's terms, or a theme since removed
    # from the themes file: keep the entry there, under the name the key carries
    name = key.removeprefix(DERIVED_PREFIX)
    return ThemeView(name=name, name_en=None, description="", catch_all=False, entries=(),
                     derived=True, key=key)


def _order(grouped: Sequence[str], order: Sequence[str]) -> list[str]:
    """``grouped`` rearranged: the keys ``order`` names first, in that order,
    then the others in the grouping's order, the catch-all (unless named) last."""
    named = [key for key in dict.fromkeys(order) if key in grouped]
    rest = [key for key in grouped if key not in named]
    if CATCH_ALL in rest:
        rest.remove(CATCH_ALL)
        rest.append(CATCH_ALL)
    return named + rest


def _named(theme: ThemeView, edits: WeekEdits) -> ThemeView:
    """The section with the editor's name and description for the week, if any."""
    name = edits.renames.get(theme.key)
    if name:
        theme = replace(theme, name=name, name_en=name, renamed=True)
    description = edits.descriptions.get(theme.key)
    if description is not None:
        theme = replace(theme, description=description, described=True)
    return theme
