"""Building email messages.
Email messages and the transports that hand them over.

    ``DigestMessage`` builds one digest's message once, with
    ``email.message.EmailMessage`` and ``policy.SMTP`` (CRLF, RFC 2047 encoded
    subject and display names), then cuts the bytes at the places that differ
    per recipient. ``render()`` only splices: the personal headers (To, Date,
    Message-ID, List-Unsubscribe) and the two bodies with the recipient's
    unsubscribe link put in place of ``UNSUBSCRIBE_PLACEHOLDER``, base64
    encoded. No per-recipient value can add a header: subjects are squashed
    to one line and per-recipient values are checked to be plain one-line ASCII.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr

from bot.config import Settings
from bot.errors import DeliveryError

UNSUBSCRIBE_PLACEHOLDER = "__DIGESTBOT_UNSUBSCRIBE_URL__"  # bot.render writes it, each message fills it in
# the reader's "choose your themes" link (issue 36), filled in the same way
PREFERENCES_PLACEHOLDER = "__DIGESTBOT_PREFERENCES_URL__"
_PLACEHOLDERS = re.compile(
    f"({re.escape(UNSUBSCRIBE_PLACEHOLDER)}|{re.escape(PREFERENCES_PLACEHOLDER)})".encode("ascii"))
# what a copy that goes to no reader (a test copy) links to instead of a reader's own page
SAMPLE_TOKEN = "SAMPLE-each-reader-gets-their-own-link"


def public_links(body: str, url: str) -> str:
    """A rendered part with both personal links pointing at ``url``: for the
    copies shown on the web (archive, feed, console), which have no reader."""
    return body.replace(UNSUBSCRIBE_PLACEHOLDER, url).replace(PREFERENCES_PLACEHOLDER, url)


ONE_CLICK = "List-Unsubscribe=One-Click"


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


_TEXT_MARK = "DIGESTBOTTEXTBODYMARKER"


_HTML_MARK = "DIGESTBOTHTMLBODYMARKER"


_MAILTO_TOKEN = re.compile(r"^[A-Za-z0-9_.-]{1,500}$")  # itsdangerous' URL-safe alphabet


def one_line(text: str) -> str:
    """Squash CR, LF and other control characters to single spaces: a header
    value built from feed text can never start a new header."""
    return " ".join(_CONTROL.sub(" ", text).split())


def envelope_address(from_addr: str) -> str:
    """The bare address of a From value: ``digestbot <digest@x.org>`` -> ``digest@x.org``."""
    address = parseaddr(from_addr)[1]
    if "@" not in address:
        raise DeliveryError(f"DIGESTBOT_FROM_ADDR: {from_addr!r} has no email address",
                            hint="use a value like 'Weekly digest <digest@example.org>'")
    return address


def sender_domain(from_addr: str) -> str:
    return envelope_address(from_addr).rsplit("@", 1)[1].lower()


def new_message_id(domain: str) -> str:
    """A digest's Message-ID: ``<centiseconds.64 random bits.digest@domain>``.

    The delivery ledger records it, and the bounce mailbox believes a report
    that names it (as VERP token or in the returned headers), so it must be
    as hard to guess as a signature: ``make_msgid``'s five random digits
    next to the time and the process id are not."""
    return f"<{time.time_ns() // 10_000_000}.{secrets.token_hex(8)}.digest@{domain}>"


def _ascii_line(value: str, what: str) -> str:
    if not value.isascii() or _CONTROL.search(value):
        raise ValueError(f"{what} must be one line of ASCII: {value!r}")
    return value


def _b64_lines(data: bytes) -> bytes:
    """Base64 in 76-character lines joined by CRLF (no trailing line break)."""
    encoded = base64.b64encode(data)
    return b"\r\n".join([encoded[i:i + 76] for i in range(0, len(encoded), 76)])


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")


_LINE_BYTES = 57  # one 76-character base64 line


_date_cache: tuple[int, str] = (0, "")


def _date_now() -> str:
    """The Date header value for now, formatted once per second."""
    global _date_cache
    second = int(time.time())
    if _date_cache[0] != second:
        _date_cache = (second, format_datetime(datetime.fromtimestamp(second, UTC)))
    return _date_cache[1]


class _Body:
    """One body part, base64-encoded per recipient at the cost of its tail only.

    Everything before the first personal link is encoded once, up to a whole
    number of base64 lines; per recipient only the rest is encoded, with the
    links put in (they sit in the footer, so that is a few hundred bytes).
    """

    def __init__(self, text: str) -> None:
        data = _crlf(text).encode("utf-8")
        # text, placeholder, text, placeholder, ..., text
        pieces = _PLACEHOLDERS.split(data)
        cut = len(pieces[0]) // _LINE_BYTES * _LINE_BYTES if len(pieces) > 1 else 0
        head = _b64_lines(pieces[0][:cut])
        self._head = head + b"\r\n" if head else b""
        self._rest = [pieces[0][cut:], *pieces[1:]]
        self._unsubscribe = UNSUBSCRIBE_PLACEHOLDER.encode("ascii")

    def encode(self, link: bytes, preferences: bytes = b"") -> bytes:
        rest = self._rest
        if len(rest) == 1:
            return self._head + _b64_lines(rest[0])
        parts = [rest[0]]
        for i in range(1, len(rest), 2):
            parts.append(link if rest[i] == self._unsubscribe else preferences)
            parts.append(rest[i + 1])
        return self._head + _b64_lines(b"".join(parts))


class DigestMessage:
    """One digest's email, built once and personalised per recipient by splicing."""

    def __init__(self, settings: Settings, subject: str, html: str, text: str, *,
                 list_unsubscribe: bool = True) -> None:
        """``list_unsubscribe=False`` leaves out List-Unsubscribe and
        List-Unsubscribe-Post: for a test copy, which goes to no subscriber,
        so a mail client's unsubscribe button would point nowhere true."""
        self.list_unsubscribe_headers = list_unsubscribe
        self.envelope_from = envelope_address(settings.from_addr)
        self.sample_preferences = f"{settings.base_url.rstrip('/')}/preferences/{SAMPLE_TOKEN}"
        self.domain = sender_domain(settings.from_addr)
        # the bounce mailbox reads these (bot.bounces): the bounce address if set
        self.mailto_address = settings.bounce_address or self.envelope_from
        self.subject = one_line(subject)
        msg = EmailMessage(policy=policy.SMTP)
        msg["From"] = one_line(settings.from_addr)
        if settings.reply_to:
            msg["Reply-To"] = one_line(settings.reply_to)
        msg["Subject"] = self.subject
        msg["List-Id"] = f"<digest.{self.domain}>"
        if list_unsubscribe:
            msg["List-Unsubscribe-Post"] = ONE_CLICK
        msg["MIME-Version"] = "1.0"
        msg["Content-Type"] = "multipart/alternative"
        for subtype, mark in (("plain", _TEXT_MARK), ("html", _HTML_MARK)):
            part = EmailMessage(policy=policy.SMTP)
            part["Content-Type"] = f'text/{subtype}; charset="utf-8"'
            part["Content-Transfer-Encoding"] = "base64"
            part.set_payload(mark)
            msg.attach(part)
        raw = msg.as_bytes(policy=policy.SMTP)
        head, rest = raw.split(_TEXT_MARK.encode(), 1)
        middle, tail = rest.split(_HTML_MARK.encode(), 1)
        self._head, self._middle, self._tail = head, middle, tail
        self._text = _Body(text)  # canonical CRLF form, encoded once up to the link
        self._html = _Body(html)

    def mailto(self, unsubscribe_token: str) -> str:
        """The List-Unsubscribe ``mailto:``: the bounce address, with the
        recipient's signed unsubscribe token in the subject. The bounce
        mailbox acts on that token only, never on who the mail says it is from."""
        return f"mailto:{self.mailto_address}?subject=unsubscribe%20{unsubscribe_token}"

    def list_unsubscribe(self, url: str, unsubscribe_token: str | None = None) -> str:
        """The List-Unsubscribe value: the link, and the ``mailto:`` when there is a token."""
        return f"<{url}>" + (f",\r\n <{self.mailto(unsubscribe_token)}>" if unsubscribe_token else "")

    def render(self, to: str, message_id: str, unsubscribe_url: str,
               date: datetime | None = None, preferences_url: str | None = None,
               unsubscribe_token: str | None = None) -> bytes:
        """The complete message for one recipient, CRLF line endings. Without
        ``preferences_url`` the "choose your themes" link is the marked sample
        (a test copy has no reader); ``unsubscribe_token`` (the one in
        ``unsubscribe_url``) adds the mailto:."""
        _ascii_line(to, "recipient address")
        _ascii_line(message_id, "Message-ID")
        _ascii_line(unsubscribe_url, "unsubscribe URL")
        preferences = _ascii_line(preferences_url or self.sample_preferences, "preferences URL")
        if unsubscribe_token is not None and not _MAILTO_TOKEN.match(unsubscribe_token):
            raise ValueError(f"unsubscribe token must be URL-safe ASCII: {unsubscribe_token!r}")
        personal = (
            f"To: {to}\r\n"
            f"Date: {format_datetime(date) if date else _date_now()}\r\n"
            f"Message-ID: {message_id}\r\n"
        )
        if self.list_unsubscribe_headers:
            personal += f"List-Unsubscribe: {self.list_unsubscribe(unsubscribe_url, unsubscribe_token)}\r\n"
        link, choose = unsubscribe_url.encode("ascii"), preferences.encode("ascii")
        return b"".join((personal.encode("ascii"), self._head, self._text.encode(link, choose),
                         self._middle, self._html.encode(link, choose), self._tail))


def simple_message(
    settings: Settings, to: str, subject: str, text: str, html: str | None = None,
    message_id: str | None = None,
) -> tuple[str, bytes]:
    """A one-off message (confirmation mail): (Message-ID, bytes)."""
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = one_line(settings.from_addr)
    msg["To"] = _ascii_line(to, "recipient address")
    if settings.reply_to:
        msg["Reply-To"] = one_line(settings.reply_to)
    msg["Subject"] = one_line(subject)
    msg["Date"] = format_datetime(datetime.now(UTC))
    message_id = message_id or make_msgid(domain=sender_domain(settings.from_addr))
    msg["Message-ID"] = message_id
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    return message_id, msg.as_bytes(policy=policy.SMTP)
