"""Email messages and the transports that hand them over.

Building
    ``DigestMessage`` builds one digest's message once, with
    ``email.message.EmailMessage`` and ``policy.SMTP`` (CRLF, RFC 2047 encoded
    subject and display names), then cuts the bytes at the places that differ
    per recipient. ``render()`` only splices: the personal headers (To, Date,
    Message-ID, List-Unsubscribe) and the two bodies with the recipient's
    unsubscribe link put in place of ``UNSUBSCRIBE_PLACEHOLDER``, base64
    encoded. No per-recipient value can add a header: subjects are squashed
    to one line and per-recipient values are checked to be plain one-line ASCII.

Sending
    A ``Sender`` takes (envelope sender, recipient, message bytes). It raises
    ``PermanentFailure`` for a 5xx about this recipient, ``TemporaryFailure``
    for a 4xx or a dropped/refused connection (``connection=True``), and
    ``DeliveryError`` for problems no retry can fix (login refused, TLS
    certificate not trusted, our sender address refused). Retrying is the
    caller's business (``bot.delivery``).

    ``SmtpSender`` keeps one connection open across messages and opens a new
    one after it drops. ``OutboxSender`` writes ``.eml`` files to a folder
    (temp file, then an atomic rename), named after the Message-ID, so the
    same message written twice is still one file.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import smtplib
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from pathlib import Path
from typing import Protocol

from bot.config import Settings
from bot.errors import DeliveryError

UNSUBSCRIBE_PLACEHOLDER = "__DIGESTBOT_UNSUBSCRIBE_URL__"  # same string as bot.render's
ONE_CLICK = "List-Unsubscribe=One-Click"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
_TEXT_MARK = "DIGESTBOTTEXTBODYMARKER"
_HTML_MARK = "DIGESTBOTHTMLBODYMARKER"


# --- addresses and headers -----------------------------------------------------------

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
    return make_msgid(idstring="digest", domain=domain)


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
    link put in (it sits in the footer, so that is a few hundred bytes).
    """

    def __init__(self, text: str) -> None:
        data = _crlf(text).encode("utf-8")
        pieces = data.split(UNSUBSCRIBE_PLACEHOLDER.encode("ascii"))
        cut = len(pieces[0]) // _LINE_BYTES * _LINE_BYTES if len(pieces) > 1 else 0
        head = _b64_lines(pieces[0][:cut])
        self._head = head + b"\r\n" if head else b""
        self._rest = [pieces[0][cut:], *pieces[1:]]

    def encode(self, link: bytes) -> bytes:
        return self._head + _b64_lines(link.join(self._rest))


class DigestMessage:
    """One digest's email, built once and personalised per recipient by splicing."""

    def __init__(self, settings: Settings, subject: str, html: str, text: str) -> None:
        self.envelope_from = envelope_address(settings.from_addr)
        self.domain = sender_domain(settings.from_addr)
        self.mailto = f"mailto:{self.envelope_from}?subject=unsubscribe"
        self.subject = one_line(subject)
        msg = EmailMessage(policy=policy.SMTP)
        msg["From"] = one_line(settings.from_addr)
        if settings.reply_to:
            msg["Reply-To"] = one_line(settings.reply_to)
        msg["Subject"] = self.subject
        msg["List-Id"] = f"<digest.{self.domain}>"
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

    def list_unsubscribe(self, url: str) -> str:
        return f"<{url}>, <{self.mailto}>"

    def render(self, to: str, message_id: str, unsubscribe_url: str,
               date: datetime | None = None) -> bytes:
        """The complete message for one recipient, CRLF line endings."""
        _ascii_line(to, "recipient address")
        _ascii_line(message_id, "Message-ID")
        _ascii_line(unsubscribe_url, "unsubscribe URL")
        personal = (
            f"To: {to}\r\n"
            f"Date: {format_datetime(date) if date else _date_now()}\r\n"
            f"Message-ID: {message_id}\r\n"
            f"List-Unsubscribe: <{unsubscribe_url}>,\r\n <{self.mailto}>\r\n"
        ).encode("ascii")
        link = unsubscribe_url.encode("ascii")
        return b"".join((personal, self._head, self._text.encode(link), self._middle,
                         self._html.encode(link), self._tail))


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


# --- transports ------------------------------------------------------------------------

