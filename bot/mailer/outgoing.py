"""The last step before a message leaves: DKIM signature and envelope sender.

``make_sender`` wraps the transport in an ``OutgoingSender`` when DKIM or a
bounce address is configured, so every mail the bot sends -- digests, test
copies, confirmation mails, admin mail -- passes here with its final bytes
(personal links already filled in) and is signed and given its envelope
sender in one place, whoever built it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.mailer import verp
from bot.mailer.dkim import DkimSigner, signer_from_settings
from bot.mailer.message import envelope_address
from bot.mailer.senders import OutboxSender, Ready, Sender, SmtpSender


class OutgoingSender:
    """A ``Sender`` that signs each message and sets its envelope sender, then
    hands it to the real transport (SMTP or the outbox)."""

    def __init__(self, inner: Sender, signer: DkimSigner | None = None,
                 bounce_address: str | None = None, use_verp: bool = False) -> None:
        self.inner = inner
        self.signer = signer
        self.bounce_address = bounce_address
        self.use_verp = use_verp
        self.description = inner.description

    def envelope_for(self, envelope_from: str, message_id: str) -> str:
        """The Return-Path: the bounce address (VERP-encoded when asked), else as given."""
        if not self.bounce_address:
            return envelope_from
        if self.use_verp:
            return verp.verp_address(self.bounce_address, message_id)
        return self.bounce_address

    def send(self, envelope_from: str, recipient: str, message: bytes, message_id: str,
             ready: Ready | None = None) -> None:
        if self.signer is not None:
            message = self.signer.sign(message)
        self.inner.send(self.envelope_for(envelope_from, message_id), recipient, message,
                        message_id, ready)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # a transparent wrapper: whatever else callers use of the transport
        return getattr(self.inner, name)


def outgoing(settings: Settings, inner: Sender) -> Sender:
    """``inner`` wrapped for signing and bounces, or ``inner`` itself if neither is set."""
    signer = signer_from_settings(settings)
    bounce = bounce_address(settings)
    if signer is None and bounce is None:
        return inner
    return OutgoingSender(inner, signer, bounce, settings.verp)


def bounce_address(settings: Settings) -> str | None:
    """Where bounces go: ``DIGESTBOT_BOUNCE_ADDRESS``; with VERP on and no bounce
    address, the From address (``digest+TOKEN@...``)."""
    if settings.bounce_address:
        return settings.bounce_address
    if settings.verp:
        return envelope_address(settings.from_addr)
    return None


def make_sender(settings: Settings) -> Sender:
    """SMTP when ``DIGESTBOT_SMTP_HOST`` is set, else the local outbox folder;
    DKIM-signed and with the bounce address as envelope sender when configured
    (``OutgoingSender``), so every mail the bot sends is."""
    inner: Sender = (SmtpSender.from_settings(settings) if settings.smtp_host
                     else OutboxSender(Path(settings.outbox_dir)))
    return outgoing(settings, inner)
