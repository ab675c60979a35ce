"""What one feed's poll did: the value a poll hands to the CLI, the log and the alerts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class PollResult:
    """What one feed's poll did; ``status`` is ok, not-modified, error or
    stopped (the service stopped while it was fetched: nothing recorded).

    ``failures`` and ``failing_since`` describe the feed's failure streak: the
    one this error continues, or, after a success, the one it just ended (0
    and None if there was none); ``bot.ingest.alerts`` mails about them.
    """

    url: str
    status: str
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    error: str | None = None
    warning: str | None = None
    merged: int = 0  # items that are articles already stored (another feed brought them)
    backlog: int = 0  # of the new ones: the backlog of a feed added late
    backfill: bool = False  # ... which goes into the next digest
    feed_id: int | None = None
    name: str | None = None
    hint: str | None = None
    failures: int = 0
    failing_since: datetime | None = None

    def summary(self) -> str:
        if self.status == "stopped":
            return f"stopped       {self.url}: the poll was stopped"
        if self.status == "error":
            return f"error         {self.url}: {self.error}"
        if self.status == "not-modified":
            return f"not modified  {self.url}"
        line = (f"ok            {self.url}: {self.new} new, {self.updated} updated, "
                f"{self.unchanged} unchanged")
        if self.merged:
            line += f", {self.merged} already stored through another feed"
        if self.backlog:
            line += (f" ({self.backlog} of the new ones are its backlog, from before it was added: "
                     + ("they go into the next digest)" if self.backfill
                        else "those of weeks up to the last one mailed are never mailed, those "
                             "of later weeks are part of their week's digest)"))
        return line + (f" (warning: {self.warning})" if self.warning else "")
