"""How specific a word is in general language: for naming derived sections, and for
leaving everyday words out of a suggested themes file's keywords.

Derived sections are named after terms their entries share. Shared is not
enough: "added", "models" or "网络" can be in every entry of a section and
still say nothing about its topic. A term's *specificity* is 1 for a word
that is rare in everyday English or Chinese ("compiler", "ImageNet", "卷积")
and falls towards ``FLOOR`` for the commonest ones, by the word's Zipf
frequency (log10 of its frequency per billion words, from wordfreq's data in
``bot/data/common_words.json.gz``, written by ``scripts/make_common_words.py``).

Blind pairwise judgements of the names on four dev feeds preferred names
weighed this way in 25 of 36 cases that were not ties (``docs/grouping-quality.md``).
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from importlib.resources import files

from bot.themes.terms import CJK_CHAR_RE

SPECIFIC_BELOW = 3.5  # Zipf frequency under which a word counts as fully specific ("compiler" is 3.4)
GENERIC_AT = 6.0  # ... and at which it would reach 0 ("the" is 7.7; "point" 5.5 gets 0.2)
FLOOR = 0.15  # the least a word counts: a common word the entries share still says a little
PARTICIPLE = 0.3  # "added", "learned", "programmed": a verb form names no topic
_NOT_PARTICIPLES = frozenset({"embed", "shred", "infrared"})  # "-ed" words that are no verb form
# last words that make a two-word term a fragment, not a topic ("languages including")
_NOT_HEADS = frozenset({"including", "according", "regarding", "following", "given", "called", "named"})


@lru_cache(maxsize=1)
def _zipf() -> dict[str, dict[str, int]]:
    """Zipf frequency x 100 per language, for words at or above ``SPECIFIC_BELOW``."""
    raw = files("bot.data").joinpath("common_words.json.gz").read_bytes()
    table: dict[str, dict[str, int]] = json.loads(gzip.decompress(raw))["zipf"]
    return table


def word_specificity(word: str) -> float:
    """1 for a rare word, down to ``FLOOR`` for the commonest."""
    language = "zh" if CJK_CHAR_RE.search(word) else "en"
    hundredths = _zipf()[language].get(word.casefold())
    if hundredths is None:
        return 1.0
    return min(1.0, max(FLOOR, (GENERIC_AT - hundredths / 100) / (GENERIC_AT - SPECIFIC_BELOW)))


def _participle(word: str) -> bool:
    """"added", "programmed"; not "speed", "embed" or "RED"."""
    return len(word) >= 5 and word.endswith("ed") and not word.endswith("eed") and word not in _NOT_PARTICIPLES


def specificity(term: str) -> float:
    """How well a term, as the feed writes it, can name a topic on its own.

    A phrase is as specific as its words together (either may carry it:
    "garbage collection"), unless it ends in a participle or a preposition,
    which makes it a fragment ("data collected", "languages including").
    """
    words = term.split()
    last = words[-1].casefold()
    if _participle(last) or last in _NOT_HEADS:
        return PARTICIPLE
    if len(words) == 1:
        return word_specificity(words[0])
    common = 1.0
    for word in words:
        common *= 1.0 - word_specificity(word)
    return 1.0 - common
