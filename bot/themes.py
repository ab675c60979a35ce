"""Sort one week's entries into a few named themes.

The digest reads best as a handful of meaningful sections, not a wall of
one-entry headings, so grouping happens in four deterministic steps:

1. **Score** every entry against every theme of the themes file with a
   weighted keyword lexicon (Chinese and English). Title hits count more than
   summary hits because a deep read's title states its subject, while its
   summary also names baselines, benchmarks and neighbouring ideas. All
   keywords are matched in one pass, longest match first, so a specific
   phrase ("process reward model") is not also counted as the shorter phrase
   inside it ("process reward") that belongs to another theme.
2. **Assign** each entry to its best theme if the score clears ``min_score``.
   Sections smaller than ``min_section_size`` are dissolved: their entries
   move to their next-best theme that already has entries (if the score there
   is decent), otherwise they become leftovers.
3. **Derive** sections among the leftovers that share salient terms (rjieba
   for Chinese, a regex for English), named after those terms.
4. **Cap** the number of sections at ``max_sections`` (the catch-all counts)
   by dissolving the smallest sections; whatever is left over goes into the
   catch-all section, which is always last.

Everything is sorted by stable keys (item key, theme file order, term text),
so the same entries give the same groups whatever order they arrive in.
"""

from __future__ import annotations

import math
import re
import tomllib
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from bot.errors import ThemesError

# --- public data types ------------------------------------------------------


@dataclass(frozen=True)
class ThemeDef:
    """One theme from the themes file.

    ``keywords`` carry normal weight; ``strong_keywords`` are phrases that
    almost only occur when an entry is about this theme; ``weak_keywords`` are
    hints that are common elsewhere too and only tip the balance.
    """

    key: str
    name: str
    name_en: str | None
    description: str
    keywords: tuple[str, ...]
    strong_keywords: tuple[str, ...] = ()
    weak_keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThemeSet:
    """All themes plus the knobs that shape a week's sections."""

    themes: tuple[ThemeDef, ...]
    catch_all_name: str
    catch_all_name_en: str | None
    max_sections: int = 8
    catch_all_description: str = ""
    min_section_size: int = 2
    min_score: float = 3.0


@dataclass(frozen=True)
class Item:
    """One feed entry as plain text."""

    key: str
    title: str
    summary: str
    papers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """One section of the digest."""

    name: str
    name_en: str | None
    description: str
    catch_all: bool
    keys: tuple[str, ...]
    theme_key: str | None


# --- loading the themes file ------------------------------------------------

DEFAULT_THEMES_LABEL = "bot/data/themes.toml (packaged default)"

# How much one keyword hit is worth, by the list it is written in.
TIER_WEIGHTS: Mapping[str, float] = {
    "strong_keywords": 2.0,
    "keywords": 1.0,
    "weak_keywords": 0.4,
}
_THEME_FIELDS = frozenset({"name", "name_en", "description", *TIER_WEIGHTS})
_SETTINGS_FIELDS = frozenset({"max_sections", "min_section_size", "min_score"})
_CATCH_ALL_FIELDS = frozenset({"name", "name_en", "description"})
_TOP_LEVEL_FIELDS = frozenset({"settings", "catch_all", "themes"})
_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+$")


def load_themes(path: str | Path | None = None) -> ThemeSet:
    """Read a themes file; ``None`` reads the default shipped in the package.

    Every problem is reported as a ``ThemesError`` naming the file, because the
    person who sees it is the admin who edited that file.
    """
    if path is None:
        label = DEFAULT_THEMES_LABEL
        resource = resources.files("bot").joinpath("data", "themes.toml")
        try:
            text = resource.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ThemesError(f"themes file {label} cannot be read: {exc}") from exc
    else:
        label = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise ThemesError(
                f"themes file {label} not found",
                hint="check the path, or leave it unset to use the default themes",
            ) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ThemesError(f"themes file {label} cannot be read: {exc}") from exc
    return parse_themes(text, label)


