"""The dashboard (feeds, the next send, the last digests, subscribers) and the
archive (every frozen digest with its delivery counts and its email)."""

from __future__ import annotations

import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot import status
from bot.digest import queries as digest_queries
from bot.mailer import public_links
from bot.send import ledger
from bot.web.admin.auth import Admin, Session, admin_of
from bot.web.admin.base import page, route, texts, when

WEEK = re.compile(r"^\d{4}-W\d{2}$")
COUNTED = ("sent", "failed", "skipped", "bounced", "pending")


def _digests(admin: Admin, limit: int | None) -> list[dict[str, Any]]:
    """Frozen digests, newest first, each with its delivery counts by state."""
    rows = []
    with admin.site.factory() as session:
        for digest in digest_queries.frozen_digests(session, limit):
            counts = ledger.delivery_counts(session, digest.id)
            rows.append({"week": digest.week, "status": digest.status, "subject": digest.subject,
                         "entries": digest.entry_count, "sent_at": when(digest.sent_at, admin),
                         "started": when(digest.created_at, admin),
                         "counts": {state: counts.get(state, 0) for state in COUNTED}
                         | {k: v for k, v in counts.items() if k not in COUNTED},
                         "recipients": sum(counts.values())})
    return rows


def _dashboard(admin: Admin) -> dict[str, Any]:
    factory = admin.site.factory
    report = status.gather(admin.site.settings, factory.kw["bind"], factory)
    return {"report": report, "digests": _digests(admin, 5)}


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def day_name(day: str, admin: Admin) -> str:
    """``mon`` as the console's language names it (Monday, 星期一)."""
    from babel.dates import get_day_names

    index = DAYS.index(day) if day in DAYS else None
    if index is None:
        return day
    return str(get_day_names("wide", locale=texts(admin).locale)[index])


async def dashboard(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    data = await admin.site.db(_dashboard, admin)
    return page(request, admin, session, "dashboard.html", **data,
                send_day=day_name(data["report"]["schedule"]["send_day"], admin),
                short=lambda iso: when(_parse(iso), admin))


def _parse(iso: str | None) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(iso) if iso else None


async def archive(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    return page(request, admin, session, "archive.html",
                digests=await admin.site.db(_digests, admin, None))


def _email(admin: Admin, week: str) -> str | None:
    with admin.site.factory() as session:
        digest = digest_queries.digest_for_week(session, week)
        return None if digest is None else public_links(digest.html, admin.site.home)


async def archive_week(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    week = request.path_params["week"].upper()
    rows = [d for d in await admin.site.db(_digests, admin, None) if d["week"] == week]
    if not WEEK.match(week) or not rows:
        raise HTTPException(404)
    return page(request, admin, session, "archive_week.html", digest=rows[0])


async def archive_email(request: Request, session: Session) -> Response:
    """The email as it was frozen, for the archive page's frame."""
    admin = admin_of(request)
    week = request.path_params["week"].upper()
    html = await admin.site.db(_email, admin, week) if WEEK.match(week) else None
    if html is None:
        raise HTTPException(404)
    return HTMLResponse(html)


ROUTES = [
    route("", dashboard),
    route("/", dashboard),
    route("/archive", archive),
    route("/archive/{week}", archive_week),
    route("/archive/{week}/email", archive_email, frame=True),
]
