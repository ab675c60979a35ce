"""Shaping an entry's text for a digest: one-line titles, summaries cut at a
sentence or clause end, links that are safe to put in an email."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A sentence ends at 。！？ (plus closing quotes or brackets), or at .!? followed
# by a space or the end, so "91.0%" and "e.g." inside a word do not count.
_SENTENCE_END = re.compile(r"[。！？][”’」』）)\"']*|[.!?][\"'”’)\]]*(?=\s|$)")


# A clause ends at ；; (Chinese summaries run long sentences).
_CLAUSE_END = re.compile(r"[；;]")


# The last resort before a cut inside a clause: a comma.
_COMMA = re.compile(r"，|,(?=\s)")  # not the comma in "10,000"


def clean_line(text: str) -> str:
    """One line of plain text: any run of whitespace (CR/LF included) becomes a space."""
    return " ".join((text or "").split())


def trim_summary(text: str, limit: int) -> str:
    """Shorten plain text to at most ``limit`` characters, at a boundary,
    filling the budget with whole sentences and then whole clauses.

    The cut is at the last boundary within the limit: a sentence end (。！？,
    or .!? before a space), kept as it is, or a clause end after it (；; or a
    comma), which becomes an ellipsis. So a short first sentence is followed
    by as many clauses of the next as fit, instead of leaving most of the
    budget unused. Only when there is no boundary at all is it cut inside a
    clause (at a word boundary for English), marked with an ellipsis.
    """
    text = clean_line(text)
    if len(text) <= limit:
        return text
    sentence = _last_end(_SENTENCE_END, text, limit)
    # the ellipsis takes the place of the ；, ; or comma
    clause = max(_last_end(_CLAUSE_END, text, limit), _last_end(_COMMA, text, limit))
    # a whole sentence beats a scrap of the next one (less than a tenth of the budget)
    if sentence and (sentence >= clause or clause - sentence < limit // 10):
        return text[:sentence]
    if clause:
        return text[:clause].rstrip(" ,，、；;") + "…"
    cut = text[: limit - 1]
    if text[limit - 1].isascii() and text[limit - 1].isalnum() and " " in cut[-25:]:
        cut = cut.rsplit(" ", 1)[0]  # do not split an English word
    return cut.rstrip(" ,;:，、；：-—") + "…"


def _last_end(pattern: re.Pattern[str], text: str, limit: int) -> int:
    """End offset of the last match of ``pattern`` within ``text[:limit]``, or 0."""
    ends = [m.end() for m in pattern.finditer(text, 0, limit + 1) if m.end() <= limit]
    return ends[-1] if ends else 0


def safe_link(link: str | None) -> str | None:
    """Only absolute http(s) links reach the email; anything else is dropped."""
    link = (link or "").strip()
    parts = urlsplit(link)
    if parts.scheme.lower() in ("http", "https") and parts.netloc and not any(
        ch.isspace() for ch in link
    ):
        return link
    return None
