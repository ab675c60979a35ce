"""`digestbot themes suggest --llm`: a starter themes file written by the language model
from the feed's recent entries (names in the digest's languages, descriptions, keywords).

The answer is checked like every other: keys become plain identifiers, names and
descriptions plain capped text, and the file is parsed by the themes loader before
it is handed back, so a bad answer is an error, never a broken file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings
from bot.errors import ThemesError
from bot.llm.answer import AnswerError, parse_object, plain
from bot.llm.client import CallError
from bot.llm.prompt import suggest_request
from bot.llm.reading import _Run
from bot.themes import Item, parse_themes

MAX_ENTRIES = 60  # the newest entries shown to the model
_KEY = re.compile(r"[^a-z0-9_]+")


def _toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def themes_toml(answer: dict[str, object], language: str, languages: Sequence[str]) -> str:
    """The themes file of a model's answer; ThemesError when it holds no usable theme."""
    lines = ["# Suggested by the language model from the feed's recent entries (digestbot themes suggest --llm).",
             "# Read it, fix the names and keywords, then set DIGESTBOT_THEMES_FILE to this file.", "",
             "[settings]", f"language = {_toml(language)}", ""]
    seen: set[str] = set()
    themes = answer.get("themes")
    for theme in themes if isinstance(themes, list) else []:
        if not isinstance(theme, dict):
            continue
        key = _KEY.sub("_", str(theme.get("key", "")).lower()).strip("_")[:40]
        names = theme.get("names") if isinstance(theme.get("names"), dict) else {}
        name = plain(names.get(language), 60) if isinstance(names, dict) else ""
        keywords = [plain(k, 60) for k in theme.get("keywords") or [] if plain(k, 60)][:15] \
            if isinstance(theme.get("keywords"), list) else []
        if not key or key in seen or not name or not keywords:
            continue
        seen.add(key)
        lines += [f"[themes.{key}]", f"name = {_toml(name)}"]
        others = {code: plain(names.get(code), 60) for code in languages if code != language} \
            if isinstance(names, dict) else {}
        if others.get("en"):
            lines.append(f"name_en = {_toml(others.pop('en'))}")
        if any(others.values()):
            lines.append("names = { " + ", ".join(f"{c} = {_toml(n)}" for c, n in others.items() if n) + " }")
        lines += [f"description = {_toml(plain(theme.get('description'), 200))}",
                  f"keywords = [{', '.join(_toml(k) for k in keywords)}]", ""]
    if not seen:
        raise ThemesError("the language model's answer holds no usable theme",
                          hint="try again, or use `digestbot themes suggest` without --llm")
    text = "\n".join(lines)
    parse_themes(text, "suggested by the language model")
    return text


def suggest_with_llm(settings: Settings, factory: sessionmaker[Session], items: Sequence[Item]) -> str:
    """Ask the model for a starter themes file from ``items`` (newest first)."""
    from bot.llm.reader import tldr_languages

    if not settings.llm_enabled:
        raise ThemesError("--llm needs a language model", hint="set DIGESTBOT_LLM_BASE_URL and DIGESTBOT_LLM_MODEL")
    languages = tldr_languages()
    entries = [(item.title, item.summary) for item in items[:MAX_ENTRIES]]
    run = _Run(settings, factory, None)
    body = suggest_request(run.model, entries, languages)
    try:
        content = run.caller.complete(body, {**body, "response_format": {"type": "json_object"}})
        answer = parse_object(content)
    except (CallError, AnswerError) as exc:
        reason = exc.reason if isinstance(exc, CallError) else str(exc)
        run.record(datetime.now(UTC), False, reason)
        raise ThemesError(f"the language model could not suggest themes: {reason}",
                          hint="check `digestbot status`, or use `digestbot themes suggest` without --llm") from None
    run.record(datetime.now(UTC), True)
    return themes_toml(answer, settings.language, languages)
