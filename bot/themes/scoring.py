"""Scoring an entry against every theme with the themes file's keywords.

- **Title over summary.** A keyword in the title counts ``TITLE_WEIGHT``
  times a summary mention: a deep read's title states its subject, while its
  summary also names baselines, benchmarks and neighbouring ideas.
- **Longest match first.** All keywords are matched in one pass and the
  longest claims its characters, so "process reward model" is not also the
  shorter "process reward" of another theme.
- **Repeats show focus** in a summary, with diminishing returns.

Every point is recorded as a ``Hit``, so ``--explain`` can show where a score
came from.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from bot.themes.lexicon import TIER_WEIGHTS
from bot.themes.model import Hit, Item, ThemeScore, ThemeSet

TITLE_WEIGHT = 3.0  # a keyword in the title is worth this many summary mentions

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
    label: str  # as the themes file first writes it, for explanations
    anchor: str  # a literal piece every match contains: a cheap `in` test skips most regexes
    length: int  # letters in the keyword, so longer (more specific) matches win
    targets: tuple[tuple[int, float], ...]  # (theme index, weight)


@dataclass(frozen=True)
class _Lexicon:
    """All keywords of a theme set, bucketed by their literal anchor."""

    keywords: tuple[_Keyword, ...]
    by_anchor: tuple[tuple[str, tuple[int, ...]], ...]
    theme_count: int
    # anchors by their first two characters (one for one-character anchors): a
    # text only needs the anchors whose opening pair it contains
    by_opening: dict[str, tuple[tuple[str, tuple[int, ...]], ...]]


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
def lexicon(themes: ThemeSet) -> _Lexicon:
    """Compile every keyword once per theme set.

    A keyword written in several themes (or tiers) becomes one entry that
    scores for each of them, with the highest weight per theme.
    """
    by_pattern: dict[str, dict[int, float]] = {}
    labels: dict[str, str] = {}
    for index, theme in enumerate(themes.themes):
        for tier, weight in TIER_WEIGHTS.items():
            for keyword in getattr(theme, tier):
                pattern = keyword_pattern(keyword)
                weights = by_pattern.setdefault(pattern, {})
                weights[index] = max(weight, weights.get(index, 0.0))
                labels.setdefault(pattern, keyword.strip("*").strip())
    keywords = []
    for pattern in sorted(by_pattern):
        core = normalise_text(labels[pattern])
        keywords.append(
            _Keyword(
                regex=re.compile(pattern),
                label=labels[pattern],
                anchor=_anchor(core),
                length=sum(1 for char in core if char not in _SEPARATORS),
                targets=tuple(sorted(by_pattern[pattern].items())),
            )
        )
    buckets: dict[str, list[int]] = {}
    for number, keyword in enumerate(keywords):
        buckets.setdefault(keyword.anchor, []).append(number)
    by_anchor = tuple((anchor, tuple(numbers)) for anchor, numbers in sorted(buckets.items()))
    openings: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for anchor, numbers in by_anchor:
        openings.setdefault(anchor[:2], []).append((anchor, numbers))
    by_opening = {key: tuple(found) for key, found in openings.items()}
    return _Lexicon(tuple(keywords), by_anchor, len(themes.themes), by_opening)


def keyword_hits(lex: _Lexicon, text: str) -> Counter[int]:
    """Count hits per keyword in one text, longest match first."""
    normal = normalise_text(text)
    spans: list[tuple[int, int, int]] = []
    present = {normal[i : i + 2] for i in range(len(normal) - 1)} | set(normal)
    for opening in sorted(present & lex.by_opening.keys()):
        for anchor, numbers in lex.by_opening[opening]:
            if anchor in normal:
                for number in numbers:
                    for match in lex.keywords[number].regex.finditer(normal):
                        spans.append((match.start(), match.end(), number))
    if not spans:
        return Counter()
    spans.sort(key=lambda s: (-lex.keywords[s[2]].length, -(s[1] - s[0]), s[0], s[2]))
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


def score_details(item: Item, themes: ThemeSet, lex: _Lexicon | None = None) -> tuple[ThemeScore, ...]:
    """Score one item against every theme, with the hits behind each score
    (same order as the themes file). Pass ``lex`` (``lexicon(themes)``) when
    scoring many items: looking it up hashes the whole theme set."""
    lex = lex or lexicon(themes)
    hits: list[list[Hit]] = [[] for _ in range(lex.theme_count)]
    scores = [0.0] * lex.theme_count
    for text, field in ((item.title, "title"), (item.summary, "summary")):
        for number, count in sorted(keyword_hits(lex, text).items()):
            keyword = lex.keywords[number]
            credit = TITLE_WEIGHT if field == "title" else _summary_credit(count)
            for theme_index, weight in keyword.targets:
                points = weight * credit
                scores[theme_index] += points
                hits[theme_index].append(Hit(keyword.label, field, count, round(points, 3)))  # type: ignore[arg-type]
    return tuple(
        ThemeScore(theme.key, round(scores[i], 6), tuple(sorted(hits[i], key=lambda h: (-h.points, h.term))))
        for i, theme in enumerate(themes.themes)
    )


def score_item(item: Item, themes: ThemeSet) -> tuple[float, ...]:
    """Score one item against every theme (same order as the themes file)."""
    return tuple(detail.score for detail in score_details(item, themes))


def best_theme(scores: Sequence[float]) -> int:
    """Index of the best theme; ties go to the theme listed first in the file."""
    return min(range(len(scores)), key=lambda i: (-scores[i], i))
