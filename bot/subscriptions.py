"""Subscribers: addresses, their states, and the mails that change them.

States: ``pending`` (asked, not confirmed) -> ``confirmed`` -> ``unsubscribed``
or ``bounced`` (``max_hard_failures`` permanent failures in a row); they are
``bot.models.SubscriberState``. Every
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

import contextlib
import csv
import dataclasses
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from email_validator import EmailNotValidError, validate_email
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot import choices, subscribers
from bot.config import Settings
from bot.errors import BotError
from bot.mailer import Sender, SendFailure, envelope_address, sender_domain, simple_message
from bot.models import Subscriber
from bot.models import SubscriberState as State
from bot.templating import language, render_template
from bot.themes import ThemeSet
from bot.tokens import ConfirmClaim, Tokens, UnsubscribeClaim, address_tag, confirm_url, unsubscribe_url

log = logging.getLogger(__name__)

MAX_ADDRESS = 254


class AddressError(BotError):
    """Not an email address we can send to."""


class LinkUsed(BotError):
    """A confirmation link that was already used or no longer applies."""


class NotSubscriber(BotError):
    """An address that is not in the subscriber list."""


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


def _set_state(sub: Subscriber, status: str, now: datetime, reason: str | None = None) -> None:
    sub.status = status
    sub.status_reason = reason  # see Subscriber.status_reason; stale after any change
    sub.token_nonce = new_nonce()
    if status == State.CONFIRMED:
        sub.confirmed_at = now
        sub.hard_failures = 0
    elif status == State.UNSUBSCRIBED:
        sub.unsubscribed_at = now
    elif status == State.BOUNCED:
        sub.bounced_at = now
    elif status == State.COMPLAINED:
        sub.complained_at = now


def set_state(sub: Subscriber, status: str, now: datetime, reason: str | None = None) -> None:
    """Change a subscriber's state from outside the web/CLI flows (bounce
    processing): dates stamped, nonce rotated, ``reason`` recorded."""
    _set_state(sub, status, now, reason)


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
        sub = subscribers.add_subscriber(session, email=address, status=State.PENDING, nonce=new_nonce(),
                                   now=now)
        return Change(sub, "created", True)
    if sub.status == State.CONFIRMED:
        return Change(sub, "already", False)
    if sub.status != State.PENDING:
        _set_state(sub, State.PENDING, now)
    return Change(sub, "pending", True)


def add_confirmed(session: Session, address: str, now: datetime) -> Change:
    """``subscribers add --confirmed`` / ``import --confirmed``: the admin vouches
    for the address. Someone who unsubscribed or bounced is left alone: their
    opt-out wins (remove them first to really add them again)."""
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        sub = subscribers.add_subscriber(session, email=address, status=State.CONFIRMED,
                                   nonce=new_nonce(), now=now)
        return Change(sub, "created", False)
    if sub.status == State.PENDING:
        _set_state(sub, State.CONFIRMED, now)
        return Change(sub, "confirmed", False)
    if sub.status == State.CONFIRMED:
        return Change(sub, "already", False)
    return Change(sub, "kept", False)


def awaiting_confirmation(session: Session, claim: ConfirmClaim) -> Subscriber | None:
    """The subscriber a valid confirmation token names, if its link still
    applies: the one rule for confirm links (the web page that shows the
    button and ``confirm`` both ask it). The subscriber must still be pending
    and hold the token's nonce, which every state change rotates, so a link
    works once and stops working after an unsubscribe or a new request."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or sub.status != State.PENDING or sub.token_nonce != claim.nonce:
        return None
    return sub


def confirm(session: Session, claim: ConfirmClaim, now: datetime) -> Subscriber:
    """Confirm the subscriber a valid confirmation token names, once."""
    sub = awaiting_confirmation(session, claim)
    if sub is None:
        raise LinkUsed("this confirmation link has already been used or is no longer valid")
    _set_state(sub, State.CONFIRMED, now)
    return sub


