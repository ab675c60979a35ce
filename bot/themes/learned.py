"""What labelled deep reads taught about words: a small model that reads the summary.

The themes file's keywords catch the phrases their author thought of; next
week's papers word the same topics differently ("turn-level advantage",
"每一步的功劳"). This model reads every word of an entry instead. It ships as
package data (``bot/data/learned_themes.json.gz``) and was made offline, once,
by ``scripts/train_theme_model.py``:

1. each word of a broad vocabulary (the labelled entries' words, the 40,000
   commonest words of jieba's Chinese dictionary, the 30,000 commonest
   English words) was embedded by a multilingual sentence-embedding model
   (multilingual-e5-small), so words of like meaning, in either language,
   sit close together;
2. an entry is the weighted mean of its words' vectors (title words count
   ``TITLE_COUNT`` times); a logistic regression learned the primary theme of
   the 4,402 hand-labelled entries of the dev sets and of held-out sets 1-30
   (over 2,300 papers, most written up in Chinese and in English; held-out
   sets 31 and up never);
3. regression and embedding fold into one table: per word, what it adds to
   each theme's log-odds. At run time an entry's theme probabilities are the
   softmax of the bias plus the mean of its words' rows: no embedding model,
   no numpy, deterministic, under a millisecond per entry.

It knows only the themes it was trained on (the bundled themes file's keys)
and is used only when the themes in use carry every one of them; another
field's themes file is grouped by its keywords alone. ``--explain`` shows the
points it gave and the words that weighed most.

Where an entry carries a sentence vector (stored after the poll, see
``bot.embedding``), ``LearnedModel`` mixes in a regression on that vector
(``bot.themes.sentence``), which reads the entry as a whole rather than word
by word, and the vote of the labelled entries nearest to it
(``bot.themes.neighbours``).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from bot.themes import packing
from bot.themes.latent import LatentHead, shipped_latent_head
from bot.themes.model import Item, ThemeSet
from bot.themes.neighbours import Neighbours, shipped_neighbours
from bot.themes.sentence import SentenceHead, shipped_head

MODEL_RESOURCE = "learned_themes.json.gz"
SENTENCE_SHARE = 0.5  # the sentence model's share of the mixed probability, where an entry has a vector
# The neighbours' vote's share of the sentence model (the head has the rest). Grouped leave-one-source-out
# over 71 sets (36 sources): no vote 0.812, a quarter 0.817, half 0.809; the primary theme of unseen entries
# is right for 0.811, 0.818, 0.824 of them. Half looked best over 51 sets of 26 sources (0.838, against 0.836
# at 0.3 and 0.830 without); with all the data a quarter is the share that never did worse than no vote.
NEIGHBOUR_SHARE = 0.25
# The latent-terms head's share of the head (bot.themes.latent; the sentence vector's head has the rest), where
# an entry has latent terms. One source left out at a time over the 42 sources (4,402 entries), the mix names
# the primary theme of 0.820 of the entries without it and 0.834 with half.
LATENT_SHARE = 0.5
TITLE_COUNT = 3  # a title word counts as this many summary words (a title states the subject)

_WORD_RE = re.compile(r"[a-z][a-z0-9\-\.]*[a-z0-9]|[a-z]")
_CJK_RUN_RE = re.compile(r"[\u3400-\u9fff]+")
_cut: Callable[[str], list[str]] | None = None


def model_words(text: str) -> list[str]:
    """The words the model knows how to look up: lower-cased English words and jieba's Chinese words.

    Training and run time must cut text the same way, so this is the one place it is done.
    """
    global _cut
    plain = unicodedata.normalize("NFKC", text).casefold()
    words = _WORD_RE.findall(_CJK_RUN_RE.sub(" ", plain))
    runs = _CJK_RUN_RE.findall(plain)
    if runs:
        if _cut is None:
            import rjieba  # loading its dictionary takes ~0.2 s; English-only feeds never pay it

            _cut = rjieba.cut
        for run in runs:
            words.extend(word for word in _cut(run) if word.strip())
    return words


@dataclass(frozen=True)
class Reading:
    """What the model makes of one entry: a probability per theme (the themes file's
    order; 0 for themes it does not know) and, per theme, the words that weighed most."""

    probabilities: tuple[float, ...]
    words: tuple[tuple[str, ...], ...]
    # the sentence model's share: its probability per theme, None when the entry has no vector
    sentence: tuple[float, ...] | None = None
    # how many of the nearest labelled entries have each theme as their primary (None: no vote)
    votes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class WordModel:
    """Per-word log-odds for a fixed list of themes (see the module docstring).

    The table is one flat array of 16-bit integers (``scale`` apart), a row of
    one value per theme for each word of ``index``: it loads in milliseconds,
    where 70,000 rows of Python floats would take a second.
    """

    theme_keys: tuple[str, ...]
    bias: tuple[float, ...]
    index: dict[str, int]  # word -> its row
    values: array[int]
    scale: float
    source: str = ""  # how it was made, for the README and `--explain` readers

    @classmethod
    def from_rows(
        cls, theme_keys: Sequence[str], bias: Sequence[float], rows: dict[str, Sequence[float]],
        source: str = "", scale: float = 0.01,
    ) -> WordModel:
        """A model from per-word rows of floats (rounded to ``scale``)."""
        if len(bias) != len(theme_keys) or any(len(row) != len(theme_keys) for row in rows.values()):
            raise ValueError("theme model: every row needs one value per theme")
        words = sorted(rows)
        values = packing.quantise((v for w in words for v in rows[w]), scale)
        return cls(tuple(theme_keys), tuple(bias), {w: i for i, w in enumerate(words)}, values, scale, source)

    def row(self, word: str) -> tuple[float, ...]:
        """What ``word`` adds to each theme's log-odds (zeros for an unknown word)."""
        found = self.index.get(word)
        width = len(self.theme_keys)
        if found is None:
            return (0.0,) * width
        return tuple(v * self.scale for v in self.values[found * width : (found + 1) * width])

    def applies_to(self, themes: ThemeSet) -> bool:
        """True when ``themes`` has every theme the model was trained on."""
        keys = {theme.key for theme in themes.themes}
        return all(key in keys for key in self.theme_keys)

    def read(self, item: Item, themes: ThemeSet, top_words: int = 4) -> Reading:
        """Theme probabilities for one entry, in the order of ``themes``."""
        counts: Counter[str] = Counter()
        for word in model_words(item.title):
            counts[word] += TITLE_COUNT
        counts.update(model_words(item.summary))
        known = [(word, n) for word, n in counts.items() if word in self.index]
        total = sum(n for _, n in known)
        logits = list(self.bias)
        rows = {word: self.row(word) for word, _ in known}
        for word, n in known:
            share = n / total
            for position, value in enumerate(rows[word]):
                logits[position] += value * share
        peak = max(logits)
        exp = [math.exp(value - peak) for value in logits]
        norm = sum(exp)
        by_key = {key: position for position, key in enumerate(self.theme_keys)}
        probabilities: list[float] = []
        words: list[tuple[str, ...]] = []
        for theme in themes.themes:
            found = by_key.get(theme.key)
            if found is None:
                probabilities.append(0.0)
                words.append(())
                continue
            probabilities.append(exp[found] / norm)
            weight = {word: rows[word][found] * n for word, n in known}
            ranked = sorted(weight, key=lambda word: (-weight[word], word))
            words.append(tuple(word for word in ranked[:top_words] if weight[word] > 0))
        return Reading(tuple(probabilities), tuple(words))


