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
from rich.table import Column, Table
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import choices, subscribers
from bot import scheduler as sched
from bot.bounces.queries import bounce_status
from bot.config import Settings
from bot.digest import draft, draft_queries, due, theme_fit
from bot.digest import queries as digest_queries
from bot.digest.schedule import scheduled_week
from bot.ingest import feeds as managed_feeds
from bot.ingest import queries as feed_queries
from bot.llm import status as llm_status
from bot.models import SUBSCRIBER_STATES, FeedState
from bot.send import ledger
from bot.terminal import markup as escape  # controls dropped, markup escaped
from bot.times import local_iso, local_short

DELIVERY_STATES = ("sent", "failed", "pending")


def gather(settings: Settings, engine: Engine, factory: sessionmaker[Session],
           now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    jobs = sched.stored_next_run_times(engine)
    with factory() as session:
        feeds = feed_queries.all_feeds(session)
        counts = feed_queries.entry_counts(session)
        pending = managed_feeds.not_added_yet(session, settings)
        digest = digest_queries.latest_digest(session)
        deliveries = ledger.delivery_counts(session, digest.id) if digest else {}
        by_state = subscribers.subscriber_counts(session)
        bounces = bounce_status(session, settings, digest.id if digest else None)
        approval = _approval(settings, session, now)
        themes = theme_fit.fit_report(session, settings, now=now)
        owed = due.weekly_send(session, settings, now)
        chosen = choices.choice_counts(session)
        llm = llm_status.report(session, settings, now)  # the language-model reader (bot.llm)
    feed_rows = _feeds(settings, feeds, counts, pending, jobs, now)
    return {
        "feeds": feed_rows,
        "feed_alerts": _alerts(settings, feed_rows),
        "schedule": _schedule(settings, jobs, now, owed),
        "last_digest": _digest(settings, digest, deliveries),
        "approval": approval,
        "themes": themes,
        "subscribers": {state: by_state.get(state, 0) for state in SUBSCRIBER_STATES}
        | {k: v for k, v in by_state.items() if k not in SUBSCRIBER_STATES}
        | {"total": sum(by_state.values())},
        "bounces": bounces,
        # confirmed readers per chosen theme (issue 36); "everything": no choice
        "theme_choices": chosen,
        "llm": llm,
    }


def _approval(settings: Settings, session: Session, now: datetime) -> dict[str, Any]:
    """DIGESTBOT_REQUIRE_APPROVAL: the next send's week, whether it is approved,
    and the weeks a scheduled send held that still wait (nothing went out)."""
    week = scheduled_week(session, settings, now)
    edits = draft_queries.week_edits(session, week.label)
    digest = digest_queries.digest_for_week(session, week.label)
    frozen = digest is not None
    return {
        "required": settings.require_approval,
        "week": week.label,
        "approved": edits.approved_at is not None,
        "approved_at": _iso(edits.approved_at, settings),
        "frozen": frozen,
        # how far its send got: None (not started), sending, or sent
        "send": digest.status if digest is not None else None,
        "sent_at": _iso(digest.sent_at, settings) if digest is not None else None,
        "waiting": draft.waiting_weeks(session),
    }


def _iso(moment: datetime | None, settings: Settings) -> str | None:
    """Every time in the report is in the configured zone, with its offset (bot.times)."""
    return local_iso(moment, settings.tz)


def _feeds(settings: Settings, feeds: Any, counts: dict[int, int], pending: list[str],
           jobs: dict[str, datetime | None], now: datetime) -> list[dict[str, Any]]:
    """The feeds of the database (and those of DIGESTBOT_FEED_URLS the next
    start adds), failing ones first, the longest streak first."""
    next_poll = jobs.get(sched.POLL_JOB_ID)
    configured = managed_feeds.configured_urls(settings)
    rows = []
    known = {feed.url: feed for feed in feeds}
    for url in dict.fromkeys([*known, *pending]):
        feed = known.get(url)
        if feed is None or feed.last_polled_at is None:
            health = "not polled yet"
        elif feed.status == FeedState.PAUSED.value:
            health = "paused"
        elif feed.consecutive_failures:
            health = "failing"
        else:
            health = "ok"
        active = feed is None or feed.status == FeedState.ACTIVE.value
        rows.append({
            "id": feed.id if feed else None,
            "url": url,
            "name": feed.display_name if feed else url,
            "title": feed.title if feed else None,
            "status": feed.status if feed else "not added yet",
            "configured": url in configured,
            "health": health,
            "entries": counts.get(feed.id, 0) if feed else 0,
            "consecutive_failures": feed.consecutive_failures if feed else 0,
            "failing_since": _iso(feed.failing_since, settings) if feed else None,
            "admin_told": bool(feed and feed.alerted_at),
            "last_error": feed.last_error if feed and feed.consecutive_failures else None,
            "last_poll": _iso(feed.last_polled_at, settings) if feed else None,
            "last_success": _iso(feed.last_success_at, settings) if feed else None,
            "next_poll": _iso(next_poll, settings) if next_poll and active else None,
            "next_poll_overdue": bool(active and next_poll and next_poll < now - timedelta(minutes=1)),
        })
    rows.sort(key=lambda row: -row["consecutive_failures"] if row["health"] == "failing" else 0)
    return rows


def _alerts(settings: Settings, feeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Who hears of a broken feed, and the feeds past the alert threshold."""
    return {
        "admin_email": settings.admin_email,
        "after_failures": settings.feed_alert_after,
        "broken": [row["url"] for row in feeds if row["health"] == "failing"
                   and row["consecutive_failures"] >= settings.feed_alert_after],
    }


def _schedule(settings: Settings, jobs: dict[str, datetime | None], now: datetime,
              owed: due.WeeklySend) -> dict[str, Any]:
    """The next send: the job store's time, unless the settings now say otherwise.
    A missed send is what the database says is owed (``bot.digest.due``): the
    last send time passed within the grace period and its week is not frozen;
    `digestbot run` sends it at its next start."""
    planned = sched.next_send_time(settings, now)
    stored = jobs.get(sched.SEND_JOB_ID)
    missed = owed.fire if owed.due and stored is not None else None  # made up at the next start
    if stored is not None and stored <= now:  # the service was not running at send time
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
        "missed_week": owed.week.label if missed else None,
        "service_seen": bool(jobs),
    }


def _digest(settings: Settings, digest: Any, deliveries: dict[str, int]) -> dict[str, Any] | None:
    if digest is None:
        return None
    counts = {state: deliveries.get(state, 0) for state in DELIVERY_STATES}
    counts |= {k: v for k, v in deliveries.items() if k not in DELIVERY_STATES}
    return {
        "week": digest.week,
        "status": digest.status,
        "subject": digest.subject,
        "entries": digest.entry_count,
        "created_at": _iso(digest.created_at, settings),
        "sent_at": _iso(digest.sent_at, settings),
        "deliveries": counts,
    }


# --- for people ----------------------------------------------------------------

def _bounce_lines(bounces: dict[str, Any] | None, tz: str) -> list[str]:
    """The bounce mailbox: when it was read, what it held, what came back for the last digest."""
    if not bounces or not bounces["mailbox"]:
        return ["[bold]bounces[/]  [dim]no bounce mailbox (DIGESTBOT_BOUNCE_MAILBOX): bounces "
                "that come back as mail are not read[/]"]
    kinds = ", ".join(f"{n} {'unmatched, ignored' if kind == 'unmatched' else kind}"
                      for kind, n in sorted(bounces["processed"].items())) or "no mail yet"
    line = (f"[bold]bounces[/]  {escape(bounces['mailbox'])}, read every {bounces['interval_minutes']} "
            f"min (last: {_short(bounces['last_processed'], tz) or 'never'}): {kinds}")
    feedback = bounces["last_digest_feedback"]
    if feedback:
        line += "; last digest: " + ", ".join(f"{n} {what}" for what, n in sorted(feedback.items()))
    return [line]


def render(status: dict[str, Any], console: Console) -> None:
    tz = status["schedule"]["timezone"]
    # nothing is cut short: long URLs and errors fold onto the next line
    feeds = Table(*(Column(name, overflow="fold") for name in
                    ("feed", "health", "entries", "last poll", "next poll")),
                  title="feeds", title_justify="left", caption=f"times in {tz}",
                  caption_justify="left")
    for feed in status["feeds"]:
        # feed text is shown as written, never read as rich markup
        url = escape(feed["url"])
        name = f"{escape(feed['name'])}\n[dim]{url}[/]" if feed["name"] != feed["url"] else url
        health = {"ok": "[green]ok[/]", "failing": "[red]failing[/]",
                  "paused": "[dim]paused[/]"}.get(feed["health"], feed["health"])
        if feed["health"] == "failing":
            health += (f" ({feed['consecutive_failures']}x since "
                       f"{_short(feed['failing_since'], tz)}): {escape(feed['last_error'] or '')}")
        if feed["status"] == "not added yet":
            health += " [dim](in DIGESTBOT_FEED_URLS: added at the next poll or start)[/]"
        active = feed["status"] in ("active", "not added yet")
        next_poll = _short(feed["next_poll"], tz) if feed["next_poll"] else "at start of `digestbot run`"
        if feed["next_poll_overdue"]:
            next_poll += " [yellow](overdue: is `digestbot run` running?)[/]"
        feeds.add_row(name, health, str(feed["entries"]), _short(feed["last_poll"], tz) or "never",
                      next_poll if active else "")

    alerts = status["feed_alerts"]
    lines: list[str] = []
    if alerts["broken"] and not alerts["admin_email"]:
        lines.append(f"[yellow]{len(alerts['broken'])} feed(s) failed "
                     f"{alerts['after_failures']}+ polls in a row and nobody is mailed about it: "
                     "set DIGESTBOT_ADMIN_EMAIL[/]")
    s = status["schedule"]
    lines += [f"[bold]schedule[/]  poll every {s['poll_interval_minutes']} min; "
             f"send every {s['send_day']} at {s['send_time']} {s['timezone']}",
             f"  next send  {_short(s['next_send'], tz)} [dim](from the {s['next_send_source']})[/]"]
    if s["missed_send"]:
        lines.append(f"  [yellow]missed send {_short(s['missed_send'], tz)}: it goes out when "
                     f"`digestbot run` starts (within {s['send_grace_hours']} h)[/]")
    if not s["service_seen"]:
        lines.append("  [dim]`digestbot run` has not run on this database yet[/]")

    a = status["approval"]
    if a["required"]:
        for week in a["waiting"]:
            lines.append(f"  [red]{week} was not sent: it waits for approval[/] "
                         f"(`digestbot draft approve --week {week}`, or /admin)")
        if a["frozen"]:
            pass
        elif a["approved"]:
            lines.append(f"  approval   {a['week']} approved {_short(a['approved_at'], tz)}")
        elif a["week"] not in a["waiting"]:
            lines.append(f"  [yellow]approval   {a['week']} is not approved: the next send waits "
                         f"for `digestbot draft approve --week {a['week']}`[/]")

    d = status["last_digest"]
    if d is None:
        lines.append("[bold]last digest[/]  none sent yet")
    else:
        counts = ", ".join(f"{n} {state}" for state, n in d["deliveries"].items())
        if d["sent_at"]:
            when = f"sent {_short(d['sent_at'], tz)}"
        else:  # frozen when its send started
            when = f"{d['status']}, started {_short(d['created_at'], tz)}"
        lines.append(f"[bold]last digest[/]  {d['week']}: {when}; deliveries: {counts}")
    lines += _bounce_lines(status.get("bounces"), tz)
    lines += _themes_lines(status.get("themes"))
    lines += _llm_lines(status.get("llm"), tz)
    subs = status["subscribers"]
    lines.append("[bold]subscribers[/]  " + ", ".join(f"{n} {state}" for state, n in subs.items()))
    lines += _choice_lines(status.get("theme_choices"))
    console.print(Group(feeds, *lines))


def _llm_lines(llm: dict[str, Any] | None, tz: str) -> list[str]:
    """The language-model reader: off, or its model, calls today, cache hits, last success and failure."""
    if not llm or not llm.get("enabled"):
        return ["[bold]language model[/]  [dim]off (DIGESTBOT_LLM_BASE_URL not set): the offline readers group[/]"]
    line = (f"[bold]language model[/]  {escape(llm['model'])}: {llm['calls_today']}/{llm['daily_calls']} calls "
            f"today, {llm['cache_hits_today']} cache hits, {llm['readings']} readings ({llm['refused']} refused); "
            f"last success {_short(llm['last_success'], tz) or 'never'}")
    if llm["last_failure"]:
        line += (f"; last failure {_short(llm['last_failure'], tz)}: "
                 f"{escape(llm['last_failure_reason'] or '')}")
    return [line]


def _themes_lines(t: dict[str, Any] | None) -> list[str]:
    """The themes file against each feed's newest week: does it fit that feed?"""
    if not t:
        return []
    if t.get("error"):
        return [f"[bold]themes[/]  [red]{escape(t['error'])}[/]"]
    if not t["feeds"]:
        return [f"[bold]themes[/]  {escape(t['file'])}: no recent entries to check"]
    lines = [f"[bold]themes[/]  {escape(t['file'])}, judged per feed on its newest week:"]
    for feed in t["feeds"]:
        verdict = "fits" if feed["fits"] else "[yellow]does not fit: grouped on its own by shared terms[/]"
        lines.append(f"  {escape(feed['feed'])} ({feed['week']}): {feed['matched']} of {feed['entries']} recent"
                     f" entries clearly fit a theme ({feed['share']:.0%}): {verdict}")
    if t["learned"]["words"]:
        lines.append("  learned model: the theme pack's word model")
    if t["fits"]:
        return lines
    return [*lines, "  [yellow]for a feed the themes do not fit, run `digestbot themes suggest --out themes.toml`,"
                    " edit it, and set DIGESTBOT_THEMES_FILE to it[/]"]


def _choice_lines(counts: dict[str, int] | None) -> list[str]:
    """How many confirmed readers chose each theme (issue 36)."""
    if not counts:
        return []
    chosen = sorted(((n, key) for key, n in counts.items() if key != "everything"), reverse=True)
    if not chosen:
        return [f"  themes chosen: none; all {counts.get('everything', 0)} get every section"]
    listed = ", ".join(f"{escape(key)} {n}" for n, key in chosen)
    return [f"  themes chosen: {listed}; {counts.get('everything', 0)} get every section"]


def _short(iso: str | None, tz: str) -> str:
    """2026-10-05T01:00:00+00:00 -> 2026-10-05 09:00 +08:00 in the zone ``tz``."""
    return local_short(iso, ZoneInfo(tz))
