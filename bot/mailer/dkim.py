"""DKIM: signing every outgoing message, making a key, checking the setup.

Receivers (Gmail and Yahoo require it of bulk senders since 2024) accept a
mail as coming from our domain when a ``DKIM-Signature`` made with our
private key verifies against the public key we publish in DNS at
``<selector>._domainkey.<domain>``. Signing is done with dkimpy on the final
bytes of each message -- after the recipient's personal links are filled in,
so what the receiver hashes is exactly what it got: rsa-sha256,
relaxed/relaxed, over ``SIGNED_HEADERS``.

Keys are made with ``cryptography`` (2048-bit RSA, PKCS#1 PEM, which dkimpy
reads); dkimpy's own key tool needs the ``openssl`` program, which slim
container images lack.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dkim
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from dkim.dnsplug import get_txt

from bot.config import Settings
from bot.errors import ConfigError
from bot.files import KEY_CAP, read_regular_file
from bot.mailer.message import sender_domain

# What the signature covers (the list). Headers a message lacks are
# still named in h=, which makes adding one later break the signature; From
# is named twice so a second From cannot be slipped in above ours.
SIGNED_HEADERS: tuple[str, ...] = (
    "From", "To", "Subject", "Date", "Message-ID", "List-Unsubscribe", "List-Unsubscribe-Post",
    "MIME-Version", "Content-Type", "Content-Transfer-Encoding", "Reply-To", "List-Id", "From",
)
CANONICALIZE = (b"relaxed", b"relaxed")
ALGORITHM = b"rsa-sha256"
KEY_BITS = 2048

DnsFunc = Callable[..., bytes | None]


def dkim_domain(settings: Settings) -> str:
    """``DIGESTBOT_DKIM_DOMAIN``, else the domain of the From address."""
    return (settings.dkim_domain or sender_domain(settings.from_addr)).lower()


class DkimSigner:
    """Signs message bytes with one private key; the key is read once."""

    def __init__(self, private_pem: bytes, selector: str, domain: str) -> None:
        self.private_pem = private_pem
        self.selector = selector
        self.domain = domain
        try:  # fail at start, not at the first message
            dkim.crypto.parse_pem_private_key(private_pem)
        except dkim.crypto.UnparsableKeyError as exc:
            raise ConfigError(f"the DKIM key is not an RSA private key in PEM form: {exc}",
                              hint="make one with `digestbot dkim keygen`") from None

    @classmethod
    def from_file(cls, path: str | Path, selector: str, domain: str) -> DkimSigner:
        pem = read_regular_file(path, cap=KEY_CAP, what="DIGESTBOT_DKIM_KEY_FILE:", error=ConfigError,
                                hint="make a key with `digestbot dkim keygen`, or unset the "
                                     "setting to send unsigned mail")
        return cls(pem, selector, domain)

    def sign(self, message: bytes) -> bytes:
        """The message with a ``DKIM-Signature`` header on top (CRLF line endings)."""
        try:
            header = dkim.sign(
                message, self.selector.encode("ascii"), self.domain.encode("ascii"),
                self.private_pem, include_headers=[h.encode("ascii") for h in SIGNED_HEADERS],
                canonicalize=CANONICALIZE, signature_algorithm=ALGORITHM, linesep=b"\r\n")
        except dkim.DKIMException as exc:
            raise ConfigError(f"cannot DKIM-sign the message: {exc}",
                              hint="check DIGESTBOT_DKIM_KEY_FILE and DIGESTBOT_DKIM_DOMAIN") from None
        return header + message


def signer_from_settings(settings: Settings) -> DkimSigner | None:
    """The signer ``DIGESTBOT_DKIM_KEY_FILE`` asks for, or None (mail goes unsigned)."""
    if not settings.dkim_key_file:
        return None
    return DkimSigner.from_file(settings.dkim_key_file, settings.dkim_selector, dkim_domain(settings))


# --- keys and DNS -------------------------------------------------------------------------

def generate_key(bits: int = KEY_BITS) -> bytes:
    """A new RSA private key as PKCS#1 PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def write_key(path: Path, pem: bytes) -> None:
    """Write a private key readable by its owner only; never over an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)


def public_key_b64(private_pem: bytes) -> str:
    """The p= value of the DNS record: the SubjectPublicKeyInfo, base64."""
    key = serialization.load_pem_private_key(private_pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError("the DKIM key is not an RSA key", hint="make one with `digestbot dkim keygen`")
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode("ascii")


@dataclass(frozen=True)
class DnsRecord:
    name: str  # selector._domainkey.domain
    value: str  # v=DKIM1; k=rsa; p=...

    def zone_line(self) -> str:
        """The record as a zone-file line, split into 255-byte strings as DNS requires."""
        chunks = [self.value[i:i + 250] for i in range(0, len(self.value), 250)]
        quoted = " ".join(f'"{c}"' for c in chunks)
        return f"{self.name}. IN TXT ( {quoted} )"


def dns_record(selector: str, domain: str, public_b64: str) -> DnsRecord:
    return DnsRecord(f"{selector}._domainkey.{domain}", f"v=DKIM1; k=rsa; p={public_b64}")


def file_dnsfunc(record: DnsRecord) -> DnsFunc:
    """A dkimpy DNS function that answers from ``record`` instead of DNS."""
    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        wanted = record.name.lower().rstrip(".")
        return record.value.encode("ascii") if name.decode().lower().rstrip(".") == wanted else None
    return lookup


# --- checking --------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    ok: bool
    problem: str = ""


def verify(message: bytes, dnsfunc: DnsFunc | None = None) -> Verdict:
    """Does the first DKIM signature of ``message`` verify? If not, why not.

    ``dnsfunc`` answers the public key lookup (default: real DNS).
    """
    checker = dkim.DKIM(message, minkey=1024)
    if not checker.present():
        return Verdict(False, "the message has no DKIM-Signature header")
    try:
        ok = checker.verify(dnsfunc=dnsfunc) if dnsfunc else checker.verify()
    except dkim.DKIMException as exc:
        return Verdict(False, str(exc))
    return Verdict(True) if ok else Verdict(False, "the signature does not match the message "
                                                   "(signed by another key, or changed after signing)")


def lookup_record(name: str) -> str | None:
    """The TXT record at ``name`` in DNS, as dkimpy reads it (None if there is none)."""
    try:
        found = get_txt(name.encode("ascii") + b".")
    except Exception:  # dnspython raises many kinds; none of them is a record
        return None
    return found.decode("ascii", "replace") if found else None


def record_key(record: str) -> str:
    """The p= value of a DKIM TXT record, without spaces."""
    for tag in record.split(";"):
        name, _, value = tag.strip().partition("=")
        if name.strip() == "p":
            return "".join(value.split())
    return ""
