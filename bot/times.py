"""How a moment is shown to the operator: one rule for every command.

Times are stored in UTC. Every report (``status``, ``feeds``, ``subscribers
list``, the preview's JSON) shows them in the configured time zone
(``DIGESTBOT_TIMEZONE``) and says which: ``2026-10-05 09:00 +08:00`` for a
person, ISO 8601 with the offset (``2026-10-05T09:00:00+08:00``) for a script.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo


def local_iso(moment: datetime | None, tz: tzinfo) -> str | None:
    """ISO 8601 in ``tz``, to the second, with its offset; None stays None.
    A naive value is taken to be UTC (that is how the database stores it)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(tz).isoformat(timespec="seconds")


def local_short(moment: datetime | str | None, tz: tzinfo) -> str:
    """``2026-10-05 09:00 +08:00`` (``UTC`` when the zone is UTC); "" for None.
    Accepts an ISO string as ``local_iso`` writes it."""
    if moment is None or moment == "":
        return ""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(tz)
    offset = moment.strftime("%z")
    label = f"{offset[:3]}:{offset[3:]}" if moment.utcoffset() else "UTC"
    return moment.strftime("%Y-%m-%d %H:%M ") + label
