"""Subscribers: addresses, their states, and the mails that change them.

States: ``pending`` (asked, not confirmed) -> ``confirmed`` -> ``unsubscribed``
or ``bounced`` (``max_hard_failures`` permanent failures in a row). Every
change stamps its date and rotates ``token_nonce``, which makes any earlier
confirmation link stop working.

Addresses are checked and normalised with email-validator (syntax only, no
DNS) and kept unique case-insensitively through ``email_key``. Only ASCII
addresses are taken (internationalised domains are stored in their ASCII
``xn--`` form), so every address can go into a header as it is.

Functions that take a Session leave committing to the caller (the rows'
queries are in ``bot.subscribers``); the use cases for the web app and the CLI are at the bottom.
"""

from __future__ import annotations

import csv
import io
import logging
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources

import jinja2
from email_validator import EmailNotValidError, validate_email
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot import subscribers
from bot.config import Settings
from bot.errors import BotError
from bot.mailer import Sender, envelope_address, simple_message
from bot.models import Subscriber
from bot.tokens import ConfirmClaim, Tokens, UnsubscribeClaim, address_tag, confirm_url

log = logging.getLogger(__name__)

STATES = ("pending", "confirmed", "unsubscribed", "bounced")
MAX_ADDRESS = 254


class AddressError(BotError):
    """Not an email address we can send to."""


class LinkUsed(BotError):
    """A confirmation link that was already used or no longer applies."""