def parse_themes(text: str, label: str = "<themes>") -> ThemeSet:
    """Parse and validate the TOML text of a themes file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemesError(f"themes file {label} is not valid TOML: {exc}") from exc
    _reject_unknown(data, _TOP_LEVEL_FIELDS, label, "the top level")
    settings = _table(data, "settings", label, required=False)
    _reject_unknown(settings, _SETTINGS_FIELDS, label, "[settings]")
    catch_all = _table(data, "catch_all", label, required=False)
    _reject_unknown(catch_all, _CATCH_ALL_FIELDS, label, "[catch_all]")
    themes_table = _table(data, "themes", label, required=True)
    if not themes_table:
        raise ThemesError(f"themes file {label} defines no themes under [themes]")
    themes = tuple(_parse_theme(key, value, label) for key, value in themes_table.items())
    return ThemeSet(
        themes=themes,
        catch_all_name=_text(catch_all, "name", label, "[catch_all]", default="其他精读"),
        catch_all_name_en=_optional_text(catch_all, "name_en", label, "[catch_all]", default="More deep reads"),
        catch_all_description=_text(catch_all, "description", label, "[catch_all]", default="", allow_empty=True),
        max_sections=_int_setting(settings, "max_sections", label, default=8, minimum=1),
        min_section_size=_int_setting(settings, "min_section_size", label, default=2, minimum=1),
        min_score=_float_setting(settings, "min_score", label, default=3.0),
    )


def _parse_theme(key: str, value: Any, label: str) -> ThemeDef:
    where = f"[themes.{key}]"
    if not isinstance(value, dict):
        raise ThemesError(f"themes file {label}: {where} must be a table")
    if not _KEY_RE.match(key):
        raise ThemesError(f"themes file {label}: theme key {key!r} may only use A-Z, 0-9, _ and -")
    _reject_unknown(value, _THEME_FIELDS, label, where)
    tiers = {tier: _keyword_list(value, tier, label, where) for tier in TIER_WEIGHTS}
    if not any(tiers.values()):
        raise ThemesError(
            f"themes file {label}: {where} has no keywords",
            hint="add a `keywords = [...]` list",
        )
    return ThemeDef(
        key=key,
        name=_text(value, "name", label, where),
        name_en=_optional_text(value, "name_en", label, where, default=None),
        description=_text(value, "description", label, where, default="", allow_empty=True),
        keywords=tiers["keywords"],
        strong_keywords=tiers["strong_keywords"],
        weak_keywords=tiers["weak_keywords"],
    )


def _reject_unknown(table: Mapping[str, Any], allowed: frozenset[str], label: str, where: str) -> None:
    """Fail on unknown fields: a typo like `keyword =` would otherwise be ignored silently."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ThemesError(
            f"themes file {label}: unknown field(s) {', '.join(unknown)} in {where}",
            hint=f"allowed: {', '.join(sorted(allowed))}",
        )


def _table(data: Mapping[str, Any], name: str, label: str, *, required: bool) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        if required:
            raise ThemesError(f"themes file {label} has no [{name}] table")
        return {}
    if not isinstance(value, dict):
        raise ThemesError(f"themes file {label}: `{name}` must be a table")
    return value


def _text(
    table: Mapping[str, Any],
    field: str,
    label: str,
    where: str,
    *,
    default: str | None = None,
    allow_empty: bool = False,
) -> str:
    value = table.get(field, default)
    if value is None:
        raise ThemesError(f"themes file {label}: {where} needs `{field}`")
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a non-empty string")
    return value.strip()


def _optional_text(table: Mapping[str, Any], field: str, label: str, where: str, *, default: str | None) -> str | None:
    value = table.get(field, default)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a string")
    return value.strip() or None


