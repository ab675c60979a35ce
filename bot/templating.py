"""One Jinja environment for every mail and page, and the one place that knows the language.

Every fixed string a reader or subscriber sees is an English ``msgid`` in the
code or the templates (``_()``, ``ngettext()``, ``pgettext()``, ``{% trans %}``)
and its text in the chosen language comes from that language's message
catalogue, ``bot/locales/<language>/LC_MESSAGES/messages.po`` (gettext through
Babel and Jinja2's i18n extension). Dates are formatted by Babel (CLDR), with
patterns taken from the catalogue too, so ``9/30 周三`` and ``Wed, Sep 30``
come out of the same code. A new language is a new catalogue; see the README.

The ``.po`` files are read at run time (``babel.messages.pofile.read_po``) and
turned into gettext translations once per process: nothing has to be compiled
at install time, so a plain ``pip install .`` (or a source checkout) works.

The environment: templates are the package ``bot.templates`` (``templates/``
in the repository), found through importlib.resources whether installed or
editable; ``.html`` is autoescaped, ``.txt`` is not; an undefined name is an
error. There is one environment per language, all built by ``environment()``
with the same settings, because Jinja's i18n extension installs the
translations on the environment.

This module knows nothing of settings or the database: callers pass the
language code (``settings.language``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources
from typing import Any

import jinja2
from babel import Locale
from babel.dates import format_date
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

DEFAULT_LANGUAGE = "zh"
CATALOGUE = "messages.po"


def N_(message: str) -> str:  # noqa: N802 (the gettext convention)
    """Mark a msgid where it is defined (a table of pages, say); it is
    translated where it is shown. Babel's extractor knows this name."""
    return message


def _locales() -> Any:
    return resources.files("bot").joinpath("locales")


def languages() -> tuple[str, ...]:
    """The language codes that have a catalogue, sorted (``("en", "zh")``)."""
    found = [entry.name for entry in _locales().iterdir()
             if entry.joinpath("LC_MESSAGES", CATALOGUE).is_file()]
    return tuple(sorted(found))


@cache
def catalogue(language: str) -> Catalog:
    """The parsed ``messages.po`` of a language; KeyError names the ones there are."""
    path = _locales().joinpath(language, "LC_MESSAGES", CATALOGUE)
    if not path.is_file():
        raise KeyError(f"no message catalogue for language {language!r} "
                       f"(there are: {', '.join(languages())})")
    with path.open("rb") as fh:
        return read_po(fh, locale=None, domain="messages")


@cache
def translations(language: str) -> Translations:
    """gettext translations of a language, built in memory from its ``.po``."""
    buffer = io.BytesIO()
    write_mo(buffer, catalogue(language))
    buffer.seek(0)
    return Translations(fp=buffer, domain="messages")


@dataclass(frozen=True)
class Language:
    """What code outside templates needs of a language: gettext and dates."""

    code: str
    locale: Locale
    strings: Translations

    @property
    def html_lang(self) -> str:
        """``zh-CN``, ``en``: the ``lang`` attribute of every page and mail."""
        if self.locale.territory:
            return f"{self.locale.language}-{self.locale.territory}"
        return self.locale.language

    def gettext(self, message: str, **values: Any) -> str:
        text = self.strings.gettext(message)
        return text % values if values else text

    def ngettext(self, singular: str, plural: str, num: int, **values: Any) -> str:
        """Like Jinja's newstyle ngettext: ``%(num)s`` is always filled in."""
        return self.strings.ngettext(singular, plural, num) % {"num": num, **values}

    def pgettext(self, context: str, message: str, **values: Any) -> str:
        text = str(self.strings.pgettext(context, message))
        return text % values if values else text

    # Dates: the catalogue gives a CLDR pattern (a translator picks the order),
    # Babel fills in the month and weekday names of the language.

    def short_date(self, day: date) -> str:
        """``9/28`` or ``Sep 28``."""
        return format_date(day, self.pgettext("date format (a CLDR pattern)", "MMM d"), locale=self.locale)

    def entry_date(self, day: date) -> str:
        """``9/30 周三`` or ``Wed, Sep 30``."""
        return format_date(day, self.pgettext("date format (a CLDR pattern)", "EEE, MMM d"),
                           locale=self.locale)

    def date_range(self, first: date, last: date) -> str:
        return self.gettext("%(start)s – %(end)s", start=self.short_date(first),
                            end=self.short_date(last))


@cache
def language(code: str) -> Language:
    """The Language for a code such as ``settings.language``."""
    found = catalogue(code)
    return Language(code=code, locale=found.locale or Locale.parse(code), strings=translations(code))


def default_title(code: str) -> str:
    """The digest's title when ``DIGESTBOT_TITLE`` is not set, in the language ``code``."""
    return language(code).pgettext("default title of the digest", "Weekly digest")


# --- the Jinja environment ---------------------------------------------------------


def _load_template(name: str) -> str | None:
    """Templates ship as the package ``bot.templates`` (top-level ``templates/``
    in the repository); importlib.resources finds them editable or installed."""
    try:
        return resources.files("bot.templates").joinpath(*name.split("/")).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@cache
def environment(code: str = DEFAULT_LANGUAGE) -> jinja2.Environment:
    """The environment for one language: every template, its gettext installed,
    and ``lang`` (the Language) as a global."""
    lang = language(code)
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        extensions=["jinja2.ext.i18n"],
    )
    env.install_gettext_translations(lang.strings, newstyle=True)  # type: ignore[attr-defined]
    env.globals["lang"] = lang
    return env


def render_template(code: str, name: str, **context: Any) -> str:
    """Render ``name`` (``digest.html``, ``web/home.html``, ``mail/confirm.txt``)
    in the language ``code``."""
    return environment(code).get_template(name).render(context)
