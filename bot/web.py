"""The web app: subscribe, confirm, unsubscribe, the archive, a health check.

``create_app(settings, factory)`` builds a Starlette app; ``digestbot web``
serves it with uvicorn. ``DIGESTBOT_BASE_URL`` is its public address: links
in mails are built from it, and pages link relative to its path.

- ``POST /subscribe`` answers the same "check your inbox" page whether the
  address is new, pending or already confirmed, so the form reveals nothing
  about who is subscribed. Confirmation mails go out after the response
  (a background task), so timing reveals nothing either.
- ``GET /confirm/TOKEN`` only shows a button; ``POST`` confirms. Mail
  scanners that fetch links cannot subscribe anyone.
- ``POST /unsubscribe/TOKEN`` is RFC 8058 one-click: it unsubscribes at once
  and answers 200, whatever the body (form-encoded, multipart, empty), with
  no cookie or login, and is idempotent. ``GET`` shows a button.
- Bad input gets a page and a 4xx, never a traceback: malformed address
  (400), tampered token (400), expired token (410), body over 10 KB (413),
  too many subscribe requests (429, per client IP and per address).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import jinja2
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot import subscriptions
from bot.config import Settings
from bot.digest import queries as digest_queries
from bot.errors import BotError
from bot.mailer import UNSUBSCRIBE_PLACEHOLDER, Sender, SendFailure, make_sender
from bot.models import Digest, Subscriber
from bot.tokens import TokenExpired, TokenInvalid, Tokens

log = logging.getLogger(__name__)

MAX_BODY = 10 * 1024
WEEK_PATTERN = re.compile(r"^\d{4}-W\d{2}$")

STRINGS: dict[str, dict[str, str]] = {
    "zh": {
        "lang": "zh-CN",
        "home": "订阅",
        "archive": "往期周报",
        "subscribe_heading": "订阅每周精读",
        "intro": "每周一封邮件：一周的强化学习精读，按主题整理。随时可以退订。",
        "email_label": "邮箱地址",
        "subscribe_button": "订阅",
        "privacy": "我们只用这个地址发送周报。提交后会收到一封确认邮件，确认后才会开始发送。",
        "check_heading": "请查收邮件",
        "check_lines": "如果这个地址还没有订阅，我们刚刚发出了一封确认邮件。|"
                       "请打开邮件里的链接完成确认。没收到的话，看看垃圾邮件文件夹。",
        "bad_address": "这个邮箱地址看起来不对，请检查后再试。",
        "confirm_heading": "确认订阅",
        "confirm_lines": "点击下面的按钮，确认用 {address} 订阅。",
        "confirm_button": "确认订阅",
        "confirmed_heading": "订阅成功",
        "confirmed_lines": "{address} 已确认订阅，下一期周报会发到这个地址。|"
                           "每封周报底部都有退订链接。",
        "used_heading": "链接已失效",
        "used_lines": "这个确认链接已经用过，或者已不再有效。|"
                      "如果你已经确认过，就不需要再做什么了；否则请重新订阅。",
        "unsub_heading": "退订",
        "unsub_lines": "点击下面的按钮，停止接收「{title}」。",
        "unsub_button": "退订",
        "unsub_note": "退订后不会再收到周报，之后也可以随时重新订阅。",
        "unsubbed_heading": "已退订",
        "unsubbed_lines": "你不会再收到「{title}」了。|想回来的话，随时可以重新订阅。",
        "invalid_heading": "链接无效",
        "invalid_lines": "这个链接不完整或者被改动过。请直接使用邮件里的链接。",
        "expired_heading": "链接已过期",
        "expired_lines": "这个链接已经过期。|确认链接的有效期是 {hours} 小时，请重新订阅以获取新的链接。",
        "archive_heading": "往期周报",
        "archive_empty": "还没有发出过周报。",
        "notfound_heading": "没有找到",
        "notfound_lines": "这个页面不存在。",
        "toolarge_heading": "请求太大",
        "toolarge_lines": "提交的内容太大了。",
        "ratelimit_heading": "请稍后再试",
        "ratelimit_lines": "短时间内的订阅请求太多了。请过一会儿再试。",
        "method_heading": "不支持的请求",
        "method_lines": "这个地址不接受这种请求。",
        "error_heading": "出了点问题",
        "error_lines": "服务器暂时无法处理这个请求，请稍后再试。",
        "back_home": "返回首页",
    },
    "en": {
        "lang": "en",
        "home": "Subscribe",
        "archive": "Archive",
        "subscribe_heading": "Subscribe to the weekly digest",
        "intro": "One email a week: the week's reinforcement-learning deep reads, grouped "
                 "by theme. Unsubscribe any time.",
        "email_label": "Email address",
        "subscribe_button": "Subscribe",
        "privacy": "We use this address only to send the digest. You'll get a confirmation "
                   "email first; nothing is sent until you confirm.",
        "check_heading": "Check your inbox",
        "check_lines": "If this address isn't subscribed yet, we've just sent it a "
                       "confirmation email.|Open the link in it to confirm. Nothing there? "
                       "Have a look in the spam folder.",
        "bad_address": "That doesn't look like an email address. Please check it and try again.",
        "confirm_heading": "Confirm your subscription",
        "confirm_lines": "Press the button to confirm the subscription for {address}.",
        "confirm_button": "Confirm subscription",
        "confirmed_heading": "You're subscribed",
        "confirmed_lines": "{address} is confirmed; the next digest goes there.|"
                           "Every digest has an unsubscribe link at the bottom.",
        "used_heading": "Link no longer valid",
        "used_lines": "This confirmation link has been used already or no longer applies.|"
                      "If you confirmed before, there's nothing more to do; otherwise please "
                      "subscribe again.",
        "unsub_heading": "Unsubscribe",
        "unsub_lines": "Press the button to stop receiving “{title}”.",
        "unsub_button": "Unsubscribe",
        "unsub_note": "You can subscribe again any time.",
        "unsubbed_heading": "You're unsubscribed",
        "unsubbed_lines": "You won't receive “{title}” any more.|You can subscribe again any time.",
        "invalid_heading": "Link not valid",
        "invalid_lines": "This link is incomplete or has been changed. Please use the link "
                         "from the email as it is.",
        "expired_heading": "Link expired",
        "expired_lines": "This link has expired.|Confirmation links work for {hours} hours; "
                         "please subscribe again to get a new one.",
        "archive_heading": "Archive",
        "archive_empty": "No digest has been sent yet.",
        "notfound_heading": "Not found",
        "notfound_lines": "There is no such page.",
        "toolarge_heading": "Request too large",
        "toolarge_lines": "What was sent is too large.",
        "ratelimit_heading": "Please try again later",
        "ratelimit_lines": "Too many subscribe requests in a short time. Please wait a while "
                           "and try again.",
        "method_heading": "Not supported",
        "method_lines": "This address doesn't accept that kind of request.",
        "error_heading": "Something went wrong",
        "error_lines": "The server couldn't handle this request right now. Please try again later.",
        "back_home": "Back to the start page",
    },
}


# --- rate limits ----------------------------------------------------------------------------

class SlidingWindow:
    """At most ``limit`` hits per key in any ``seconds``-long window, in memory."""

    def __init__(self, limit: int, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.limit, self.seconds, self.clock = limit, seconds, clock
        self._hits: dict[str, deque[float]] = {}
        self._calls = 0

    def allow(self, key: str) -> bool:
        now = self.clock()
        self._calls += 1
        if self._calls % 1000 == 0:
            self._forget(now)
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - self.seconds:
            hits.popleft()
        if len(hits) >= self.limit:
            return False
        hits.append(now)
        return True

    def _forget(self, now: float) -> None:
        for key in [k for k, hits in self._hits.items() if not hits or hits[-1] <= now - self.seconds]:
            del self._hits[key]


@dataclass(frozen=True)
class RateLimits:
    per_ip: tuple[int, float] = (5, 600.0)  # 5 requests per 10 minutes
    per_address: tuple[int, float] = (3, 3600.0)  # 3 requests per hour


# --- body size ------------------------------------------------------------------------------

class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app, self.limit = app, limit

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
                    request = Request(scope)
                    response = await too_large(request, HTTPException(413))
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


async def too_large(request: Request, exc: Exception) -> Response:
    page: Callable[..., Response] = request.app.state.page
    return page("toolarge", status=413)


# --- the app ---------------------------------------------------------------------------------

def _load_web_template(name: str) -> str | None:
    try:
        return resources.files("bot.templates").joinpath("web", name).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def web_templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_web_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


HealthCheck = Callable[[], Any]


def create_app(
    settings: Settings,
    factory: sessionmaker[Session],
    *,
    tokens: Tokens | None = None,
    sender_factory: Callable[[], Sender] | None = None,
    limits: RateLimits | None = None,
    health_checks: Mapping[str, HealthCheck] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Starlette:
    """The web app. ``health_checks`` adds named checks to ``/healthz``: each
    returns a JSON-able value, or a pair (ok, detail); a falsy value, ok False
    or an exception makes the answer 503."""
    tokens = tokens or Tokens.from_settings(settings)
    make = sender_factory or partial(make_sender, settings)
    limits = limits or RateLimits()
    ip_window = SlidingWindow(*limits.per_ip, clock=clock)
    address_window = SlidingWindow(*limits.per_address, clock=clock)
    extra_checks = dict(health_checks or {})
    env = web_templates()
    words = STRINGS[settings.language]
    home = urlsplit(settings.base_url).path.rstrip("/") + "/"
    private = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
               "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}

    def page(key: str, *, status: int = 200, template: str = "message.html",
             back: bool = True, **context: Any) -> HTMLResponse:
        fmt = {"title": settings.title, "hours": settings.confirm_ttl_hours,
               "address": context.pop("address", "")}
        lines = [line.format(**fmt) for line in words.get(f"{key}_lines", "").split("|") if line]
        body = env.get_template(template).render(
            t=words, site_title=settings.title, home=home, heading=words[f"{key}_heading"],
            lines=lines, back=back, **context)
        return HTMLResponse(body, status_code=status, headers=private)

    def read_token(kind: str, token: str) -> Any:
        if kind == "confirm":
            return tokens.read_confirm(token)
        return tokens.read_unsubscribe(token)

    def token_problem(exc: Exception) -> HTMLResponse:
        if isinstance(exc, TokenExpired):
            return page("expired", status=410)
        return page("invalid", status=400)

    async def db(func: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(func, *args)

    # -- subscribe ------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        return page("subscribe", template="home.html", back=False, error=None, value="")

    async def subscribe(request: Request) -> Response:
        client = request.client.host if request.client else "unknown"
        if not ip_window.allow(client):
            return page("ratelimit", status=429)
        form = await request.form(max_files=0, max_fields=10)
        raw = form.get("email")
        value = raw if isinstance(raw, str) else ""
        try:
            address = subscriptions.normalize_address(value)
        except subscriptions.AddressError:
            return page("subscribe", status=400, template="home.html", back=False,
                        error=words["bad_address"], value=value[:254])
        if not address_window.allow(address.lower()):
            return page("ratelimit", status=429)
        change = await db(subscriptions.subscribe, factory, address)
        task = BackgroundTask(send_confirmation, change.subscriber) if change.confirm_mail else None
        response = page("check")
        response.background = task
        return response

    def send_confirmation(sub: Any) -> None:
        sender = make()
        try:
            subscriptions.send_confirmation(settings, tokens, sender, sub)
        except (BotError, SendFailure) as exc:
            log.error("could not send the confirmation mail to subscriber %s: %s", sub.id, exc)
        finally:
            sender.close()

    # -- confirm --------------------------------------------------------------------------

    def pending_address(claim: Any) -> str | None:
        with factory() as session:
            sub = session.get(Subscriber, claim.subscriber_id)
            if sub is None or sub.status != "pending" or sub.token_nonce != claim.nonce:
                return None
            return str(sub.email)

    def do_confirm(claim: Any) -> str | None:
        try:
            with factory() as session, session.begin():
                return str(subscriptions.confirm(session, claim, datetime.now(UTC)).email)
        except subscriptions.LinkUsed:
            return None

    async def confirm_page(request: Request) -> Response:
        try:
            claim = read_token("confirm", request.path_params["token"])
        except (TokenInvalid, TokenExpired) as exc:
            return token_problem(exc)
        address = await db(pending_address, claim)
        if address is None:
            return page("used", status=400)
        return page("confirm", template="action.html", address=address,
                    action=f"{home}confirm/{request.path_params['token']}",
                    button=words["confirm_button"], note=None)

    async def confirm_post(request: Request) -> Response:
        try:
            claim = read_token("confirm", request.path_params["token"])
        except (TokenInvalid, TokenExpired) as exc:
            return token_problem(exc)
        address = await db(do_confirm, claim)
        if address is None:
            return page("used", status=400)
        return page("confirmed", address=address)

    # -- unsubscribe -----------------------------------------------------------------------

    def do_unsubscribe(claim: Any) -> bool:
        with factory() as session, session.begin():
            return subscriptions.unsubscribe(session, claim, datetime.now(UTC))

    async def unsubscribe_page(request: Request) -> Response:
        try:
            read_token("unsubscribe", request.path_params["token"])
        except (TokenInvalid, TokenExpired) as exc:
            return token_problem(exc)
        return page("unsub", template="action.html",
                    action=f"{home}unsubscribe/{request.path_params['token']}",
                    button=words["unsub_button"], note=words["unsub_note"])

    async def unsubscribe_post(request: Request) -> Response:
        try:
            claim = read_token("unsubscribe", request.path_params["token"])
        except (TokenInvalid, TokenExpired) as exc:
            return token_problem(exc)
        # RFC 8058: the body is "List-Unsubscribe=One-Click" (form-encoded or
        # multipart) or a bare button press; the token alone decides.
        await request.body()
        await db(do_unsubscribe, claim)
        return page("unsubbed")

    # -- archive -------------------------------------------------------------------------------

    def archive_rows() -> list[tuple[str, str, datetime | None]]:
        with factory() as session:
            return digest_queries.sent_digests(session)

    def archived_html(week: str) -> str | None:
        with factory() as session:
            html = session.scalar(
                select(Digest.html).where(Digest.week == week, Digest.status == "sent"))
        if html is None:
            return None
        return str(html).replace(UNSUBSCRIBE_PLACEHOLDER, home)

    async def archive(request: Request) -> Response:
        return page("archive", template="archive.html", back=False, digests=await db(archive_rows))

    async def archive_week(request: Request) -> Response:
        week = request.path_params["week"].upper()
        html = await db(archived_html, week) if WEEK_PATTERN.match(week) else None
        if html is None:
            raise HTTPException(404)
        return HTMLResponse(html, headers={"X-Content-Type-Options": "nosniff"})

    # -- health ----------------------------------------------------------------------------------

    def database_ok() -> bool:
        try:
            with factory() as session:
                session.execute(text("SELECT 1"))
            return True
        except Exception as exc:  # any failure means unhealthy, never a 500
            log.warning("health check: database query failed: %s", exc)
            return False

    async def healthz(request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok", "database": await db(database_ok)}
        healthy = body["database"]
        for name, check in extra_checks.items():
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
        return JSONResponse(body, status_code=200 if healthy else 503,
                            headers={"Cache-Control": "no-store"})

    # -- errors ------------------------------------------------------------------------------------

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        key = {404: "notfound", 405: "method", 413: "toolarge", 429: "ratelimit"}.get(code)
        if key is None:
            key = "error" if code >= 500 else "invalid"
        return page(key, status=code)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("error handling %s %s", request.method, request.url.path, exc_info=exc)
        return page("error", status=500)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/subscribe", subscribe, methods=["POST"]),
        Route("/confirm/{token}", confirm_page, methods=["GET"]),
        Route("/confirm/{token}", confirm_post, methods=["POST"]),
        Route("/unsubscribe/{token}", unsubscribe_page, methods=["GET"]),
        Route("/unsubscribe/{token}", unsubscribe_post, methods=["POST"]),
        Route("/archive", archive, methods=["GET"]),
        Route("/archive/{week}", archive_week, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: http_error,
        Exception: server_error,
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.page = page
    app.add_middleware(BodyLimit)  # type: ignore[arg-type]
    return app
