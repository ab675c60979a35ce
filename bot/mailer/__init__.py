"""Email: building messages (``message``) and handing them over (``senders``).

Used by every stage that mails: the weekly send, the confirmation mail, test copies.
"""

from bot.mailer.message import (
    ONE_CLICK,
    PREFERENCES_PLACEHOLDER,
    UNSUBSCRIBE_PLACEHOLDER,
    DigestMessage,
    envelope_address,
    new_message_id,
    one_line,
    public_links,
    sender_domain,
    simple_message,
)
from bot.mailer.outgoing import make_sender
from bot.mailer.senders import (
    OutboxSender,
    PermanentFailure,
    Ready,
    Sender,
    SendFailure,
    SmtpSender,
    TemporaryFailure,
)

__all__ = [
    "ONE_CLICK", "PREFERENCES_PLACEHOLDER", "UNSUBSCRIBE_PLACEHOLDER", "DigestMessage", "OutboxSender",
    "PermanentFailure",
    "Ready", "SendFailure", "Sender", "SmtpSender", "TemporaryFailure", "envelope_address",
    "make_sender", "new_message_id", "one_line", "public_links", "sender_domain", "simple_message",
]
