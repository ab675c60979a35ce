"""Turn a week's DigestData into the email: subject, HTML, plain text, preheader.

Both parts come from the same template context, so they always carry the same
entries. The HTML is written for mail clients (table layout, 600px, one
``<style>`` block in the template) and its CSS is inlined with premailer once
per digest; what is left has no ``<style>``, ``<link>`` or ``<script>``.
Personal links (unsubscribe) are the ``UNSUBSCRIBE_PLACEHOLDER`` string, which
the delivery code replaces per recipient.

Feed text is untrusted: the templates autoescape, summaries are plain text,
links are http(s) only (see ``bot.digest.safe_link``) and the subject has no
line breaks, so a feed cannot change the layout or inject headers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2
from premailer import Premailer

from bot.config import Settings
from bot.digest import DigestData, clean_line

UNSUBSCRIBE_PLACEHOLDER = "__DIGESTBOT_UNSUBSCRIBE_URL__"
PREHEADER_LIMIT = 140
WEEKDAYS = {"zh": ("周一", "周二", "周三", "周四", "周五", "周六", "周日"),
            "en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")}
MONTHS_EN = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Every fixed string of the email, one table per language (settings.language).
STRINGS: dict[str, dict[str, str]] = {
    "zh": {
        "lang": "zh-CN",
        "kicker": "每周精读",
        "entries": "{n} 篇精读",
        "papers": "{n} 篇论文",
        "empty_subject": "本周没有新精读",
        "empty_body": "这一周没有新的精读。下周见。",
        "toc": "本周主题",
        "count": "{n} 篇",
        "late": "补录",
        "late_note": "标有「补录」的文章发表于更早的一周，但在那一周的周报发出后才收录。",
        "read_more": "阅读全文",
        "papers_label": "论文",
        "colon": "：",
        "preheader": "本周主题：{themes}",
        "theme_count": "{name}（{n}）",
        "preheader_sep": "、",
        "why": "你收到这封邮件，是因为你订阅了「{title}」并确认了订阅。每周一封，随时可以退订。",
        "view_online": "在浏览器中查看",
        "unsubscribe": "退订",
        "range_sep": "–",
        "date_range": "{start}–{end}",
    },
    "en": {
        "lang": "en",
        "kicker": "Weekly digest",
        "entries": "{n} deep reads",
        "entries_one": "1 deep read",
        "papers": "{n} papers",
        "papers_one": "1 paper",
        "empty_subject": "no new deep reads this week",
        "empty_body": "There were no new deep reads this week. See you next week.",
        "toc": "This week's themes",
        "count": "{n}",
        "late": "Late addition",
        "late_note": "Items marked “Late addition” were published in an earlier week "
                     "but arrived after that week's digest went out.",
        "read_more": "Read more",
        "papers_label": "Papers",
        "colon": ": ",
        "preheader": "This week: {themes}",
        "theme_count": "{name} ({n})",
        "preheader_sep": ", ",
        "why": "You get this email because you subscribed to “{title}” and confirmed "
               "your address. One email a week; unsubscribe any time.",
        "view_online": "View in browser",
        "unsubscribe": "Unsubscribe",
        "date_range": "{start} – {end}",
    },
}


@dataclass(frozen=True)
class Rendered:
    subject: str
    html: str
    text: str
    preheader: str


def render_digest(data: DigestData, settings: Settings) -> Rendered:
    """Render both parts of one week's email; CSS is inlined here, once."""
    words = STRINGS[settings.language]
    context = _context(data, settings, words)
    env = _environment()
    html = inline_css(env.get_template("digest.html").render(context))
    text = env.get_template("digest.txt").render(context)
    return Rendered(subject=context["subject"], html=html, text=text,
                    preheader=context["preheader"])


