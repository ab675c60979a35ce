"""What `digestbot status` reports: feeds, schedule, last digest, subscribers.

``gather`` collects plain data (the JSON output is exactly that); ``render``
turns it into tables for a person. Nothing here needs the service to be
running: the next run times come from the job store the service keeps in the
database when there is one, else from the settings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from rich.console import Console, Group
from rich.table import Table
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import scheduler as sched
from bot import subscribers
from bot.config import Settings
from bot.digest import queries as digest_queries
from bot.ingest import queries as feed_queries
from bot.send import ledger

SUBSCRIBER_STATES = ("pending", "confirmed", "unsubscribed", "bounced")
DELIVERY_STATES = ("sent", "failed", "pending")


def gather(settings: Settings, engine: Engine, factory: sessionmaker[Session],
           now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    jobs = sched.stored_next_run_times(engine)
    with factory() as session:
        feeds = feed_queries.all_feeds(session)
        counts = feed_queries.entry_counts(session)
        digest = digest_queries.latest_digest(session)
        deliveries = ledger.delivery_counts(session, digest.id) if digest else {}
        by_state = subscribers.subscriber_counts(session)
    return {
        "feeds": _feeds(settings, feeds, counts, jobs, now),
        "schedule": _schedule(settings, jobs, now),
        "last_digest": _digest(digest, deliveries),
        "subscribers": {state: by_state.get(state, 0) for state in SUBSCRIBER_STATES}
        | {k: v for k, v in by_state.items() if k not in SUBSCRIBER_STATES}
        | {"total": sum(by_state.values())},
    }


def _iso(moment: datetime | None, settings: Settings | None = None) -> str | None:
    if moment is None:
        return None
    return (moment.astimezone(settings.tz) if settings else moment.astimezone(UTC)).isoformat(
        timespec="seconds")


def _feeds(settings: Settings, feeds: Any, counts: dict[int, int],
           jobs: dict[str, datetime | None], now: datetime) -> list[dict[str, Any]]:
    next_poll = jobs.get(sched.POLL_JOB_ID)
    rows = []
    known = {feed.url: feed for feed in feeds}
    for url in dict.fromkeys([*settings.feed_urls, *known]):
        feed = known.get(url)
        if feed is None or feed.last_polled_at is None:
            health = "not polled yet"
        elif feed.consecutive_failures:
            health = "failing"
        else:
            health = "ok"
        rows.append({
            "url": url,
            "title": feed.title if feed else None,
            "configured": url in settings.feed_urls,
            "health": health,
            "entries": counts.get(feed.id, 0) if feed else 0,
            "consecutive_failures": feed.consecutive_failures if feed else 0,
            "last_error": feed.last_error if feed and feed.consecutive_failures else None,
            "last_poll": _iso(feed.last_polled_at) if feed else None,
            "last_success": _iso(feed.last_success_at) if feed else None,
            "next_poll": _iso(next_poll) if next_poll and url in settings.feed_urls else None,
            "next_poll_overdue": bool(next_poll and next_poll < now - timedelta(minutes=1)),
        })
    return rows


def _schedule(settings: Settings, jobs: dict[str, datetime | None], now: datetime) -> dict[str, Any]:
    """The next send: the job store's time, unless the settings now say otherwise."""
    planned = sched.next_send_time(settings, now)
    stored = jobs.get(sched.SEND_JOB_ID)
    grace = timedelta(hours=settings.send_grace_hours)
    missed = None
    if stored is not None and stored <= now:
        # the service was not running at send time: it sends once at its next
        # start if that is within the grace period, else waits for `planned`
        if now - stored <= grace:
            missed = stored
        source, at = "settings", planned
    elif stored is not None and stored == planned:
        source, at = "job store", stored
    else:  # no job store yet, or the settings changed since the service last started
        source, at = "settings", planned
    return {
        "timezone": settings.timezone,
        "poll_interval_minutes": settings.poll_interval,
        "send_day": settings.send_day.lower()[:3],
        "send_time": settings.send_time.isoformat(timespec="minutes" if not settings.send_time.second
                                                  else "seconds"),
        "send_grace_hours": settings.send_grace_hours,
        "next_send": _iso(at, settings),
        "next_send_source": source,
        "missed_send": _iso(missed, settings),
        "service_seen": bool(jobs),
    }


def _digest(digest: Any, deliveries: dict[str, int]) -> dict[str, Any] | None:
    if digest is None:
        return None
    counts = {state: deliveries.get(state, 0) for state in DELIVERY_STATES}
    counts |= {k: v for k, v in deliveries.items() if k not in DELIVERY_STATES}
    return {
        "week": digest.week,
        "status": digest.status,
        "subject": digest.subject,
        "entries": digest.entry_count,
        "created_at": _iso(digest.created_at),
        "sent_at": _iso(digest.sent_at),
        "deliveries": counts,
    }


# --- for people ----------------------------------------------------------------

def render(status: dict[str, Any], console: Console) -> None:
    tz = status["schedule"]["timezone"]
    feeds = Table("feed", "health", "entries", "last poll", "next poll", title="feeds",
                  title_justify="left")
    for feed in status["feeds"]:
        name = f"{feed['title']}\n[dim]{feed['url']}[/]" if feed["title"] else feed["url"]
        health = {"ok": "[green]ok[/]", "failing": "[red]failing[/]"}.get(feed["health"], feed["health"])
        if feed["health"] == "failing":
            health += f" ({feed['consecutive_failures']}x): {feed['last_error']}"
        if not feed["configured"]:
            health += " [dim](no longer configured)[/]"
        next_poll = _short(feed["next_poll"], tz) if feed["next_poll"] else "at start of `digestbot run`"
        if feed["next_poll_overdue"]:
            next_poll += " [yellow](overdue: is `digestbot run` running?)[/]"
        feeds.add_row(name, health, str(feed["entries"]), _short(feed["last_poll"], tz) or "never",
                      next_poll if feed["configured"] else "")

    s = status["schedule"]
    lines = [f"[bold]schedule[/]  poll every {s['poll_interval_minutes']} min; "
             f"send every {s['send_day']} at {s['send_time']} {s['timezone']}",
             f"  next send  {_short(s['next_send'])} [dim](from the {s['next_send_source']})[/]"]
    if s["missed_send"]:
        lines.append(f"  [yellow]missed send {_short(s['missed_send'])}: it goes out when "
                     f"`digestbot run` starts (within {s['send_grace_hours']} h)[/]")
    if not s["service_seen"]:
        lines.append("  [dim]`digestbot run` has not run on this database yet[/]")

    d = status["last_digest"]
    if d is None:
        lines.append("[bold]last digest[/]  none sent yet")
    else:
        counts = ", ".join(f"{n} {state}" for state, n in d["deliveries"].items())
        lines.append(f"[bold]last digest[/]  {d['week']} ({d['status']}"
                     f"{', sent ' + _short(d['sent_at'], tz) if d['sent_at'] else ''}): {counts}")
    subs = status["subscribers"]
    lines.append("[bold]subscribers[/]  " + ", ".join(f"{n} {state}" for state, n in subs.items()))
    console.print(Group(feeds, *lines))


def _short(iso: str | None, tz: str | None = None) -> str:
    """2026-10-05T01:00:00+00:00 -> 2026-10-05 09:00 +08:00 (in ``tz`` when given)"""
    if not iso:
        return ""
    moment = datetime.fromisoformat(iso)
    if tz:
        moment = moment.astimezone(ZoneInfo(tz))
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %H:%M ") + (f"{offset[:3]}:{offset[3:]}" if moment.utcoffset() else "UTC")
