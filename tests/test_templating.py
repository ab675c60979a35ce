"""The message catalogues and the one Jinja environment.

Every msgid the code and templates use is in every catalogue, translated, with
the same placeholders; no catalogue keeps strings nothing uses; a third
language is a new catalogue and nothing else. ``CJK`` and ``leftover_cjk``
are shared with test_render and test_web (the English edition checks).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Iterator
from datetime import date
from functools import cache
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po
from test_digest import W40, poll_fixture

from bot import config, templating
from bot.digest import build_digest
from bot.render import render_digest

ROOT = Path(__file__).parent.parent
# CJK ideographs and punctuation, fullwidth forms, kana and hangul
CJK = re.compile(r"[\u2e80-\u2fdf\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def leftover_cjk(text: str, allowed: Iterable[str]) -> list[str]:
    """The CJK characters of ``text`` outside the ``allowed`` strings (feed text),
    each with a little context, so a failure shows where the Chinese is."""
    for piece in sorted({a for a in allowed if a}, key=len, reverse=True):
        text = text.replace(piece, " ")
    return [text[max(m.start() - 30, 0): m.end() + 30] for m in CJK.finditer(text)]


Key = tuple[str | None, str]  # (msgctxt, msgid)


@cache
def used_messages() -> dict[Key, str]:
    """Every message the code and the templates use, extracted as
    ``pybabel extract -F babel.cfg`` does: key -> where it is first used."""
    with (ROOT / "babel.cfg").open(encoding="utf-8") as fh:
        methods, options = parse_mapping_cfg(fh)
    found: dict[Key, str] = {}
    for filename, line, message, _, context in extract_from_dir(str(ROOT), methods, options):
        msgid = message[0] if isinstance(message, tuple) else message
        found.setdefault((context, msgid), f"{filename}:{line}")
    return found


def catalogue_keys(catalogue: Catalog) -> Iterator[Key]:
    for message in catalogue:
        if message.id:
            msgid = message.id[0] if isinstance(message.id, tuple) else message.id
            yield (message.context, msgid)


def test_there_is_a_catalogue_per_supported_language():
    assert templating.languages() == ("en", "zh")
    for code in templating.languages():
        catalogue = templating.catalogue(code)
        assert catalogue.locale is not None and catalogue.plural_forms, code


def test_the_code_uses_messages_and_the_extractor_finds_them():
    used = used_messages()
    assert len(used) > 60
    assert (None, "Late addition") in used and (None, "%(num)s deep read") in used
    assert ("date format (a CLDR pattern)", "EEE, MMM d") in used
    assert (None, "Check your inbox") in used  # marked with N_ in bot/web/site.py


@pytest.mark.parametrize("code", ["en", "zh"])
def test_every_used_message_is_translated_in_every_catalogue(code):
    catalogue = templating.catalogue(code)
    used = used_messages()
    present = set(catalogue_keys(catalogue))
    missing = {key: where for key, where in used.items() if key not in present}
    assert not missing, f"{code}: not in the catalogue: {missing}"
    stale = present - set(used)
    assert not stale, f"{code}: in the catalogue but used nowhere: {stale}"
    for message in catalogue:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        assert len(strings) == (catalogue.num_plurals if message.pluralizable else 1), message.id
        assert all(strings), f"{code}: {message.id!r} has no translation"
        assert not message.fuzzy, f"{code}: {message.id!r} is marked fuzzy"


@pytest.mark.parametrize("code", ["en", "zh"])
def test_translations_keep_their_placeholders(code):
    problems = [(message.id, errors) for message, errors in templating.catalogue(code).check()]
    assert not problems
    for message in templating.catalogue(code):
        msgid = message.id[0] if isinstance(message.id, tuple) else message.id
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for text in strings:
            # python-format check above only compares when both sides have them
            assert sorted(re.findall(r"%\((\w+)\)s", text)) == sorted(
                set(re.findall(r"%\((\w+)\)s", msgid))) or message.pluralizable, (code, msgid, text)


def test_dates_and_plurals_by_language():
    zh, en = templating.language("zh"), templating.language("en")
    day = date(2026, 9, 30)
    assert (zh.entry_date(day), en.entry_date(day)) == ("9/30 周三", "Wed, Sep 30")
    assert zh.date_range(date(2026, 9, 28), date(2026, 10, 4)) == "9/28–10/4"
    assert en.date_range(date(2026, 9, 28), date(2026, 10, 4)) == "Sep 28 – Oct 4"
    assert [en.ngettext("%(num)s paper", "%(num)s papers", n) for n in (1, 2)] == ["1 paper", "2 papers"]
    assert zh.ngettext("%(num)s paper", "%(num)s papers", 1) == "1 篇论文"
    assert (zh.html_lang, en.html_lang) == ("zh-CN", "en")


def test_unknown_language_names_the_ones_there_are():
    with pytest.raises(KeyError, match="there are: en, zh"):
        templating.catalogue("xx")


def test_one_environment_escapes_html_but_not_text():
    env = templating.environment("en")
    assert env is templating.environment("en")
    hostile = "<b>&</b>"
    assert "&lt;b&gt;" in env.from_string("{{ x }}").render(x=hostile)  # strings as html
    page = templating.render_template("en", "web/message.html", site_title=hostile, home="/",
                                      heading="h", lines=[hostile], back=True)
    assert hostile not in page and "&lt;b&gt;&amp;&lt;/b&gt;" in page
    mail = templating.render_template("en", "mail/confirm.txt", title=hostile, address="a@b.c",
                                      link="http://x/confirm/t", hours=72, home="http://x/")
    assert hostile in mail and "&lt;" not in mail


@pytest.fixture
def third_language(tmp_path, monkeypatch):
    """A French pseudo-translation (every msgstr is ``[fr] `` + the English)
    next to copies of the shipped catalogues: nothing else changes."""
    locales = tmp_path / "locales"
    shutil.copytree(ROOT / "bot" / "locales", locales)
    english = templating.catalogue("en")
    french = Catalog(locale="fr", domain="messages")
    for message in english:
        if not message.id:
            continue
        if message.context == "date format (a CLDR pattern)":
            string = {"MMM d": "d MMM", "EEE, MMM d": "EEE d MMM"}[message.id]
        elif isinstance(message.string, tuple):
            string = tuple("[fr] " + s for s in message.string)
        else:
            string = "[fr] " + message.string
        french.add(message.id, string, context=message.context, flags=message.flags)
    (locales / "fr" / "LC_MESSAGES").mkdir(parents=True)
    with (locales / "fr" / "LC_MESSAGES" / "messages.po").open("wb") as fh:
        write_po(fh, french)
    monkeypatch.setattr(templating, "_locales", lambda: locales)
    monkeypatch.setattr(config, "catalogued_languages", templating.languages)
    yield locales
    for cached in (templating.catalogue, templating.translations, templating.language,
                   templating.environment):
        cached.cache_clear()


def test_a_third_language_is_just_a_new_catalogue(third_language, fresh_db, make_settings):
    with (third_language / "fr" / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        assert len(list(read_po(fh))) == len(list(templating.catalogue("en")))
    settings = make_settings(language="fr")
    assert settings.title == ""  # unset: the first feed's own title
    poll_fixture(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        rendered = render_digest(build_digest(session, W40, settings), settings)
    # every piece (layout, title, range, counts) from the French catalogue, dates from CLDR
    assert rendered.subject == ("[fr] 强化学习 on MessageDaily · [fr] 2026-W40 ([fr] 28 sept. – 4 oct.) · "
                                "[fr] 13 deep reads · [fr] 24 papers")
    assert "[fr] Read more" in rendered.html and 'lang="fr"' in rendered.html
    assert "[fr] Unsubscribe: __DIGESTBOT_UNSUBSCRIBE_URL__" in rendered.text
