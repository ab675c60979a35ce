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
- Wrong passwords slow the next attempts, never refuse them: failures are
  counted per client address and for the account, in the database
  (``bot.web.limits.FailureLog``: every instance shares the count), and an
  attempt after ``LOGIN_FREE`` recent failures waits (``login_wait``: doubling,
  at most ``LOGIN_MAX_WAIT`` seconds) before its password is checked. One
  address's attempts are checked one at a time, so waiting cannot be dodged by
  sending many at once; more than ``LOGIN_QUEUE`` waiting from one address get
  429. The right password therefore always gets in within a few seconds, from
  an address that is not the flood's, however long the flood goes on. The
  client's address is the connection's peer; ``X-Forwarded-For`` only counts
  from DIGESTBOT_TRUSTED_PROXIES (``bot.web.security.client_ip``).
- Anonymous requests: a browser (Accept: text/html) is sent to the login
  page, anything else gets 401.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from bot.passwords import admin_password_hash, verify_password
from bot.tokens import load_secret_key
from bot.web.limits import FailureLog
from bot.web.security import client_ip
from bot.web.site import Site

COOKIE = "digestbot_admin"
SALT = "digestbot-admin-session"
LOGIN_FREE = 5  # recent wrong passwords (per address, and for the account) before any wait
LOGIN_FIRST_WAIT = 0.5  # seconds; doubled with each further failure
LOGIN_MAX_WAIT = 4.0  # an attempt never waits longer than this
LOGIN_WINDOW = 900.0  # failures older than this are forgotten
LOGIN_QUEUE = 3  # attempts from one address waiting at once; more get 429
ACCOUNT = "admin"  # the console's one account

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


def login_wait(failures: int, since_last: float) -> float:
    """How long an attempt waits after ``failures`` recent wrong passwords, the
    last ``since_last`` seconds ago: nothing for the first ``LOGIN_FREE``, then
    ``LOGIN_FIRST_WAIT`` doubling up to ``LOGIN_MAX_WAIT``, counted from the
    last failure (time that has passed since is not waited again)."""
    if failures < LOGIN_FREE:
        return 0.0
    wait = min(LOGIN_MAX_WAIT, LOGIN_FIRST_WAIT * 2 ** min(failures - LOGIN_FREE, 16))
    return max(0.0, wait - max(0.0, since_last))


class TooManyWaiting(Exception):
    """More than ``LOGIN_QUEUE`` attempts from one address are waiting already."""


@dataclass
class Admin:
    """The console's shared parts; one per app (``app.state.admin``).

    ``clock`` and ``sleep`` are the login's sense of time: tests pass their own."""

    site: Site
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    failures: FailureLog = field(init=False)

    def __post_init__(self) -> None:
        self.failures = FailureLog(self.site.factory, "login-failed", LOGIN_WINDOW,
                                   clock=lambda: datetime.fromtimestamp(self.clock(), UTC))
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # per address: its lock, waiting
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

    def client(self, request: Request) -> str:
        """Who is logging in: behind a trusted proxy, the client it names."""
        return client_ip(request, self.site.settings.trusted_proxies)

    async def try_login(self, client: str, password: str) -> bool:
        """Wait as the failures ask (``login_wait``), then check ``password``;
        one attempt per address at a time. TooManyWaiting if the queue is full."""
        lock, waiting = self._turns.get(client, (asyncio.Lock(), 0))
        if waiting >= LOGIN_QUEUE:
            raise TooManyWaiting(client)
        self._turns[client] = (lock, waiting + 1)
        try:
            async with lock:
                await self.sleep(await run_in_threadpool(self.login_delay, client))
                right = await run_in_threadpool(self.check_password, password)  # argon2: slow
                await run_in_threadpool(self._after_attempt, client, right)
                return right
        finally:
            lock, waiting = self._turns[client]
            if waiting <= 1:
                del self._turns[client]
            else:
                self._turns[client] = (lock, waiting - 1)

    def login_delay(self, client: str) -> float:
        """The wait before this address's next attempt: the longer of its own and
        the account's (database I/O: off the event loop)."""
        now = self.clock()
        waits = [0.0]
        for key in (f"ip:{client}", f"account:{ACCOUNT}"):
            count, last = self.failures.recent(key)
            if last is not None:
                waits.append(login_wait(count, now - last.timestamp()))
        return max(waits)

    def _after_attempt(self, client: str, right: bool) -> None:
        if right:  # the address is the admin's: its own failures are forgiven
            self.failures.clear(f"ip:{client}")
            return
        self.failures.record(f"ip:{client}")
        self.failures.record(f"account:{ACCOUNT}")

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
