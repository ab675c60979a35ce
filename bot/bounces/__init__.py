"""The bounce mailbox: bounces, complaints and unsubscribe mails read back.

Mail that comes back after the relay accepted a digest -- bounces (DSNs and
the common non-standard formats), feedback-loop complaints (ARF) and mails
to the List-Unsubscribe ``mailto:`` address -- lands in one mailbox
(``DIGESTBOT_BOUNCE_MAILBOX``). ``process_bounces`` reads it and records each
outcome in the delivery ledger and on the subscriber.

- ``mailboxes``: IMAP, POP3 and Maildir, each reading unmarked mail and
  marking what it handled
- ``classify``: what one mail is (pure: bytes in, a ``Finding`` out)
- ``apply``: what a finding does to the ledger and the subscriber
- ``process``: one pass over the mailbox, each mail handled exactly once

Rules of this package: a mail acts only on evidence the bot minted (a
recorded or signed Message-ID, a signed unsubscribe token; see ``apply``
and docs/security-mail.md), never on the addresses, From or
Authentication-Results it carries; nothing is deleted that was not
understood; and no mail is acted on twice.
"""

from bot.bounces.process import BounceReport, Handled, process_bounces

__all__ = ["BounceReport", "Handled", "process_bounces"]
