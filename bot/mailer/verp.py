"""VERP: an envelope sender per message, so a bounce names what it bounces.

A bounce goes to the envelope sender (Return-Path) of the message that
failed. With ``DIGESTBOT_VERP`` on, each message's envelope sender is
``<bounce local part>+<token>@<bounce domain>``, where the token is the local
part of the message's own Message-ID. The delivery ledger records every
digest's Message-ID, so the address a bounce comes back to leads straight to
the delivery -- the subscriber and the digest -- with no need to trust what
the bouncing server wrote in its report.

A token is believed only as evidence the bot minted (``bot.bounces.apply``):
the Message-ID of a recorded delivery (64 random bits, see
``bot.mailer.message.new_message_id``: an outsider cannot guess one), or a
Message-ID the bot signed (``bot.tokens.Tokens.mail_id``, the confirmation
mail). A token that is neither names nobody. Mail servers deliver ``local+anything``
to ``local`` (Postfix's ``recipient_delimiter``, Gmail, Fastmail, Exim's
``local_part_suffix``), so one mailbox receives them all.

Only tokens made of letters, digits, ``.``, ``_``, ``=`` and ``-`` are used (our
Message-IDs are digits, lower-case hex and dots), and only if the
local part stays within 64 characters; otherwise the plain bounce address is
used and bounces are matched by their content.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_=-]|\.(?!\.))*[A-Za-z0-9]$")
MAX_LOCAL = 64


def token_of(message_id: str) -> str | None:
    """The VERP token of a Message-ID (its local part), if it can be one."""
    local = message_id.strip().strip("<>").split("@", 1)[0]
    return local if _TOKEN.match(local) else None


def verp_address(bounce_address: str, message_id: str) -> str:
    """``bounces+TOKEN@domain`` for this message, or the bounce address itself."""
    local, domain = bounce_address.rsplit("@", 1)
    token = token_of(message_id)
    if token is None or len(local) + 1 + len(token) > MAX_LOCAL:
        return bounce_address
    return f"{local}+{token}@{domain}"


def token_from_address(address: str, bounce_address: str) -> str | None:
    """The token in ``address`` if it is a VERP form of ``bounce_address``."""
    if "@" not in address or "@" not in bounce_address:
        return None
    local, domain = bounce_address.rsplit("@", 1)
    a_local, a_domain = address.strip().strip("<>").rsplit("@", 1)
    prefix = local.lower() + "+"
    if a_domain.lower() != domain.lower() or not a_local.lower().startswith(prefix):
        return None
    token = a_local[len(prefix):]
    return token if _TOKEN.match(token) else None


def message_id_for(token: str, domain: str) -> str:
    """The Message-ID a token came from (Message-IDs use the From domain)."""
    return f"<{token}@{domain}>"
