"""Turn a week's DigestData into the email: subject, HTML, plain text, preheader.

Both parts come from the same template context, so they always carry the same
entries. The HTML is written for mail clients (table layout, 600px, one
``<style>`` block in the template) and its CSS is inlined with premailer once
per digest; what is left has no ``<style>``, ``<link>`` or ``<script>``.
Personal links (unsubscribe) are the ``UNSUBSCRIBE_PLACEHOLDER`` string, which
the sending stage replaces per recipient; it appears only where the templates
put it, never where feed text had it (``bot.mailer.slots``).

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
from dataclasses import dataclass, replace
from typing import Any

from markupsafe import Markup
from premailer import Premailer

from bot.config import Settings
from bot.digest import DigestData, DigestEntryView, ThemeView, clean_line
from bot.digest.note import note_html, note_text
from bot.mailer.message import UNSUBSCRIBE_PLACEHOLDER
from bot.mailer.slots import mark_slots, new_slot
from bot.templating import Language, language, render_template

__all__ = ["SAMPLE_UNSUBSCRIBE_TOKEN", "UNSUBSCRIBE_PLACEHOLDER", "Rendered", "Section",
           "digest_json", "inline_css", "sample_unsubscribe_url", "with_sample_links",
           "render_digest", "sections", "subject_line"]

PREHEADER_LIMIT = 140
# an email's HTML stays under this: Gmail clips a message at 102 KB (104,448 bytes)
EMAIL_HTML_BYTES = 100_000
# A preview or a test copy has no reader, so no reader's own unsubscribe link:
# it shows this one, which says what it is (and the unsubscribe page says so too).
SAMPLE_UNSUBSCRIBE_TOKEN = "SAMPLE-each-reader-gets-their-own-link"
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

    @property
    def total(self) -> int:
        return len(self.entries) + self.hidden


def render_digest(data: DigestData, settings: Settings) -> Rendered:
    """Render both parts of one week's email; CSS is inlined here, once.

    The email shows at most ``settings.max_entries`` entries, shared fairly
    among the themes, and fewer if its HTML would still pass ``EMAIL_HTML_BYTES``
    (Gmail clips a message at 102 KB and hides the rest, footer and unsubscribe
    link included); each theme says how many more it has, linking to the web
    copy, which is rendered with every entry (``archive_html``)."""
    lang = language(settings.language)
    # personal links go only into the template's own slots (bot.mailer.slots)
    slot = new_slot()
    context = _context(data, settings, lang) | {"unsubscribe_url": slot}
    everything: list[Section] = context["sections"]
    total = sum(section.total for section in everything)
    limit = settings.max_entries
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
    if count < total:  # the web copy: every entry (its <style> is fine in a browser)
        archive = mark_slots(render_template(lang.code, "digest.html", **context
                                             | {"shown_count": total, "total_count": total}), slot)
    return Rendered(subject=context["subject"], html=mark_slots(html, slot),
                    text=mark_slots(text, slot), preheader=context["preheader"],
                    archive_html=archive)


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


def sample_unsubscribe_url(base_url: str) -> str:
    """The clearly marked sample link a preview or a test copy shows instead of
    ``UNSUBSCRIBE_PLACEHOLDER`` (never the placeholder itself)."""
    return f"{base_url.rstrip('/')}/unsubscribe/{SAMPLE_UNSUBSCRIBE_TOKEN}"


def with_sample_links(body: str, base_url: str) -> str:
    """A rendered part (HTML or text) with the sample unsubscribe link put in."""
    return body.replace(UNSUBSCRIBE_PLACEHOLDER, sample_unsubscribe_url(base_url))


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
                "entries": [
                    {
                        "id": entry.entry_id,
                        "title": entry.title,
                        "link": entry.link,
                        "published": entry.published.isoformat(),
                        "papers": list(entry.papers),
                        "late": entry.late,
                        "source": entry.source,  # the feed(s), when several are active
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
        "title": clean_line(settings.title),
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
        name = (theme.name if native else theme.name_en) or lang.gettext("More deep reads")
        description = (theme.description if native else "") or \
            lang.gettext("The week's other deep reads worth a look.")
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
        description = "" if theme.derived else description
    return Section(anchor=f"theme-{number}", name=name, subtitle=subtitle,
                   description=description, entries=theme.entries)


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


def subject_line(data: DigestData, settings: Settings) -> str:
    """``强化学习周报 · 2026 年第 40 周（9/28–10/4）· 9 篇精读 · 23 篇论文``, on one line."""
    lang = language(settings.language)
    counts = lang.gettext("no new deep reads this week") if data.is_empty else counts_line(data, lang)
    subject = lang.gettext(
        "%(title)s · %(week)s (%(dates)s) · %(counts)s", title=clean_line(settings.title),
        week=lang.pgettext("ISO week in the subject line", "%(year)s-W%(week)02d",
                           year=data.week.year, week=data.week.number),
        dates=lang.date_range(data.week.first_day, data.week.last_day),
        counts=counts)
    # squash every whitespace run: a CR or LF in a header would start a new header
    return clean_line(subject)


def counts_line(data: DigestData, lang: Language) -> str:
    """``13 篇精读 · 24 篇论文`` / ``13 deep reads · 24 papers``; a week whose
    entries name no paper (a feed of blog posts) counts ``6 entries``."""
    if not data.paper_count:
        return lang.ngettext("%(num)s entry", "%(num)s entries", data.entry_count)
    parts = [lang.ngettext("%(num)s deep read", "%(num)s deep reads", data.entry_count)]
    if data.paper_count:
        parts.append(lang.ngettext("%(num)s paper", "%(num)s papers", data.paper_count))
    return " · ".join(parts)


def preheader(shown: list[Section], lang: Language) -> str:
    """The inbox preview line: the week's themes, largest first."""
    if not shown:
        return lang.gettext("There were no new deep reads this week. See you next week.")
    themes = lang.pgettext("list separator", ", ").join(
        lang.gettext("%(name)s (%(num)s)", name=s.name, num=len(s.entries)) for s in shown)
    text = lang.gettext("This week: %(themes)s", themes=themes)
    return text if len(text) <= PREHEADER_LIMIT else text[: PREHEADER_LIMIT - 1] + "…"


# --- CSS ---------------------------------------------------------------------------


def inline_css(html: str) -> str:
    """Move the template's ``<style>`` rules onto the elements and drop the block.

    No base URL is given, so premailer leaves every href alone (links are
    already absolute, and the unsubscribe placeholder must survive verbatim);
    rules that cannot be inlined are dropped rather than kept in a ``<style>``.
    """
    return Premailer(
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
