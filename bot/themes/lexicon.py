"""Reading and checking a themes file (TOML).

Every problem is a ``ThemesError`` that names the file, because the person
who sees it is the admin who edited that file. Unknown fields are refused, so
a typo like ``keyword =`` cannot be ignored silently.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from bot.errors import ThemesError
from bot.files import THEMES_CAP, read_regular_text
from bot.themes.model import ThemeDef, ThemeSet

DEFAULT_THEMES_LABEL = "bot/data/themes.toml (packaged default)"

# How much one keyword hit is worth, by the list it is written in.
TIER_WEIGHTS: Mapping[str, float] = {
    "strong_keywords": 2.0,
    "keywords": 1.0,
    "weak_keywords": 0.4,
}
_THEME_FIELDS = frozenset({"name", "name_en", "names", "description", *TIER_WEIGHTS})
_SETTINGS_FIELDS = frozenset({"max_sections", "min_section_size", "min_score", "min_fit", "language"})
_CATCH_ALL_FIELDS = frozenset({"name", "name_en", "names", "description"})
_TOP_LEVEL_FIELDS = frozenset({"settings", "catch_all", "themes"})
_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+$")
_LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z0-9]+)?$")


def load_themes(path: str | Path | None = None) -> ThemeSet:
    """Read a themes file; ``None`` reads the default shipped in the package.

    Parsed once per version of the file (its size and modification time), since
    every digest build reads it and the packaged one is some 300 lines of TOML.
    """
    if path is not None:
        try:
            stat = Path(path).stat()
        except OSError:
            return _load_themes(path)  # not there: _load_themes says so
        return _load_themes_cached(str(path), stat.st_mtime_ns, stat.st_size)
    return _load_default()


@lru_cache(maxsize=1)
def _load_default() -> ThemeSet:
    return _load_themes(None)


@lru_cache(maxsize=8)
def _load_themes_cached(path: str, mtime_ns: int, size: int) -> ThemeSet:
    return _load_themes(path)


def _load_themes(path: str | Path | None) -> ThemeSet:
    if path is None:
        label = DEFAULT_THEMES_LABEL
        resource = resources.files("bot").joinpath("data", "themes.toml")
        try:
            text = resource.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ThemesError(f"themes file {label} cannot be read: {exc}") from exc
    else:
        label = str(path)
        text = read_regular_text(path, cap=THEMES_CAP, what="themes file", error=ThemesError,
                                 hint="check DIGESTBOT_THEMES_FILE, or leave it unset to use "
                                      "the default themes")
    return parse_themes(text, label)


def parse_themes(text: str, label: str = "<themes>") -> ThemeSet:
    """Parse and validate the TOML text of a themes file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemesError(f"themes file {label} is not valid TOML: {exc}") from exc
    _reject_unknown(data, _TOP_LEVEL_FIELDS, label, "the top level")
    settings = _table(data, "settings", label, required=False)
    _reject_unknown(settings, _SETTINGS_FIELDS, label, "[settings]")
    catch_all = _table(data, "catch_all", label, required=False)
    _reject_unknown(catch_all, _CATCH_ALL_FIELDS, label, "[catch_all]")
    themes_table = _table(data, "themes", label, required=True)
    if not themes_table:
        raise ThemesError(f"themes file {label} defines no themes under [themes]")
    themes = tuple(_parse_theme(key, value, label) for key, value in themes_table.items())
    catch_all_names = _names(catch_all, label, "[catch_all]")
    return ThemeSet(
        themes=themes,
        catch_all_name=_optional_text(catch_all, "name", label, "[catch_all]"),
        catch_all_name_en=_optional_text(catch_all, "name_en", label, "[catch_all]") or catch_all_names.get("en"),
        catch_all_description=_text(catch_all, "description", label, "[catch_all]", default="", allow_empty=True),
        max_sections=_int_setting(settings, "max_sections", label, default=8, minimum=1),
        min_section_size=_int_setting(settings, "min_section_size", label, default=1, minimum=1),
        min_score=_float_setting(settings, "min_score", label, default=3.0),
        min_fit=_float_setting(settings, "min_fit", label, default=0.5, maximum=1.0),
        language=_language(settings, label),
    )


