"""Signed, expiring tokens for the links we mail out, and the secret behind them.

Four kinds, each with its own itsdangerous salt or key so one can never pass for the other:

- **confirm** (``/confirm/TOKEN``): ``[subscriber id, token_nonce]``, valid for
  ``confirm_ttl_hours``. The subscriber's ``token_nonce`` is rotated on every
  state change, so a link stops working once it has been used (or once the
  subscriber unsubscribed, bounced, ...).
- **unsubscribe** (``/unsubscribe/TOKEN``): ``[subscriber id, address tag]``,
  valid for ``unsubscribe_ttl_days``. It does *not* carry the nonce: the link
  in a digest mailed months ago must keep working. The address tag (a short
  hash of the lower-cased address) ties it to that address, so a token can't
  unsubscribe a different person who later got the same row id. The same
  token rides in the subject of the List-Unsubscribe ``mailto:`` address
  (``bot.bounces`` reads it back), so mail can only unsubscribe whom we named.
- **mail id**: the local part of a one-off mail's Message-ID (the
  confirmation mail), ``c<subscriber id>.<nonce>.<mac>``: an HMAC of those
  and the address tag, in lower-case hex so it survives as a VERP token in
  the envelope sender. No delivery row records such a mail, so a bounce or
  complaint about it is believed by this signature alone. It does not expire.
- **preferences** (``/preferences/TOKEN``, issue 36): the same claim as
  unsubscribe under its own salt, with the same time to live: the "choose
  your themes" link of every digest, no login needed.

The secret comes from ``DIGESTBOT_SECRET_KEY``; without it one is generated on
first use and kept in ``<var_dir>/secret_key`` (mode 0600).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from itsdangerous.timed import TimestampSigner

from bot.config import Settings
from bot.errors import BotError, ConfigError
from bot.files import KEY_CAP, read_regular_text

log = logging.getLogger(__name__)

CONFIRM_SALT = "digestbot.confirm.v1"
UNSUBSCRIBE_SALT = "digestbot.unsubscribe.v1"
MAIL_ID_SALT = b"digestbot.mail-id.v1"
MAIL_ID_MAC = 16  # hex characters (64 bits): enough against guessing by mail
_MAIL_ID = re.compile(r"^c([1-9][0-9]{0,11})\.([0-9a-f]{8})\.([0-9a-f]{16})$")
PREFERENCES_SALT = "digestbot.preferences.v1"
SECRET_FILE = "secret_key"


class TokenError(BotError):
    """A link token we cannot accept."""


class TokenInvalid(TokenError):
    """Tampered, truncated, or made for another purpose."""


class TokenExpired(TokenError):
    """Correctly signed but older than its time to live."""


@dataclass(frozen=True)
class ConfirmClaim:
    subscriber_id: int
    nonce: str


@dataclass(frozen=True)
class UnsubscribeClaim:
    subscriber_id: int
    address_tag: str


@dataclass(frozen=True)
class MailIdClaim:
    """What a signed Message-ID local part says; ``Tokens.mail_id_matches`` checks it."""

    subscriber_id: int
    nonce: str
    mac: str


def address_tag(email_key: str) -> str:
    """A short fingerprint of a lower-cased address (inside a signed token)."""
    return hashlib.sha256(email_key.encode("utf-8")).hexdigest()[:10]


def _signer_class(clock: Callable[[], float]) -> type[TimestampSigner]:
    class ClockSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(clock())

    return ClockSigner


class Tokens:
    """Makes and checks both kinds of token. ``clock`` is for tests."""

    def __init__(
        self,
        secret: str,
        *,
        confirm_ttl_seconds: int,
        unsubscribe_ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        signer = _signer_class(clock)
        kwargs: dict[str, Any] = {"digest_method": hashlib.sha256}
        self._confirm = URLSafeTimedSerializer(secret, salt=CONFIRM_SALT, signer=signer,
                                               signer_kwargs=kwargs)
        self._unsubscribe = URLSafeTimedSerializer(secret, salt=UNSUBSCRIBE_SALT, signer=signer,
                                                   signer_kwargs=kwargs)
        self._mail_key = hmac.new(secret.encode("utf-8"), MAIL_ID_SALT, hashlib.sha256).digest()
        self._preferences = URLSafeTimedSerializer(secret, salt=PREFERENCES_SALT, signer=signer,
                                                   signer_kwargs=kwargs)
        self.confirm_ttl = confirm_ttl_seconds
        self.unsubscribe_ttl = unsubscribe_ttl_seconds

    @classmethod
    def from_settings(cls, settings: Settings, clock: Callable[[], float] = time.time) -> Tokens:
        return cls(
            load_secret_key(settings),
            confirm_ttl_seconds=settings.confirm_ttl_hours * 3600,
            unsubscribe_ttl_seconds=settings.unsubscribe_ttl_days * 86400,
            clock=clock,
        )

    # confirm ----------------------------------------------------------------

    def confirm_token(self, subscriber_id: int, nonce: str) -> str:
        return str(self._confirm.dumps([subscriber_id, nonce]))

    def read_confirm(self, token: str) -> ConfirmClaim:
        sid, nonce = _load(self._confirm, token, self.confirm_ttl)
        if not isinstance(nonce, str):
            raise TokenInvalid("this confirmation link is not valid")
        return ConfirmClaim(sid, nonce)

    # unsubscribe ------------------------------------------------------------

    def unsubscribe_token(self, subscriber_id: int, email_key: str) -> str:
        return str(self._unsubscribe.dumps([subscriber_id, address_tag(email_key)]))

    def read_unsubscribe(self, token: str) -> UnsubscribeClaim:
        sid, tag = _load(self._unsubscribe, token, self.unsubscribe_ttl)
        if not isinstance(tag, str):
            raise TokenInvalid("this unsubscribe link is not valid")
        return UnsubscribeClaim(sid, tag)

    # mail id ----------------------------------------------------------------

    def mail_id(self, subscriber_id: int, email_key: str) -> str:
        """A fresh Message-ID local part naming this subscriber, signed."""
        nonce = secrets.token_hex(4)
        return f"c{subscriber_id}.{nonce}.{self._mail_mac(subscriber_id, nonce, email_key)}"

    def read_mail_id(self, local: str) -> MailIdClaim | None:
        """The claim of a Message-ID local part shaped like ``mail_id``'s, else None."""
        match = _MAIL_ID.match(local.strip().lower())
        if match is None:
            return None
        return MailIdClaim(int(match.group(1)), match.group(2), match.group(3))

    def mail_id_matches(self, claim: MailIdClaim, email_key: str) -> bool:
        """Whether we signed ``claim`` for this subscriber and address."""
        expected = self._mail_mac(claim.subscriber_id, claim.nonce, email_key)
        return hmac.compare_digest(expected, claim.mac)

    def _mail_mac(self, subscriber_id: int, nonce: str, email_key: str) -> str:
        text = f"{subscriber_id}.{nonce}.{address_tag(email_key)}".encode()
        return hmac.new(self._mail_key, text, hashlib.sha256).hexdigest()[:MAIL_ID_MAC]
    # preferences (the reader's theme choice) ------------------------------------

    def preferences_token(self, subscriber_id: int, email_key: str) -> str:
        return str(self._preferences.dumps([subscriber_id, address_tag(email_key)]))

    def read_preferences(self, token: str) -> UnsubscribeClaim:
        """The same claim as an unsubscribe token (who, and which address), other salt."""
        sid, tag = _load(self._preferences, token, self.unsubscribe_ttl)
        if not isinstance(tag, str):
            raise TokenInvalid("this link is not valid")
        return UnsubscribeClaim(sid, tag)