def _keyword_list(table: Mapping[str, Any], field: str, label: str, where: str) -> tuple[str, ...]:
    value = table.get(field, [])
    if not isinstance(value, list):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a list of strings")
    words: list[str] = []
    for word in value:
        if not isinstance(word, str) or not re.search(r"[^\s\-_*]", word):
            raise ThemesError(f"themes file {label}: {where} `{field}` has an empty or non-string entry")
        words.append(word.strip())
    return tuple(words)


def _int_setting(table: Mapping[str, Any], field: str, label: str, *, default: int, minimum: int) -> int:
    value = table.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ThemesError(f"themes file {label}: [settings] `{field}` must be an integer >= {minimum}")
    return value


def _float_setting(table: Mapping[str, Any], field: str, label: str, *, default: float) -> float:
    value = table.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ThemesError(f"themes file {label}: [settings] `{field}` must be a number >= 0")
    return float(value)


# --- keyword scoring ----------------------------------------------------------

TITLE_WEIGHT = 3.0  # a keyword in the title is worth this many summary mentions
SECONDARY_RATIO = 0.5  # a fallback theme must score at least this share of the best one

_SEPARATORS = " -_"
_SEPARATOR_RE = r"[\s\-_]?"


def normalise_text(text: str) -> str:
    """NFKC + casefold so full-width letters and case never hide a keyword."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _is_word_char(char: str) -> bool:
    return char.isascii() and char.isalnum()


def keyword_pattern(keyword: str) -> str:
    """Regex for one keyword.

    English words need word boundaries ("rm" must not hit "form") and may be
    plural; Chinese has no spaces, so Chinese keywords match as substrings.
    Spaces and hyphens are interchangeable and optional ("on-policy",
    "on policy", "onpolicy"), and a space is optional where the script
    changes ("RL环境" / "RL 环境"). A leading or trailing ``*`` drops the
    boundary on that side ("*bench" also hits "SWE-bench", "ReproBench").
    """
    word = normalise_text(keyword)
    open_left, open_right = word.startswith("*"), word.endswith("*")
    core = word.strip("*").strip()
    parts: list[str] = []
    previous = ""
    for char in core:
        if char in _SEPARATORS:
            if parts and parts[-1] != _SEPARATOR_RE:
                parts.append(_SEPARATOR_RE)
        else:
            if previous and previous not in _SEPARATORS and (_is_word_char(previous) != _is_word_char(char)):
                parts.append(r"\s?")
            parts.append(re.escape(char))
        previous = char
    left = r"(?<![a-z0-9])" if _is_word_char(core[0]) and not open_left else ""
    if not _is_word_char(core[-1]) or open_right:
        right = ""
    elif core[-1].isalpha():
        right = r"(?:e?s)?(?![a-z0-9])"
    else:
        right = r"(?![a-z0-9])"
    return left + "".join(parts) + right


@dataclass(frozen=True)
class _Keyword:
    """One compiled keyword and the themes it scores for."""

    regex: re.Pattern[str]
    anchor: str  # a literal piece every match contains: a cheap `in` test skips most regexes
    length: int  # letters in the keyword, so longer (more specific) matches win
    targets: tuple[tuple[int, float], ...]  # (theme index, weight)


@dataclass(frozen=True)
class _Lexicon:
    """All keywords of a theme set, bucketed by their literal anchor."""

    keywords: tuple[_Keyword, ...]
    by_anchor: tuple[tuple[str, tuple[int, ...]], ...]
    theme_count: int


def _anchor(core: str) -> str:
    """The longest piece of a keyword that must appear literally in any match."""
    pieces: list[str] = []
    current = ""
    for char in core:
        if char in _SEPARATORS or (current and _is_word_char(current[-1]) != _is_word_char(char)):
            if current:
                pieces.append(current)
            current = "" if char in _SEPARATORS else char
        else:
            current += char
    if current:
        pieces.append(current)
    return max(pieces, key=len)


@lru_cache(maxsize=16)
def _lexicon(themes: ThemeSet) -> _Lexicon:
    """Compile every keyword once per theme set.

    A keyword written in several themes (or tiers) becomes one entry that
    scores for each of them, with the highest weight per theme.
    """
    by_pattern: dict[str, dict[int, float]] = {}
    cores: dict[str, str] = {}
    for index, theme in enumerate(themes.themes):
        for tier, weight in TIER_WEIGHTS.items():
            for keyword in getattr(theme, tier):
                pattern = keyword_pattern(keyword)
                weights = by_pattern.setdefault(pattern, {})
                weights[index] = max(weight, weights.get(index, 0.0))
                cores.setdefault(pattern, normalise_text(keyword).strip("*").strip())
    keywords = tuple(
        _Keyword(
            regex=re.compile(pattern),
            anchor=_anchor(cores[pattern]),
            length=sum(1 for char in cores[pattern] if char not in _SEPARATORS),
            targets=tuple(sorted(by_pattern[pattern].items())),
        )
        for pattern in sorted(by_pattern)
    )
    buckets: dict[str, list[int]] = {}
    for number, keyword in enumerate(keywords):
        buckets.setdefault(keyword.anchor, []).append(number)
    by_anchor = tuple((anchor, tuple(numbers)) for anchor, numbers in sorted(buckets.items()))
    return _Lexicon(keywords, by_anchor, len(themes.themes))


def _keyword_hits(lexicon: _Lexicon, text: str) -> Counter[int]:
    """Count hits per keyword in one text, longest match first.

    Overlapping matches are resolved globally: the longest keyword claims its
    characters, so "process reward model" is not also "process reward".
    """
    normal = normalise_text(text)
    spans: list[tuple[int, int, int]] = []
    for anchor, numbers in lexicon.by_anchor:
        if anchor not in normal:
            continue
        for number in numbers:
            keyword = lexicon.keywords[number]
            for match in keyword.regex.finditer(normal):
                spans.append((match.start(), match.end(), number))
    spans.sort(key=lambda s: (-lexicon.keywords[s[2]].length, -(s[1] - s[0]), s[0], s[2]))
    taken = bytearray(len(normal))
    hits: Counter[int] = Counter()
    for start, end, number in spans:
        if end > start and not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            hits[number] += 1
    return hits


def _summary_credit(count: int) -> float:
    """Repeated mentions show focus, but with diminishing returns."""
    return 1.0 + 0.5 * (min(count, 3) - 1)


def score_item(item: Item, themes: ThemeSet) -> tuple[float, ...]:
    """Score one item against every theme (same order as the themes file)."""
    lexicon = _lexicon(themes)
    scores = [0.0] * lexicon.theme_count
    fields = [(item.title, TITLE_WEIGHT, False)]
    fields.append((item.summary, 1.0, True))
    for text, field_weight, repeats_count in fields:
        for number, count in _keyword_hits(lexicon, text).items():
            credit = field_weight * (_summary_credit(count) if repeats_count else 1.0)
            for theme_index, weight in lexicon.keywords[number].targets:
                scores[theme_index] += weight * credit
    return tuple(round(score, 6) for score in scores)


# --- assignment ---------------------------------------------------------------


@dataclass(frozen=True)
class _Scored:
    item: Item
    scores: tuple[float, ...]

    @property
    def best(self) -> int:
        """Index of the best theme; ties go to the theme listed first in the file."""
        return min(range(len(self.scores)), key=lambda i: (-self.scores[i], i))

    @property
    def best_score(self) -> float:
        return self.scores[self.best]


def _fallback_theme(entry: _Scored, open_themes: Iterable[int], min_score: float) -> int | None:
    """The best other theme that is still open and where the entry scores decently."""
    floor = max(min_score, SECONDARY_RATIO * entry.best_score)
    candidates = [t for t in open_themes if entry.scores[t] >= floor]
    if not candidates:
        return None
    return min(candidates, key=lambda t: (-entry.scores[t], t))


def _assign(scored: Sequence[_Scored], themes: ThemeSet) -> tuple[dict[int, list[_Scored]], list[_Scored]]:
    """Best-theme assignment, then dissolve sections that are too small.

    The smallest section is dissolved first; its entries move to their best
    other theme that still has entries, so two lone entries that fit one
    shared theme end up together instead of both in the catch-all.
    """
    members: dict[int, list[_Scored]] = {}
    leftovers: list[_Scored] = []
    for entry in scored:
        if entry.best_score >= themes.min_score:
            members.setdefault(entry.best, []).append(entry)
        else:
            leftovers.append(entry)
    while True:
        small = [t for t, group in members.items() if len(group) < themes.min_section_size]
        if not small:
            break
        victim = min(small, key=lambda t: _dissolve_first(t, members, themes.min_score))
        for entry in members.pop(victim):
            target = _fallback_theme(entry, sorted(members), themes.min_score)
            if target is None:
                leftovers.append(entry)
            else:
                members[target].append(entry)
    return members, leftovers


def _dissolve_first(
    theme: int, members: Mapping[int, Sequence[_Scored]], min_score: float
) -> tuple[bool, int, float, int]:
    """Which small section to dissolve first.

    Sections whose entries all have somewhere decent to go come first: when a
    lone entry joins another lone entry's theme, both are saved. Then the
    smallest, the weakest, and the later in the file.
    """
    others = [t for t in sorted(members) if t != theme]
    stranded = any(_fallback_theme(e, others, min_score) is None for e in members[theme])
    return (stranded, len(members[theme]), _group_strength(members[theme]), -theme)


def _group_strength(entries: Sequence[_Scored]) -> float:
    return sum(entry.best_score for entry in entries)


# --- derived sections among leftovers -------------------------------------------

_EN_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*")


def _words(text: str) -> list[str]:
    return text.split()


_CJK_RE = re.compile(r"^[\u4e00-\u9fff]{2,}$")
_EN_STOPWORDS = frozenset(
    _words(
        """a an and are as at be by can do does for from how in into is it its of on or
    the their this to via vs what when where which with without why not just new
    llm llms model models agent agents agentic learning reinforcement rl training train
    language large paper deep read reading study towards toward using based approach
    method methods framework efficient scaling task tasks data performance over under
    beyond through across between more less one two three all any only really"""
    )
)
_ZH_STOPWORDS = frozenset(
    _words(
        """精读 合读 本文 本篇 论文 两篇 三篇 四篇 一篇 同日 同期 方法 模型 大模型 智能体 训练
    强化 学习 强化学习 提出 通过 实现 基准 提升 任务 结果 实验 性能 机制 框架 设计 发现
    能力 分析 证据 研究 团队 大学 联合 合作 首次 核心 关键 推理 一个 两个 三个 我们 这篇
    以及 同时 进行 使用 基于 其中 之间 作者 覆盖 拆解 结构 灵感 可迁移 机构 实验室 问题
    解法 背景 定位 动机 部分 九部分 外部 交叉 验证 根源 知识 反推 通用 全文 深度 系统 现有
    方案 场景 效果 显著 超过 超越 达到 平均 相对 百分点 样本 基线 最强 开源 证明 给出
    这一 这种 一种 没有 不是 而是 就是 可以 需要 如何 什么 为什么 以及 并且 而且 因为 所以
    主流 不同 相同 同一 更新 优化 策略 信号 奖励 方向 完整 因果 因果链 链条 评测 证据链
    二重奏 三重奏 四重奏 双视角 甚至 正确 目标 质量 直接 实测 何时 新范式 范式 路线 两条
    三条 视角 互补 共同 指向 反直觉 一致 全面 大幅"""
    )
)
_MIN_COHESION = 0.12  # cosine of each member with the rest of its derived section
_MAX_DF_SHARE = 0.5  # terms in more than this share of the week are too common to name a topic


@dataclass(frozen=True)
class _Terms:
    weights: dict[str, float]  # term -> tf-idf
    salient: frozenset[str]  # terms in the title or mentioned repeatedly
    surface: dict[str, str]  # term -> how it was written (for naming)


@lru_cache(maxsize=4)
def _theme_phrases(themes: ThemeSet) -> frozenset[str]:
    """The themes' Chinese keywords, to re-join what jieba splits (信用 / 分配)."""
    return frozenset(
        word
        for theme in themes.themes
        for keyword in (*theme.strong_keywords, *theme.keywords, *theme.weak_keywords)
        if _CJK_RE.match(word := keyword.strip("* "))
    )


