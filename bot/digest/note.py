"""The editor's note: Markdown in, mail-safe HTML and plain text out.

The note is written by the operator, but it lands in thousands of inboxes and
in the admin's own browser, so it is treated like feed text: markdown-it
(CommonMark, raw HTML off) turns it into HTML, then nh3 keeps only a few
tags that mean the same in every mail client, and links that are http(s) or
mailto. The plain-text part shows the Markdown itself, which is written to
read well as text.
"""

from __future__ import annotations

from functools import cache

import nh3
from markdown_it import MarkdownIt

from bot.errors import BotError

MAX_NOTE = 3000  # characters: a few paragraphs above the table of contents (and within the web form limit)

TAGS = frozenset({"p", "br", "strong", "em", "b", "i", "s", "del", "code", "a", "ul", "ol", "li",
                  "blockquote", "h3", "h4"})
ATTRIBUTES = {"a": {"href", "title"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


class NoteError(BotError):
    """An editor's note we will not put in a mail."""


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("strikethrough")


def check_note(markdown: str) -> str:
    """The note as stored: line ends normalised, outer blank lines dropped."""
    text = (markdown or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(text) > MAX_NOTE:
        raise NoteError(f"the note has {len(text)} characters; at most {MAX_NOTE} fit above the digest",
                        hint="shorten it, or link to a longer text")
    if "\x00" in text:
        raise NoteError("the note contains a NUL character", hint="save it as plain UTF-8 text")
    return text


def note_html(markdown: str) -> str:
    """Sanitised HTML of the note ("" for no note). Headings come out as h3/h4
    so a note cannot outrank the digest's own title."""
    text = check_note(markdown)
    if not text:
        return ""
    html = _markdown().render(text)
    for level, to in (("1", "3"), ("2", "3"), ("5", "4"), ("6", "4")):
        html = html.replace(f"<h{level}>", f"<h{to}>").replace(f"</h{level}>", f"</h{to}>")
    return nh3.clean(html, tags=set(TAGS), attributes={k: set(v) for k, v in ATTRIBUTES.items()},
                     url_schemes=set(URL_SCHEMES), link_rel="noopener noreferrer").strip()


def note_text(markdown: str) -> str:
    """The note for the plain-text part: its Markdown, tidied."""
    return check_note(markdown)
