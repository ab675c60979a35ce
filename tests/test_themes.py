"""Tests for bot.themes: loading the themes file and grouping a week's entries."""

from __future__ import annotations

import html
import random
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import feedparser
import pytest

from bot.errors import ThemesError
from bot.themes import (
    Group,
    Item,
    ThemeDef,
    ThemeSet,
    group_items,
    load_themes,
    parse_themes,
    score_item,
)

FIXTURE = Path(__file__).parent / "fixtures" / "messagedaily-rl.xml"
SHANGHAI = ZoneInfo("Asia/Shanghai")


# --- helpers -------------------------------------------------------------------


def _plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _fixture_weeks() -> dict[str, list[Item]]:
    """The fixture feed split into ISO weeks in Asia/Shanghai."""
    weeks: dict[str, list[Item]] = {}
    for entry in feedparser.parse(str(FIXTURE)).entries:
        year, month, day, hour, minute, second = entry.published_parsed[:6]
        when = datetime(year, month, day, hour, minute, second, tzinfo=UTC).astimezone(SHANGHAI)
        iso_year, iso_week, _ = when.isocalendar()
        item = Item(key=entry.id, title=_plain(entry.title), summary=_plain(entry.description))
        weeks.setdefault(f"{iso_year}-W{iso_week:02d}", []).append(item)
    return weeks


@pytest.fixture(scope="module")
def themes() -> ThemeSet:
    return load_themes()


@pytest.fixture(scope="module")
def weeks() -> dict[str, list[Item]]:
    return _fixture_weeks()


def _theme_of(groups: list[Group], key: str) -> str | None:
    return next(group.theme_key for group in groups if key in group.keys)


def _group_with_title(groups: list[Group], items: list[Item], prefix: str) -> Group:
    key = next(item.key for item in items if item.title.startswith(prefix))
    return next(group for group in groups if key in group.keys)


def _check_shape(groups: list[Group], items: list[Item], themes: ThemeSet) -> None:
    """The invariants every week must satisfy."""
    seen = Counter(key for group in groups for key in group.keys)
    assert sorted(seen) == sorted(item.key for item in items)
    assert all(count == 1 for count in seen.values()), "an item appears in two groups"
    assert len(groups) <= themes.max_sections
    assert all(group.keys for group in groups), "empty group"
    assert all(group.name.strip() for group in groups), "unnamed group"
    catch_alls = [index for index, group in enumerate(groups) if group.catch_all]
    assert len(catch_alls) <= 1
    if catch_alls:
        assert catch_alls == [len(groups) - 1], "catch-all must be last"
        assert groups[-1].theme_key is None
    sizes = [len(group.keys) for group in groups if not group.catch_all]
    assert sizes == sorted(sizes, reverse=True), "largest sections first"


# --- loading ------------------------------------------------------------------


def test_default_themes_cover_the_field(themes: ThemeSet) -> None:
    keys = [theme.key for theme in themes.themes]
    assert len(keys) == len(set(keys)) >= 10
    for expected in ("credit_assignment", "on_policy_distillation", "harness_engineering"):
        assert expected in keys
    assert themes.catch_all_name == "其他精读"
    assert themes.catch_all_name_en == "More deep reads"
    assert themes.max_sections == 8
    for theme in themes.themes:
        assert theme.name and theme.description
        assert len(theme.keywords) + len(theme.strong_keywords) >= 10, theme.key
        words = " ".join((*theme.keywords, *theme.strong_keywords))
        assert re.search(r"[\u4e00-\u9fff]", words), f"{theme.key} has no Chinese keywords"
        assert re.search(r"[A-Za-z]", words), f"{theme.key} has no English keywords"


def test_load_themes_from_path(tmp_path: Path) -> None:
    path = tmp_path / "themes.toml"
    path.write_text(
        '[settings]\nmax_sections = 4\n[catch_all]\nname = "杂项"\nname_en = "Misc"\n'
        '[themes.alpha]\nname = "甲"\nname_en = "Alpha"\ndescription = "d"\n'
        'keywords = ["alpha"]\n',
        encoding="utf-8",
    )
    loaded = load_themes(path)
    assert loaded.max_sections == 4
    assert (loaded.catch_all_name, loaded.catch_all_name_en) == ("杂项", "Misc")
    assert loaded.themes == (ThemeDef("alpha", "甲", "Alpha", "d", ("alpha",)),)
    assert load_themes(str(path)) == loaded


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[themes.a\nname = 'x'", "not valid TOML"),
        ("[catch_all]\nname = 'x'\n", "no [themes] table"),
        ("[themes]\n", "defines no themes"),
        ("[themes.a]\ndescription = 'd'\nkeywords = ['k']\n", "needs `name`"),
        ("[themes.a]\nname = 'x'\n", "has no keywords"),
        ("[themes.a]\nname = 'x'\nkeywords = 'k'\n", "must be a list"),
        ("[themes.a]\nname = 'x'\nkeywords = ['k', 3]\n", "non-string"),
        ("[themes.a]\nname = 'x'\nkeywords = ['k', ' - ']\n", "empty"),
        ("[themes.a]\nname = 'x'\nkeyword = ['k']\n", "unknown field(s) keyword"),
        ("[settings]\nmax_sections = 0\n[themes.a]\nname = 'x'\nkeywords = ['k']\n", ">= 1"),
    ],
)
def test_malformed_themes_file_names_file_and_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "broken-themes.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ThemesError) as caught:
        load_themes(path)
    assert str(path) in str(caught.value)
    assert problem in str(caught.value)


