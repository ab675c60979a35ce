"""The subscriber's pages: subscribe, confirm, unsubscribe, choose themes.

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

- ``GET /preferences/TOKEN`` (issue 36) shows the themes file's themes with
  checkboxes, the reader's choice ticked; ``POST`` saves what is ticked, in
  one click, and shows the page again. The token is signed per reader, like
  the unsubscribe one, so no login is needed; a valid token whose reader is
  gone answers the same pages (nothing ticked, "saved") and changes nothing.
  The page after confirming a subscription offers the same choice.

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

from bot import choices, subscriptions
from bot.render import SAMPLE_UNSUBSCRIBE_TOKEN
from bot.themes import load_themes
from bot.tokens import ConfirmClaim, TokenExpired, TokenInvalid, UnsubscribeClaim
from bot.web.security import address_rate_key, client_ip
from bot.web.site import Site, site_of

Endpoint = Callable[[Request], Awaitable[Response]]
ClaimHandler = Callable[[Request, Site, Any], Awaitable[Response]]


def with_claim(kind: Literal["confirm", "unsubscribe", "preferences"]) -> Callable[[ClaimHandler], Endpoint]:
    """Read the path's token before the handler runs: a tampered or wrong-kind
    token answers 400, an expired one 410, and the handler gets the claim."""

    def decorate(handler: ClaimHandler) -> Endpoint:
        @wraps(handler)
        async def endpoint(request: Request) -> Response:
            site = site_of(request)
            token = request.path_params["token"]
            if kind != "confirm" and token == SAMPLE_UNSUBSCRIBE_TOKEN:
                # a preview's link: say so, change nothing
                return site.page("unsub_sample" if kind == "unsubscribe" else "prefs_sample")
            read = {"confirm": site.tokens.read_confirm, "unsubscribe": site.tokens.read_unsubscribe,
                    "preferences": site.tokens.read_preferences}[kind]
            try:
                claim = read(token)
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


def _confirm(site: Site, claim: ConfirmClaim) -> tuple[str, str] | None:
    """Confirm; (the address, the reader's preferences token) or None if the link is used."""
    try:
        with site.factory() as session, session.begin():
            sub = subscriptions.confirm(session, claim, datetime.now(UTC))
            return str(sub.email), site.tokens.preferences_token(sub.id, sub.email_key)
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
    confirmed = await site.db(_confirm, site, claim)
    if confirmed is None:
        return site.page("used", status=400)
    address, token = confirmed
    # the same choice the digests' "choose your themes" link offers
    return _preferences(site, "prefs_confirmed", token, frozenset(), address=address)


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


# --- choose themes (issue 36) -------------------------------------------------------------------

MAX_FORM_FIELDS = 200  # one per theme ticked; a themes file has a few dozen at most


def _preferences(site: Site, key: str, token: str, chosen: frozenset[str], *,
                 saved: str | None = None, address: str = "") -> Response:
    """The themes form, posting to ``/preferences/TOKEN``, ``chosen`` ticked."""
    themes = load_themes(site.settings.themes_file)
    return site.page(key, template="preferences.html", address=address, back=False,
                     action=f"{site.home}preferences/{token}", chosen=chosen, saved=saved,
                     options=choices.options(themes, site.lang.code))


def _choice(site: Site, claim: UnsubscribeClaim) -> frozenset[str]:
    with site.factory() as session:
        return subscriptions.reader_choice(session, claim)


def _save(site: Site, claim: UnsubscribeClaim, keys: list[str]) -> frozenset[str]:
    """Save the ticked keys; what the page then shows ticked (the known ones)."""
    themes = load_themes(site.settings.themes_file)
    with site.factory() as session, session.begin():
        subscriptions.save_choice(session, claim, keys, themes)
    return frozenset(keys) & frozenset(choices.theme_keys(themes))


@with_claim("preferences")
async def preferences_page(request: Request, site: Site, claim: UnsubscribeClaim) -> Response:
    chosen = await site.db(_choice, site, claim)
    return _preferences(site, "prefs", request.path_params["token"], chosen)


@with_claim("preferences")
async def preferences_post(request: Request, site: Site, claim: UnsubscribeClaim) -> Response:
    form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
    keys = [value for value in form.getlist("theme") if isinstance(value, str)]
    chosen = await site.db(_save, site, claim, keys)
    saved = (site.lang.gettext("Saved: the next digest brings only the themes ticked below.") if chosen
             else site.lang.gettext("Saved: the next digest brings every section."))
    return _preferences(site, "prefs", request.path_params["token"], chosen, saved=saved)


ROUTES = [
    Route("/", index, methods=["GET"]),
    Route("/subscribe", subscribe, methods=["POST"]),
    Route("/confirm/{token}", confirm_page, methods=["GET"]),
    Route("/confirm/{token}", confirm_post, methods=["POST"]),
    Route("/unsubscribe/{token}", unsubscribe_page, methods=["GET"]),
    Route("/unsubscribe/{token}", unsubscribe_post, methods=["POST"]),
    Route("/preferences/{token}", preferences_page, methods=["GET"]),
    Route("/preferences/{token}", preferences_post, methods=["POST"]),
]