class SendFailure(Exception):
    """A message was not accepted."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class PermanentFailure(SendFailure):
    """The server refused this recipient or message for good (5xx)."""


class TemporaryFailure(SendFailure):
    """Try again later: a 4xx reply, or (``connection``) no working connection."""

    def __init__(self, message: str, code: int | None = None, connection: bool = False) -> None:
        super().__init__(message, code)
        self.connection = connection


Ready = Callable[[], None]


class Sender(Protocol):
    description: str

    def send(self, envelope_from: str, recipient: str, message: bytes, message_id: str,
             ready: Ready | None = None) -> None:
        """Hand one message over. ``ready`` is called before the message can be
        accepted (SMTP: after the server's 354, before the data and its final
        "."; outbox: before the rename); if it raises, nothing is accepted."""
        ...

    def close(self) -> None:
        ...


def make_sender(settings: Settings) -> Sender:
    """SMTP when ``DIGESTBOT_SMTP_HOST`` is set, else the local outbox folder."""
    if settings.smtp_host:
        return SmtpSender.from_settings(settings)
    return OutboxSender(Path(settings.outbox_dir))


def _reply(code: int, resp: bytes | str) -> str:
    text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
    return f"{code} {one_line(text)}".strip()


class SmtpSender:
    """One SMTP connection, reused across messages, reopened after it drops."""

    def __init__(
        self, host: str, port: int, *, security: str = "starttls", user: str | None = None,
        password: str | None = None, timeout: float = 30.0,
    ) -> None:
        self.host, self.port, self.security = host, port, security
        self.user, self.password, self.timeout = user, password, timeout
        self.description = f"SMTP server {host}:{port} ({security})"
        self._conn: smtplib.SMTP | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpSender:
        assert settings.smtp_host
        return cls(settings.smtp_host, settings.smtp_port, security=settings.smtp_security,
                   user=settings.smtp_user, password=settings.smtp_password,
                   timeout=settings.smtp_timeout)

    def _open(self) -> smtplib.SMTP:
        where = f"{self.host}:{self.port}"
        conn: smtplib.SMTP | None = None
        try:
            context = ssl.create_default_context()
            if self.security == "ssl":
                conn = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout,
                                        context=context)
            else:
                conn = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            conn.ehlo()
            if self.security == "starttls":
                if not conn.has_extn("starttls"):
                    raise DeliveryError(
                        f"the SMTP server {where} does not offer STARTTLS",
                        hint="set DIGESTBOT_SMTP_SECURITY=ssl (port 465) or, on a trusted "
                             "local relay only, none")
                conn.starttls(context=context)
                conn.ehlo()
            if self.user:
                conn.login(self.user, self.password or "")
            if conn.sock is not None:
                # commands and data are whole writes: don't let Nagle's algorithm
                # hold a short one back waiting for the ACK of the previous one
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except DeliveryError:
            _quietly_close(conn)
            raise
        except ssl.SSLCertVerificationError as exc:
            _quietly_close(conn)
            raise DeliveryError(
                f"the TLS certificate of {where} is not trusted: {exc.verify_message}",
                hint="use the server's real host name in DIGESTBOT_SMTP_HOST; certificates "
                     "are checked against the system's trusted CAs") from None
        except smtplib.SMTPAuthenticationError as exc:
            _quietly_close(conn)
            raise DeliveryError(f"the SMTP server {where} refused the login: "
                                f"{_reply(exc.smtp_code, exc.smtp_error)}",
                                hint="check DIGESTBOT_SMTP_USER and DIGESTBOT_SMTP_PASSWORD") from None
        except smtplib.SMTPNotSupportedError as exc:
            _quietly_close(conn)
            raise DeliveryError(f"the SMTP server {where}: {exc}",
                                hint="unset DIGESTBOT_SMTP_USER if it needs no login") from None
        except smtplib.SMTPResponseException as exc:
            _quietly_close(conn)
            reply = _reply(exc.smtp_code, exc.smtp_error)
            raise TemporaryFailure(f"cannot use the SMTP server {where}: {reply}",
                                   exc.smtp_code, connection=True) from None
        except (OSError, smtplib.SMTPException) as exc:
            _quietly_close(conn)
            raise TemporaryFailure(f"cannot connect to the SMTP server {where}: "
                                   f"{exc or type(exc).__name__}", connection=True) from None
        return conn

    def send(self, envelope_from: str, recipient: str, message: bytes, message_id: str,
             ready: Ready | None = None) -> None:
        if self._conn is None:
            self._conn = self._open()
        conn = self._conn
        try:
            self._transaction(conn, envelope_from, recipient, message, ready)
        except _NotReady as exc:
            self._drop()  # the server drops the unfinished DATA with the connection
            raise exc.error from None
        except smtplib.SMTPRecipientsRefused as exc:
            code, resp = exc.recipients.get(recipient, (0, b"refused"))
            raise self._failure(code, resp) from None
        except smtplib.SMTPSenderRefused as exc:
            if exc.smtp_code >= 500:
                self.close()
                raise DeliveryError(
                    f"the SMTP server refused our sender address {envelope_from}: "
                    f"{_reply(exc.smtp_code, exc.smtp_error)}",
                    hint="check DIGESTBOT_FROM_ADDR: the server must let this account "
                         "send as that address") from None
            raise self._failure(exc.smtp_code, exc.smtp_error) from None
        except smtplib.SMTPResponseException as exc:
            raise self._failure(exc.smtp_code, exc.smtp_error) from None
        except (OSError, smtplib.SMTPException) as exc:
            self._drop()
            raise TemporaryFailure(f"connection to {self.host}:{self.port} lost: "
                                   f"{exc or type(exc).__name__}", connection=True) from None

    @staticmethod
    def _transaction(conn: smtplib.SMTP, envelope_from: str, recipient: str, message: bytes,
                     ready: Ready | None) -> None:
        """``smtplib.SMTP.sendmail`` for one recipient, with a pause after the
        server's 354: it gets the data (and can accept it) only after ``ready()``,
        while MAIL, RCPT and DATA have already overlapped with whatever
        ``ready`` waits for."""
        conn.ehlo_or_helo_if_needed()
        code, resp = conn.mail(envelope_from)
        if code != 250:
            _reset(conn, code)
            raise smtplib.SMTPSenderRefused(code, resp, envelope_from)
        code, resp = conn.rcpt(recipient)
        if code not in (250, 251):
            _reset(conn, code)
            raise smtplib.SMTPRecipientsRefused({recipient: (code, resp)})
        code, resp = conn.docmd("data")
        if code != 354:
            _reset(conn, code)
            raise smtplib.SMTPDataError(code, resp)
        data = _LEADING_DOT.sub(b"..", message)
        if not data.endswith(b"\r\n"):
            data += b"\r\n"
        if ready is not None:
            try:
                ready()
            except Exception as exc:
                raise _NotReady(exc) from exc
        conn.send(data + b".\r\n")
        code, resp = conn.getreply()
        if code != 250:
            _reset(conn, code)
            raise smtplib.SMTPDataError(code, resp)

    def _failure(self, code: int, resp: bytes | str) -> SendFailure:
        reply = _reply(code, resp)
        if 500 <= code < 600:
            return PermanentFailure(reply, code)
        if 400 <= code < 500 and code != 421:
            return TemporaryFailure(reply, code)
        self._drop()  # 421 (closing), or a reply we don't understand: start afresh
        return TemporaryFailure(reply, code, connection=True)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        _quietly_close(conn)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.quit()
        except (OSError, smtplib.SMTPException):
            _quietly_close(conn)


_LEADING_DOT = re.compile(rb"(?m)^\.")


class _NotReady(Exception):
    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _reset(conn: smtplib.SMTP, code: int) -> None:
    """After a refused command: 421 means the server is closing; else RSET."""
    if code == 421:
        conn.close()
        return
    with contextlib.suppress(smtplib.SMTPServerDisconnected):
        conn.rset()


def _quietly_close(conn: smtplib.SMTP | None) -> None:
    if conn is not None:
        with contextlib.suppress(OSError):
            conn.close()


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@=-]+")


class OutboxSender:
    """Writes each message to ``<dir>/<message-id>.eml`` (temp file, then rename)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.description = f"outbox folder {directory}"

    def path_for(self, message_id: str) -> Path:
        name = _UNSAFE_NAME.sub("_", message_id.strip("<> ")) or "message"
        return self.directory / f"{name[:200]}.eml"

    def send(self, envelope_from: str, recipient: str, message: bytes, message_id: str,
             ready: Ready | None = None) -> None:
        tmp = None
        try:
            with self._writing():
                self.directory.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".eml")
                with os.fdopen(fd, "wb") as fh:
                    fh.write(message)
            if ready is not None:
                ready()
            with self._writing():
                os.replace(tmp, self.path_for(message_id))
        except BaseException:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise DeliveryError(f"cannot write to the outbox {self.directory}: {exc}",
                                hint="check DIGESTBOT_OUTBOX_DIR, or set DIGESTBOT_SMTP_HOST "
                                     "to send by SMTP") from None

    def close(self) -> None:
        pass