def _join_phrases(tokens: Sequence[str], phrases: frozenset[str]) -> list[str]:
    """Greedily merge up to four adjacent tokens that spell a theme phrase.

    Cheaper than loading a second jieba dictionary, and leaves the shared
    default dictionary untouched for other modules.
    """
    joined: list[str] = []
    index = 0
    while index < len(tokens):
        for span in range(min(4, len(tokens) - index), 1, -1):
            candidate = "".join(tokens[index : index + span])
            if candidate in phrases:
                joined.append(candidate)
                index += span
                break
        else:
            joined.append(tokens[index])
            index += 1
    return joined


def _raw_terms(item: Item, cut: Callable[[str], list[str]]) -> tuple[Counter[str], set[str], dict[str, str]]:
    """Term counts of one item; title terms count double."""
    counts: Counter[str] = Counter()
    in_title: set[str] = set()
    surface: dict[str, str] = {}
    # papers are not scored on their own: their names come from the title
    texts = [(item.title, 2, True)]
    texts.append((item.summary, 1, False))
    for text, weight, is_title in texts:
        plain = unicodedata.normalize("NFKC", text)
        for token in _tokens(plain, cut):
            term = token.casefold()
            counts[term] += weight
            surface.setdefault(term, token)
            if is_title:
                in_title.add(term)
    return counts, in_title, surface


