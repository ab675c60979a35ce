"""What a week's digest looks like once chosen and grouped: the values
``build`` hands to ``bot.render`` and the editor's desk (``edits``, ``draft``).

Plain frozen dataclasses, no I/O, so every stage can import them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from bot.digest.week import Week
from bot.themes import Explanation

# Section keys: how an edit names a section whatever its name this week. A
# theme of the themes file is its key there; the catch-all is CATCH_ALL; a
# section named after the week's own terms is DERIVED_PREFIX + its name.
CATCH_ALL = "catch-all"
DERIVED_PREFIX = "auto:"


def section_key(theme_key: str | None, catch_all: bool, name: str) -> str:
    """The key of a section of the grouping (see above)."""
    if catch_all:
        return CATCH_ALL
    return theme_key or DERIVED_PREFIX + name


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
    # the feed(s) it came through, named when more than one feed is active
    source: str | None = None
    # why the grouping put it in its section (`digestbot preview --explain`)
    why: Explanation | None = field(default=None, compare=False)
    # the language model's one-line TL;DR in the digest's language, when the summary is in another (bot.llm)
    tldr: str = ""
    # what the language model chose for it and why (`--explain`; "" without a reading)
    llm: str = field(default="", compare=False)


@dataclass(frozen=True)
class ThemeView:
    name: str
    name_en: str | None
    description: str
    catch_all: bool
    entries: tuple[DigestEntryView, ...]
    derived: bool = False  # named after the week's own terms, not a theme of the file
    key: str = ""  # see section_key; what the editor's edits refer to
    renamed: bool = False  # the editor named it for this week: ``name`` is used in every language
    intro: str = ""  # one or two sentences on what its entries share (bot.llm; the editor's, if edited)
    described: bool = False  # the editor wrote ``description`` for this week: used in every language
    # a derived section: the terms most of its entries share besides those of its name
    shared: tuple[str, ...] = ()


@dataclass(frozen=True)
class DigestData:
    week: Week
    themes: tuple[ThemeView, ...]
    entry_count: int
    paper_count: int
    note: str = ""  # the editor's note, Markdown (bot.digest.note renders it)
    excluded: tuple[DigestEntryView, ...] = ()  # left out by the editor; not sent
    after_approval: int = 0  # entries stored after the week's approval: they wait for the next digest
    title: str = ""  # what the digest is called (bot.titles); empty: the settings' title

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
