"""Turn a week's DigestData into the email: subject, HTML, plain text, preheader.

Both parts come from the same template context, so they always carry the same
entries. The HTML is written for mail clients (table layout, 600px, one
``<style>`` block in the template) and its CSS is inlined with premailer once
per digest; what is left has no ``<style>``, ``<link>`` or ``<script>``.
Personal links (unsubscribe, and "choose your themes") are the
``UNSUBSCRIBE_PLACEHOLDER`` and ``PREFERENCES_PLACEHOLDER`` strings, which the
sending stage replaces per recipient; they appear only where the templates put
them, never where feed text had them (``bot.mailer.slots``).

A reader who chose themes (``bot.choices``) gets a copy of their own choice,
rendered once per (digest, choice): the chosen sections in the digest's
order, each with all its entries, then "also this week" naming the other
sections with their counts and a link to the web copy; the subject and
preheader name the reader's sections. If none of the chosen themes has an
entry that week the reader gets the whole digest with one line saying so.

Every fixed string is a msgid translated through ``bot.templating`` in
``settings.language``; section names and descriptions come from the themes
file (``name`` is the Chinese name, ``name_en`` the English one) or, for the
catch-all and the sections made from the week's own terms, from the catalogue.

Feed text is untrusted: the templates autoescape, summaries are plain text,
links are http(s) only (see ``bot.digest.safe_link``) and the subject has no
line breaks, so a feed cannot change the layout or inject headers.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from markupsafe import Markup, escape
from premailer import Premailer

from bot.config import Settings
from bot.digest import DigestData, DigestEntryView, ThemeView, clean_line
from bot.digest.note import note_html, note_text
from bot.mailer.message import PREFERENCES_PLACEHOLDER, SAMPLE_TOKEN, UNSUBSCRIBE_PLACEHOLDER
from bot.mailer.slots import mark_slots, new_slot
from bot.templating import Language, default_title, language, render_template

__all__ = ["PREFERENCES_PLACEHOLDER", "SAMPLE_UNSUBSCRIBE_TOKEN", "UNSUBSCRIBE_PLACEHOLDER",
           "ChoiceCopies", "Rendered", "Section", "chosen_sections", "sample_preferences_url",
           "digest_json", "inline_css", "sample_unsubscribe_url", "with_sample_links",
           "render_digest", "sections", "subject_line"]

PREHEADER_LIMIT = 140
# an email's HTML stays under this: Gmail clips a message at 102 KB (104,448 bytes)
EMAIL_HTML_BYTES = 100_000
# A preview or a test copy has no reader, so no reader's own unsubscribe link:
# it shows this one, which says what it is (and the unsubscribe page says so too).
SAMPLE_UNSUBSCRIBE_TOKEN = SAMPLE_TOKEN  # "SAMPLE-each-reader-gets-their-own-link"
# the language the themes file's ``name`` and ``description`` are written in
THEMES_FILE_LANGUAGE = "zh"
RELATED_PAPERS = 3  # papers named in a derived section's name in another language
_CJK_RE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")


@dataclass(frozen=True)
class Rendered:
    subject: str
    html: str
    text: str
    preheader: str
    # the web copy with every entry, when the email shows fewer (None: the email is all)
    archive_html: str | None = None


@dataclass(frozen=True)
class Section:
    """One theme as the email shows it, in the digest's language."""

    anchor: str  # theme-1, theme-2, ...
    name: str
    subtitle: str | None  # the English name under a Chinese heading
    description: str
    entries: tuple[DigestEntryView, ...]
    hidden: int = 0  # entries of this theme the email leaves to the web copy
    # a theme of the themes file a reader can choose (not derived, not the catch-all)
    key: str | None = None
    intro: str = ""  # what its entries share, plain text (bot.llm, or the editor's)

    @property
    def total(self) -> int:
        return len(self.entries) + self.hidden


