"""Weight tables as 16-bit integers: how the learned models ship their numbers.

The word model (``bot.themes.learned``) and the latent-terms head
(``bot.themes.latent``) each hold hundreds of thousands of weights. As
16-bit integers a fixed ``scale`` apart they load in milliseconds (70,000
rows of Python floats would take a second) and compress well; in JSON they
are base64 of the little-endian bytes, whatever the machine's byte order.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Iterable


def quantise(values: Iterable[float], scale: float) -> array[int]:
    """``values`` rounded to steps of ``scale``, clipped to what 16 bits hold."""
    return array("h", (max(-32767, min(32767, round(v / scale))) for v in values))


def to_base64(values: array[int]) -> str:
    """A 16-bit table as base64 of its little-endian bytes."""
    little = array("h", values)
    if sys.byteorder != "little":
        little.byteswap()
    return base64.b64encode(little.tobytes()).decode("ascii")


def from_base64(text: str) -> array[int]:
    """A 16-bit table back from ``to_base64``."""
    values = array("h")
    values.frombytes(base64.b64decode(text))
    if sys.byteorder != "little":
        values.byteswap()
    return values
