# bot/themes/vote.py
"""What one reader says about one entry: points per theme, with reasons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Vote:
    """One reader's opinion of one entry.

    ``points`` maps theme keys to non-negative points (a missing key is 0); ``reasons`` gives
    a short human reason per theme key, shown by ``--explain``. ``decides`` names a theme key
    the reader is sure of (a confident language model): the weighing lets it decide the
    entry's theme over the other readers' points.
    """

    reader: str
    points: Mapping[str, float] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    decides: str | None = None
