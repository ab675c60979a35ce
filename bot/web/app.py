"""``create_app``: the Site, the routes of each part, the error pages, the body limit.

Bad input gets a page and a 4xx, never a traceback: malformed address (400),
tampered token (400), expired token (410), body over 10 KB (413), too many
subscribe requests (429, per client IP and per address); anything else is a
logged 500 page.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from bot.config import Settings
from bot.ingest.queries import first_feed_title
from bot.mailer import Sender, make_sender
from bot.titles import titled
from bot.tokens import Tokens
from bot.web import admin, archive, feed, health, public
from bot.web.limits import SharedWindow, utcnow
from bot.web.security import SECURITY_HEADERS, BodyLimit, RateLimits, SecurityHeaders, slash_redirect
from bot.web.site import HealthCheck, Site, site_of

log = logging.getLogger(__name__)

# which page answers which HTTP error; other 4xx are "invalid", 5xx "error"
ERROR_PAGES = {404: "notfound", 405: "method", 413: "toolarge", 429: "ratelimit"}


def create_app(
    settings: Settings,
    factory: sessionmaker[Session],
    *,
    tokens: Tokens | None = None,
    sender_factory: Callable[[], Sender] | None = None,
    limits: RateLimits | None = None,
    health_checks: Mapping[str, HealthCheck] | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> Starlette:
    """The web app. ``health_checks`` adds named checks to ``/healthz`` (see
    ``bot.web.health``); ``tokens``, ``sender_factory`` and ``clock`` are for tests.
    The rate limits count in the database (``bot.web.limits``), so every
    instance serving the same database enforces them together."""
    limits = limits or RateLimits()
    configured = settings
    settings = titled(settings, factory)  # the pages and the confirmation mail name the digest
    site = Site(
        settings=settings,
        factory=factory,
        tokens=tokens or Tokens.from_settings(settings),
        make_sender=sender_factory or partial(make_sender, settings),
        ip_window=SharedWindow(factory, "subscribe-ip", *limits.per_ip, clock=clock),
        address_window=SharedWindow(factory, "subscribe-address", *limits.per_address, clock=clock),
        health_checks=dict(health_checks or {}),
    )
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: http_error,
        Exception: server_error,
    }
    app = Starlette(
        routes=[*public.ROUTES, *archive.ROUTES, *feed.ROUTES, *health.ROUTES, *admin.ROUTES],
        exception_handlers=handlers,
        middleware=[Middleware(SecurityHeaders),  # CSP, frames, referrer: on every answer
                    Middleware(BodyLimit, too_large=too_large,  # type: ignore[arg-type]
                               larger=admin.LARGE_BODIES),
                    *([] if configured.title else [Middleware(FollowFeedTitle, site=site,
                                                              configured=configured)])],
    )
    # Starlette's own /archive/ -> /archive redirect is built from the Host header,
    # which a client chooses; ours (http_error) goes to DIGESTBOT_BASE_URL
    app.router.redirect_slashes = False
    app.state.site = site
    app.state.admin = admin.Admin(site)  # the operator's console (bot.web.admin)
    return app


class FollowFeedTitle:
    """With DIGESTBOT_TITLE unset, the site is named after the first feed's own
    title (bot.titles), which a poll may bring after the app started: read it
    again before a request while there is none yet, then once every
    ``RECHECK_SECONDS`` (a feed's title can change)."""

    RECHECK_SECONDS = 60.0

    def __init__(self, app: Any, site: Site, configured: Settings) -> None:
        self.app, self.site, self.configured = app, site, configured
        self.found = False  # a feed's title names the site
        self.checked = time.monotonic()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (
                not self.found or time.monotonic() - self.checked >= self.RECHECK_SECONDS):
            self.checked = time.monotonic()
            title = await run_in_threadpool(self._title)
            self.found = title is not None
            if title and title != self.site.settings.title:
                self.site.settings = dataclasses.replace(self.site.settings, title=title)
        await self.app(scope, receive, send)

    def _title(self) -> str | None:
        try:
            with self.site.factory() as session:
                return first_feed_title(session)
        except SQLAlchemyError:
            return None


async def too_large(request: Request) -> Response:
    return site_of(request).page("toolarge", status=413)


async def http_error(request: Request, exc: Exception) -> Response:
    code = exc.status_code if isinstance(exc, HTTPException) else 500
    if code == 404 and (moved := slash_redirect(request, site_of(request).settings.base_url)):
        return moved
    key = ERROR_PAGES.get(code) or ("error" if code >= 500 else "invalid")
    return site_of(request).page(key, status=code)


async def server_error(request: Request, exc: Exception) -> Response:
    log.error("error handling %s %s", request.method, request.url.path, exc_info=exc)
    response = site_of(request).page("error", status=500)
    for name, value in SECURITY_HEADERS.items():  # answered outside the middleware
        response.headers.setdefault(name, value)
    return response