def test_missing_themes_file_names_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ThemesError, match="nope.toml"):
        load_themes(path)


# --- keyword matching -----------------------------------------------------------


def _score_of(themes: ThemeSet, key: str, title: str, summary: str = "") -> float:
    index = [theme.key for theme in themes.themes].index(key)
    return score_item(Item("k", title, summary), themes)[index]


def test_english_keywords_match_whole_words_case_insensitively(themes: ThemeSet) -> None:
    assert _score_of(themes, "reward_models", "A Better PRM for Math") > 0
    assert _score_of(themes, "reward_models", "Reward Models and Verifiers") > 0
    # "orm" is a reward-model keyword but must not fire inside "platform" or "form"
    assert _score_of(themes, "reward_models", "A new platform form factor") == 0
    for spelling in ("On-Policy Distillation", "on policy distillation", "ONPOLICY distillation"):
        assert _score_of(themes, "on_policy_distillation", spelling) > 0


def test_longest_keyword_wins_overlaps(themes: ThemeSet) -> None:
    # "process reward model" is a reward-model phrase; its "process reward" must not
    # also score for credit assignment
    assert _score_of(themes, "credit_assignment", "process reward model") == 0
    assert _score_of(themes, "credit_assignment", "process rewards from the first step") > 0


def test_title_weighs_more_than_summary(themes: ThemeSet) -> None:
    in_title = _score_of(themes, "multi_agent", "Multi-agent debate", "")
    in_summary = _score_of(themes, "multi_agent", "A study", "multi-agent debate")
    assert in_title > in_summary > 0


# --- grouping: field-level assignments ----------------------------------------------


def test_field_titles_land_in_their_themes(themes: ThemeSet) -> None:
    items = [
        Item("a1", "On-Policy Distillation with Noisy Teachers", "学生在自己的轨迹上接受教师监督。"),
        Item("a2", "在线策略蒸馏的数据效率精读", "OPD 只需一条样本。"),
        Item("b1", "Fine-Grained Credit Assignment for Long-Horizon Agents", "步级信用分配。"),
        Item("b2", "过程奖励：从第一个错误步学习", "把终局奖励分摊到每一步。"),
        Item("c1", "SWE-bench 上的编码智能体", "修 bug、写补丁。"),
        Item("c2", "Coding Agents that Test Their Own Patches", "repository-level unit tests"),
    ]
    groups = group_items(items, themes)
    assert _theme_of(groups, "a1") == _theme_of(groups, "a2") == "on_policy_distillation"
    assert _theme_of(groups, "b1") == _theme_of(groups, "b2") == "credit_assignment"
    assert _theme_of(groups, "c1") == _theme_of(groups, "c2") == "coding_agents"


def test_fixture_weeks_put_field_papers_together(themes: ThemeSet, weeks: dict[str, list[Item]]) -> None:
    w36 = weeks["2026-W36"]
    groups = group_items(w36, themes)
    credit = _group_with_title(groups, w36, "Cliff")
    assert credit.theme_key == "credit_assignment"
    assert _group_with_title(groups, w36, "VICT") is credit
    assert _group_with_title(groups, w36, "CAST") is credit
    assert _group_with_title(groups, w36, "Locked at the Entrance").theme_key == "exploration_data"

    w37 = weeks["2026-W37"]
    groups = group_items(w37, themes)
    distill = _group_with_title(groups, w37, "Rethinking On-Policy Distillation II")
    assert distill.theme_key == "on_policy_distillation"
    assert _group_with_title(groups, w37, "TGOPD") is distill


def test_lone_entry_goes_to_decent_second_theme_or_catch_all(themes: ThemeSet) -> None:
    items = [
        Item("s1", "Self-Play from Zero Data", "出题者与解题者自博弈、共进化。"),
        Item("s2", "Recursive Self-Improvement 精读", "自我改进循环。"),
        # best theme: on-policy distillation (alone this week); decent second: self-improvement
        Item("x", "On-Policy Distillation as Self-Improvement", "teacher-free self-improvement"),
        # alone in its theme and nowhere else decent
        Item("y", "Jailbreak Attacks on Tool-Using Agents", "prompt injection and malware"),
    ]
    groups = group_items(items, themes)
    assert [g.theme_key for g in groups] == ["self_improvement", None]
    assert set(groups[0].keys) == {"s1", "s2", "x"}
    assert groups[-1].catch_all and groups[-1].keys == ("y",)
    assert (groups[-1].name, groups[-1].name_en) == ("其他精读", "More deep reads")


