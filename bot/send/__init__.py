"""The deliver stage: a frozen digest to every confirmed subscriber.

- ``loop``: the send loop and the interfaces it depends on (Ledger, Composer,
  and the mailer's Sender); the state diagram and what survives a crash
- ``ledger``: the delivery rows and their queries; ``DbLedger``
- ``prepared``: the hot path's statements, compiled once
- ``lock``: one sender per digest, with a lease
- ``compose``: a ledger row to the bytes of its message
- ``variants``: the digest's copies per readers' theme choice, stored once each
- ``run``: one ``digestbot send`` (dry run, test copy, send, resume)
"""

from bot.send.report import SendReport
from bot.send.run import send_digest

__all__ = ["SendReport", "send_digest"]