def _tokens(text: str, cut: Callable[[str], list[str]]) -> list[str]:
    """English words by regex and Chinese words by rjieba, stopwords removed."""
    tokens = [
        match.group(0)
        for match in _EN_TOKEN_RE.finditer(text)
        if len(match.group(0)) >= 3 and match.group(0).casefold() not in _EN_STOPWORDS
    ]
    tokens += [
        word for word in cut(re.sub(r"[A-Za-z0-9]+", " ", text)) if _CJK_RE.match(word) and word not in _ZH_STOPWORDS
    ]
    return tokens


def _term_vectors(items: Sequence[Item], themes: ThemeSet) -> tuple[dict[str, _Terms], dict[str, float]]:
    """TF-IDF vectors with IDF taken over the whole week, so a term common to
    the week (e.g. GRPO) does not glue unrelated leftovers together."""
    import rjieba  # imported lazily: loading its dictionary takes ~0.2 s

    phrases = _theme_phrases(themes)

    def cut(text: str) -> list[str]:
        return _join_phrases(rjieba.cut(text), phrases)

    raw = {item.key: _raw_terms(item, cut) for item in items}
    doc_freq: Counter[str] = Counter()
    for counts, _, _ in raw.values():
        doc_freq.update(counts.keys())
    total = len(items)
    idf = {
        term: math.log((1 + total) / (1 + df)) + 1.0
        for term, df in doc_freq.items()
        if df <= max(2, _MAX_DF_SHARE * total)
    }
    vectors: dict[str, _Terms] = {}
    for key, (counts, in_title, surface) in raw.items():
        weights = {term: (1.0 + math.log(count)) * idf[term] for term, count in counts.items() if term in idf}
        salient = frozenset(t for t in weights if t in in_title or counts[t] >= 2)
        vectors[key] = _Terms(weights, salient, surface)
    return vectors, idf


