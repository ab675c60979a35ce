"""Logging in and out, and the console's own script and style files."""

from __future__ import annotations

import logging
import math
from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bot.web.admin.auth import LOGIN_MAX_WAIT, Session, TooManyWaiting, admin_of
from bot.web.admin.base import field, page, route, texts

log = logging.getLogger(__name__)

STATIC = {"admin.css": "text/css; charset=utf-8", "admin.js": "text/javascript; charset=utf-8"}


async def login_page(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    if session.user:
        return RedirectResponse(admin.safe_next(request.query_params.get("next")), status_code=303)
    response = page(request, admin, session, "login.html", error=None,
                    next=admin.safe_next(request.query_params.get("next")))
    return admin.save(response, session)  # the anonymous cookie carries the login form's CSRF token


async def login(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    form = await request.form()
    target = admin.safe_next(field(form, "next", 2000))
    client = admin.client(request)
    try:
        right = await admin.try_login(client, field(form, "password", 1000))
    except TooManyWaiting:
        log.warning("admin login: too many attempts at once from %s", client)
        response = page(request, admin, session, "login.html", status=429, next=target,
                        error=texts(admin).gettext(
                            "Too many login attempts at once. Wait a few seconds and try again."))
        response.headers["Retry-After"] = str(math.ceil(LOGIN_MAX_WAIT))
        return response
    if not right:
        log.warning("admin login: wrong password from %s", client)
        return page(request, admin, session, "login.html", status=401, next=target,
                    error=texts(admin).gettext("That password is not right."))
    log.info("admin login from %s", client)
    # a new session (new CSRF token) at login: a token seen before it is worth nothing after
    return admin.save(RedirectResponse(target, status_code=303), admin.new_session("admin"))


async def logout(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    return admin.forget(RedirectResponse(admin.prefix + "/login", status_code=303))


async def static(request: Request) -> Response:
    """``/static/admin/admin.js`` and ``admin.css``: plain files shipped in the package."""
    name = request.path_params["name"]
    if name not in STATIC:
        return Response("not found\n", status_code=404, media_type="text/plain")
    body = resources.files("bot.web.admin").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name],
                    headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})


ROUTES = [
    route("/login", login_page, login=False),
    route("/login", login, ["POST"], login=False),
    route("/logout", logout, ["POST"]),
    Route("/static/admin/{name}", static, methods=["GET"]),
]