def render_digest(data: DigestData, settings: Settings,
                  choice: frozenset[str] = frozenset()) -> Rendered:
    """Render both parts of one week's email; CSS is inlined here, once.

    The email shows at most ``settings.max_entries`` entries, shared fairly
    among the themes, and fewer if its HTML would still pass ``EMAIL_HTML_BYTES``
    (Gmail clips a message at 102 KB and hides the rest, footer and unsubscribe
    link included); each theme says how many more it has, linking to the web
    copy, which is rendered with every entry (``archive_html``).

    With a ``choice`` (theme keys, ``bot.choices``) it is the copy for readers
    who chose those themes (see the module docstring); it shows the chosen
    sections uncapped (only the size limit applies) and has no web copy of
    its own: its links go to the whole digest's."""
    lang = language(settings.language)
    # personal links go only into the template's own slots (bot.mailer.slots)
    slot, choose = new_slot(), new_slot()
    context = _context(data, settings, lang) | {"unsubscribe_url": slot, "preferences_url": choose}
    limit = settings.max_entries
    if choice:
        mine, also = chosen_sections(context["sections"], choice)
        if mine:
            context |= _chosen_context(data, settings, lang, mine, also)
            limit = sum(section.total for section in mine)
        else:  # none of the reader's themes has an entry this week: everything, saying so
            context |= {"none_chosen": True}
    everything: list[Section] = context["sections"]
    total = sum(section.total for section in everything)
    while True:
        shown = capped(everything, limit)
        count = sum(len(section.entries) for section in shown)
        capped_context = context | {"sections": shown, "shown_count": count, "total_count": total}
        html = inline_css(render_template(lang.code, "digest.html", **capped_context))
        size = len(html.encode("utf-8"))
        if size <= EMAIL_HTML_BYTES or count <= 1:
            break
        limit = max(1, min(count - 1, count * EMAIL_HTML_BYTES // size - 1))
    text = render_template(lang.code, "digest.txt", **capped_context)
    archive = None
    if count < total and not choice:  # the web copy: every entry (its <style> is fine in a browser)
        archive = mark_slots(render_template(lang.code, "digest.html", **context
                                             | {"shown_count": total, "total_count": total}),
                             slot, choose)
    return Rendered(subject=context["subject"], html=mark_slots(html, slot, choose),
                    text=mark_slots(text, slot, choose), preheader=context["preheader"],
                    archive_html=archive)


class ChoiceCopies:
    """The copies of one digest for readers' theme choices, cut from one
    rendering (issue 36): one render per distinct copy, at a fraction of
    ``render_digest``'s cost.

    The HTML is rendered and CSS-inlined once with every section and every
    "also this week" line, each between markers, and sentinels where a copy's
    words differ (subject, preheader, counts, the reader's themes, the
    sections' numbers); a copy is those pieces it keeps, with the sentinels
    filled in. Inlining needs no context (the template's selectors are one
    class or element each), so a copy is the HTML ``render_digest`` would
    make for that choice, less the markers (tests/test_theme_choices.py
    compares them). The text part is rendered per copy: it needs no inlining.
    A copy the cut cannot make as ``render_digest`` would -- none of the
    chosen themes has a section this week, or one too large for an email --
    is rendered by ``render_digest``."""

    _PIECE = re.compile(r"<!--dbp:(toc|sec|also):([\w-]+)-->(.*?)<!--/dbp-->\n?", re.S)

    def __init__(self, data: DigestData, settings: Settings) -> None:
        self.data, self.settings = data, settings
        self.lang = language(settings.language)
        self.slots = (new_slot(), new_slot())
        self.context = _context(data, settings, self.lang) | {
            "unsubscribe_url": self.slots[0], "preferences_url": self.slots[1]}
        everything: list[Section] = self.context["sections"]
        total = sum(section.total for section in everything)
        mark = secrets.token_hex(8)  # no feed can know them in advance
        self.sentinels = {name: f"dbv{mark}{name}" for name in
                          ("subject", "preheader", "counts", "names", "number")}
        master = self.context | {
            "also": everything, "shown_count": total, "total_count": total,
            "chosen_names": self.sentinels["names"], "subject": self.sentinels["subject"],
            "preheader": self.sentinels["preheader"], "counts": self.sentinels["counts"],
            "pieces": {"number": self.sentinels["number"]}}
        html = inline_css(render_template(self.lang.code, "digest.html", **master))
        self.html = mark_slots(html, *self.slots)

    def render(self, choice: frozenset[str]) -> Rendered:
        mine, also = chosen_sections(self.context["sections"], choice)
        if not mine:
            return render_digest(self.data, self.settings, choice)
        values = _chosen_context(self.data, self.settings, self.lang, mine, also)
        html = self._cut(mine, also, values)
        if len(html.encode("utf-8")) > EMAIL_HTML_BYTES:
            return render_digest(self.data, self.settings, choice)
        total = sum(section.total for section in mine)
        text = render_template(self.lang.code, "digest.txt", **self.context | values
                               | {"shown_count": total, "total_count": total})
        return Rendered(subject=values["subject"], html=html, text=mark_slots(text, *self.slots),
                        preheader=values["preheader"])

    def _cut(self, mine: list[Section], also: list[Section], values: dict[str, Any]) -> str:
        kept = {("toc", s.anchor) for s in mine} | {("sec", s.anchor) for s in mine} \
            | {("also", s.anchor) for s in also} | ({("also", "block")} if also else set())
        numbers = {"toc": 0, "sec": 0}

        def piece(match: re.Match[str]) -> str:
            kind, anchor, body = match.groups()
            if (kind, anchor) not in kept:
                return ""
            if kind in numbers:
                numbers[kind] += 1
                return body.replace(self.sentinels["number"], f"{numbers[kind]:02d}")
            return body

        html = self._PIECE.sub(piece, self.html)
        for name, value in (("subject", values["subject"]), ("preheader", values["preheader"]),
                            ("counts", values["counts"]), ("names", values["chosen_names"])):
            html = html.replace(self.sentinels[name], str(escape(value)))
        return html


def chosen_sections(shown: list[Section], choice: frozenset[str]) -> tuple[list[Section], list[Section]]:
    """(the reader's sections, the others), both in the digest's order. Only a
    theme of the themes file can be chosen: derived sections and the catch-all
    are always among the others."""
    mine = [section for section in shown if section.key is not None and section.key in choice]
    return mine, [section for section in shown if section not in mine]


def _chosen_context(data: DigestData, settings: Settings, lang: Language, mine: list[Section],
                    also: list[Section]) -> dict[str, Any]:
    """What the copy for a reader's choice says differently: their sections,
    the others under "also this week", their subject, preheader and counts."""
    entries = sum(section.total for section in mine)
    papers = len({p for section in mine for entry in section.entries for p in entry.papers})
    counts = _counts(lang, entries, papers, [entry for section in mine for entry in section.entries])
    names = lang.pgettext("list separator", ", ").join(section.name for section in mine)
    subject = clean_line(lang.gettext(
        "%(title)s · %(week)s · %(themes)s · %(counts)s", title=clean_line(title_of(data, settings)),
        week=_week_label(data, lang), themes=names, counts=counts))
    return {"sections": mine, "also": also, "chosen_names": names, "counts": counts,
            "subject": subject, "preheader": preheader(mine, lang, also=len(also))}


def capped(shown: list[Section], limit: int) -> list[Section]:
    """At most ``limit`` entries in all, shared out one per theme in turn (in
    theme order), so every theme keeps its first entries; the rest are counted
    as ``hidden``."""
    if sum(section.total for section in shown) <= limit:
        return shown
    quota = [0] * len(shown)
    left = limit
    while left > 0 and any(q < s.total for q, s in zip(quota, shown, strict=True)):
        for i, section in enumerate(shown):
            if left and quota[i] < section.total:
                quota[i] += 1
                left -= 1
    return [replace(section, entries=section.entries[:q], hidden=section.total - q)
            for section, q in zip(shown, quota, strict=True)]


def sample_preferences_url(base_url: str) -> str:
    """The sample "choose your themes" link of a preview or a test copy."""
    return f"{base_url.rstrip('/')}/preferences/{SAMPLE_TOKEN}"


def sample_unsubscribe_url(base_url: str) -> str:
    """The clearly marked sample link a preview or a test copy shows instead of
    ``UNSUBSCRIBE_PLACEHOLDER`` (never the placeholder itself)."""
    return f"{base_url.rstrip('/')}/unsubscribe/{SAMPLE_UNSUBSCRIBE_TOKEN}"


def with_sample_links(body: str, base_url: str) -> str:
    """A rendered part (HTML or text) with the sample personal links put in."""
    return body.replace(UNSUBSCRIBE_PLACEHOLDER, sample_unsubscribe_url(base_url)).replace(
        PREFERENCES_PLACEHOLDER, sample_preferences_url(base_url))


def digest_json(data: DigestData) -> dict[str, Any]:
    """The digest as plain data (what ``digestbot preview --format json`` prints)."""
    return {
        "week": data.week.label,
        "start": data.week.first_day.isoformat(),
        "end": data.week.last_day.isoformat(),
        "entry_count": data.entry_count,
        "paper_count": data.paper_count,
        "note": data.note,
        "excluded": [entry.entry_id for entry in data.excluded],
        "themes": [
            {
                "name": theme.name,
                "key": theme.key,
                "name_en": theme.name_en,
                "catch_all": theme.catch_all,
                "intro": theme.intro,  # bot.llm, or the editor's ("" when none)
                "entries": [
                    {
                        "id": entry.entry_id,
                        "title": entry.title,
                        "link": entry.link,
                        "published": entry.published.isoformat(),
                        "papers": list(entry.papers),
                        "late": entry.late,
                        "source": entry.source,  # the feed(s), when several are active
                        "tldr": entry.tldr,  # the language model's line in the digest's language ("" when none)
                    }
                    for entry in theme.entries
                ],
            }
            for theme in data.themes
        ],
    }


# --- context ---------------------------------------------------------------------


def _context(data: DigestData, settings: Settings, lang: Language) -> dict[str, Any]:
    base_url = settings.base_url.rstrip("/")
    shown = sections(data, lang)
    return {
        "title": clean_line(title_of(data, settings)),
        "week": data.week.label,
        "date_range": lang.date_range(data.week.first_day, data.week.last_day),
        "counts": counts_line(data, lang),
        "subject": subject_line(data, settings),
        "preheader": preheader(shown, lang),
        "sections": shown,
        # the editor's note (bot.digest.note): sanitised HTML, and its Markdown as text
        "note_html": Markup(note_html(data.note)),
        "note_text": note_text(data.note),
        "has_late": data.late_count > 0,
        "archive_url": f"{base_url}/archive/{data.week.label}",
        "unsubscribe_url": UNSUBSCRIBE_PLACEHOLDER,
        "preferences_url": PREFERENCES_PLACEHOLDER,
        "also": [],  # a reader's choice: the sections left out (_chosen_context)
        "chosen_names": "",
        "none_chosen": False,
        "pieces": None,  # ChoiceCopies' master rendering: its markers and sentinels
    }


def sections(data: DigestData, lang: Language) -> list[Section]:
    """The week's themes as the email shows them, in order."""
    return [_section(theme, n, lang) for n, theme in enumerate(data.themes, 1)]


def _section(theme: ThemeView, number: int, lang: Language) -> Section:
    """Names and descriptions in the digest's language, by the kind of section.

    A theme from the themes file is named there (``name`` in Chinese,
    ``name_en`` in English; a theme without a name in the language keeps the
    other one). The catch-all and the sections derived from the week's own
    terms get their fixed words from the catalogue.
    """
    native = lang.code == THEMES_FILE_LANGUAGE
    if theme.catch_all:
        name = (theme.name if native else theme.name_en) or lang.gettext("Also this week")
        description = (theme.description if native else "") or \
            lang.gettext("The week's other entries.")
    else:
        name = theme.name if native else (theme.name_en or theme.name)
        description = theme.description if native else ""
    if theme.derived and (native or theme.name_en):
        description = _shared_description(theme, lang)
    elif theme.derived:  # its members share only words of the feed's language: name it by their papers
        name, description = _related_reads(theme, lang), lang.gettext(
            "Grouped automatically: these entries share distinctive terms.")
    subtitle = theme.name_en if native and theme.name_en != name else None
    if theme.renamed:  # the editor's name for this week, in every language
        name, subtitle = theme.name, None
        description = ""  # the old theme's words would sit under the new name
    if theme.described:  # the editor's description for this week (kept at a rename, or written)
        description = theme.description
    choosable = not theme.catch_all and not theme.derived
    return Section(anchor=f"theme-{number}", name=name, subtitle=subtitle,
                   description=description, entries=theme.entries, intro=theme.intro,
                   key=theme.key if choosable else None)


def _shared_description(theme: ThemeView, lang: Language) -> str:
    """What a derived section's entries share beyond the terms of its name (its heading says those)."""
    if not theme.shared:
        return lang.gettext("Grouped automatically: these entries share distinctive terms.")
    return lang.gettext("Grouped automatically: these entries also share %(terms)s.",
                        terms=lang.pgettext("list separator", ", ").join(theme.shared))


def _related_reads(theme: ThemeView, lang: Language) -> str:
    """A derived section's name in a language its shared terms are not written in.

    The terms it was named after are the feed's own words (Chinese ones, for a
    Chinese feed read in English), so it is named after the papers its entries
    cover, as far as they are written in Latin script.
    """
    papers = [p for entry in theme.entries for p in entry.papers if not _CJK_RE.search(p)]
    unique = list(dict.fromkeys(papers))[:RELATED_PAPERS]
    if not unique:
        return lang.gettext("Related reads")
    return lang.gettext("Related reads: %(papers)s", papers=" · ".join(unique))


def title_of(data: DigestData, settings: Settings) -> str:
    """The digest's name: as built (``bot.titles``), else the settings'
    (resolved by ``bot.titles.titled``), else the neutral default."""
    return data.title or settings.title or default_title(settings.language)


def subject_line(data: DigestData, settings: Settings) -> str:
    """``强化学习周报 · 2026 年第 40 周（9/28–10/4）· 9 篇精读 · 23 篇论文``, on one line."""
    lang = language(settings.language)
    counts = lang.gettext("no new deep reads this week") if data.is_empty else counts_line(data, lang)
    subject = lang.gettext(
        "%(title)s · %(week)s (%(dates)s) · %(counts)s", title=clean_line(title_of(data, settings)),
        week=_week_label(data, lang),
        dates=lang.date_range(data.week.first_day, data.week.last_day),
        counts=counts)
    # squash every whitespace run: a CR or LF in a header would start a new header
    return clean_line(subject)


def _week_label(data: DigestData, lang: Language) -> str:
    return lang.pgettext("ISO week in the subject line", "%(year)s-W%(week)02d",
                         year=data.week.year, week=data.week.number)


def counts_line(data: DigestData, lang: Language) -> str:
    """``13 篇精读 · 24 篇论文`` / ``13 deep reads · 24 papers``; a week whose
    entries name no paper (a feed of blog posts) counts ``6 entries``, and so
    does one where fewer than half the entries name one: there a name is
    incidental (a venue in a title), and "1 paper" for 14 papers would mislead."""
    return _counts(lang, data.entry_count, data.paper_count, data.entries)


def _counts(lang: Language, entries: int, papers: int, listed: Sequence[Any]) -> str:
    """The counts line for ``entries`` entries and ``papers`` papers; papers are
    counted only when at least half the ``listed`` entries name one."""
    naming = sum(bool(entry.papers) for entry in listed)
    if not papers or 2 * naming < len(listed):
        return lang.ngettext("%(num)s entry", "%(num)s entries", entries)
    return " · ".join([lang.ngettext("%(num)s deep read", "%(num)s deep reads", entries),
                       lang.ngettext("%(num)s paper", "%(num)s papers", papers)])


def preheader(shown: list[Section], lang: Language, also: int = 0) -> str:
    """The inbox preview line: the week's themes (a reader's choice: theirs,
    and how many other sections there are)."""
    if not shown:
        return lang.gettext("There were no new deep reads this week. See you next week.")
    themes = lang.pgettext("list separator", ", ").join(
        lang.gettext("%(name)s (%(num)s)", name=s.name, num=s.total) for s in shown)
    text = lang.gettext("This week: %(themes)s", themes=themes)
    if also:
        text = lang.gettext("Your themes: %(themes)s", themes=themes) + " · " + lang.ngettext(
            "%(num)s more section", "%(num)s more sections", also)
    return text if len(text) <= PREHEADER_LIMIT else text[: PREHEADER_LIMIT - 1] + "…"


# --- CSS ---------------------------------------------------------------------------


class _RulesOnce(Premailer):
    """Premailer that turns one ``<style>`` block into rules once per process.

    Every render inlines the same template stylesheet; premailer caches its
    parse but serialises every declaration again each time, most of the cost
    of a render (issue 36 renders a copy per readers' theme choice). The
    rules are plain strings, so sharing them between renders is safe."""

    _cache: dict[tuple[str, int, bool, bool], tuple[list[Any], list[Any]]] = {}

    def _parse_style_rules(self, css_body: str, ruleset_index: int) -> tuple[list[Any], list[Any]]:
        key = (css_body, ruleset_index, bool(self.strip_important), bool(self.disable_validation))
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) > 16:  # one template's stylesheet, or a few: never grows unbounded
                self._cache.clear()
            found = self._cache[key] = super()._parse_style_rules(css_body, ruleset_index)
        return list(found[0]), list(found[1])


def inline_css(html: str) -> str:
    """Move the template's ``<style>`` rules onto the elements and drop the block.

    No base URL is given, so premailer leaves every href alone (links are
    already absolute, and the unsubscribe placeholder must survive verbatim);
    rules that cannot be inlined are dropped rather than kept in a ``<style>``.
    """
    return _RulesOnce(
        html,
        keep_style_tags=False,
        remove_classes=True,
        # keep width="600" on the card for Outlook; the inlined max-width does the rest
        disable_basic_attributes=["width"],
        strip_important=True,
        disable_leftover_css=True,
        disable_validation=True,
        allow_network=False,
        cssutils_logging_level=logging.CRITICAL,
    ).transform()