def unsubscribe(session: Session, claim: UnsubscribeClaim, now: datetime) -> bool:
    """Unsubscribe who a valid unsubscribe token names. Idempotent: True if this
    changed anything; an unknown (removed) subscriber is nothing to do."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or address_tag(sub.email_key) != claim.address_tag:
        return False
    if sub.status == State.UNSUBSCRIBED:
        return False
    _set_state(sub, State.UNSUBSCRIBED, now)
    return True


def unsubscribe_address(session: Session, claim: UnsubscribeClaim) -> str | None:
    """The address a valid unsubscribe token is about, for the page to name it;
    None when that subscriber was removed (or the token names someone else)."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or address_tag(sub.email_key) != claim.address_tag:
        return None
    return str(sub.email)


def mask_address(address: str) -> str:
    """``reader@example.org`` -> ``r***@example.org``: enough for its owner to
    recognise it, not enough for someone who got hold of the link to learn it."""
    local, at, domain = address.rpartition("@")
    if not at or not local:
        return "***"
    return f"{local[0]}***@{domain}"


def remove(session: Session, address: str) -> bool:
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        return False
    subscribers.delete_subscriber(session, sub)
    return True


# --- theme choices (issue 36) -------------------------------------------------------------------

def choose_themes(session: Session, address: str, keys: Iterable[str], themes: ThemeSet) -> str | None:
    """``subscribers themes ADDRESS KEY...``: the reader gets only these themes'
    sections (no keys: every section). Returns the canonical choice stored."""
    choice = choices.check_keys(keys, themes)
    sub = subscribers.subscriber_by_key(session, address.lower())
    if sub is None:
        raise NotSubscriber(f"{address} is not a subscriber",
                            hint="`digestbot subscribers list` shows them; "
                                 "`digestbot subscribers add` adds one")
    choices.set_choice(sub, choice)
    return choice


def _reader(session: Session, claim: UnsubscribeClaim) -> Subscriber | None:
    """Who a valid preferences token names, if they are still that address."""
    sub = session.get(Subscriber, claim.subscriber_id)
    if sub is None or address_tag(sub.email_key) != claim.address_tag:
        return None
    return sub


def reader_choice(session: Session, claim: UnsubscribeClaim) -> frozenset[str]:
    """The themes the reader a preferences token names chose (empty: every
    section, or no such reader: the page looks the same either way)."""
    sub = _reader(session, claim)
    return choices.decode(sub.themes) if sub is not None else frozenset()


def save_choice(session: Session, claim: UnsubscribeClaim, keys: Iterable[str],
                themes: ThemeSet) -> bool:
    """The preferences page's save: only keys of the themes file are kept (a
    form can post anything). False, changing nothing, when the token names no
    reader any more; the page answers the same, so it reveals nothing."""
    known = set(choices.theme_keys(themes))
    sub = _reader(session, claim)
    if sub is None:
        return False
    choices.set_choice(sub, choices.encode(key for key in keys if key in known))
    return True


# --- use cases (own transactions) ------------------------------------------------------------

def subscribe(
    factory: sessionmaker[Session], address: str, *, confirmed: bool = False,
    now: datetime | None = None, name: str | None = None,
) -> Change:
    """``request`` or ``add_confirmed`` in a transaction of its own; two requests
    for a new address at the same moment end up as one subscriber. ``name``
    (the admin's: a CSV import, the console) is stored when given."""
    for attempt in range(2):
        try:
            with factory() as session, session.begin():
                now = now or datetime.now(UTC)
                change = (add_confirmed if confirmed else request)(session, address, now)
                if name:
                    change.subscriber.name = " ".join(name.split())[:MAX_NAME]
                session.flush()
                return change
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


# --- the confirmation mail -------------------------------------------------------------------

def confirmation_mail(settings: Settings, tokens: Tokens, sub: Subscriber) -> tuple[str, str, str]:
    """(subject, text, html) of the confirmation mail for a pending subscriber,
    in ``settings.language`` (templates ``mail/confirm.*``)."""
    link = confirm_url(settings.base_url, tokens.confirm_token(sub.id, sub.token_nonce))
    context = {
        "title": settings.title, "link": link, "hours": settings.confirm_ttl_hours,
        "home": settings.base_url.rstrip("/") + "/", "address": sub.email,
    }
    code = settings.language
    subject = language(code).gettext("Please confirm your subscription to “%(title)s”",
                                     title=settings.title)
    return (subject, render_template(code, "mail/confirm.txt", **context),
            render_template(code, "mail/confirm.html", **context))


