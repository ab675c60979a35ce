"""What every console handler shares: the guard each route goes through, the
one way to answer with a page, and the redirect back with a message.

A handler is ``async def handler(request, session) -> Response``; ``route``
wraps it so that, before it runs, the admin password is configured, the
request is logged in (unless the route is the login page), and a POST carries
the session's CSRF token; after it, the console's headers are set
(``auth.HEADERS``: no-store, CSP, no framing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.errors import BotError
from bot.templating import Language, language, render_template
from bot.web.admin.auth import FRAME_HEADERS, HEADERS, Admin, Handler, Session, admin_of, csrf_ok

MAX_FIELDS = 200  # a draft's order form names every section; nothing needs more


def route(path: str, handler: Handler, methods: Sequence[str] = ("GET",), *,
          login: bool = True, frame: bool = False, files: int = 0) -> Route:
    """A console route at ``/admin`` + ``path``, behind the guard (see the module
    docstring); a POST may carry up to ``files`` uploaded files (none by default)."""

    async def endpoint(request: Request) -> Response:
        admin = admin_of(request)
        try:
            configured = admin.password_hash() is not None
        except BotError as exc:  # a password file that cannot be read
            return page(request, admin, None, "nopassword.html", status=500, problem=exc)
        if not configured:
            status = 200 if request.url.path.rstrip("/").endswith("/admin") else 403
            return page(request, admin, None, "nopassword.html", status=status, problem=None)
        if login:
            session = admin.logged_in(request)
            if session is None:
                return admin.refuse_anonymous(request)
        else:
            session = admin.session(request) or admin.new_session()
        if request.method == "POST":
            await request.form(max_fields=MAX_FIELDS, max_files=files)
            if not await csrf_ok(request, session):
                lang = texts(admin)
                return page(request, admin, None, "message.html", status=403,
                            heading=lang.gettext("Refused"),
                            lines=[lang.gettext("This form is out of date or did not come from this "
                                                "console (its security token is missing or wrong)."),
                                   lang.gettext("Go back, reload the page and try again.")])
        response = await handler(request, session)
        response.headers.update(FRAME_HEADERS if frame else HEADERS)
        return response

    return Route("/admin" + path, endpoint, methods=list(methods))


def page(request: Request, admin: Admin, session: Session | None, template: str, *,
         status: int = 200, **context: Any) -> Response:
    """A console page (``templates/admin/<template>``). Shows and clears the
    session's message, if it has one."""
    settings = admin.site.settings
    body = render_template(
        settings.language, f"admin/{template}", prefix=admin.prefix, home=admin.site.home,
        site_title=settings.title, csrf=session.csrf if session else "",
        logged_in=bool(session and session.user), flash=session.flash if session else None,
        path=request.url.path, **context)
    response = HTMLResponse(body, status_code=status, headers=HEADERS)
    if session is not None and session.flash:
        admin.save(response, replace(session, flash=None))
    return response


def back(admin: Admin, session: Session, to: str, message: str | None = None) -> Response:
    """303 to a console page (``to`` under ``/admin``), with a message for it."""
    response = RedirectResponse(admin.prefix + to, status_code=303)
    if message:
        admin.save(response, replace(session, flash=message))
    return response


def field(form: Any, name: str, limit: int = 300) -> str:
    """A text field of a posted form ('' if absent), at most ``limit`` characters."""
    value = form.get(name)
    return value[:limit] if isinstance(value, str) else ""


def texts(admin: Admin) -> Language:
    """The console's words, in the configured language (DIGESTBOT_LANGUAGE)."""
    return language(admin.site.settings.language)


def when(moment: datetime | None, admin: Admin) -> str:
    """A stored time in the configured zone, as the CLI shows it."""
    from bot.times import local_short

    return local_short(moment, admin.site.settings.tz) if moment else ""
