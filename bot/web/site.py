"""What every handler shares: the ``Site`` (settings, database, tokens, mail,
rate limits, language) and the one way to answer with a page.

Handlers are plain ``async def handler(request)`` functions; they find the
Site on ``request.app.state.site`` (``site_of``), so they can be tested and
read one by one and the app factory only wires them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from bot import subscriptions
from bot.config import Settings
from bot.errors import BotError
from bot.mailer import Sender, SendFailure
from bot.models import Subscriber
from bot.templating import N_, Language, language, render_template
from bot.tokens import Tokens
from bot.web.limits import Window
from bot.web.security import PRIVATE_HEADERS

log = logging.getLogger(__name__)

T = TypeVar("T")
HealthCheck = Callable[[], Any]

# Every page that is a heading and a few lines: key -> (heading, lines).
# Lines may use %(title)s, %(hours)s and %(address)s.
MESSAGES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "subscribe": (N_("Subscribe to the weekly digest"), ()),
    "check": (N_("Check your inbox"), (
        N_("If this address isn't subscribed yet, we've just sent it a confirmation email."),
        N_("Open the link in it to confirm. Nothing there? Have a look in the spam folder."))),
    "confirm": (N_("Confirm your subscription"), (
        N_("Press the button to confirm the subscription for %(address)s."),)),
    "confirmed": (N_("You're subscribed"), (
        N_("%(address)s is confirmed; the next digest goes there."),
        N_("Every digest has an unsubscribe link at the bottom."))),
    "used": (N_("Link no longer valid"), (
        N_("This confirmation link has been used already or no longer applies."),
        N_("If you confirmed before, there's nothing more to do; otherwise please subscribe again."))),
    "unsub": (N_("Unsubscribe"), (
        N_("Press the button to stop receiving “%(title)s” at %(address)s."),)),
    # the subscriber was removed since: the button still answers, there is no address to name
    "unsub_gone": (N_("Unsubscribe"), (N_("Press the button to stop receiving “%(title)s”."),)),
    # the marked sample link of a preview or a test copy (bot.render.SAMPLE_UNSUBSCRIBE_TOKEN)
    "unsub_sample": (N_("Sample link"), (
        N_("This is the sample unsubscribe link of a preview or a test copy: it unsubscribes nobody."),
        N_("Each subscriber's digest carries a link of their own."))),
    "unsubbed": (N_("You're unsubscribed"), (
        N_("You won't receive “%(title)s” any more."), N_("You can subscribe again any time."))),
    "invalid": (N_("Link not valid"), (
        N_("This link is incomplete or has been changed. Please use the link from the email as it is."),)),
    "expired": (N_("Link expired"), (
        N_("This link has expired."),
        N_("Confirmation links work for %(hours)s hours; please subscribe again to get a new one."))),
    # the reader's theme choice (issue 36): /preferences/TOKEN, and after confirming
    "prefs": (N_("Choose your themes"), (
        N_("Pick the sections of “%(title)s” you want to read. You can change this from any digest."),)),
    "prefs_confirmed": (N_("You're subscribed"), (
        N_("%(address)s is confirmed; the next digest goes there."),
        N_("If you only want some of its sections, choose them here (you can change this from any digest)."))),
    "prefs_sample": (N_("Sample link"), (
        N_("This is the sample “choose your themes” link of a preview or a test copy: it changes nobody's themes."),
        N_("Each subscriber's digest carries a link of their own."))),
    "archive": (N_("Archive"), ()),
    "notfound": (N_("Not found"), (N_("There is no such page."),)),
    "toolarge": (N_("Request too large"), (N_("What was sent is too large."),)),
    "ratelimit": (N_("Please try again later"), (
        N_("Too many subscribe requests in a short time. Please wait a while and try again."),)),
    "method": (N_("Not supported"), (N_("This address doesn't accept that kind of request."),)),
    "error": (N_("Something went wrong"), (
        N_("The server couldn't handle this request right now. Please try again later."),)),
}


@dataclass
class Site:
    """The public site's shared parts; one per app."""

    settings: Settings
    factory: sessionmaker[Session]
    tokens: Tokens
    make_sender: Callable[[], Sender]
    ip_window: Window  # shared by every instance (bot.web.limits): call through db()
    address_window: Window
    health_checks: Mapping[str, HealthCheck]

    @property
    def lang(self) -> Language:
        return language(self.settings.language)

    @property
    def home(self) -> str:
        """The public URL's path with a trailing slash: pages link relative to it."""
        return urlsplit(self.settings.base_url).path.rstrip("/") + "/"

    def page(self, key: str, *, status: int = 200, template: str = "message.html",
             back: bool = True, **context: Any) -> HTMLResponse:
        """The page ``key`` of MESSAGES, in ``template`` (under ``templates/web/``)."""
        heading, lines = MESSAGES[key]
        values = {"title": self.settings.title, "hours": self.settings.confirm_ttl_hours,
                  "address": context.pop("address", "")}
        body = render_template(
            self.lang.code, f"web/{template}", site_title=self.settings.title, home=self.home,
            heading=self.lang.gettext(heading), lines=[self.lang.gettext(line, **values) for line in lines],
            back=back, **context)
        return HTMLResponse(body, status_code=status, headers=PRIVATE_HEADERS)

    async def db(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking database call off the event loop."""
        return await run_in_threadpool(func, *args)

    def send_confirmation(self, sub: Subscriber) -> None:
        """Mail the confirmation link (a background task: the answer is already out)."""
        sender = self.make_sender()
        try:
            subscriptions.send_confirmation(self.settings, self.tokens, sender, sub)
        except (BotError, SendFailure) as exc:
            log.error("could not send the confirmation mail to subscriber %s: %s", sub.id, exc)
        finally:
            sender.close()


def site_of(request: Request) -> Site:
    site: Site = request.app.state.site
    return site