def model_from_json(data: dict[str, Any]) -> WordModel:
    """Build a model from its JSON form (the rows as base64 of little-endian int16)."""
    keys = tuple(str(key) for key in data["themes"])
    words = [str(word) for word in data["words"]]
    values = packing.from_base64(data["values"])
    bias = tuple(float(value) for value in data["bias"])
    if len(bias) != len(keys) or len(values) != len(words) * len(keys):
        raise ValueError("theme model: every row needs one value per theme")
    index = {word: i for i, word in enumerate(words)}
    return WordModel(keys, bias, index, values, float(data["scale"]), str(data.get("source", "")))


def model_to_json(model: WordModel) -> dict[str, Any]:
    """The JSON form of ``model``."""
    return {
        "themes": list(model.theme_keys),
        "bias": [round(value, 4) for value in model.bias],
        "scale": model.scale,
        "source": model.source,
        "words": sorted(model.index, key=model.index.__getitem__),
        "values": packing.to_base64(model.values),
    }


@lru_cache(maxsize=1)
def shipped_model() -> WordModel | None:
    """The model shipped with the package, loaded once per process; None if absent."""
    resource = resources.files("bot.data").joinpath(MODEL_RESOURCE)
    if not resource.is_file():
        return None
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        return model_from_json(json.load(text))


