"""Who may use the console: one admin, a signed session cookie, CSRF tokens,
a login rate limit, and the headers every console answer carries.

- The password's argon2 hash comes from DIGESTBOT_ADMIN_PASSWORD_HASH or the
  file DIGESTBOT_ADMIN_PASSWORD_FILE (``bot.passwords``). Without one, every
  console route shows only how to set it.
- The session is a cookie signed with itsdangerous (the app's secret key, a
  salt of its own): ``HttpOnly``, ``SameSite=Lax``, ``Secure`` when the base
  URL is https, scoped to the console's path, and valid for
  DIGESTBOT_ADMIN_SESSION_HOURS from the login (not from the last request).
  It names the password hash it was made under (a fingerprint), so changing
  the password ends every session.
- Every form carries the session's CSRF token; a POST without the right one
  is refused (403) before anything else happens. The login form has one
  too (the anonymous cookie holds it), so nobody can log a browser in
  under their own session.
- Login attempts are counted per client address and in total, in the
  database (``bot.web.limits``: every instance shares the count); over the
  limit the answer is 429 and the password is not even checked.
- Anonymous requests: a browser (Accept: text/html) is sent to the login
  page, anything else gets 401.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from bot.passwords import admin_password_hash, verify_password
from bot.tokens import load_secret_key
from bot.web.limits import SharedWindow
from bot.web.security import client_ip
from bot.web.site import Site

COOKIE = "digestbot_admin"
SALT = "digestbot-admin-session"
LOGIN_PER_IP = (10, 600.0)  # attempts per client address in 10 minutes
LOGIN_TOTAL = (60, 600.0)  # attempts from everywhere in 10 minutes

# On every console answer: never cached, never framed by another site, no
# referrer, and a content security policy that allows only our own script
# and style files (no inline script, no CDN).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "frame-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HEADERS = {"Cache-Control": "no-store", "Pragma": "no-cache", "Content-Security-Policy": CSP,
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "X-Content-Type-Options": "nosniff"}
# the email previews, shown in the console's frames: the email's inline styles, no script
FRAME_HEADERS = HEADERS | {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; "
                               "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
    "X-Frame-Options": "SAMEORIGIN"}


@dataclass
class Session:
    """What the cookie holds. ``user`` is set once logged in."""

    csrf: str
    user: str | None = None
    since: float = 0.0  # login time (epoch seconds)
    key: str = ""  # fingerprint of the password hash at login
    flash: str | None = None

    def dump(self) -> dict[str, Any]:
        return {"c": self.csrf, "u": self.user, "s": self.since, "k": self.key, "f": self.flash}


@dataclass
class Admin:
    """The console's shared parts; one per app (``app.state.admin``)."""

    site: Site
    clock: Callable[[], float] = time.time
    per_ip: SharedWindow = field(init=False)
    total: SharedWindow = field(init=False)

    def __post_init__(self) -> None:
        self.per_ip = SharedWindow(self.site.factory, "login-ip", *LOGIN_PER_IP)
        self.total = SharedWindow(self.site.factory, "login-total", *LOGIN_TOTAL)
        self._serializer = URLSafeTimedSerializer(load_secret_key(self.site.settings), salt=SALT)

    # --- the password ----------------------------------------------------------------

    def password_hash(self) -> str | None:
        """Read each time: a changed hash file takes effect without a restart."""
        return admin_password_hash(self.site.settings)

    def fingerprint(self, stored: str) -> str:
        return hashlib.sha256(stored.encode()).hexdigest()[:16]

    def check_password(self, password: str) -> bool:
        stored = self.password_hash()
        return bool(stored) and verify_password(stored or "", password)

    def may_try_login(self, request: Request) -> bool:
        """Counts the attempt in the database: call it off the event loop."""
        client = client_ip(request, self.site.settings.trusted_proxies)  # behind a proxy: the real client
        return self.per_ip.allow(client) and self.total.allow("*")

    # --- the cookie ----------------------------------------------------------------

    @property
    def lifetime(self) -> int:
        return self.site.settings.admin_session_hours * 3600

    @property
    def prefix(self) -> str:
        """The console's path: ``/admin`` under the public URL's path."""
        return self.site.home + "admin"

    def session(self, request: Request) -> Session | None:
        """The valid session of this request, logged in or not; None if none or forged."""
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            data = self._serializer.loads(raw, max_age=self.lifetime)
            found = Session(csrf=str(data["c"]), user=data["u"], since=float(data["s"]),
                            key=str(data["k"]), flash=data["f"])
        except (BadSignature, KeyError, TypeError, ValueError):
            return None
        if found.user is not None:
            stored = self.password_hash()
            if (not stored or not hmac.compare_digest(found.key, self.fingerprint(stored))
                    or self.clock() - found.since > self.lifetime):
                return None
        return found

    def logged_in(self, request: Request) -> Session | None:
        found = self.session(request)
        return found if found is not None and found.user is not None else None

    def new_session(self, user: str | None = None) -> Session:
        stored = self.password_hash() if user else None
        return Session(csrf=secrets.token_urlsafe(24), user=user,
                       since=self.clock() if user else 0.0,
                       key=self.fingerprint(stored) if stored else "")

    def save(self, response: Response, session: Session) -> Response:
        left = self.lifetime - int(self.clock() - session.since) if session.user else self.lifetime
        response.set_cookie(
            COOKIE, self._serializer.dumps(session.dump()), max_age=max(left, 1), path=self.prefix,
            httponly=True, samesite="lax",
            secure=urlsplit(self.site.settings.base_url).scheme == "https")
        return response

    def forget(self, response: Response) -> Response:
        response.delete_cookie(COOKIE, path=self.prefix, httponly=True, samesite="lax",
                               secure=urlsplit(self.site.settings.base_url).scheme == "https")
        return response

    # --- answers --------------------------------------------------------------------

    def refuse_anonymous(self, request: Request) -> Response:
        """A browser goes to the login page; a script gets 401."""
        if "text/html" in request.headers.get("accept", ""):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            response: Response = RedirectResponse(
                f"{self.prefix}/login?next={quote(target, safe='')}", status_code=303)
        else:
            response = PlainTextResponse("log in to the admin console first\n", status_code=401,
                                         headers={"WWW-Authenticate": 'Cookie realm="digestbot admin"'})
        response.headers.update(HEADERS)
        return response

    def safe_next(self, target: str | None) -> str:
        """Where to go after logging in: a console path, never another site."""
        if target and target.startswith(self.prefix) and not target.startswith("//") \
                and "\\" not in target:
            return target
        return self.prefix


def admin_of(request: Request) -> Admin:
    admin: Admin = request.app.state.admin
    return admin


async def csrf_ok(request: Request, session: Session) -> bool:
    """The form's token is the session's (read once; handlers use ``request.form()`` after)."""
    form = await request.form()
    sent = form.get("csrf")
    return isinstance(sent, str) and hmac.compare_digest(sent, session.csrf)


Handler = Callable[[Request, Session], Awaitable[Response]]
