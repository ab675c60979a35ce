"""A starter themes file from a feed's own entries (`digestbot themes suggest`).

The entries are clustered by shared distinctive terms (``bot.themes.derive``),
loosening the threshold step by step until at most ``MAX_THEMES`` clusters
remain: a theme should gather one topic across many weeks, and a topic split
over two themes lands in two sections. Every cluster of at least ``min_size``
entries becomes a theme:

- its **name** is the cluster's naming terms ("concurrency control / MVCC");
- its **strong keywords** are the terms that are concentrated in it: most of
  their mentions are in the cluster's entries, several of them in titles;
- its **keywords** are the other terms its members share;
- neither is an everyday word ("估计", "测试", "models"): in Chinese a keyword
  matches anywhere in the text, so a common one pulls every entry in;
- a Chinese word jieba cut in two is one keyword ("信用分配", not "信用", "分配");
- its **description** is left empty, for the operator to write.

The result is TOML text: deterministic for the same entries, and meant to be
edited (rename, merge, add keywords) before `DIGESTBOT_THEMES_FILE` points at it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bot.themes.common_words import specificity
from bot.themes.derive import Cluster, cluster_items
from bot.themes.model import Item
from bot.themes.terms import CJK_CHAR_RE, Vocabulary, Weighted, one_chinese_word, weigh

SUGGEST_THRESHOLDS = (0.15, 0.12, 0.1, 0.08, 0.06)  # looser than a week's: themes span many weeks
MAX_THEMES = 8  # a week shows at most max_sections; more themes than that split topics
STRONG_PER_THEME = 6
KEYWORDS_PER_THEME = 12
# everyday words ("估计", "测试", "models") are not written as keywords: a Chinese keyword matches anywhere
# in a text, so a common one pulls every entry in (bot.themes.common_words; 0.5 is a Zipf frequency of 4.75)
KEYWORD_SPECIFICITY = 0.5


@dataclass(frozen=True)
class SuggestedTheme:
    """One theme of a suggested file."""

    key: str
    name: str
    strong_keywords: tuple[str, ...]
    keywords: tuple[str, ...]
    size: int
    examples: tuple[str, ...]  # a few member titles, as a comment for the operator


def detect_language(items: Sequence[Item]) -> str:
    """``zh`` when most entries' titles or summaries are Chinese, else ``en``."""
    chinese = sum(bool(CJK_CHAR_RE.search(item.title + item.summary[:80])) for item in items)
    return "zh" if chinese * 2 > len(items) else "en"


def suggest(items: Sequence[Item], *, min_size: int | None = None) -> list[SuggestedTheme]:
    """Themes for ``items``, largest first."""
    if len(items) < 2:
        return []
    vocab = Vocabulary()
    weighted = weigh(items, vocab)
    floor = min_size or max(2, math.ceil(0.03 * len(items)))
    for threshold in SUGGEST_THRESHOLDS:
        clusters = [c for c in cluster_items(items, vocab, threshold=threshold, weighted=weighted)
                    if len(c.keys) >= floor]
        if len(clusters) <= MAX_THEMES:
            break
    clusters = clusters[:MAX_THEMES]
    titles = {item.key: item.title for item in items}
    texts = {item.key: f"{item.title} {item.summary}" for item in items}
    themes: list[SuggestedTheme] = []
    used_keys: set[str] = set()
    for cluster in clusters:
        strong, plain = _joined_words(*_keywords(cluster, weighted, vocab), [texts[k] for k in cluster.keys])
        if not strong and not plain:
            continue
        key = _unique_key(_slug(cluster.terms[0] if cluster.terms else "theme"), used_keys)
        examples = tuple(sorted(titles[k] for k in cluster.keys)[:3])
        themes.append(SuggestedTheme(key, cluster.name or key, strong, plain, len(cluster.keys), examples))
    return themes