def normalize_address(text: str) -> str:
    """The normalised form of an address, or AddressError saying what is wrong."""
    text = (text or "").strip()
    if not text:
        raise AddressError("no email address given")
    if len(text) > MAX_ADDRESS:
        raise AddressError("that email address is too long")
    try:
        result = validate_email(text, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        raise AddressError(f"{text!r} is not a valid email address: {exc}") from None
    return result.ascii_email or result.normalized


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def _set_state(sub: Subscriber, status: str, now: datetime) -> None:
    sub.status = status
    sub.token_nonce = new_nonce()
    if status == "confirmed":
        sub.confirmed_at = now
        sub.hard_failures = 0
    elif status == "unsubscribed":
        sub.unsubscribed_at = now
    elif status == "bounced":
        sub.bounced_at = now


# --- state changes ---------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """What a subscribe/add did. ``confirm_mail`` says whether to send one."""

    subscriber: Subscriber
    action: str  # created | confirmed | pending | already | kept
    confirm_mail: bool


def request(session: Session, address: str, now: datetime) -> Change:
    """A subscribe request (web form, or ``subscribers add`` without --confirmed).

    New or pending or gone (unsubscribed, bounced): pending, and a confirmation
    mail goes out. Already confirmed: nothing changes and no mail goes out --
    the web page says the same thing in every case, so it tells no one who
    is subscribed.
    """
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        sub = subscribers.add_subscriber(session, email=address, status="pending", nonce=new_nonce(),
                                   now=now)
        return Change(sub, "created", True)
    if sub.status == "confirmed":
        return Change(sub, "already", False)
    if sub.status != "pending":
        _set_state(sub, "pending", now)
    return Change(sub, "pending", True)


def add_confirmed(session: Session, address: str, now: datetime) -> Change:
    """``subscribers add --confirmed`` / ``import --confirmed``: the admin vouches
    for the address. Someone who unsubscribed or bounced is left alone: their
    opt-out wins (remove them first to really add them again)."""
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        sub = subscribers.add_subscriber(session, email=address, status="confirmed",
                                   nonce=new_nonce(), now=now)
        return Change(sub, "created", False)
    if sub.status == "pending":
        _set_state(sub, "confirmed", now)
        return Change(sub, "confirmed", False)
    if sub.status == "confirmed":
        return Change(sub, "already", False)
    return Change(sub, "kept", False)


def confirm(session: Session, claim: ConfirmClaim, now: datetime) -> Subscriber:
    """Confirm the subscriber a valid confirmation token names, once."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or sub.token_nonce != claim.nonce or sub.status != "pending":
        raise LinkUsed("this confirmation link has already been used or is no longer valid")
    _set_state(sub, "confirmed", now)
    return sub


def unsubscribe(session: Session, claim: UnsubscribeClaim, now: datetime) -> bool:
    """Unsubscribe who a valid unsubscribe token names. Idempotent: True if this
    changed anything; an unknown (removed) subscriber is nothing to do."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or address_tag(sub.email_key) != claim.address_tag:
        return False
    if sub.status == "unsubscribed":
        return False
    _set_state(sub, "unsubscribed", now)
    return True


def remove(session: Session, address: str) -> bool:
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        return False
    subscribers.delete_subscriber(session, sub)
    return True


# --- use cases (own transactions) ------------------------------------------------------------

def subscribe(
    factory: sessionmaker[Session], address: str, *, confirmed: bool = False,
    now: datetime | None = None,
) -> Change:
    """``request`` or ``add_confirmed`` in a transaction of its own; two requests
    for a new address at the same moment end up as one subscriber."""
    for attempt in range(2):
        try:
            with factory() as session, session.begin():
                now = now or datetime.now(UTC)
                change = (add_confirmed if confirmed else request)(session, address, now)
                session.flush()
                return change
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


# --- the confirmation mail -------------------------------------------------------------------

MAIL_STRINGS = {
    "zh": {"subject": "请确认订阅「{title}」"},
    "en": {"subject": "Please confirm your subscription to “{title}”"},
}


def _load_mail_template(name: str) -> str | None:
    try:
        return resources.files("bot.templates").joinpath("mail", name).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@lru_cache(maxsize=1)
def mail_templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_mail_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def confirmation_mail(settings: Settings, tokens: Tokens, sub: Subscriber) -> tuple[str, str, str]:
    """(subject, text, html) of the confirmation mail for a pending subscriber."""
    link = confirm_url(settings.base_url, tokens.confirm_token(sub.id, sub.token_nonce))
    context = {
        "lang": settings.language, "title": settings.title, "link": link,
        "hours": settings.confirm_ttl_hours, "home": settings.base_url.rstrip("/") + "/",
        "address": sub.email,
    }
    env = mail_templates()
    subject = MAIL_STRINGS[settings.language]["subject"].format(title=settings.title)
    return (subject, env.get_template("confirm.txt").render(context),
            env.get_template("confirm.html").render(context))


def send_confirmation(settings: Settings, tokens: Tokens, sender: Sender, sub: Subscriber) -> None:
    subject, text, html = confirmation_mail(settings, tokens, sub)
    message_id, data = simple_message(settings, sub.email, subject, text, html)
    sender.send(envelope_address(settings.from_addr), sub.email, data, message_id)
    log.info("confirmation mail for subscriber %s sent", sub.id)


# --- CSV import and export ---------------------------------------------------------------------

@dataclass(frozen=True)
class CsvRow:
    line: int
    address: str | None  # normalised, or None with an error
    error: str | None = None


def read_csv(text: str) -> Iterator[CsvRow]:
    """Addresses from a CSV: the column named ``email`` if the first row names
    one, else the first column. Bad rows come back with an error and their line."""
    reader = csv.reader(io.StringIO(text))
    column = 0
    first = True
    for fields in reader:
        line = reader.line_num
        if first:
            first = False
            names = [f.strip().lower().lstrip("\ufeff") for f in fields]
            if "email" in names:
                column = names.index("email")
                continue
        if not fields or not any(f.strip() for f in fields):
            continue
        if column >= len(fields):
            yield CsvRow(line, None, "no email column in this row")
            continue
        try:
            yield CsvRow(line, normalize_address(fields[column]))
        except AddressError as exc:
            yield CsvRow(line, None, exc.message)


EXPORT_FIELDS = ("email", "status", "created_at", "confirmed_at", "unsubscribed_at",
                 "bounced_at", "hard_failures")


def export_rows(subscribers: Iterable[Subscriber]) -> Iterator[list[str]]:
    yield list(EXPORT_FIELDS)
    for sub in subscribers:
        yield [sub.email, sub.status, _iso(sub.created_at), _iso(sub.confirmed_at),
               _iso(sub.unsubscribed_at), _iso(sub.bounced_at), str(sub.hard_failures)]


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else ""