def digest_json(data: DigestData) -> dict[str, Any]:
    """The digest as plain data (what ``digestbot preview --format json`` prints)."""
    return {
        "week": data.week.label,
        "start": data.week.first_day.isoformat(),
        "end": data.week.last_day.isoformat(),
        "entry_count": data.entry_count,
        "paper_count": data.paper_count,
        "themes": [
            {
                "name": theme.name,
                "name_en": theme.name_en,
                "catch_all": theme.catch_all,
                "entries": [
                    {
                        "title": entry.title,
                        "link": entry.link,
                        "published": entry.published.isoformat(),
                        "papers": list(entry.papers),
                        "late": entry.late,
                    }
                    for entry in theme.entries
                ],
            }
            for theme in data.themes
        ],
    }


# --- context ---------------------------------------------------------------------


def _context(data: DigestData, settings: Settings, words: dict[str, str]) -> dict[str, Any]:
    base_url = settings.base_url.rstrip("/")
    title = clean_line(settings.title)
    return {
        "t": words,
        "data": data,
        "title": title,
        "week": data.week.label,
        "date_range": date_range(data.week.first_day, data.week.last_day, settings.language),
        "counts": counts_line(data, words),
        "subject": subject_line(data, settings),
        "preheader": preheader(data, words),
        "themes": [(f"theme-{n}", theme) for n, theme in enumerate(data.themes, 1)],
        "has_late": data.late_count > 0,
        "lang": settings.language,
        "day": lambda moment: entry_date(moment.date(), settings.language),
        "archive_url": f"{base_url}/archive/{data.week.label}",
        "unsubscribe_url": UNSUBSCRIBE_PLACEHOLDER,
        "why": words["why"].format(title=title),
    }


def subject_line(data: DigestData, settings: Settings) -> str:
    """``强化学习周报 · 2026-W40（9/28–10/4）· 9 篇精读 · 23 篇论文``, on one line."""
    words = STRINGS[settings.language]
    days = date_range(data.week.first_day, data.week.last_day, settings.language)
    when = f"（{days}）" if settings.language == "zh" else f" ({days})"
    parts = [f"{clean_line(settings.title)} · {data.week.label}{when}"]
    parts.append(counts_line(data, words) if not data.is_empty else words["empty_subject"])
    # squash every whitespace run: a CR or LF in a header would start a new header
    return clean_line(" · ".join(parts).replace("） · ", "）· "))


def counts_line(data: DigestData, words: dict[str, str]) -> str:
    parts = [_plural(words, "entries", data.entry_count)]
    if data.paper_count:
        parts.append(_plural(words, "papers", data.paper_count))
    return " · ".join(parts)


def _plural(words: dict[str, str], key: str, n: int) -> str:
    if n == 1 and f"{key}_one" in words:
        return words[f"{key}_one"]
    return words[key].format(n=n)


def preheader(data: DigestData, words: dict[str, str]) -> str:
    """The inbox preview line: the week's themes, largest first."""
    if data.is_empty:
        return words["empty_body"]
    themes = words["preheader_sep"].join(
        words["theme_count"].format(name=t.name, n=len(t.entries)) for t in data.themes
    )
    text = words["preheader"].format(themes=themes)
    return text if len(text) <= PREHEADER_LIMIT else text[: PREHEADER_LIMIT - 1] + "…"


def short_date(day: date, language: str) -> str:
    return f"{day.month}/{day.day}" if language == "zh" else f"{MONTHS_EN[day.month - 1]} {day.day}"


def entry_date(day: date, language: str) -> str:
    """``9/30 周三`` or ``Wed, Sep 30``."""
    weekday = WEEKDAYS[language][day.weekday()]
    if language == "zh":
        return f"{short_date(day, language)} {weekday}"
    return f"{weekday}, {short_date(day, language)}"


def date_range(first: date, last: date, language: str) -> str:
    words = STRINGS[language]
    return words["date_range"].format(start=short_date(first, language),
                                      end=short_date(last, language))


# --- templates and CSS -------------------------------------------------------------


def _load_template(name: str) -> str | None:
    """Templates ship as the package ``bot.templates`` (top-level ``templates/``
    in the repository); importlib.resources finds them editable or installed."""
    try:
        return resources.files("bot.templates").joinpath(name).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",),
                                            default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


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
