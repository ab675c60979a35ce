"""What the model's cached answers add to a built digest: a TL;DR line beside a
summary written in another language, and each section's introduction (the
editor's where edited), and the introduction request of each section (which the
cache is keyed by). Reads the cache only; never calls the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.llm import store
from bot.llm.answer import Reading
from bot.llm.prompt import body_hash, intro_request

if TYPE_CHECKING:  # bot.digest imports this module: the digest's type for hints only
    from bot.digest.views import DigestData

CJK_SHARE = 0.2  # from this share of CJK characters among its letters, a text is taken as Chinese


def text_language(text: str) -> str:
    """"zh" for text mostly in Chinese characters, else "en" (the two editions there are)."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    cjk = sum("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in letters)
    return "zh" if cjk / len(letters) >= CJK_SHARE else "en"


def tldr_for(reading: Reading, text: str, language: str) -> str:
    """The TL;DR to show beside an entry in a ``language`` digest: only when its own text is
    in another language (a Chinese feed's English edition, and the other way round)."""
    if text_language(text) == language:
        return ""
    return reading.tldr.get(language, "")


def attach_intros(session: Session, data: DigestData, settings: Settings) -> DigestData:
    """``data`` with each section's introduction: the editor's for the week, else the one
    generated for the section as it stands (none when its entries changed since)."""
    edited = store.week_intros(session, data.week.label)
    generated: dict[str, str] = {}
    if settings.llm_enabled:

        keyed = {section: body_hash(body) for section, body, _ in section_requests(settings, data)}
        found = store.intros(session, keyed.values())
        generated = {section: found[key] for section, key in keyed.items() if key in found}
    if not edited and not generated:
        return data
    themes = tuple(replace(theme, intro=edited.get(theme.key, generated.get(theme.key, "")))
                   for theme in data.themes)
    return replace(data, themes=themes)


def intro_body(settings: Settings, name: str, entries: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The introduction request of a section as the digest shows it now."""
    return intro_request(settings.llm_model or "", name, entries, settings.language)


def section_requests(settings: Settings, data: Any) -> list[tuple[str, dict[str, Any], str]]:
    """(section key, request body, the entries' own text) for every named section of a digest."""
    found = []
    for theme in data.themes:
        if theme.catch_all or not theme.entries:
            continue
        name = theme.name_en if settings.language == "en" and theme.name_en and not theme.renamed else theme.name
        entries = [(entry.title, entry.summary) for entry in theme.entries]
        text = "\n".join(f"{t}\n{s}" for t, s in entries)
        found.append((theme.key, intro_body(settings, name, entries), text))
    return found
