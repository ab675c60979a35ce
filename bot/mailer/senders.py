"""Handing messages over: the Sender interface, SMTP and the outbox folder.

    A ``Sender`` takes (envelope sender, recipient, message bytes). It raises
    ``PermanentFailure`` for a 5xx about this recipient, ``TemporaryFailure``
    for a 4xx or a dropped/refused connection (``connection=True``), and
    ``DeliveryError`` for problems no retry can fix (login refused, TLS
    certificate not trusted, our sender address refused). Retrying is the
    caller's business (``bot.send``).

    ``SmtpSender`` keeps one connection open across messages and opens a new
    one after it drops. ``OutboxSender`` writes ``.eml`` files to a folder
    (temp file, then an atomic rename), named after the Message-ID, so the
    same message written twice is still one file.
"""

from __future__ import annotations

import contextlib
import os
import re
import smtplib
import socket
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from bot.config import Settings
from bot.errors import DeliveryError
from bot.mailer.message import one_line


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
        ``ready`` waits for. A server that offers PIPELINING (RFC 2920) gets
        MAIL, RCPT and DATA in one write: one round trip for the three."""
        conn.ehlo_or_helo_if_needed()
        # what conn.mail() and conn.rcpt() send, without parsing plain addresses each time
        commands = (f"MAIL FROM:{_angle(envelope_from)}", f"RCPT TO:{_angle(recipient)}", "DATA")
        replies = (_pipelined(conn, commands) if conn.has_extn("pipelining")
                   else _one_by_one(conn, commands))
        for stage, ((code, resp), expected) in enumerate(zip(replies, _EXPECTED, strict=False)):
            if code in expected:
                continue
            if len(replies) == 3 and replies[2][0] == 354:  # pipelined DATA went in regardless
                conn.send(b".\r\n")  # an empty message, to no valid recipient
                conn.getreply()
            _reset(conn, code)
            if stage == 0:
                raise smtplib.SMTPSenderRefused(code, resp, envelope_from)
            if stage == 1:
                raise smtplib.SMTPRecipientsRefused({recipient: (code, resp)})
            raise smtplib.SMTPDataError(code, resp)
        data = _LEADING_DOT.sub(b"..", message) if _needs_stuffing(message) else message
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

    def abort(self) -> None:
        """Cut the connection now, from any thread: a transaction waiting on a
        stalled server fails at once with a lost connection (a stop does not
        wait out DIGESTBOT_SMTP_TIMEOUT). A server takes a message only at the
        final "." and its 250: one cut before that has delivered nothing."""
        sock = getattr(self._conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.quit()
        except (OSError, smtplib.SMTPException):
            _quietly_close(conn)


_LEADING_DOT = re.compile(rb"(?m)^\.")
_EXPECTED = ((250,), (250, 251), (354,))  # the good replies to MAIL, RCPT and DATA
_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9.-]+")


def _needs_stuffing(message: bytes) -> bool:
    """Whether a line starts with a dot. Dot-stuffing is a pass over the whole
    message (~1.5 ms for a 140 KB digest), and so is looking for "\\n." (~0.14
    ms); dots are rare (base64 bodies have none), and finding each one is
    memchr-fast: ~0.03 ms."""
    if message.startswith(b"."):
        return True
    dot = message.find(b".")
    while dot != -1:
        if message[dot - 1] == 0x0A:  # "\n"
            return True
        dot = message.find(b".", dot + 1)
    return False


def _pipelined(conn: smtplib.SMTP, commands: tuple[str, ...]) -> list[tuple[int, bytes]]:
    """Send ``commands`` in one write and read their replies; after a 421 the
    server closes the connection, so no further reply is read."""
    conn.send("".join(f"{command}\r\n" for command in commands))
    replies: list[tuple[int, bytes]] = []
    for _ in commands:
        replies.append(conn.getreply())
        if replies[-1][0] == 421:
            break
    return replies


def _one_by_one(conn: smtplib.SMTP, commands: tuple[str, ...]) -> list[tuple[int, bytes]]:
    """Send ``commands`` one at a time, up to the first refused one."""
    replies: list[tuple[int, bytes]] = []
    for command, expected in zip(commands, _EXPECTED, strict=True):
        replies.append(conn.docmd(command))
        if replies[-1][0] not in expected:
            break
    return replies


def _angle(address: str) -> str:
    """``<address>``, as ``smtplib.quoteaddr`` makes it (which it does for others)."""
    return f"<{address}>" if _PLAIN_ADDRESS.fullmatch(address) else smtplib.quoteaddr(address)


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