def send_confirmation(settings: Settings, tokens: Tokens, sender: Sender, sub: Subscriber) -> None:
    """Mail the confirmation link. Its Message-ID names the subscriber, signed
    (``Tokens.mail_id``): no delivery row records this mail, and a bounce or
    complaint about it is believed on that signature only."""
    subject, text, html = confirmation_mail(settings, tokens, sub)
    message_id = f"<{tokens.mail_id(sub.id, sub.email_key)}@{sender_domain(settings.from_addr)}>"
    message_id, data = simple_message(settings, sub.email, subject, text, html, message_id)
    sender.send(envelope_address(settings.from_addr), sub.email, data, message_id)
    log.info("confirmation mail for subscriber %s sent", sub.id)


def send_unsubscribe_link(settings: Settings, tokens: Tokens, sender: Sender, sub: Subscriber) -> None:
    """Mail ``sub`` the signed one-click unsubscribe link: the answer to a token-less
    unsubscribe mail from their address (``bot.bounces.apply.link_request``). It goes
    to the address we hold, never to a reply address, and changes no state."""
    link = unsubscribe_url(settings.base_url, tokens.unsubscribe_token(sub.id, sub.email_key))
    context = {"title": settings.title, "link": link, "home": settings.base_url.rstrip("/") + "/",
               "address": sub.email}
    code = settings.language
    subject = language(code).gettext("Your unsubscribe link for “%(title)s”", title=settings.title)
    message_id = f"<{tokens.mail_id(sub.id, sub.email_key)}@{sender_domain(settings.from_addr)}>"
    message_id, data = simple_message(settings, sub.email, subject,
                                      render_template(code, "mail/unsubscribe_link.txt", **context),
                                      render_template(code, "mail/unsubscribe_link.html", **context),
                                      message_id)
    sender.send(envelope_address(settings.from_addr), sub.email, data, message_id)
    log.info("unsubscribe link for subscriber %s mailed", sub.id)


# --- CSV import and export ---------------------------------------------------------------------

@dataclass(frozen=True)
class CsvRow:
    """One line of an import file that is not blank and not the header."""

    line: int
    address: str | None  # normalised, or None with an error
    error: str | None = None
    duplicate_of: int | None = None  # the line where this address came first
    themes: str | None = None  # the line's `themes` cell (issue 36), when not blank
    name: str | None = None  # the header's ``name`` column, if it has one


HEADER_NAMES = {"email", "e-mail", "email address", "e-mail address", "mail", "address"}
NAME_HEADERS = {"name", "full name", "display name"}
MAX_NAME = 200
MAX_LINE = 10_000  # characters; no address line is longer, and csv refuses fields over 128 KB
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as an editor numbers lines (not str.splitlines)


def read_csv(data: bytes | str) -> Iterator[CsvRow]:
    """Addresses from a CSV file, one verdict per line that is not blank.

    Each physical line is read on its own, so a stray quote spoils that line
    only (a CSV reader would read on to the next quote, swallowing every line
    in between). The column named ``email`` (or ``e-mail``, ``address``...) in
    a header line is used, else the first; when that field is not an address
    but exactly one other field is, that one is taken, so every valid address
    in the file is found. Bytes in any encoding are accepted (UTF-8 or UTF-16
    with a BOM, else UTF-8 line by line with Latin-1 where that fails:
    addresses are ASCII). A repeated address comes back with ``duplicate_of``.
    """
    column, name_column = 0, None
    themes_column: int | None = None
    seen: dict[str, int] = {}
    first = True
    for number, text in enumerate(_lines(data), 1):
        if not text.strip():
            continue
        if len(text) > MAX_LINE:
            yield CsvRow(number, None, f"the line is too long ({len(text):,} characters)")
            first = False
            continue
        fields = _fields(text)
        if first:
            first = False
            names = [f.strip().strip("\ufeff").strip().lower() for f in fields]
            header = [i for i, name in enumerate(names) if name in HEADER_NAMES]
            if header:
                column = header[0]
                name_column = next((i for i, n in enumerate(names) if n in NAME_HEADERS), None)
                themes_column = _themes_column(names)
                continue
        row = _row(number, fields, column)
        if row.address is None and '"' in text:  # a stray quote glued fields together
            unquoted = _row(number, text.replace('"', "").split(","), column)
            row = unquoted if unquoted.address is not None else row
        if row.address is not None:
            key = row.address.lower()
            if key in seen:
                row = CsvRow(number, row.address, duplicate_of=seen[key])
            else:
                seen[key] = number
                row = replace(row, name=_name(fields, name_column))
        yield _with_themes(row, fields, themes_column)


