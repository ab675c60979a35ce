"""Shaping an entry's text for a digest: one-line titles, summaries cut at a
sentence end, links that are safe to put in an email."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A sentence ends at 。！？ (plus closing quotes or brackets), or at .!? followed
# by a space or the end, so "91.0%" and "e.g." inside a word do not count.
_SENTENCE_END = re.compile(r"[。！？][”’」』）)\"']*|[.!?][\"'”’)\]]*(?=\s|$)")


# Failing that, a clause ends at ；; (Chinese summaries run long sentences).
_CLAUSE_END = re.compile(r"[；;]")


_MIN_SENTENCE_SHARE = 0.3  # a cut at a sentence end must keep this much of the limit


_MIN_CLAUSE_SHARE = 0.6



def clean_line(text: str) -> str:
    """One line of plain text: any run of whitespace (CR/LF included) becomes a space."""
    return " ".join((text or "").split())


def trim_summary(text: str, limit: int) -> str:
    """Shorten plain text to at most ``limit`` characters.

    Prefer the last sentence end that keeps a fair share of the limit (the
    reader gets whole sentences); else the last clause end, else a word or
    character boundary, both marked with an ellipsis.
    """
    text = clean_line(text)
    if len(text) <= limit:
        return text
    sentence = _last_end(_SENTENCE_END, text, limit)
    if sentence >= limit * _MIN_SENTENCE_SHARE:
        return text[:sentence]
    clause = _last_end(_CLAUSE_END, text, limit - 1)
    if clause >= limit * _MIN_CLAUSE_SHARE:
        return text[: clause - 1] + "…"
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
