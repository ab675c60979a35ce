"""The pipeline's promises: fit judged per feed, readers that plug in, the editor followed."""

from __future__ import annotations

from pathlib import Path

from bot.themes import EditorLabel, Item, Vote, group_week, load_themes, parse_themes
from bot.themes.explain import explanation_lines
from bot.themes.readers import READERS
from evaluation.grouping import feed_weeks

FIXTURES = Path(__file__).parent / "fixtures"

THEMES = parse_themes(
    """
[settings]
language = "en"
[themes.planning]
name = "Planning"
keywords = ["planning", "lookahead", "tree search"]
[themes.memory]
name = "Memory"
keywords = ["memory", "episodic", "retrieval"]
"""
)


def _placed(grouping) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {key: group.theme_key for group in grouping.groups for key in group.keys}


def test_a_computer_vision_feed_next_to_the_rl_feed_is_grouped_on_its_own() -> None:
    """18 vision papers beside the bundled RL feed: none lands under an RL theme (before, 15 went to
    world models and GANs to agent safety), while the RL feed keeps its themes."""
    rl = [Item(f"rl:{i.key}", i.title, i.summary, feed="rl")
          for week in list(feed_weeks(FIXTURES / "messagedaily-rl.xml").values())[-2:] for i in week]
    vision = [Item(f"cv:{i.key}", i.title, i.summary, feed="cv")
              for week in feed_weeks(FIXTURES / "dev" / "vision-en" / "vision-en.xml").values() for i in week][:18]
    grouping = group_week([*rl, *vision], load_themes())
    assert grouping.fits is not None
    assert grouping.fits["rl"].fits and not grouping.fits["cv"].fits
    placed = _placed(grouping)
    assert all(placed[item.key] is None for item in vision)
    assert sum(placed[item.key] is not None for item in rl) >= 0.7 * len(rl)  # two weeks in one cap of 8
    # no section mixes the two feeds
    for group in grouping.groups:
        if not group.catch_all:
            assert len({key.split(":")[0] for key in group.keys}) == 1, group.name


def _entry(key: str, n: int) -> Item:
    """An entry on planning by its keywords, about episodic recall by its other words."""
    return Item(key, f"Planning with lookahead over recalled episodes, study {n}",
                f"Tree search planning that replays recalled episodes from a forgetting-curve store, variant {n}.")


def test_entries_like_ones_the_editor_moved_follow_them() -> None:
    """Two weeks the editor moves such entries from Planning to Memory; in week three a new one
    lands in Memory, and --explain says whose example it followed."""
    week3 = [_entry("new", 9), Item("p", "Planning by tree search", "Lookahead planning with a value model.")]
    assert _placed(group_week(week3, THEMES))["new"] == "planning"
    labels = [EditorLabel(e.title, e.summary, "memory", week)
              for e, week in ((_entry("a", 1), "2026-W40"), (_entry("b", 2), "2026-W40"),
                              (_entry("c", 3), "2026-W41"), (_entry("d", 4), "2026-W41"))]
    # the feed's earlier weeks: what makes a word common in it
    history = [Item(f"h{n}", f"Lookahead planning for robots, note {n}",
                    f"Tree search planning for grasping, case {n}.") for n in range(8)]
    grouping = group_week(week3, THEMES, labels=labels, history=history)
    assert _placed(grouping)["new"] == "memory"
    assert _placed(grouping)["p"] == "planning"  # an entry unlike the labelled ones stays
    why = next(w for g in grouping.groups for w in g.explanations if w.key == "new")
    text = "\n".join(explanation_lines(why))
    assert "which the editor put in Memory in 2026-W4" in text and "like 'Planning with lookahead" in text


def test_a_reader_plugs_in_and_a_confident_one_decides() -> None:
    """A reader is a function appended to the list; ``Vote.decides`` overrides the others' points,
    and what it reads comes through ``Context.extra``."""
    def oracle(item: Item, context) -> Vote:  # type: ignore[no-untyped-def]
        answer = context.extra.get("oracle", {}).get(item.key)
        return Vote("oracle", decides=str(answer) if answer else None)

    week = [Item("p", "Planning by tree search", "Lookahead planning with a value model."),
            Item("q", "Planning with lookahead", "Tree search planning for agents.")]
    grouping = group_week(week, THEMES, readers=(*READERS, oracle), extra={"oracle": {"p": "memory"}})
    assert _placed(grouping) == {"p": "memory", "q": "planning"}
    why = next(w for g in grouping.groups for w in g.explanations if w.key == "p")
    assert [v.reader for v in why.votes] == ["keywords", "words", "feed", "editor", "oracle"]
    assert any("oracle decides memory" in line for line in explanation_lines(why))


def test_a_feed_the_keywords_miss_is_placed_when_a_confident_reader_decides_it() -> None:
    """Another field's feed whose words the themes' keywords miss is grouped by shared terms,
    unless a reader that decides (a confident language model) places most of its week: then
    its entries go under the themes the reader chose."""
    def oracle(item: Item, context) -> Vote:  # type: ignore[no-untyped-def]
        answer = context.extra.get("oracle", {}).get(item.key)
        return Vote("oracle", decides=str(answer) if answer else None)

    week = [Item(f"e{n}", f"Cohort study {n} of hospital admissions",
                 f"Admissions and discharge records, part {n}, cohort analysis.", feed="clinic")
            for n in range(6)]
    apart = group_week(week, THEMES, readers=(*READERS, oracle))
    assert all(theme is None for theme in _placed(apart).values())  # by shared terms: nothing fits
    answers = {f"e{n}": "memory" if n % 2 else "planning" for n in range(5)}  # 5 of 6 decided
    placed = group_week(week, THEMES, readers=(*READERS, oracle), extra={"oracle": answers})
    assert {key: _placed(placed)[key] for key in answers} == answers
    too_few = group_week(week, THEMES, readers=(*READERS, oracle), extra={"oracle": {"e0": "memory"}})
    assert all(theme is None for theme in _placed(too_few).values())
