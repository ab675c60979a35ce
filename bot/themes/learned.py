"""The default theme pack's word model: what labelled deep reads taught about words.

The themes file's keywords catch the phrases their author thought of; next week's papers word
the same topics differently ("turn-level advantage", "每一步的功劳"). This model reads every word
of an entry instead. It is a trained file of the default theme pack
(``bot/data/learned_themes.json.gz``), made by ``scripts/train_theme_model.py`` (``make models``):
each word of a broad vocabulary was embedded once by a multilingual sentence encoder, a
logistic regression learned the labelled entries' primary themes from their mean word vector,
and regression and embedding fold into one table of per-word log-odds. At run time an entry's
theme probabilities are a softmax over the mean of its words' rows: no encoder, no numpy, the
same result every time, under a millisecond an entry.

It knows only the themes it was trained on and is used only when the themes in use carry every
one of them (``WordModel.applies_to``).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
import sys
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from bot.themes.model import Item, ThemeSet

MODEL_RESOURCE = "learned_themes.json.gz"
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


def _quantise(values: Iterable[float], scale: float) -> array[int]:
    """``values`` rounded to steps of ``scale``, clipped to 16 bits: the table loads in milliseconds."""
    return array("h", (max(-32767, min(32767, round(v / scale))) for v in values))


def _to_base64(values: array[int]) -> str:
    """A 16-bit table as base64 of its little-endian bytes, whatever the machine's byte order."""
    little = array("h", values)
    if sys.byteorder != "little":
        little.byteswap()
    return base64.b64encode(little.tobytes()).decode("ascii")


def _from_base64(text: str) -> array[int]:
    values = array("h")
    values.frombytes(base64.b64decode(text))
    if sys.byteorder != "little":
        values.byteswap()
    return values


@dataclass(frozen=True)
class Reading:
    """What the model makes of one entry: a probability per theme (the themes file's
    order; 0 for themes it does not know) and, per theme, the words that weighed most."""

    probabilities: tuple[float, ...]
    words: tuple[tuple[str, ...], ...]


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
    source: str = ""  # how it was made

    @classmethod
    def from_rows(
        cls, theme_keys: Sequence[str], bias: Sequence[float], rows: dict[str, Sequence[float]],
        source: str = "", scale: float = 0.01,
    ) -> WordModel:
        """A model from per-word rows of floats (rounded to ``scale``)."""
        if len(bias) != len(theme_keys) or any(len(row) != len(theme_keys) for row in rows.values()):
            raise ValueError("theme model: every row needs one value per theme")
        words = sorted(rows)
        values = _quantise((v for w in words for v in rows[w]), scale)
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
    values = _from_base64(data["values"])
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
        "values": _to_base64(model.values),
    }


@lru_cache(maxsize=1)
def shipped_model() -> WordModel | None:
    """The model shipped with the package, loaded once per process; None if absent."""
    resource = resources.files("bot.data").joinpath(MODEL_RESOURCE)
    if not resource.is_file():
        return None
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        return model_from_json(json.load(text))
