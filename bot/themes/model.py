"""The plain data the themes package takes in and hands out.

Nothing here is text a reader sees: theme names come from the themes file,
derived sections carry the week's own terms, and the catch-all carries no
name unless the themes file gives one. The renderer turns the ``kind`` of a
section into words of the digest's language (from the message catalogue).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from bot.themes.vote import Vote

SectionKind = Literal["theme", "derived", "catch_all"]

# Why an entry is where it is (codes for `digestbot preview --explain`, not prose).
Reason = Literal[
    "best_theme",  # its keywords' best theme, where the readers' points put it too
    "readers",  # the readers' points together put it in another theme than its keywords alone
    "lone_theme",  # its best theme, kept although the entry is alone on it this week
    "fallback_theme",  # its best theme's section was dissolved (max_sections); next-best kept theme
    "shared_terms",  # a derived section: shares distinctive terms with the other members
    "themes_do_not_fit",  # its feed's recent entries fit the themes file too poorly; grouped by shared terms
    "no_theme",  # catch-all: no theme reached min_score with evidence and no derived section took it
    "over_cap",  # catch-all: its section was dissolved to stay within max_sections
]


def _no_names() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ThemeDef:
    """One theme from the themes file.

    ``keywords`` carry normal weight; ``strong_keywords`` are phrases that
    almost only occur when an entry is about this theme; ``weak_keywords`` are
    hints that are common elsewhere too and only tip the balance.
    ``names`` holds the name in other languages (``{"en": ...}``); ``name``
    is in the themes file's own language.
    """

    key: str
    name: str
    name_en: str | None
    description: str
    keywords: tuple[str, ...]
    strong_keywords: tuple[str, ...] = ()
    weak_keywords: tuple[str, ...] = ()
    names: Mapping[str, str] = field(default_factory=_no_names, compare=False, hash=False)

    def name_in(self, language: str, file_language: str) -> str | None:
        """The name in ``language``, or None when the file gives none."""
        if language == file_language:
            return self.name
        if language == "en" and self.name_en:
            return self.name_en
        return self.names.get(language)


@dataclass(frozen=True)
class ThemeSet:
    """All themes plus the knobs that shape a week's sections.

    ``catch_all_name`` is None unless the themes file names the catch-all;
    then the renderer uses the catalogue's words for it.
    """

    themes: tuple[ThemeDef, ...]
    catch_all_name: str | None = None
    catch_all_name_en: str | None = None
    max_sections: int = 8
    catch_all_description: str = ""
    min_section_size: int = 1
    min_score: float = 3.0
    language: str = "zh"  # the language of every theme's `name` and `description`
    min_fit: float = 0.5  # below this share of matched entries a week is grouped by shared terms


@dataclass(frozen=True)
class Item:
    """One feed entry as plain text."""

    key: str
    title: str
    summary: str
    papers: tuple[str, ...] = ()
    feed: str = ""  # which feed it came from: fit is judged per feed


@dataclass(frozen=True)
class Hit:
    """One keyword found in an entry, and what it added to a theme's score."""

    term: str  # the keyword as the themes file writes it
    field: Literal["title", "summary"]
    count: int
    points: float


@dataclass(frozen=True)
class ThemeScore:
    """An entry's score for one theme, with the hits that make it up."""

    theme_key: str
    score: float
    hits: tuple[Hit, ...]


@dataclass(frozen=True)
class Explanation:
    """Why one entry is in its section: the reason code, every reader's vote, the keyword hits."""

    key: str
    reason: Reason
    theme_key: str | None  # the theme it landed in, if any
    top: tuple[ThemeScore, ...]  # its best themes by keywords, highest first (at most three)
    shared_terms: tuple[str, ...] = ()  # derived sections: the terms it shares
    votes: tuple[Vote, ...] = ()  # each reader's points and reasons, in the readers' order


@dataclass(frozen=True)
class Group:
    """One section of the digest.

    ``name`` is the theme's name in the themes file's language, the derived
    section's terms joined, or the catch-all's configured name (empty when
    the file gives none: the renderer names it). ``terms`` are a derived
    section's shared terms, most shared first.
    """

    name: str
    name_en: str | None
    description: str
    catch_all: bool
    keys: tuple[str, ...]
    theme_key: str | None
    kind: SectionKind = "theme"
    terms: tuple[str, ...] = ()
    names: Mapping[str, str] = field(default_factory=_no_names, compare=False, hash=False)
    explanations: tuple[Explanation, ...] = field(default=(), compare=False, hash=False)

    def name_in(self, language: str) -> str | None:
        """The section's name in ``language``; None if the file gives none."""
        return self.names.get(language)


@dataclass(frozen=True)
class Fit:
    """How well a themes file fits a set of entries."""

    entries: int
    matched: int  # entries that clearly fit a theme: best score >= FIT_MARGIN x min_score
    min_fit: float

    @property
    def share(self) -> float:
        return self.matched / self.entries if self.entries else 1.0

    @property
    def fits(self) -> bool:
        """False when the themes match too few entries to be worth using."""
        return self.entries < FIT_MIN_ENTRIES or self.share >= self.min_fit


# Fewer entries than this say nothing about fit: a 2-entry week is not evidence.
FIT_MIN_ENTRIES = 4
# An entry "clearly fits" a theme at this multiple of min_score. Words in passing
# ("code", "memory", "benchmark") give another field's entries a bare min_score
# on some theme; entries of the field the themes were written for score far above.
FIT_MARGIN = 2.0
