"""``/archive.xml``: the archive as an Atom feed, for readers who prefer a feed reader.

Each sent digest is one entry: its subject, a link to ``/archive/WEEK``, and
its full HTML as mailed -- the body only, without the hidden inbox preview
line (feed readers drop the styles that hide it), and with the personal
unsubscribe link pointing at the subscribe page, as in the web archive. The
newest ``FEED_SIZE`` digests are listed. The archive and subscribe pages
announce the feed with ``<link rel="alternate">``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from xml.etree import ElementTree as ET

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.digest import queries
from bot.mailer import public_links
from bot.web.site import Site, site_of

ATOM = "http://www.w3.org/2005/Atom"
FEED_SIZE = 20
MEDIA_TYPE = "application/atom+xml; charset=utf-8"
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S | re.I)
# the preheader: the first element of the body, hidden with display:none
_PREHEADER = re.compile(r'^\s*<div style="display:\s*none[^"]*">.*?</div>', re.S | re.I)


def feed_html(html: str, home_url: str) -> str:
    """A digest's HTML as a feed entry shows it: body only, no preheader, no personal link."""
    match = _BODY.search(html)
    body = match.group(1) if match else html
    return public_links(_PREHEADER.sub("", body, count=1), home_url).strip()


def _stamp(moment: datetime | None) -> str:
    return (moment or datetime(1970, 1, 1, tzinfo=UTC)).astimezone(UTC).isoformat(timespec="seconds")


def atom_feed(site: Site) -> bytes:
    """The feed document (UTF-8 XML)."""
    base = site.settings.base_url.rstrip("/")
    with site.factory() as session:
        digests = queries.latest_sent_digests(session, FEED_SIZE)
        rows = [(d.week, d.subject, d.html, d.sent_at or d.created_at) for d in digests]
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed", {"{http://www.w3.org/XML/1998/namespace}lang": site.lang.html_lang})

    def child(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", attrs)
        element.text = text
        return element

    child(feed, "title", site.settings.title)
    child(feed, "id", f"{base}/archive")
    child(feed, "link", rel="self", type="application/atom+xml", href=f"{base}/archive.xml")
    child(feed, "link", rel="alternate", type="text/html", href=f"{base}/archive")
    child(feed, "updated", _stamp(max((r[3] for r in rows if r[3]), default=None)))
    author = child(feed, "author")
    child(author, "name", site.settings.title)
    child(author, "uri", f"{base}/")
    for week, subject, html, when in rows:
        entry = child(feed, "entry")
        child(entry, "title", subject)
        child(entry, "id", f"{base}/archive/{week}")
        child(entry, "link", rel="alternate", type="text/html", href=f"{base}/archive/{week}")
        child(entry, "published", _stamp(when))
        child(entry, "updated", _stamp(when))
        child(entry, "content", feed_html(html, f"{base}/"), type="html")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8",
                                                                     xml_declaration=False)


async def archive_feed(request: Request) -> Response:
    site = site_of(request)
    body = await site.db(atom_feed, site)
    return Response(body, media_type=MEDIA_TYPE, headers={"X-Content-Type-Options": "nosniff",
                                                          "Cache-Control": "public, max-age=300"})


ROUTES = [Route("/archive.xml", archive_feed, methods=["GET"])]