def _parse_theme(key: str, value: Any, label: str) -> ThemeDef:
    where = f"[themes.{key}]"
    if not isinstance(value, dict):
        raise ThemesError(f"themes file {label}: {where} must be a table")
    if not _KEY_RE.match(key):
        raise ThemesError(f"themes file {label}: theme key {key!r} may only use A-Z, 0-9, _ and -")
    _reject_unknown(value, _THEME_FIELDS, label, where)
    tiers = {tier: _keyword_list(value, tier, label, where) for tier in TIER_WEIGHTS}
    if not any(tiers.values()):
        raise ThemesError(
            f"themes file {label}: {where} has no keywords",
            hint="add a `keywords = [...]` list",
        )
    names = _names(value, label, where)
    name_en = _optional_text(value, "name_en", label, where) or names.get("en")
    if name_en:
        names = {**names, "en": name_en}
    return ThemeDef(
        key=key,
        name=_text(value, "name", label, where),
        name_en=name_en,
        description=_text(value, "description", label, where, default="", allow_empty=True),
        keywords=tiers["keywords"],
        strong_keywords=tiers["strong_keywords"],
        weak_keywords=tiers["weak_keywords"],
        names=MappingProxyType(names),
    )


def _names(table: Mapping[str, Any], label: str, where: str) -> dict[str, str]:
    """A ``names = { en = "...", ja = "..." }`` table: the name in other languages."""
    value = table.get("names", {})
    if not isinstance(value, dict):
        raise ThemesError(f"themes file {label}: {where} `names` must be a table of language = \"name\"")
    names = {}
    for language, name in value.items():
        if not _LANGUAGE_RE.match(language):
            raise ThemesError(
                f"themes file {label}: {where} `names` has {language!r}, which is not a language code",
                hint="use codes like en, zh, ja",
            )
        if not isinstance(name, str) or not name.strip():
            raise ThemesError(f"themes file {label}: {where} `names.{language}` must be a non-empty string")
        names[language] = name.strip()
    return names


def _language(settings: Mapping[str, Any], label: str) -> str:
    value = settings.get("language", "zh")
    if not isinstance(value, str) or not _LANGUAGE_RE.match(value):
        raise ThemesError(
            f"themes file {label}: [settings] `language` must be a language code like zh or en",
            hint="it says which language the themes' `name` and `description` are written in",
        )
    return value


def _reject_unknown(table: Mapping[str, Any], allowed: frozenset[str], label: str, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ThemesError(
            f"themes file {label}: unknown field(s) {', '.join(unknown)} in {where}",
            hint=f"allowed: {', '.join(sorted(allowed))}",
        )


def _table(data: Mapping[str, Any], name: str, label: str, *, required: bool) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        if required:
            raise ThemesError(f"themes file {label} has no [{name}] table")
        return {}
    if not isinstance(value, dict):
        raise ThemesError(f"themes file {label}: `{name}` must be a table")
    return value


def _text(
    table: Mapping[str, Any],
    field: str,
    label: str,
    where: str,
    *,
    default: str | None = None,
    allow_empty: bool = False,
) -> str:
    value = table.get(field, default)
    if value is None:
        raise ThemesError(f"themes file {label}: {where} needs `{field}`")
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a non-empty string")
    return value.strip()


def _optional_text(table: Mapping[str, Any], field: str, label: str, where: str) -> str | None:
    value = table.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a string")
    return value.strip() or None


def _keyword_list(table: Mapping[str, Any], field: str, label: str, where: str) -> tuple[str, ...]:
    value = table.get(field, [])
    if not isinstance(value, list):
        raise ThemesError(f"themes file {label}: {where} `{field}` must be a list of strings")
    words: list[str] = []
    for word in value:
        if not isinstance(word, str) or not re.search(r"[^\s\-_*]", word):
            raise ThemesError(f"themes file {label}: {where} `{field}` has an empty or non-string entry")
        words.append(word.strip())
    return tuple(words)


def _int_setting(table: Mapping[str, Any], field: str, label: str, *, default: int, minimum: int) -> int:
    value = table.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ThemesError(f"themes file {label}: [settings] `{field}` must be an integer >= {minimum}")
    return value


def _float_setting(
    table: Mapping[str, Any], field: str, label: str, *, default: float, maximum: float | None = None
) -> float:
    value = table.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (
        maximum is not None and value > maximum
    ):
        bound = f" and <= {maximum}" if maximum is not None else ""
        raise ThemesError(f"themes file {label}: [settings] `{field}` must be a number >= 0{bound}")
    return float(value)


def missing_names(themes: ThemeSet, language: str) -> list[str]:
    """Keys of the themes that have no name in ``language`` (they fall back to ``name``)."""
    return [t.key for t in themes.themes if t.name_in(language, themes.language) is None]


def names_warning(themes: ThemeSet, language: str, label: str) -> str | None:
    """One line for the log at start when some themes lack a name in the digest's language."""
    missing = missing_names(themes, language)
    if not missing:
        return None
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    how = 'name_en = "..." or names = { en = "..." }' if language == "en" else f'names = {{ {language} = "..." }}'
    return (
        f"themes file {label}: {len(missing)} theme(s) have no name in language {language!r} ({shown}); "
        f"their sections use the {themes.language!r} name instead. Add {how} to each theme."
    )
