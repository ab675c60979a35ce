"""The subscriber's pages: subscribe, confirm, unsubscribe.

- ``POST /subscribe`` answers the same "check your inbox" page whether the
  address is new, pending or already confirmed, so the form reveals nothing
  about who is subscribed. Confirmation mails go out after the response
  (a background task), so timing reveals nothing either.
- ``GET /confirm/TOKEN`` only shows a button; ``POST`` confirms. Mail
  scanners that fetch links cannot subscribe anyone.
- ``POST /unsubscribe/TOKEN`` is RFC 8058 one-click: it unsubscribes at once
  and answers 200, whatever the body (form-encoded, multipart, empty), with
  no cookie or login, and is idempotent. ``GET`` shows a button and names
  the address, masked (``r***@example.org``). The sample link of previews and
  test copies answers a page that says what it is.

Whether a confirm link still applies is ``subscriptions.awaiting_confirmation``;
these handlers only read the token (``with_claim``) and answer with a page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any, Literal

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot import subscriptions
from bot.render import SAMPLE_UNSUBSCRIBE_TOKEN
from bot.tokens import ConfirmClaim, TokenExpired, TokenInvalid, UnsubscribeClaim
from bot.web.security import address_rate_key, client_ip
from bot.web.site import Site, site_of

Endpoint = Callable[[Request], Awaitable[Response]]
ClaimHandler = Callable[[Request, Site, Any], Awaitable[Response]]


def with_claim(kind: Literal["confirm", "unsubscribe"]) -> Callable[[ClaimHandler], Endpoint]:
    """Read the path's token before the handler runs: a tampered or wrong-kind
    token answers 400, an expired one 410, and the handler gets the claim."""

    def decorate(handler: ClaimHandler) -> Endpoint:
        @wraps(handler)
        async def endpoint(request: Request) -> Response:
            site = site_of(request)
            token = request.path_params["token"]
            if kind == "unsubscribe" and token == SAMPLE_UNSUBSCRIBE_TOKEN:
                return site.page("unsub_sample")  # a preview's link: say so, change nothing
            try:
                claim = (site.tokens.read_confirm(token) if kind == "confirm"
                         else site.tokens.read_unsubscribe(token))
            except TokenExpired:
                return site.page("expired", status=410)
            except TokenInvalid:
                return site.page("invalid", status=400)
            return await handler(request, site, claim)

        return endpoint

    return decorate


# --- subscribe -------------------------------------------------------------------------------

async def index(request: Request) -> Response:
    site = site_of(request)
    return site.page("subscribe", template="home.html", back=False, error=None, value="",
                     tagline=site.settings.tagline)


async def subscribe(request: Request) -> Response:
    site = site_of(request)
    client = client_ip(request, site.settings.trusted_proxies)  # behind a proxy: the real client
    if not await site.db(site.ip_window.allow, client):
        return site.page("ratelimit", status=429)
    form = await request.form(max_files=0, max_fields=10)
    raw = form.get("email")
    value = raw if isinstance(raw, str) else ""
    try:
        address = subscriptions.normalize_address(value)
    except subscriptions.AddressError:
        error = site.lang.gettext("That doesn't look like an email address. Please check it and try again.")
        return site.page("subscribe", status=400, template="home.html", back=False, error=error,
                         value=value[:254], tagline=site.settings.tagline)
    # victim+1@, victim+2@ ... are one inbox: one limit
    if not await site.db(site.address_window.allow, address_rate_key(address)):
        return site.page("ratelimit", status=429)
    change = await site.db(subscriptions.subscribe, site.factory, address)
    response = site.page("check")
    if change.confirm_mail:
        response.background = BackgroundTask(site.send_confirmation, change.subscriber)
    return response


# --- confirm ---------------------------------------------------------------------------------

def _pending_address(site: Site, claim: ConfirmClaim) -> str | None:
    with site.factory() as session:
        sub = subscriptions.awaiting_confirmation(session, claim)
        return None if sub is None else str(sub.email)


def _confirm(site: Site, claim: ConfirmClaim) -> str | None:
    try:
        with site.factory() as session, session.begin():
            return str(subscriptions.confirm(session, claim, datetime.now(UTC)).email)
    except subscriptions.LinkUsed:
        return None


@with_claim("confirm")
async def confirm_page(request: Request, site: Site, claim: ConfirmClaim) -> Response:
    address = await site.db(_pending_address, site, claim)
    if address is None:
        return site.page("used", status=400)
    return site.page("confirm", template="action.html", address=address,
                     action=f"{site.home}confirm/{request.path_params['token']}",
                     button=site.lang.gettext("Confirm subscription"), note=None)


@with_claim("confirm")
async def confirm_post(request: Request, site: Site, claim: ConfirmClaim) -> Response:
    address = await site.db(_confirm, site, claim)
    if address is None:
        return site.page("used", status=400)
    return site.page("confirmed", address=address)


# --- unsubscribe -------------------------------------------------------------------------------

def _address(site: Site, claim: UnsubscribeClaim) -> str | None:
    with site.factory() as session:
        return subscriptions.unsubscribe_address(session, claim)


def _unsubscribe(site: Site, claim: UnsubscribeClaim) -> bool:
    with site.factory() as session, session.begin():
        return subscriptions.unsubscribe(session, claim, datetime.now(UTC))


@with_claim("unsubscribe")
async def unsubscribe_page(request: Request, site: Site, claim: UnsubscribeClaim) -> Response:
    # which address this is about, masked: its owner knows it, whoever got the link learns little
    address = await site.db(_address, site, claim)
    return site.page("unsub" if address else "unsub_gone", template="action.html",
                     address=subscriptions.mask_address(address) if address else "",
                     action=f"{site.home}unsubscribe/{request.path_params['token']}",
                     button=site.lang.gettext("Unsubscribe"),
                     note=site.lang.pgettext("unsubscribe page, under the button",
                                             "You can subscribe again any time."))


@with_claim("unsubscribe")
async def unsubscribe_post(request: Request, site: Site, claim: UnsubscribeClaim) -> Response:
    # RFC 8058: the body is "List-Unsubscribe=One-Click" (form-encoded or
    # multipart) or a bare button press; the token alone decides.
    await request.body()
    await site.db(_unsubscribe, site, claim)
    return site.page("unsubbed")


ROUTES = [
    Route("/", index, methods=["GET"]),
    Route("/subscribe", subscribe, methods=["POST"]),
    Route("/confirm/{token}", confirm_page, methods=["GET"]),
    Route("/confirm/{token}", confirm_post, methods=["POST"]),
    Route("/unsubscribe/{token}", unsubscribe_page, methods=["GET"]),
    Route("/unsubscribe/{token}", unsubscribe_post, methods=["POST"]),
]
