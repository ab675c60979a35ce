"""Identities: a feed's URL, an article's link, an article's text. Pure, no I/O
(except resolving a local path).

- ``normalise_feed_url``: the one spelling of a feed's address we store, so
  ``HTTPS://Example.org:443/feed/#top`` and ``https://example.org/feed`` are
  one feed, never two rows.
- ``article_key``: a link reduced to what identifies the article (no scheme,
  no ``www.``, no fragment, no tracking parameters), so the same post reached
  through two feeds is recognised.
- ``fingerprint``: the same title and summary, whatever the link says.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit


def is_local(url: str) -> bool:
    """A file path or file: URL (a Windows drive letter too), not a network address."""
    scheme = urlsplit(url).scheme
    return scheme == "file" or scheme == "" or (len(scheme) == 1 and url[1:3] in (":\\", ":/"))


DEFAULT_PORTS = {"http": 80, "https": 443}


# query parameters that say where a reader came from, not which article it is
TRACKING_PREFIXES = ("utm_",)


TRACKING_NAMES = frozenset({"fbclid", "gclid", "mc_cid", "mc_eid"})


def normalise_feed_url(url: str) -> str:
    """The stored form of a feed address.

    http(s): scheme and host lower-cased, the default port dropped, the
    fragment dropped, no trailing slash on the path (``/`` for the root).
    A local path (or ``file:`` URL) becomes an absolute, resolved path.
    """
    url = url.strip()
    if is_local(url):
        raw = unquote(urlsplit(url).path) if url.lower().startswith("file:") else url
        return str(Path(raw).expanduser().resolve())
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: leave the URL to fail at fetch time
        port = None
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    if parts.username is not None:
        auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{auth}@{netloc}"
    path = parts.path.rstrip("/") or "/"
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def article_key(link: str | None) -> str | None:
    """What identifies the article behind a link, or None if the link cannot.

    ``https://www.Example.org/p/1/?utm_source=x#c`` -> ``example.org/p/1``.
    A link to a site's root says nothing about which article it is (some
    feeds give every item their home page), so it is no identity.
    """
    link = (link or "").strip()
    parts = urlsplit(link)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower().removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        return None
    if port not in (None, DEFAULT_PORTS.get(parts.scheme.lower())):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = urlencode(sorted(
        (name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not name.lower().startswith(TRACKING_PREFIXES) and name.lower() not in TRACKING_NAMES
    ))
    if not path and not query:
        return None
    key = host + path + (f"?{query}" if query else "")
    return key if len(key) <= 1000 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def fingerprint(title: str, summary: str) -> str | None:
    """A hash of the title and summary text, case and spacing ignored; None
    without a summary (a bare title such as "Weekly notes" is too common to
    identify an article)."""
    summary = " ".join(summary.split()).casefold()
    if not summary:
        return None
    title = " ".join(title.split()).casefold()
    return hashlib.sha256(f"{title}\0{summary}".encode()).hexdigest()