def _derive_groups(
    leftovers: Sequence[_Scored], week: Sequence[Item], themes: ThemeSet
) -> tuple[list[tuple[str, str | None, list[Item]]], list[_Scored]]:
    """Group leftovers that share a salient term and read alike.

    Anchor terms are tried from the most widely shared down (ties: rarer term
    first, then alphabetical), so the cost stays linear in the number of term
    mentions rather than quadratic in the number of entries.
    """
    if len(leftovers) < 2:
        return [], list(leftovers)
    vectors, idf = _term_vectors(week, themes)
    postings: dict[str, list[str]] = {}
    for entry in leftovers:
        for term in vectors[entry.item.key].salient:
            postings.setdefault(term, []).append(entry.item.key)
    by_key = {entry.item.key: entry for entry in leftovers}
    anchors = sorted(
        (t for t, keys in postings.items() if len(keys) >= 2),
        key=lambda t: (-len(postings[t]), -idf[t], t),
    )
    taken: set[str] = set()
    derived: list[tuple[str, str | None, list[Item]]] = []
    for anchor in anchors:
        keys = sorted(k for k in postings[anchor] if k not in taken)
        cohesive = _cohesive_subset(keys, vectors)
        if len(cohesive) < 2:
            continue
        taken.update(cohesive)
        name, name_en = _derived_name(anchor, cohesive, vectors)
        derived.append((name, name_en, [by_key[k].item for k in cohesive]))
    rest = [entry for entry in leftovers if entry.item.key not in taken]
    return derived, rest


