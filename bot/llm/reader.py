"""The language model as one reader of the grouping.

``llm_reader`` is pure: it turns the cached reading of an entry (read after the
poll, ``bot.llm.reading``) into a ``Vote``. A confident answer decides the
entry's theme; a missing, failed or unsure one is an empty vote, and the
offline readers decide. ``load_readings`` fetches the cached readings of a
week's items for the caller that builds the draft; it never calls the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.llm.answer import Reading
from bot.llm.prompt import body_hash, reading_request
from bot.templating import languages
from bot.themes.model import Item, ThemeSet
from bot.themes.vote import Vote

READER = "llm"
PRIMARY_POINTS = 6.0  # twice the default min_score: the model's choice, as points for the weighing
SECONDARY_POINTS = 3.0


def entry_text_of(title: str | None, summary: str | None) -> tuple[str, str]:
    """An entry's title and summary exactly as the grouping's Item holds them (the title as
    ``bot.digest.text.clean_line`` makes it: one line)."""
    return " ".join((title or "").split()), summary or ""


def tldr_languages() -> tuple[str, ...]:
    """The languages a TL;DR is asked in: every language the digest can be edited in."""
    return languages()


def request_for(model: str, themes: ThemeSet, title: str, summary: str,
                tldr: Sequence[str], structured: bool = True) -> dict[str, Any]:
    """The reading request of one entry (``bot.llm.prompt.reading_request``)."""
    return reading_request(model, themes, title, summary, tldr, structured=structured)


def reading_key(model: str, themes: ThemeSet, title: str, summary: str) -> str:
    """Where an entry's reading is cached: the hash of the structured request body, which holds
    the entry's text, the themes as the prompt shows them, the model and the prompt itself."""
    return body_hash(request_for(model, themes, title, summary, tldr_languages()))


def _why(reading: Reading, key: str, role: str) -> str:
    reason = f": {reading.reason}" if reading.reason else ""
    return f"{reading.model} chose {key} ({role}, confidence {reading.confidence:.2f}){reason}"


def explain(reading: Reading) -> str:
    """One line for `--explain`: the model, its choice, its confidence and its reason."""
    if reading.primary is None:
        return f"{reading.model} found no theme (confidence {reading.confidence:.2f}): {reading.reason}"
    decided = "decides" if reading.confident else "unsure, the offline readers decide"
    also = f"; also {', '.join(reading.secondary)}" if reading.secondary else ""
    return f"{_why(reading, reading.primary, 'primary')} [{decided}]{also}"


def llm_reader(item: Item, context: Any) -> Vote:
    """The model's vote on one entry, from ``context.extra["llm"][item.key]``.

    A confident reading decides its primary theme; anything else (no reading, a
    failed one, an unsure one, no theme) is an empty vote.
    """
    readings = (getattr(context, "extra", None) or {}).get(READER) or {}
    reading = readings.get(item.key) if isinstance(readings, Mapping) else None
    if not isinstance(reading, Reading) or not reading.confident or reading.primary is None:
        return Vote(reader=READER)
    points = {reading.primary: PRIMARY_POINTS * reading.confidence}
    reasons = {reading.primary: _why(reading, reading.primary, "primary")}
    for key in reading.secondary:
        points[key] = SECONDARY_POINTS * reading.confidence
        reasons[key] = _why(reading, key, "secondary")
    return Vote(reader=READER, points=points, reasons=reasons, decides=reading.primary)


def load_readings(session: Session, items: Sequence[Item], themes: ThemeSet,
                  settings: Settings) -> dict[str, Reading]:
    """The cached readings of ``items`` by item key (only those read and valid); empty when the
    reader is off. Reads the database only: the model was asked after the poll."""
    if not settings.llm_enabled:
        return {}
    from bot.llm import store

    model = settings.llm_model or ""
    keys = {item.key: reading_key(model, themes, item.title, item.summary) for item in items}
    found = store.readings(session, set(keys.values()))
    return {item_key: found[key] for item_key, key in keys.items() if key in found}