THEMES_HEADER = "themes"


def _themes_column(names: list[str]) -> int | None:
    """Where a header line has the `themes` column (issue 36), if it has one."""
    return names.index(THEMES_HEADER) if THEMES_HEADER in names else None


def _with_themes(row: CsvRow, fields: list[str], column: int | None) -> CsvRow:
    """The row with its `themes` cell: theme keys separated by spaces, commas
    or semicolons (``bot.choices.split_keys``); a blank cell changes nothing."""
    if column is None or column >= len(fields) or row.address is None:
        return row
    cell = fields[column].strip()
    return replace(row, themes=cell) if cell else row


def _name(fields: list[str], column: int | None) -> str | None:
    """The name field of a line, as one line of at most MAX_NAME characters; None if empty."""
    if column is None or column >= len(fields):
        return None
    return " ".join(fields[column].split())[:MAX_NAME] or None


def _lines(data: bytes | str) -> Iterator[str]:
    """The file's lines as text, whatever its encoding (see ``read_csv``)."""
    if isinstance(data, str):
        yield from _LINE_BREAK.split(data.lstrip("\ufeff"))
        return
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"),
                          (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom) and encoding.startswith("utf-16"):
            yield from _LINE_BREAK.split(data[len(bom):].decode(encoding, errors="replace"))
            return
        if data.startswith(bom):
            data = data[len(bom):]
    for raw in re.split(rb"\r\n|\r|\n", data):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            yield raw.decode("latin-1")


def _fields(text: str) -> list[str]:
    try:
        return next(csv.reader([text], strict=False))
    except (csv.Error, StopIteration):  # a NUL byte, ...: split by hand
        return text.replace("\0", "").split(",")


def _row(number: int, fields: list[str], column: int) -> CsvRow:
    """The line's address: its email column, else its only other valid address."""
    wanted = fields[column].strip().strip('"').strip() if column < len(fields) else ""
    try:
        return CsvRow(number, normalize_address(_bare(wanted)))
    except AddressError as exc:
        problem = (exc.message if wanted else "no email address in this line"
                   if column < len(fields) else "no email column in this row")
    others = []
    for i, field in enumerate(fields):
        if i != column and "@" in field:
            with contextlib.suppress(AddressError):
                others.append(normalize_address(_bare(field.strip().strip('"').strip())))
    if len(set(others)) == 1:
        return CsvRow(number, others[0])
    if len(set(others)) > 1:
        problem += f"; the line holds {len(set(others))} other addresses, so none is taken"
    return CsvRow(number, None, problem)


def _bare(text: str) -> str:
    """``Ann <ann@example.org>`` -> ``ann@example.org``; anything else as it is."""
    if text.endswith(">") and "<" in text:
        return text[text.rindex("<") + 1:-1]
    return text


EXPORT_FIELDS = ("email", "status", "created_at", "confirmed_at", "unsubscribed_at",
                 "bounced_at", "hard_failures", "name")


