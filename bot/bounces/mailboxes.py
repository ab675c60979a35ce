"""Reading the bounce mailbox: IMAP, POP3 or a local Maildir.

Every kind hands out the mail not yet marked, and marks each one after its
outcome is committed to the database:

- IMAP (``imaps://user:pass@host[:port]/FOLDER``): understood mail gets the
  flags ``\\Seen $DigestbotProcessed``; mail not understood gets
  ``$DigestbotIgnored`` and stays unread for a person. Mail carrying either
  keyword is not fetched again. Fetching uses BODY.PEEK, so nothing is
  marked read before it was handled.
- POP3 (``pop3s://user:pass@host[:port]``): POP3 has no flags or folders;
  understood mail is deleted from the server (at the end of the session,
  after its outcome is committed), everything else stays.
- Maildir (a path): understood mail moves to the ``.Processed`` sub-folder,
  mail not understood moves to ``cur/`` marked flagged, for a person.

Whatever a mailbox can or cannot mark, the database (``mailbox_messages``)
remembers every mail it handled, so none is processed twice.

TLS certificates are checked against the system's trusted CAs (and the host
name); plain ``imap://`` and ``pop3://`` are accepted for 127.0.0.1 only
(checked in ``bot.config``), STARTTLS is used there when offered.
"""

from __future__ import annotations

import contextlib
import functools
import imaplib
import os
import poplib
import re
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from bot.errors import BotError
from bot.files import MAIL_CAP, read_regular_file

TIMEOUT = 30.0
DONE_KEYWORD = "$DigestbotProcessed"
IGNORED_KEYWORD = "$DigestbotIgnored"
PROCESSED_FOLDER = ".Processed"
_HEADER_END = re.compile(rb"\r?\n\r?\n")


class MailboxError(BotError):
    """The bounce mailbox cannot be read."""


# what a mailbox raises when the connection fails half-way
TRANSPORT_ERRORS = (OSError, imaplib.IMAP4.error, poplib.error_proto)


@dataclass
class MailItem:
    """One mail: where it is (``ref``), its header block, and how to get all of it."""

    ref: Any
    head: bytes
    load: Callable[[], bytes]


class Mailbox(Protocol):
    description: str

    def unmarked(self) -> Iterator[MailItem]:
        """The mail not marked yet, oldest first."""
        ...

    def mark(self, item: MailItem, understood: bool) -> None: ...

    def close(self) -> None: ...


def open_mailbox(location: str) -> Mailbox:
    """The mailbox ``DIGESTBOT_BOUNCE_MAILBOX`` names, connected and logged in."""
    scheme = urlsplit(location).scheme.lower()
    if scheme in ("imap", "imaps"):
        return ImapMailbox(location)
    if scheme in ("pop3", "pop3s"):
        return Pop3Mailbox(location)
    return MaildirMailbox(Path(location.removeprefix("file://")))


def _head(raw: bytes) -> bytes:
    match = _HEADER_END.search(raw)
    return raw[: match.start()] if match else raw


def _const(raw: bytes) -> Callable[[], bytes]:
    return lambda: raw


def safe_location(location: str) -> str:
    """A mailbox URL without its password (a Maildir path as it is), for messages."""
    return _where(location) if "://" in location else location