def _cohesive_subset(keys: Sequence[str], vectors: Mapping[str, _Terms]) -> list[str]:
    """Keep the entries that read like the rest of the candidate section.

    Each entry is compared with the sum of the others; using
    |C - v|^2 = |C|^2 - 2 v.C + |v|^2 keeps this linear in the section size.
    """
    if len(keys) < 2:
        return list(keys)
    centroid: Counter[str] = Counter()
    for key in keys:
        centroid.update(vectors[key].weights)
    centroid_sq = sum(w * w for w in centroid.values())
    kept = []
    for key in keys:
        own = vectors[key].weights
        own_sq = sum(w * w for w in own.values())
        dot = sum(w * centroid[t] for t, w in own.items())
        rest_sq = max(centroid_sq - 2 * dot + own_sq, 0.0)
        norm = math.sqrt(own_sq * rest_sq)
        if norm and (dot - own_sq) / norm >= _MIN_COHESION:
            kept.append(key)
    return kept


def _derived_name(anchor: str, keys: Sequence[str], vectors: Mapping[str, _Terms]) -> tuple[str, str | None]:
    """Name a derived section after its anchor and the next most shared term."""
    shared: dict[str, float] = {}
    present: Counter[str] = Counter()
    for key in keys:
        for term in vectors[key].salient:
            shared[term] = shared.get(term, 0.0) + vectors[key].weights[term]
            present[term] += 1
    others = sorted(
        (t for t in shared if present[t] >= 2 and t not in anchor and anchor not in t),
        key=lambda t: (-present[t], -shared[t], t),
    )
    terms = [anchor, *others[:1]]
    surface = {t: _surface(t, keys, vectors) for t in terms}
    name = " / ".join(surface[t] for t in terms)
    english = [surface[t] for t in terms if t.isascii()]
    return name, (" / ".join(english) if english else None)


def _surface(term: str, keys: Sequence[str], vectors: Mapping[str, _Terms]) -> str:
    for key in keys:
        if term in vectors[key].surface:
            return vectors[key].surface[term]
    return term


# --- building the sections ---------------------------------------------------------


@dataclass
class _Section:
    """A section while the week is being laid out."""

    name: str
    name_en: str | None
    description: str
    theme_index: int | None  # None for derived sections
    entries: list[_Scored]