def test_unthemed_entries_sharing_terms_get_a_derived_section(themes: ThemeSet) -> None:
    items = [
        Item("p1", "蛋白质折叠的结构预测", "蛋白质折叠 结构预测 氨基酸 序列 残基 接触图"),
        Item("p2", "蛋白质折叠新进展", "蛋白质折叠 氨基酸 残基 接触图 结构预测"),
        Item("w1", "天气预报与气候", "降水 气温 台风 季风"),
        Item("o1", "On-Policy Distillation I", "teacher student 蒸馏"),
        Item("o2", "On-Policy Distillation II", "teacher student 蒸馏"),
    ]
    groups = group_items(items, themes)
    derived = [g for g in groups if g.theme_key is None and not g.catch_all]
    assert len(derived) == 1
    assert set(derived[0].keys) == {"p1", "p2"}
    assert "蛋白质" in derived[0].name or "折叠" in derived[0].name
    assert groups[-1].catch_all and groups[-1].keys == ("w1",)


# --- grouping: invariants ---------------------------------------------------------


def test_empty_input_gives_no_groups(themes: ThemeSet) -> None:
    assert group_items([], themes) == []


def test_every_fixture_week_has_a_sound_shape(themes: ThemeSet, weeks: dict[str, list[Item]]) -> None:
    assert len(weeks) == 6
    for items in weeks.values():
        _check_shape(group_items(items, themes), items, themes)


def test_grouping_ignores_input_order(themes: ThemeSet, weeks: dict[str, list[Item]]) -> None:
    for items in weeks.values():
        expected = group_items(items, themes)
        for seed in range(5):
            shuffled = list(items)
            random.Random(seed).shuffle(shuffled)
            assert group_items(shuffled, themes) == expected


def test_max_sections_is_respected(themes: ThemeSet, weeks: dict[str, list[Item]]) -> None:
    tight = ThemeSet(
        themes=themes.themes,
        catch_all_name="其他",
        catch_all_name_en=None,
        max_sections=3,
    )
    for items in weeks.values():
        groups = group_items(items, tight)
        _check_shape(groups, items, tight)
        assert len(groups) <= 3
    single = ThemeSet(themes.themes, "其他", None, max_sections=1)
    items = weeks["2026-W36"]
    groups = group_items(items, single)
    assert len(groups) == 1 and groups[0].catch_all and len(groups[0].keys) == len(items)


def test_themes_without_english_names(tmp_path: Path) -> None:
    path = tmp_path / "zh-only.toml"
    path.write_text(
        '[catch_all]\nname = "其他"\nname_en = ""\n'
        '[themes.memory]\nname = "记忆"\ndescription = "记忆与技能"\nkeywords = ["记忆", "memory"]\n'
        '[themes.code]\nname = "代码"\ndescription = "代码智能体"\nkeywords = ["代码", "code"]\n',
        encoding="utf-8",
    )
    zh_only = load_themes(path)
    assert all(theme.name_en is None for theme in zh_only.themes)
    assert zh_only.catch_all_name_en is None
    items = [
        Item("m1", "长期记忆", "memory"),
        Item("m2", "Agent Memory", "记忆"),
        Item("c1", "代码生成", "code"),
        Item("z", "Unrelated", "nothing here"),
    ]
    groups = group_items(items, zh_only)
    assert [(g.name, g.name_en, g.theme_key) for g in groups] == [
        ("记忆", None, "memory"),
        ("其他", None, None),
    ]
    assert set(groups[-1].keys) == {"c1", "z"}


def test_duplicate_keys_are_rejected(themes: ThemeSet) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        group_items([Item("same", "a", ""), Item("same", "b", "")], themes)


# --- scale ------------------------------------------------------------------------


def _copies(items: list[Item], count: int) -> list[Item]:
    return [
        Item(key=f"{item.key}#{n}", title=f"{item.title} ({n})", summary=item.summary)
        for n in range(count // len(items) + 1)
        for item in items
    ][:count]


def test_four_hundred_items_group_into_a_valid_shape(themes: ThemeSet, weeks: dict[str, list[Item]]) -> None:
    # speed and scaling are measured by bench/digest.py, not by a timed unit test
    everything = [item for items in weeks.values() for item in items]
    many = _copies(everything, 400)
    groups = group_items(many, themes)
    _check_shape(groups, many, themes)


def test_parse_themes_text_without_a_file() -> None:
    parsed = parse_themes('[themes.a]\nname = "甲"\nkeywords = ["a"]\n', "inline")
    assert parsed.themes[0].name == "甲"
    assert parsed.catch_all_name == "其他精读"