def _where(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{unquote(parts.username or '')}@{host}{port}{parts.path}"


def _connect_errors(where: str, exc: Exception, what: str) -> MailboxError:
    """A connection problem as a message with a hint."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return MailboxError(f"the TLS certificate of {where} is not trusted: {exc.verify_message}",
                            hint="use the server's real host name in DIGESTBOT_BOUNCE_MAILBOX; "
                                 "certificates are checked against the system's trusted CAs")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return MailboxError(f"{where} did not answer within {TIMEOUT:g} s",
                            hint="check the host and port in DIGESTBOT_BOUNCE_MAILBOX")
    return MailboxError(f"cannot {what} {where}: {exc or type(exc).__name__}",
                        hint="check the host, port, user and password in DIGESTBOT_BOUNCE_MAILBOX")


# --- IMAP ------------------------------------------------------------------------------------

class ImapMailbox:
    """One IMAP folder, over TLS (imaps) or, on this machine, plain IMAP."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.where = _where(url)
        self.description = f"IMAP folder {self.where}"
        secure = parts.scheme.lower() == "imaps"
        host, port = parts.hostname or "", parts.port or (993 if secure else 143)
        self.folder = unquote(parts.path.lstrip("/")) or "INBOX"
        context = ssl.create_default_context()
        try:
            if secure:
                self.conn: imaplib.IMAP4 = imaplib.IMAP4_SSL(host, port, ssl_context=context,
                                                             timeout=TIMEOUT)
            else:
                self.conn = imaplib.IMAP4(host, port, timeout=TIMEOUT)
                if "STARTTLS" in self.conn.capabilities:
                    self.conn.starttls(context)
        except (OSError, imaplib.IMAP4.error) as exc:
            raise _connect_errors(self.where, exc, "connect to") from None
        try:
            self.conn.login(unquote(parts.username or ""), unquote(parts.password or ""))
        except imaplib.IMAP4.error as exc:
            self._logout()
            raise MailboxError(f"{self.where} refused the login: {_imap_text(exc)}",
                               hint="check the user and password in DIGESTBOT_BOUNCE_MAILBOX "
                                    "(%40 for an @ in the user name)") from None
        typ, data = self.conn.select(_quote(self.folder))
        if typ != "OK":
            self._logout()
            raise MailboxError(f"{self.where}: cannot open the folder {self.folder!r}: "
                               f"{_imap_text(data)}", hint="name an existing folder, e.g. /INBOX")

    def unmarked(self) -> Iterator[MailItem]:
        typ, data = self.conn.uid("SEARCH", "UNKEYWORD", DONE_KEYWORD,
                                  "UNKEYWORD", IGNORED_KEYWORD)
        if typ != "OK":
            raise MailboxError(f"{self.where}: search failed: {_imap_text(data)}")
        for uid in (data[0] or b"").decode("ascii").split():
            typ, fetched = self.conn.uid("FETCH", uid, "(BODY.PEEK[])")
            raw = _fetched_bytes(fetched) if typ == "OK" else None
            if raw is None:  # gone meanwhile (another client expunged it)
                continue
            yield MailItem(uid, _head(raw), _const(raw))

    def mark(self, item: MailItem, understood: bool) -> None:
        flags = f"(\\Seen {DONE_KEYWORD})" if understood else f"({IGNORED_KEYWORD})"
        typ, data = self.conn.uid("STORE", item.ref, "+FLAGS.SILENT", flags)
        if typ != "OK":
            raise MailboxError(f"{self.where}: cannot flag a message: {_imap_text(data)}",
                               hint="the mailbox must allow keywords (PERMANENTFLAGS \\*); "
                                    "the database still keeps it from being processed twice")

    def close(self) -> None:
        with contextlib.suppress(OSError, imaplib.IMAP4.error):
            self.conn.close()
        self._logout()

    def _logout(self) -> None:
        with contextlib.suppress(OSError, imaplib.IMAP4.error):
            self.conn.logout()


def _quote(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _imap_text(data: Any) -> str:
    if isinstance(data, list):
        data = b" ".join(d for d in data if isinstance(d, bytes))
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return str(data)


def _fetched_bytes(data: list[Any]) -> bytes | None:
    for item in data:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes):
            return item[1]
    return None


# --- POP3 ------------------------------------------------------------------------------------

class Pop3Mailbox:
    """A POP3 mailbox: deletions of understood mail take effect at ``close``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.where = _where(url)
        self.description = f"POP3 mailbox {self.where}"
        secure = parts.scheme.lower() == "pop3s"
        host, port = parts.hostname or "", parts.port or (995 if secure else 110)
        context = ssl.create_default_context()
        try:
            if secure:
                self.conn: poplib.POP3 = poplib.POP3_SSL(host, port, context=context, timeout=TIMEOUT)
            else:
                self.conn = poplib.POP3(host, port, timeout=TIMEOUT)
                if "STLS" in self._capabilities():
                    self.conn.stls(context)
        except (OSError, poplib.error_proto) as exc:
            raise _connect_errors(self.where, exc, "connect to") from None
        try:
            self.conn.user(unquote(parts.username or ""))
            self.conn.pass_(unquote(parts.password or ""))
        except poplib.error_proto as exc:
            self.conn.close()
            raise MailboxError(f"{self.where} refused the login: {exc}",
                               hint="check the user and password in DIGESTBOT_BOUNCE_MAILBOX") from None

    def _capabilities(self) -> dict[str, Any]:
        try:
            return self.conn.capa()
        except poplib.error_proto:
            return {}

    def unmarked(self) -> Iterator[MailItem]:
        _, listing, _ = self.conn.uidl()
        for line in listing:
            number = int(line.split()[0])
            _, lines, _ = self.conn.top(number, 0)
            yield MailItem(number, b"\r\n".join(lines), functools.partial(self._retrieve, number))

    def _retrieve(self, number: int) -> bytes:
        return b"\r\n".join(self.conn.retr(number)[1]) + b"\r\n"

    def mark(self, item: MailItem, understood: bool) -> None:
        if understood:
            self.conn.dele(item.ref)

    def close(self) -> None:
        try:
            self.conn.quit()  # commits the deletions
        except (OSError, poplib.error_proto):
            self.conn.close()


# --- Maildir ---------------------------------------------------------------------------------

class MaildirMailbox:
    """A Maildir folder written by the local mail server (or a fetchmail)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.description = f"Maildir {root}"
        missing = [d for d in ("new", "cur", "tmp") if not (root / d).is_dir()]
        if missing:
            raise MailboxError(f"{root} is not a Maildir (no {', '.join(missing)}/ in it)",
                               hint="set DIGESTBOT_BOUNCE_MAILBOX to the Maildir the bounce address "
                                    "is delivered to, or to an imaps:// or pop3s:// URL")

    def unmarked(self) -> Iterator[MailItem]:
        # listed before any is marked: marking moves mail from new/ to cur/
        paths = [self.root / sub / name for sub in ("new", "cur")
                 for name in sorted(os.listdir(self.root / sub)) if not name.startswith(".")]
        for path in paths:
            try:
                raw = read_regular_file(path, cap=MAIL_CAP, what="mail")
            except BotError:  # moved meanwhile by a mail client; not a mail file: left as it is
                continue
            yield MailItem(path, _head(raw), _const(raw))

    def mark(self, item: MailItem, understood: bool) -> None:
        path: Path = item.ref
        base = path.name.split(":", 1)[0]
        if understood:
            folder = self.root / PROCESSED_FOLDER
            for sub in ("new", "cur", "tmp"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
            target = folder / "cur" / f"{base}:2,S"
        else:
            flags = set(path.name.split(":2,", 1)[1]) if ":2," in path.name else set()
            target = self.root / "cur" / f"{base}:2,{''.join(sorted(flags | {'F'}))}"
        if target != path:
            os.replace(path, target)

    def close(self) -> None:
        pass
