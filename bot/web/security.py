"""What guards the public pages: the rate limits' values, the request body
limit, and the headers that keep personal pages out of caches, referrers and
frames.

Pure ASGI; nothing here knows about pages or the database (the rate limits
count in the database: ``bot.web.limits``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 10 * 1024

# every page that may show an address or carry a token in its URL
PRIVATE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                   "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}


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
                 limit: int = MAX_BODY) -> None:
        self.app, self.too_large, self.limit = app, too_large, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.limit + 1
                if declared > self.limit:
                    response = await self.too_large(Request(scope))
                    await response(scope, receive, send)
                    return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413)
            return message

        await self.app(scope, limited, send)
