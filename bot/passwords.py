"""The admin console's one password: argon2 hashes, and where the hash comes from.

The hash is given as ``DIGESTBOT_ADMIN_PASSWORD_HASH`` or kept in the file
``DIGESTBOT_ADMIN_PASSWORD_FILE`` (a Docker secret, say); ``digestbot admin
hash-password`` makes one. The password itself is never stored.
"""

from __future__ import annotations

from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from bot.config import Settings
from bot.errors import ConfigError
from bot.files import KEY_CAP, read_regular_text

MIN_LENGTH = 10
_hasher = PasswordHasher()  # argon2id with the library's current defaults


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` (``$argon2id$v=19$...``)."""
    if len(password) < MIN_LENGTH:
        raise ConfigError(f"the password has {len(password)} characters; use at least {MIN_LENGTH}",
                          hint="a few unrelated words make a long password that is easy to type")
    return _hasher.hash(password)


def verify_password(stored_hash: str, password: str) -> bool:
    """True if ``password`` matches; a wrong password or a broken hash is False."""
    try:
        return _hasher.verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def admin_password_hash(settings: Settings) -> str | None:
    """The admin's hash from the settings or the file they name; None if neither is set."""
    if settings.admin_password_hash:
        return settings.admin_password_hash.strip()
    if not settings.admin_password_file:
        return None
    path = Path(settings.admin_password_file)
    text = read_regular_text(path, cap=KEY_CAP, what="DIGESTBOT_ADMIN_PASSWORD_FILE:", error=ConfigError,
                             hint="make the file readable, or set DIGESTBOT_ADMIN_PASSWORD_HASH").strip()
    if not text.startswith("$argon2"):
        raise ConfigError(f"DIGESTBOT_ADMIN_PASSWORD_FILE: {path} does not hold an argon2 hash",
                          hint="write the output of `digestbot admin hash-password` into it")
    return text
