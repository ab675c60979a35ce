"""What labelled deep reads taught about whole entries: a regression on sentence vectors.

An entry's sentence vector (``bot.embedding``: multilingual-e5-small reading
title and summary, computed once when the entry is polled) goes through a
small logistic regression, one row of 384 weights per theme, trained by
``scripts/train_theme_model.py`` on the same labelled dev sets as the word
model and shipped as ``bot/data/sentence_head.json``. The grouping mixes its
probabilities with the word model's (``bot.themes.learned.LearnedModel``).

The head is plain numbers read with the standard library: no numpy, no
encoder at grouping time, deterministic for a stored vector.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

HEAD_RESOURCE = "sentence_head.json"


@dataclass(frozen=True)
class SentenceHead:
    """A logistic regression from a sentence vector to the themes it was trained on."""

    encoder: str  # the encoder whose vectors it reads (bot.embedding.ENCODER)
    theme_keys: tuple[str, ...]
    bias: tuple[float, ...]
    weights: tuple[tuple[float, ...], ...]  # one row per theme, one weight per dimension
    source: str = ""  # how it was made

    def __post_init__(self) -> None:
        width = len(self.weights[0]) if self.weights else 0
        if len(self.bias) != len(self.theme_keys) or len(self.weights) != len(self.theme_keys) \
                or any(len(row) != width for row in self.weights):
            raise ValueError("sentence head: one bias and one row of weights per theme, rows of one width")

    @property
    def dimensions(self) -> int:
        return len(self.weights[0]) if self.weights else 0

    def probabilities(self, vector: Sequence[float]) -> dict[str, float]:
        """Each trained theme's probability for an entry with this vector."""
        if len(vector) != self.dimensions:
            raise ValueError(f"sentence head: a vector of {len(vector)} numbers, expected {self.dimensions}")
        logits = [b + sum(map(operator.mul, row, vector)) for b, row in zip(self.bias, self.weights, strict=True)]
        peak = max(logits)
        exp = [math.exp(value - peak) for value in logits]
        norm = sum(exp)
        return {key: value / norm for key, value in zip(self.theme_keys, exp, strict=True)}


def head_from_json(data: dict[str, Any]) -> SentenceHead:
    """Build a head from its JSON form."""
    return SentenceHead(
        encoder=str(data["encoder"]),
        theme_keys=tuple(str(key) for key in data["themes"]),
        bias=tuple(float(value) for value in data["bias"]),
        weights=tuple(tuple(float(value) for value in row) for row in data["weights"]),
        source=str(data.get("source", "")),
    )


def head_to_json(head: SentenceHead, digits: int = 5) -> dict[str, Any]:
    """The JSON form of ``head`` (weights rounded to ``digits`` places)."""
    return {
        "encoder": head.encoder,
        "themes": list(head.theme_keys),
        "source": head.source,
        "bias": [round(value, digits) for value in head.bias],
        "weights": [[round(value, digits) for value in row] for row in head.weights],
    }


@lru_cache(maxsize=1)
def shipped_head() -> SentenceHead | None:
    """The head shipped with the package, loaded once per process; None if absent."""
    resource = resources.files("bot.data").joinpath(HEAD_RESOURCE)
    if not resource.is_file():
        return None
    return head_from_json(json.loads(resource.read_text(encoding="utf-8")))
