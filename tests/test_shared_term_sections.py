"""Sections made from shared terms, as a reader meets them (issue 35, item 6): the heading is
printed once, the description says what the entries share rather than repeating the name, and
`themes suggest` never writes a theme without keywords."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.digest import DigestData, DigestEntryView, ThemeView, Week
from bot.render import sections
from bot.templating import language
from bot.themes import parse_themes, suggest_themes
from evaluation.grouping import feed_weeks, field_folder


def _derived(shared: tuple[str, ...]) -> DigestData:
    entry = DigestEntryView(entry_id=1, title="Cardinality estimation with sketches", link="https://x.example/1",
                            summary="", published=datetime(2026, 9, 30, tzinfo=UTC), papers=(), late=False)
    theme = ThemeView(name="Query optimizers / cardinality", name_en="Query optimizers / cardinality",
                      description="", catch_all=False, entries=(entry,), derived=True, key="derived:q",
                      shared=shared)
    return DigestData(week=Week(2026, 40), themes=(theme,), entry_count=1, paper_count=0)


@pytest.mark.parametrize("code", ["zh", "en"])
def test_a_derived_heading_is_printed_once_and_described_by_what_is_shared(code: str) -> None:
    [section] = sections(_derived(("join order", "sketches")), language(code))
    assert section.subtitle is None  # the name is the English name: no "A / B / A / B"
    assert "Query optimizers" not in section.description
    assert "join order" in section.description and "sketches" in section.description


def test_a_derived_section_sharing_only_its_name_says_so_without_repeating_it() -> None:
    [section] = sections(_derived(()), language("en"))
    assert "Query optimizers" not in section.description and section.description


@pytest.mark.parametrize("field", ["vision-en", "security-en", "bio-en", "recsys-zh", "systems-zh"])
def test_suggest_writes_no_theme_without_keywords(field: str) -> None:
    weeks = list(feed_weeks(field_folder(field) / f"{field}.xml").values())
    for start in range(len(weeks)):
        for end in range(start + 1, len(weeks) + 1):
            items = [item for week in weeks[start:end] for item in week]
            themes = parse_themes(suggest_themes(items), "suggested.toml")
            assert all(t.keywords or t.strong_keywords for t in themes.themes), [t.name for t in themes.themes]
