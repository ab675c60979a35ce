"""What a send did, and what it was about: the values ``send_digest`` hands back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot import models
from bot.digest.week import Week


@dataclass(frozen=True)
class SendReport:
    """What ``send_digest`` did. ``outcome`` is one of: sent (all delivered),
    incomplete (stopped early, rows still pending), stopped (before the digest
    was frozen: nothing sent, the week still owed), already-sent, empty,
    awaiting-approval (DIGESTBOT_REQUIRE_APPROVAL, the week not approved), dry-run, test."""

    week: str
    outcome: str
    subject: str = ""
    recipients: int = 0
    sent: int = 0
    failed: int = 0
    skipped: int = 0
    bounced: int = 0
    transport: str = ""
    resumed: bool = False
    to: str | None = None
    written: str | None = None  # the .eml file of a test copy, in outbox mode
    errors: tuple[tuple[str, str], ...] = ()
    other_unfinished: tuple[str, ...] = ()
    held_elsewhere: int = 0  # rows other live workers were still sending when this one ended

    def summary(self) -> str:
        if self.outcome == "already-sent":
            return f"{self.week} was sent already (use --resend to send it again)"
        if self.outcome == "empty":
            return (f"{self.week} has no entries: nothing to send "
                    "(DIGESTBOT_SEND_EMPTY=true sends an empty digest)")
        if self.outcome == "awaiting-approval":
            return (f"{self.week} is not approved yet, so nothing was sent (DIGESTBOT_REQUIRE_APPROVAL): "
                    f"approve it with `digestbot draft approve --week {self.week}` or in /admin")
        if self.outcome == "stopped":
            return f"{self.week}: stopped before its digest was frozen; nothing was sent"
        if self.outcome == "dry-run":
            return (f"dry run: would send {self.week} ({self.subject!r}) to "
                    f"{self.recipients} recipient(s) via {self.transport}; nothing was sent")
        if self.outcome == "test":
            where = f"written to {self.written}" if self.written else f"via {self.transport}"
            return f"test message of {self.week} sent to {self.to}: {where}"
        if self.outcome == "sent" and not self.recipients:
            # recorded as sent all the same, so a later subscriber is not mailed an old week by surprise
            state = (f"done, but there are no confirmed subscribers, so nobody got it; once someone "
                     f"has confirmed, `digestbot send --week {self.week} --resend` mails it to them")
        elif self.outcome == "sent":
            state = "done"
        elif self.held_elsewhere:
            state = (f"{self.held_elsewhere} more are being sent by another send of this week, "
                     "which finishes them")
        else:
            state = "stopped early, run again to finish"
        return (f"{self.week}: {self.sent} sent, {self.failed} failed, {self.skipped} skipped"
                f"{f', {self.bounced} now bounced' if self.bounced else ''} ({state})")


@dataclass(frozen=True)
class Target:
    """The week a send is about, and what the database already says of it."""

    week: Week
    frozen: models.Digest | None
    others: tuple[str, ...]  # other weeks whose send is unfinished
    transport: str

    def report(self, outcome: str, **fields: Any) -> SendReport:
        return SendReport(self.week.label, outcome, transport=self.transport,
                          other_unfinished=self.others, **fields)
