"""The feeds: each one's health, and add, pause, resume, remove.

The same library functions as `digestbot feeds ...` (``bot.ingest.feeds``),
and a new feed's first poll is the CLI's poll (``bot.ingest.poll_feeds``:
the same fetch options, deadline and size cap). One difference on purpose:
the console adds only http(s) feeds, never a path on the server's disk (a
file feed is the operator's, added with `digestbot feeds add PATH`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bot.db import transaction
from bot.errors import BotError
from bot.ingest import feeds as managed
from bot.ingest import queries as feed_queries
from bot.ingest.fetch import is_local
from bot.web.admin.auth import Admin, Session, admin_of
from bot.web.admin.base import back, field, page, route, texts, when


def _health(feed: Any) -> str:
    """ok | failing | paused | not polled yet: the words of `digestbot status`."""
    if feed.status == "paused":
        return "paused"
    if feed.consecutive_failures:
        return "failing"
    return "ok" if feed.last_success_at else "not polled yet"


def _rows(admin: Admin) -> list[dict[str, Any]]:
    with admin.site.factory() as session:
        counts = feed_queries.entry_counts(session)
        return [{"id": feed.id, "name": feed.display_name, "url": feed.url, "status": feed.status,
                 "health": _health(feed), "entries": counts.get(feed.id, 0),
                 "failures": feed.consecutive_failures, "error": feed.last_error or "",
                 "last_success": when(feed.last_success_at, admin),
                 "last_poll": when(feed.last_polled_at, admin),
                 "failing_since": when(feed.failing_since, admin)}
                for feed in feed_queries.all_feeds(session)]


async def listing(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    return page(request, admin, session, "feeds.html", feeds=await admin.site.db(_rows, admin),
                timezone=admin.site.settings.timezone)


def check_web_url(admin: Admin, url: str) -> str:
    """The normalised http(s) address; a path or file: URL is refused here."""
    lang = texts(admin)
    if is_local(url.strip()):
        raise BotError(lang.gettext("the console adds only http(s) feeds, not files on the server"),
                       hint=lang.gettext("add a feed file with `digestbot feeds add PATH`"))
    return managed.check_url(url)


def _add(admin: Admin, url: str, name: str, backfill: bool) -> str:
    """Add the feed and poll it once, as `digestbot feeds add` does; what happened."""
    from bot import ingest

    lang = texts(admin)
    normal = check_web_url(admin, url)
    with transaction(admin.site.factory) as session:
        added = managed.add_feed(session, normal, datetime.now(UTC), name=name or None,
                                 backfill=backfill)
        feed_id, outcome = added.feed.id, added.outcome
    if outcome == "exists":
        return lang.gettext("Feed %(id)s is already there: %(url)s", id=feed_id, url=normal)
    [result] = ingest.poll_feeds(admin.site.settings, admin.site.factory, [normal])
    done = lang.gettext("Feed %(id)s added: %(url)s", id=feed_id, url=normal)
    if result.status == "error":
        failed = lang.gettext("its first poll failed: %(error)s", error=result.error or "")
        hint = f" ({result.hint})" if result.hint else ""
        return f"{done}; {failed}{hint}. " + lang.gettext(
            "It stays added and is polled with the others; remove it if it was a typo.")
    return f"{done}; " + lang.ngettext("%(num)s new entry", "%(num)s new entries", result.new)


async def add(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    form = await request.form()
    try:
        message = await admin.site.db(_add, admin, field(form, "url", 2000), field(form, "name", 200),
                                      field(form, "backfill") == "yes")
    except BotError as exc:
        message = texts(admin).gettext("Not done: %(problem)s", problem=exc.message) \
            + (f" ({exc.hint})" if exc.hint else "")
    return back(admin, session, "/feeds", message)


def _change(admin: Admin, feed_id: int, kind: str) -> str:
    lang = texts(admin)
    with transaction(admin.site.factory) as session:
        if kind == "remove":
            done = managed.remove_feed(session, str(feed_id))
            return lang.gettext(
                "Feed %(id)s removed: %(kept)s entries already mailed stay in the archive, "
                "%(handed)s now belong to another feed that carries them, %(deleted)s deleted",
                id=feed_id, kept=done.kept, handed=done.handed_over, deleted=done.deleted)
        feed, changed = managed.set_paused(session, str(feed_id), kind == "pause")
        if kind == "pause":
            return lang.gettext("Feed %(id)s paused: it is not polled until resumed", id=feed.id) \
                if changed else lang.gettext("Feed %(id)s was paused already", id=feed.id)
        return lang.gettext("Feed %(id)s resumed: the next poll fetches it", id=feed.id) \
            if changed else lang.gettext("Feed %(id)s is active already", id=feed.id)


def _action(kind: str):  # type: ignore[no-untyped-def]
    async def handler(request: Request, session: Session) -> Response:
        admin = admin_of(request)
        try:
            message = await admin.site.db(_change, admin, request.path_params["id"], kind)
        except BotError as exc:
            message = texts(admin).gettext("Not done: %(problem)s", problem=exc.message)
        return back(admin, session, "/feeds", message)

    return handler


ROUTES = [
    route("/feeds", listing),
    route("/feeds/add", add, ["POST"]),
    *(route(f"/feeds/{{id:int}}/{kind}", _action(kind), ["POST"]) for kind in ("pause", "resume", "remove")),
]
