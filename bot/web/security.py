"""What guards the public pages: the rate limits' values and keys, the client's
address behind a proxy, the request body limit, the headers on every answer
(CSP, frames, referrers), and redirects that go to DIGESTBOT_BASE_URL only.

Pure ASGI; nothing here knows about pages or the database (the rate limits
count in the database: ``bot.web.limits``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 10 * 1024

# every page that may show an address or carry a token in its URL
PRIVATE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                   "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}


# every answer of the app, unless a handler set its own (the admin console does):
# no scripts or frames on the public pages, styles inline (the archived email
# has them on every element), forms post only to us, no framing, no referrer
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class RateLimits:
    """Subscribe requests allowed, as (count, seconds), per client IP and per address."""

    per_ip: tuple[int, float] = (5, 600.0)  # 5 requests per 10 minutes
    per_address: tuple[int, float] = (3, 3600.0)  # 3 requests per hour


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, declared or streamed.

    A declared length over the limit is answered at once by ``too_large``;
    a body that grows past it while streaming raises HTTPException(413),
    which the app's error handler turns into the same page.
    """

    def __init__(self, app: ASGIApp, too_large: Callable[[Request], Awaitable[Response]],
                 limit: int = MAX_BODY, larger: Mapping[str, int] | None = None) -> None:
        """``larger``: paths that take bigger bodies (the console's CSV import), and their limits."""
        self.app, self.too_large, self.limit = app, too_large, limit
        self.larger = dict(larger or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.limit)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = limit + 1
                if declared > limit:
                    response = await self.too_large(Request(scope))
                    await response(scope, receive, send)
                    return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413)
            return message

        await self.app(scope, limited, send)


class SecurityHeaders:
    """Add ``SECURITY_HEADERS`` to every HTTP answer that does not set them itself:
    every page (the archive, error pages, the feed) gets a policy, not only those
    that remember to ask for one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


# --- who is asking ---------------------------------------------------------------------

@cache
def _networks(trusted: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in trusted)


def _trusted(host: str, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in networks)


def client_ip(request: Request, trusted_proxies: tuple[str, ...]) -> str:
    """The client's address, for rate limits and logs.

    The peer of the connection, unless it is one of ``DIGESTBOT_TRUSTED_PROXIES``:
    then X-Forwarded-For is read from its end (what the last proxy added)
    backwards, skipping the trusted proxies, and the first address that is not
    one of them is the client. Addresses a client put in the header itself
    come before that and are never believed, so a client cannot pick its own
    address; and a request not from a trusted proxy keeps its peer address
    whatever it claims.
    """
    peer = request.client.host if request.client else "unknown"
    networks = _networks(trusted_proxies)
    if not _trusted(peer, networks):
        return peer
    hops = [hop.strip() for value in request.headers.getlist("x-forwarded-for")
            for hop in value.split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return peer  # a malformed hop: nothing before it can be trusted
        if not _trusted(hop, networks):
            return hop
    return hops[0] if hops else peer


def address_rate_key(address: str) -> str:
    """One rate-limit bucket per mailbox, not per spelling: ``victim+1@`` and
    ``victim+2@`` reach the same inbox (subaddresses), as do ``v.i.c.t.i.m@``
    and ``victim@`` at Gmail, so they count together."""
    local, _, domain = address.lower().rpartition("@")
    local = local.split("+", 1)[0]
    if domain in ("gmail.com", "googlemail.com"):
        local, domain = local.replace(".", ""), "gmail.com"
    return f"{local}@{domain}"


def slash_redirect(request: Request, base_url: str) -> Response | None:
    """``/archive/`` -> ``/archive``, on DIGESTBOT_BASE_URL: the redirect
    Starlette would make from the request's Host header, which a client
    chooses (``Host: evil.example`` would send the reader there)."""
    path = request.url.path
    if request.method not in ("GET", "HEAD") or len(path) < 2 or not path.endswith("/"):
        return None
    scope = {**request.scope, "path": path.rstrip("/")}
    if not any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
        return None
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(base_url.rstrip("/") + path.rstrip("/") + query, status_code=307)
