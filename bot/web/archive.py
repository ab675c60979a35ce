"""The archive: a list of sent digests and each one as it was mailed.

An archived digest is the frozen HTML every recipient got, with the personal
unsubscribe link (still the placeholder in the stored copy) pointing at the
start page instead, so a shared archive link unsubscribes no one.
"""

from __future__ import annotations

import re
from datetime import datetime

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from bot.digest import queries
from bot.mailer import public_links
from bot.web.site import Site, site_of

WEEK_PATTERN = re.compile(r"^\d{4}-W\d{2}$")


def _rows(site: Site) -> list[tuple[str, str, datetime | None]]:
    """Each sent digest's week, subject and send time, the time in
    DIGESTBOT_TIMEZONE (as in `status` and the console), not UTC."""
    with site.factory() as session:
        rows = queries.sent_digests(session)
    tz = site.settings.tz
    return [(week, subject, when.astimezone(tz) if when else None) for week, subject, when in rows]


def _archived_html(site: Site, week: str) -> str | None:
    with site.factory() as session:
        html = queries.sent_digest_html(session, week)
    return None if html is None else public_links(html, site.home)


async def archive(request: Request) -> Response:
    site = site_of(request)
    return site.page("archive", template="archive.html", back=False, digests=await site.db(_rows, site))


async def archive_week(request: Request) -> Response:
    site = site_of(request)
    week = request.path_params["week"].upper()
    html = await site.db(_archived_html, site, week) if WEEK_PATTERN.match(week) else None
    if html is None:
        raise HTTPException(404)
    return HTMLResponse(html, headers={"X-Content-Type-Options": "nosniff"})


ROUTES = [
    Route("/archive", archive, methods=["GET"]),
    Route("/archive/{week}", archive_week, methods=["GET"]),
]
