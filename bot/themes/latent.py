"""What labelled deep reads taught about an entry's latent terms: a regression on the encoder's sparse features.

The sentence vector (``bot.themes.sentence``) is one mean over the entry's
tokens; it says where the entry sits on average. The encoder's sparse head
(``bot.embedding.encode_latent``) keeps which of 16,384 "latent terms" fired
on some token, and how strongly: closer to a bag of meanings than to one
point. A logistic regression on those terms, trained by
``scripts/train_theme_model.py`` on the same labelled sets as the other
models and shipped as ``bot/data/latent_head.json.gz``, names the primary
theme of an unseen entry about as often as the sentence head does (0.785
against 0.789, one source left out at a time), but on different entries:
the grouping averages the two (``bot.themes.learned.LATENT_SHARE``).

The weights are 16-bit integers read with the standard library, one row of
one weight per theme for each latent term: no numpy, no encoder at grouping
time, deterministic for stored terms.
"""

from __future__ import annotations

import gzip
import json
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from bot.themes import packing

LATENT_RESOURCE = "latent_head.json.gz"


@dataclass(frozen=True)
class LatentHead:
    """A logistic regression from an entry's (unit-length) latent terms to the themes it was trained on."""

    encoder: str  # the encoder whose latent terms it reads (bot.embedding.ENCODER)
    theme_keys: tuple[str, ...]
    bias: tuple[float, ...]
    features: int  # how many latent terms the encoder has
    values: array[int]  # features x themes, row-major, ``scale`` apart
    scale: float
    source: str = ""  # how it was made

    def __post_init__(self) -> None:
        if len(self.bias) != len(self.theme_keys) or len(self.values) != self.features * len(self.theme_keys):
            raise ValueError("latent head: one bias per theme and one row of weights per latent term")

    def probabilities(self, latent: Sequence[tuple[int, float]]) -> dict[str, float]:
        """Each trained theme's probability for an entry with these latent terms."""
        width = len(self.theme_keys)
        norm = math.sqrt(sum(value * value for _, value in latent)) or 1.0
        logits = list(self.bias)
        for index, value in latent:
            if not 0 <= index < self.features:
                raise ValueError(f"latent head: term {index} outside the encoder's {self.features}")
            weight = value / norm * self.scale
            row = self.values[index * width:(index + 1) * width]
            for position in range(width):
                logits[position] += row[position] * weight
        peak = max(logits)
        exp = [math.exp(value - peak) for value in logits]
        total = sum(exp)
        return {key: value / total for key, value in zip(self.theme_keys, exp, strict=True)}


def head_from_rows(encoder: str, theme_keys: Sequence[str], bias: Sequence[float],
                   rows: Sequence[Sequence[float]], source: str = "", scale: float = 0.001) -> LatentHead:
    """A head from one row of floats per latent term (rounded to ``scale``)."""
    return LatentHead(encoder, tuple(theme_keys), tuple(float(b) for b in bias), len(rows),
                      packing.quantise((v for row in rows for v in row), scale), scale, source)


def head_from_json(data: dict[str, Any]) -> LatentHead:
    """Build a head from its JSON form (the weights as base64 of little-endian int16)."""
    return LatentHead(
        encoder=str(data["encoder"]),
        theme_keys=tuple(str(key) for key in data["themes"]),
        bias=tuple(float(value) for value in data["bias"]),
        features=int(data["features"]),
        values=packing.from_base64(data["values"]),
        scale=float(data["scale"]),
        source=str(data.get("source", "")),
    )


def head_to_json(head: LatentHead) -> dict[str, Any]:
    """The JSON form of ``head``."""
    return {
        "encoder": head.encoder,
        "themes": list(head.theme_keys),
        "source": head.source,
        "bias": [round(value, 5) for value in head.bias],
        "features": head.features,
        "scale": head.scale,
        "values": packing.to_base64(head.values),
    }


@lru_cache(maxsize=1)
def shipped_latent_head() -> LatentHead | None:
    """The head shipped with the package, loaded once per process; None if absent."""
    resource = resources.files("bot.data").joinpath(LATENT_RESOURCE)
    if not resource.is_file():
        return None
    return head_from_json(json.loads(gzip.decompress(resource.read_bytes())))
