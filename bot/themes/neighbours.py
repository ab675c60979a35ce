"""What the nearest labelled deep reads say: a vote among an entry's closest neighbours.

The sentence head (``bot.themes.sentence``) draws one straight boundary per
theme through the space of sentence vectors. Topics are lumpier than that: a
paper on reward hacking in coding agents sits near both reward models and
coding agents, and what labellers chose for papers *just like it* is often the
better guide. So the labelled entries' own vectors ship too, and an entry's
``K`` nearest of them (cosine similarity of the stored vectors) vote for their
primary themes.

Cross-validated, leaving out one labelled source at a time (3,754 entries of
36 sources), the primary theme came out right for 0.811 of entries with the
word model and the head, 0.818 with this vote taking a quarter of the
sentence model (``bot.themes.learned.NEIGHBOUR_SHARE``) and 0.824 with half;
the vote alone gets about 0.75 (with 4,402 entries of 42 sources: 0.811, 0.820,
0.825 and 0.746). ``--explain`` shows the vote.

The vectors ship as ``bot/data/sentence_neighbours.npz`` (int8, one scale per
row), written by ``scripts/train_theme_model.py``; numpy computes the
similarities, one matrix-vector product per entry (under a millisecond).
"""

from __future__ import annotations

import io
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

NEIGHBOURS_RESOURCE = "sentence_neighbours.npz"
K = 5  # neighbours that vote: 3, 5 and 8 all helped in cross-validation (26 sources), 5 most; 10 no better


@dataclass(frozen=True, eq=False)
class Neighbours:
    """Labelled entries' sentence vectors (unit length) and their primary themes."""

    encoder: str  # the encoder whose vectors these are (bot.embedding.ENCODER)
    theme_keys: tuple[str, ...]
    vectors: npt.NDArray[np.float32]  # one unit-length row per labelled entry
    labels: npt.NDArray[np.int64]  # each row's primary theme, an index into theme_keys
    k: int = K
    source: str = ""  # how it was made

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or len(self.vectors) != len(self.labels) or len(self.labels) < self.k:
            raise ValueError("sentence neighbours: one label per vector, and at least k of them")
        if len(self.labels) and (self.labels.min() < 0 or self.labels.max() >= len(self.theme_keys)):
            raise ValueError("sentence neighbours: a label outside the theme list")

    @property
    def dimensions(self) -> int:
        return int(self.vectors.shape[1])

    def votes(self, vector: Sequence[float]) -> Counter[str]:
        """How many of the ``k`` nearest labelled entries have each theme as their primary."""
        if len(vector) != self.dimensions:
            raise ValueError(f"sentence neighbours: a vector of {len(vector)} numbers, expected {self.dimensions}")
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        similarity = self.vectors @ (query / norm if norm else query)
        # the k-th highest similarity, then every row that reaches it, in file order: equal
        # similarities are broken by position, so the vote is deterministic (and no full sort)
        floor = np.partition(similarity, len(similarity) - self.k)[len(similarity) - self.k]
        candidates = np.flatnonzero(similarity >= floor)
        nearest = candidates[np.argsort(-similarity[candidates], kind="stable")][: self.k]
        return Counter(self.theme_keys[int(self.labels[i])] for i in nearest)


def quantise(vectors: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Rows as int8 with one scale each: a quarter of the bytes, cosine similarity within 0.001."""
    peak = np.abs(vectors).max(axis=1, keepdims=True)
    peak[peak == 0] = 1.0
    return np.round(vectors / peak * 127).astype(np.int8), (peak[:, 0] / 127).astype(np.float32)


def neighbours_from_npz(data: bytes) -> Neighbours:
    """Build the neighbours from the bytes of their ``.npz`` file."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        rows = npz["vectors"].astype(np.float32) * npz["scales"][:, None]
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        return Neighbours(
            encoder=str(npz["encoder"]),
            theme_keys=tuple(str(key) for key in npz["themes"]),
            vectors=rows,
            labels=npz["labels"].astype(np.int64),
            k=int(npz["k"]),
            source=str(npz["source"]),
        )


def neighbours_to_npz(vectors: npt.NDArray[np.floating], labels: Sequence[str], theme_keys: Sequence[str],
                      *, encoder: str, source: str, k: int = K) -> bytes:
    """The ``.npz`` bytes for labelled ``vectors`` and their primary theme keys."""
    quantised, scales = quantise(np.asarray(vectors, dtype=np.float32))
    arrays: dict[str, npt.NDArray[Any]] = {
        "vectors": quantised, "scales": scales,
        "labels": np.array([list(theme_keys).index(label) for label in labels], dtype=np.uint8),
        "themes": np.array(list(theme_keys)), "encoder": np.array(encoder), "source": np.array(source),
        "k": np.array(k),
    }
    out = io.BytesIO()
    # what np.savez_compressed writes, with a fixed date in the zip: the same data, the same bytes
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    return out.getvalue()


@lru_cache(maxsize=1)
def shipped_neighbours() -> Neighbours | None:
    """The labelled vectors shipped with the package, loaded once per process; None if absent."""
    resource = resources.files("bot.data").joinpath(NEIGHBOURS_RESOURCE)
    if not resource.is_file():
        return None
    return neighbours_from_npz(resource.read_bytes())
