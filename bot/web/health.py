"""``GET /healthz``: the database answers, plus the named checks the app was given.

Each extra check returns a JSON-able value, or a pair (ok, detail); a falsy
value, ok False or an exception makes the answer 503. A failing check is
logged and reported, never a 500.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.web.site import Site, site_of

log = logging.getLogger(__name__)


def _database_ok(site: Site) -> bool:
    try:
        with site.factory() as session:
            session.execute(text("SELECT 1"))
        return True
    except Exception as exc:  # any failure means unhealthy, never a 500
        log.warning("health check: database query failed: %s", exc)
        return False


def _llm_report(site: Site) -> dict[str, Any]:
    from bot.llm.status import report

    with site.factory() as session:
        found = report(session, site.settings)
    found.pop("base_url", None)  # /healthz is public: no endpoint address
    return found


async def healthz(request: Request) -> Response:
    site = site_of(request)
    body: dict[str, Any] = {"status": "ok", "database": await site.db(_database_ok, site)}
    healthy = body["database"]
    if site.settings.llm_enabled and healthy:  # the optional reader: reported, never a reason for 503
        body["llm"] = await site.db(_llm_report, site)
    for name, check in site.health_checks.items():
        try:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
        except Exception as exc:
            log.warning("health check %s failed: %s", name, exc)
            result = (False, f"check failed: {exc}")
        # a check returns a value (falsy = unhealthy) or a pair (ok, detail)
        if isinstance(result, tuple) and len(result) == 2:
            ok, result = bool(result[0]), result[1]
        else:
            ok = bool(result)
        body[name] = result
        healthy = healthy and ok
    if not healthy:
        body["status"] = "error"
    return JSONResponse(body, status_code=200 if healthy else 503, headers={"Cache-Control": "no-store"})


ROUTES = [Route("/healthz", healthz, methods=["GET"])]