def _keywords(cluster: Cluster, weighted: Weighted, vocab: Vocabulary) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Terms the cluster's members share, most concentrated first."""
    members = set(cluster.keys)
    inside: Counter[str] = Counter()
    in_title: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    for key, found in weighted.terms.items():
        for term in found.counts:
            if term not in weighted.idf:
                continue
            if key in members:
                inside[term] += 1
                in_title[term] += term in found.in_title
            else:
                outside[term] += 1
    scored = []
    for term, n in inside.items():
        if n < 2:
            continue
        concentration = n / (n + outside[term])
        if concentration < 0.5:
            continue
        scored.append((concentration * n * (1 + in_title[term]) * weighted.idf[term], term))
    scored.sort(key=lambda st: (-st[0], st[1]))
    strong: list[str] = []
    plain: list[str] = []
    for _, term in scored:
        if specificity(vocab.surface(term)) < KEYWORD_SPECIFICITY:
            continue
        words = [w for w in _keyword_forms(term, vocab) if w not in strong and w not in plain]
        if in_title[term] >= 2 and len(strong) < STRONG_PER_THEME:
            strong.extend(words)
        elif len(plain) < KEYWORDS_PER_THEME:
            plain.extend(words)
    return tuple(strong), tuple(plain)


def _joined_words(
    strong: tuple[str, ...], plain: tuple[str, ...], texts: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Two Chinese keywords that the members write as one word become that word
    ("信用" and "分配": "信用分配"), where the first of them stood, as the name
    joins them; "分配" alone would match any allocation."""
    words = [*strong, *plain]
    replaced: dict[str, str | None] = {}
    for i, first in enumerate(words):
        for second in words[i + 1:]:
            if first in replaced or second in replaced:
                continue
            joined = one_chinese_word(first, second, texts)
            if joined:
                replaced[first], replaced[second] = joined, None
    if not replaced:
        return strong, plain
    new_strong = tuple(dict.fromkeys(w for w in (replaced.get(w, w) for w in strong) if w))
    new_plain = (replaced.get(w, w) for w in plain)
    return new_strong, tuple(dict.fromkeys(w for w in new_plain if w and w not in new_strong))


def _keyword_forms(term: str, vocab: Vocabulary) -> list[str]:
    """The keywords that match a term as the feed writes it: its singular when
    the feed writes "x" or "xs" (the matcher accepts plurals), and any other
    spelling that would not match ("queries" for "query")."""
    if " " in term:
        return [vocab.surface(term)]
    forms = vocab.forms(term)
    if not forms:
        return [term]
    first = term if any(f in (term, term + "s", term + "es") for f in forms) else vocab.surface(term)
    pattern = re.compile(re.escape(first.casefold()) + "(?:e?s)?")
    rest = [f for f in forms if not pattern.fullmatch(f)]
    return [first, *rest[:1]]


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9]+", "_", ascii_text).strip("_").casefold()
    return slug[:40] or "theme"


def _unique_key(base: str, used: set[str]) -> str:
    key, n = base, 2
    while key in used:
        key, n = f"{base}_{n}", n + 1
    used.add(key)
    return key


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_list(words: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_string(w) for w in words) + "]"


def suggest_themes(items: Sequence[Item], *, source: str = "the feed's stored entries",
                   min_size: int | None = None) -> str:
    """The TOML text of a starter themes file for ``items``."""
    language = detect_language(items) if items else "en"
    themes = suggest(items, min_size=min_size)
    lines = [
        f"# Themes suggested by `digestbot themes suggest` from {len(items)} entries of {source}.",
        "#",
        "# A starting point, not a finished file: rename the themes (`name` is the",
        "# section heading readers see), write a one-line `description` for each,",
        "# merge or drop themes, and add keywords you know belong. Then point",
        "# DIGESTBOT_THEMES_FILE at this file. The format is explained at the top of",
        "# the packaged default, bot/data/themes.toml.",
        "",
        "[settings]",
        f'language = "{language}"  # the language of `name` and `description` below',
        "max_sections = 8",
        "min_section_size = 1",
        "min_score = 3.0",
        "",
    ]
    if not themes:
        lines += [
            "# Too few entries share terms to suggest themes yet; poll the feed for a",
            "# few weeks and run `digestbot themes suggest` again.",
            "[themes.example]",
            'name = "Example"',
            'description = ""',
            'keywords = ["example"]',
            "",
        ]
    for theme in themes:
        lines.append(f"# {theme.size} entries, e.g.:")
        lines += [f"#   {title[:100]}" for title in theme.examples]
        lines.append(f"[themes.{theme.key}]")
        lines.append(f"name = {_toml_string(theme.name)}")
        if language != "en" and theme.name.isascii():
            lines.append(f"name_en = {_toml_string(theme.name)}")
        lines.append('description = ""')
        if theme.strong_keywords:
            lines.append(f"strong_keywords = {_toml_list(theme.strong_keywords)}")
        if theme.keywords:
            lines.append(f"keywords = {_toml_list(theme.keywords)}")
        lines.append("")
    return "\n".join(lines)