def _load(serializer: URLSafeTimedSerializer, token: str, max_age: int) -> tuple[int, Any]:
    if not token or len(token) > 500:
        raise TokenInvalid("this link is not valid")
    try:
        payload = serializer.loads(token, max_age=max_age)
    except SignatureExpired:
        raise TokenExpired("this link has expired") from None
    except BadSignature:
        raise TokenInvalid("this link is not valid") from None
    if (not isinstance(payload, list) or len(payload) != 2 or not isinstance(payload[0], int)
            or isinstance(payload[0], bool)):
        raise TokenInvalid("this link is not valid")
    return payload[0], payload[1]


# --- the secret ------------------------------------------------------------------

def load_secret_key(settings: Settings) -> str:
    """``settings.secret_key``, else the one kept in ``<var_dir>/secret_key``,
    generated (``secrets.token_urlsafe(32)``, mode 0600) on first use."""
    if settings.secret_key:
        return settings.secret_key
    return _persisted_secret(settings.var_dir / SECRET_FILE)


def _read_secret(path: Path) -> str:
    return read_regular_text(path, cap=KEY_CAP, what="the secret key file", error=ConfigError,
                             hint="set DIGESTBOT_SECRET_KEY instead").strip()


def _persisted_secret(path: Path) -> str:
    existing = _read_secret(path) if os.path.lexists(path) else ""
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secret + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if another process got there first
        except FileExistsError:
            return _read_secret(path)
    finally:
        tmp.unlink(missing_ok=True)
    log.warning("DIGESTBOT_SECRET_KEY is not set: generated a secret key and saved it to %s "
                "(keep it; links in mails already sent depend on it)", path)
    return secret


# --- the links -------------------------------------------------------------------

def confirm_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/confirm/{token}"


def unsubscribe_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/unsubscribe/{token}"


def preferences_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/preferences/{token}"
