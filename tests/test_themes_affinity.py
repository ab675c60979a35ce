"""The feed's own usage as evidence (bot.themes.affinity): an entry its keywords
leave undecided goes to the theme whose clear entries share its words."""

from __future__ import annotations

from bot.themes import Item, group_week, parse_themes
from bot.themes.affinity import exemplar_theme, theme_affinity
from bot.themes.explain import explanation_json, explanation_lines
from bot.themes.terms import Vocabulary

# Two themes with one keyword each; "planning" is listed first, so a tie goes to it.
THEMES = parse_themes(
    """
[settings]
language = "en"
[themes.planning]
name = "Planning"
keywords = ["planning", "lookahead"]
[themes.memory]
name = "Memory"
keywords = ["memory", "episodic"]
"""
)

MEMORY_CLEAR = [
    Item(f"m{i}", f"Episodic memory for agents, part {i}",
         f"Episodic memory with a forgetting curve and a retrieval index, memory consolidation study {i}.")
    for i in range(3)
]
PLANNING_CLEAR = [
    Item(f"p{i}", f"Planning with lookahead, part {i}",
         f"Planning by tree search over subgoals with a learned value, planning horizon study {i}.")
    for i in range(5)  # enough entries that the memory entries' words are not in half of them
]
# One keyword of each theme, in the title: a tie on keywords. Its other words
# (forgetting curve, retrieval index, consolidation) are what memory entries use.
UNDECIDED = Item("u", "Planning or memory?",
                 "A forgetting curve and a retrieval index decide what to keep; consolidation runs nightly.")


def _theme_of(week: list[Item], key: str, history: list[Item] | None = None) -> tuple[str | None, str]:
    grouping = group_week(week, THEMES, history=history or [])
    for group in grouping.groups:
        for why in group.explanations:
            if why.key == key:
                return group.theme_key, why.reason
    raise AssertionError(f"{key} not placed")


def test_an_undecided_entry_goes_to_the_theme_whose_clear_entries_share_its_words() -> None:
    # keywords alone: a tie, which the file order gives to planning
    assert _theme_of([UNDECIDED, PLANNING_CLEAR[0]], "u")[0] == "planning"
    # with clear memory entries in the week, the shared vocabulary decides
    theme, reason = _theme_of([UNDECIDED, *PLANNING_CLEAR, *MEMORY_CLEAR], "u")
    assert (theme, reason) == ("memory", "feed_terms")


def test_the_feeds_history_counts_as_much_as_the_week() -> None:
    week = [UNDECIDED, *PLANNING_CLEAR]
    assert _theme_of(week, "u")[0] == "planning"
    assert _theme_of(week, "u", history=MEMORY_CLEAR)[0] == "memory"


def test_explain_shows_the_points_and_the_shared_terms() -> None:
    grouping = group_week([UNDECIDED, *PLANNING_CLEAR, *MEMORY_CLEAR], THEMES)
    why = next(w for g in grouping.groups for w in g.explanations if w.key == "u")
    assert why.feed_points > 0
    assert {"forgetting curve", "forgetting", "consolidation"} & set(why.feed_terms)
    data = explanation_json(why)
    assert data["feed_terms"]["points"] == why.feed_points and data["feed_terms"]["terms"]
    assert any(line.strip().startswith("feed terms: +") for line in explanation_lines(why))


def test_clear_entries_are_not_moved_and_an_entry_is_not_its_own_evidence() -> None:
    # an entry whose keywords name only planning is not moved by memory entries' words
    clear = Item("c", "Planning, planning, planning",
                 "Planning with a forgetting curve, a retrieval index and consolidation.")
    assert _theme_of([clear, *MEMORY_CLEAR, *PLANNING_CLEAR], "c")[0] == "planning"
    # leave one out: a theme's only exemplar has no similarity to its own profile
    vocab = Vocabulary()
    lone = MEMORY_CLEAR[0]
    affinity = theme_affinity([lone, PLANNING_CLEAR[0]], [(lone, 1), (PLANNING_CLEAR[0], None)], 2, vocab)
    assert affinity.similarity[lone.key][1] == 0.0


def test_exemplars_are_clear_and_decisive() -> None:
    assert exemplar_theme((9.0, 2.0), clear_score=6.0) == 0
    assert exemplar_theme((9.0, 7.0), clear_score=6.0) is None  # not decisive
    assert exemplar_theme((5.0, 0.0), clear_score=6.0) is None  # not clear