def group_items(items: Sequence[Item], themes: ThemeSet) -> list[Group]:
    """Group one week's items into at most ``themes.max_sections`` sections."""
    if not items:
        return []
    ordered = sorted(items, key=lambda item: item.key)
    _check_unique_keys(ordered)
    scored = [_Scored(item, score_item(item, themes)) for item in ordered]
    members, leftovers = _assign(scored, themes)
    sections = [
        _Section(
            name=themes.themes[t].name,
            name_en=themes.themes[t].name_en,
            description=themes.themes[t].description,
            theme_index=t,
            entries=entries,
        )
        for t, entries in sorted(members.items())
    ]
    derived, catch_all = _derive_groups(leftovers, ordered, themes)
    score_of = {entry.item.key: entry for entry in scored}
    for name, name_en, group_items_ in derived:
        sections.append(
            _Section(
                name=name,
                name_en=name_en,
                description=f"按共享关键词自动归组：{name}",
                theme_index=None,
                entries=[score_of[item.key] for item in group_items_],
            )
        )
    sections, catch_all = _enforce_cap(sections, catch_all, themes)
    return _render(sections, catch_all, themes)


def _check_unique_keys(items: Sequence[Item]) -> None:
    for first, second in zip(items, items[1:], strict=False):
        if first.key == second.key:
            raise ValueError(f"duplicate item key {first.key!r}: every item needs its own key")


def _enforce_cap(
    sections: list[_Section], catch_all: list[_Scored], themes: ThemeSet
) -> tuple[list[_Section], list[_Scored]]:
    """Dissolve the smallest sections until the week fits ``max_sections``.

    Entries of a dissolved section move to a kept theme where they score
    decently, else to the catch-all (which counts as a section itself).
    """
    sections = list(sections)
    catch_all = list(catch_all)
    while sections and len(sections) + (1 if catch_all else 0) > themes.max_sections:
        victim = min(sections, key=_dissolve_order)
        sections.remove(victim)
        kept = {s.theme_index: s for s in sections if s.theme_index is not None}
        for entry in victim.entries:
            target = _fallback_theme(entry, sorted(kept), themes.min_score)
            if target is None:
                catch_all.append(entry)
            else:
                kept[target].entries.append(entry)
    return sections, catch_all


def _dissolve_order(section: _Section) -> tuple[int, int, float, int, str]:
    """Smallest first; among equals derived before defined, weaker before stronger,
    later in the themes file before earlier."""
    derived = section.theme_index is None
    return (
        len(section.entries),
        0 if derived else 1,
        _group_strength(section.entries),
        -(section.theme_index if section.theme_index is not None else 0),
        section.name,
    )


def _render(sections: Sequence[_Section], catch_all: Sequence[_Scored], themes: ThemeSet) -> list[Group]:
    """Largest sections first (ties: file order, then derived by name); catch-all last."""

    def order(section: _Section) -> tuple[int, int, int, str]:
        if section.theme_index is None:
            return (-len(section.entries), 1, 0, section.name)
        return (-len(section.entries), 0, section.theme_index, section.name)

    groups = []
    for section in sorted(sections, key=order):
        theme_key = None if section.theme_index is None else themes.themes[section.theme_index].key
        if section.theme_index is None:
            entries = sorted(section.entries, key=_by_title)
        else:
            entries = sorted(section.entries, key=_by_score_in(section.theme_index))
        groups.append(
            Group(
                name=section.name,
                name_en=section.name_en,
                description=section.description,
                catch_all=False,
                keys=tuple(entry.item.key for entry in entries),
                theme_key=theme_key,
            )
        )
    if catch_all:
        groups.append(
            Group(
                name=themes.catch_all_name,
                name_en=themes.catch_all_name_en,
                description=themes.catch_all_description,
                catch_all=True,
                keys=tuple(entry.item.key for entry in sorted(catch_all, key=_by_title)),
                theme_key=None,
            )
        )
    return groups


def _by_score_in(theme: int) -> Callable[[_Scored], tuple[float, str, str]]:
    """Sort key: the entries that fit the theme best come first."""

    def key(entry: _Scored) -> tuple[float, str, str]:
        return (-entry.scores[theme], *_by_title(entry))

    return key


def _by_title(entry: _Scored) -> tuple[str, str]:
    return (normalise_text(entry.item.title), entry.item.key)