@dataclass(frozen=True)
class LearnedModel:
    """The word model, and for entries that carry a sentence vector the sentence model:
    the head, and the nearest labelled entries' vote where they are given.

    Where an entry has a vector (``Item.vector``, stored when it was polled)
    its probabilities are ``SENTENCE_SHARE`` of the sentence model's and the
    rest of the word model's: cross-validated over 33 labelled sets, grouping
    F1 0.803 with words alone, 0.811 with sentences alone, 0.824 half and half.
    The sentence model is the head's probability, or with ``neighbours``
    ``NEIGHBOUR_SHARE`` of it the vote (``bot.themes.neighbours``); where the
    entry also has latent terms, the head's probability is ``LATENT_SHARE``
    the latent head's (``bot.themes.latent``). Without a
    vector (no encoder on this machine, or an entry polled before there was
    one) the word model decides alone.
    """

    word: WordModel
    head: SentenceHead | None = None
    neighbours: Neighbours | None = None
    latent: LatentHead | None = None

    @property
    def theme_keys(self) -> tuple[str, ...]:
        return self.word.theme_keys

    def applies_to(self, themes: ThemeSet) -> bool:
        return self.word.applies_to(themes)

    def read(self, item: Item, themes: ThemeSet, top_words: int = 4) -> Reading:
        """The word model's reading, mixed with the head's where ``item`` has a usable vector."""
        reading = self.word.read(item, themes, top_words)
        if self.head is None or item.vector is None or len(item.vector) != self.head.dimensions:
            return reading
        by_key = self.head.probabilities(item.vector)
        sentence = tuple(by_key.get(theme.key, 0.0) for theme in themes.themes)
        if self.latent is not None and item.latent:
            by_term = self.latent.probabilities(item.latent)
            sentence = tuple((1 - LATENT_SHARE) * p + LATENT_SHARE * by_term.get(theme.key, 0.0)
                             for p, theme in zip(sentence, themes.themes, strict=True))
        votes = None
        if self.neighbours is not None and len(item.vector) == self.neighbours.dimensions:
            counted = self.neighbours.votes(item.vector)
            votes = tuple(counted.get(theme.key, 0) for theme in themes.themes)
            share = NEIGHBOUR_SHARE / self.neighbours.k
            sentence = tuple((1 - NEIGHBOUR_SHARE) * p + share * n for p, n in zip(sentence, votes, strict=True))
        mixed = tuple((1 - SENTENCE_SHARE) * word + SENTENCE_SHARE * whole
                      for word, whole in zip(reading.probabilities, sentence, strict=True))
        return Reading(mixed, reading.words, sentence, votes)


def model_for(
    themes: ThemeSet, model: LearnedModel | WordModel | None | bool = True
) -> LearnedModel | None:
    """The model to use with ``themes``: the shipped one (``True``: word model and
    sentence head), the one given (a bare word model reads words alone), or none
    (``False``/``None``); none when it does not know ``themes``' themes."""
    if model is True:
        word = shipped_model()
        chosen = (LearnedModel(word, shipped_head(), shipped_neighbours(), shipped_latent_head())
                  if word is not None else None)
    elif isinstance(model, WordModel):
        chosen = LearnedModel(model)
    else:
        chosen = model or None
    if chosen is None or not chosen.applies_to(themes):
        return None
    return chosen