def export_rows(subscribers: Iterable[Subscriber]) -> Iterator[list[str]]:
    """The CSV export: a header, then one row per subscriber (``import`` reads it back)."""
    yield [*EXPORT_FIELDS, THEMES_HEADER]
    for sub in subscribers:
        yield [sub.email, sub.status, _iso(sub.created_at), _iso(sub.confirmed_at),
               _iso(sub.unsubscribed_at), _iso(sub.bounced_at), str(sub.hard_failures),
               sub.name or "", _themes_cell(sub)]


def _themes_cell(sub: Subscriber) -> str:
    """The reader's chosen theme keys, space-separated; blank: every section."""
    return " ".join(sorted(choices.decode(sub.themes)))


def _iso(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else ""


# --- a CSV import, line by line ---------------------------------------------------------------

@dataclass(frozen=True)
class ImportLine:
    """What became of one line: ``verdict`` is added | confirmed | pending |
    already | kept | repeated | rejected, ``note`` says it in words."""

    line: int
    address: str | None
    verdict: str
    note: str


@dataclass
class ImportReport:
    """Every line's verdict; the counts add up to the lines read."""

    lines: list[ImportLine] = dataclasses.field(default_factory=list)

    def count(self, *verdicts: str) -> int:
        return sum(line.verdict in verdicts for line in self.lines)

    @property
    def imported(self) -> int:
        """Addresses taken (new, changed or already there): neither repeated nor rejected."""
        return len(self.lines) - self.count("repeated", "rejected")


def import_csv(factory: sessionmaker[Session], data: bytes | str, *, confirmed: bool,
               send_confirmation: Callable[[Subscriber], None],
               themes: Callable[[], ThemeSet] | None = None) -> ImportReport:
    """Add every address of a CSV file (``read_csv``), with its name if the file
    has a ``name`` column and its theme choice if it has a ``themes`` column
    (checked against ``themes()``, read when first needed: a line naming an
    unknown key is rejected and its address not added); without ``confirmed``
    each new or pending address gets a confirmation mail through
    ``send_confirmation`` (a failed mail is that line's note; the import goes
    on). `subscribers import` and the console both call this."""
    report = ImportReport()
    for row in read_csv(data):
        if row.address is None:
            report.lines.append(ImportLine(row.line, None, "rejected", row.error or "rejected"))
            continue
        if row.duplicate_of is not None:
            report.lines.append(ImportLine(row.line, row.address, "repeated",
                                           f"a repeat of line {row.duplicate_of}"))
            continue
        try:
            choice = _choice_of(row, themes)
        except choices.ChoiceError as exc:
            report.lines.append(ImportLine(row.line, row.address, "rejected", exc.message))
            continue
        change = subscribe(factory, row.address, confirmed=confirmed, name=row.name)
        if choice is not None:
            with factory.begin() as session:
                sub = subscribers.subscriber_by_key(session, change.subscriber.email_key)
                if sub is not None:
                    choices.set_choice(sub, choice or None)
        report.lines.append(import_verdict(row.line, change, send_confirmation))
    return report


def _choice_of(row: CsvRow, themes: Callable[[], ThemeSet] | None) -> str | None:
    """A line's canonical theme choice ("" for every section; None: leave it as it is)."""
    if row.themes is None:
        return None
    if themes is None:
        raise choices.ChoiceError("this import takes no `themes` column")
    return choices.check_keys(choices.split_keys(row.themes), themes()) or ""


def import_verdict(line: int, change: Change, send: Callable[[Subscriber], None]) -> ImportLine:
    """What a subscribe did to one address, its confirmation mail sent (or its failure noted)."""
    sub = change.subscriber
    if change.confirm_mail:
        try:
            send(sub)
            note = "pending, confirmation mail sent"
        except SendFailure as exc:
            note = f"pending, but the confirmation mail failed: {exc}"
        return ImportLine(line, sub.email, "pending", note)
    verdict = "added" if change.action == "created" else change.action
    note = {"created": "added, confirmed", "confirmed": "confirmed",
            "already": f"already {sub.status}",
            "kept": f"left {sub.status}: they opted out (remove, then add, to override)",
            }.get(change.action, sub.status)
    return ImportLine(line, sub.email, verdict, note)
