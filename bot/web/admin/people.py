"""Subscribers: search by address, one subscriber's state and history, add,
unsubscribe, and the CSV export (the same columns as `subscribers export`)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from functools import partial
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from bot import choices, subscribers, subscriptions
from bot.db import transaction
from bot.errors import BotError
from bot.models import SUBSCRIBER_STATES, Subscriber, SubscriberState
from bot.web.admin.auth import Admin, Session, admin_of
from bot.web.admin.base import back, field, page, route, when

SHOWN = 200  # rows on one page of search results


def _search(admin: Admin, text: str, state: str | None) -> dict[str, Any]:
    with admin.site.factory() as session:
        rows = subscribers.search_subscribers(session, text, state, SHOWN + 1)
        counts = subscribers.subscriber_counts(session)
        chosen = choices.choice_counts(session)  # readers per chosen theme (issue 36)
    return {"rows": [_row(sub, admin) for sub in rows[:SHOWN]], "more": len(rows) > SHOWN,
            "counts": counts, "theme_counts": {k: n for k, n in chosen.items() if k != "everything"},
            "everything": chosen.get("everything", 0)}


def _row(sub: Subscriber, admin: Admin) -> dict[str, Any]:
    return {"id": sub.id, "email": sub.email, "status": sub.status,
            "created": when(sub.created_at, admin), "confirmed": when(sub.confirmed_at, admin)}


async def listing(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    text = request.query_params.get("q", "")[:320]
    state = request.query_params.get("state") or None
    if state is not None and state not in SUBSCRIBER_STATES:
        state = None
    data = await admin.site.db(_search, admin, text, state)
    return page(request, admin, session, "subscribers.html", q=text, state=state,
                states=SUBSCRIBER_STATES, **data)


def _history(admin: Admin, sub_id: int) -> dict[str, Any] | None:
    with admin.site.factory() as session:
        sub = session.get(Subscriber, sub_id)
        if sub is None:
            return None
        events = [(sub.created_at, "subscribed" if sub.confirmed_at else "asked to subscribe")]
        for moment, what in ((sub.confirmed_at, "confirmed"), (sub.unsubscribed_at, "unsubscribed"),
                             (sub.bounced_at, "bounced"), (sub.complained_at, "complained")):
            if moment is not None:
                events.append((moment, what))
        deliveries = [{"week": week, "status": d.status, "attempts": d.attempts,
                       "sent_at": when(d.sent_at, admin), "error": d.last_error or ""}
                      for week, d in subscribers.deliveries_of(session, sub.id)]
        return {"sub": _row(sub, admin) | {"hard_failures": sub.hard_failures,
                                           "themes": sorted(choices.decode(sub.themes))},
                "events": [(when(m, admin), what) for m, what in sorted(events, key=lambda e: e[0])],
                "deliveries": deliveries}


async def detail(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    found = await admin.site.db(_history, admin, request.path_params["id"])
    if found is None:
        raise HTTPException(404)
    return page(request, admin, session, "subscriber.html", **found)


async def add(request: Request, session: Session) -> Response:
    """Add an address: confirmed at once (the admin vouches), or sent a confirmation mail."""
    admin = admin_of(request)
    form = await request.form()
    confirmed = field(form, "confirmed") == "yes"
    try:
        address = subscriptions.normalize_address(field(form, "email", 320))
        change = await admin.site.db(partial(subscriptions.subscribe, admin.site.factory, address,
                                             confirmed=confirmed))
    except BotError as exc:
        return back(admin, session, "/subscribers", f"Not added: {exc.message}")
    message = {"created": f"{address} added" + ("" if confirmed else ": a confirmation mail goes out"),
               "confirmed": f"{address} confirmed", "pending": f"{address} asked again to confirm",
               "already": f"{address} is subscribed already",
               "kept": f"{address} unsubscribed or bounced before: left as it is"}[change.action]
    if change.confirm_mail:
        await admin.site.db(admin.site.send_confirmation, change.subscriber)
    return back(admin, session, "/subscribers?q=" + address, message)


def _unsubscribe(admin: Admin, sub_id: int) -> str:
    with transaction(admin.site.factory) as db:
        sub = db.get(Subscriber, sub_id)
        if sub is None:
            raise HTTPException(404)
        if sub.status == SubscriberState.UNSUBSCRIBED:
            return f"{sub.email} was unsubscribed already"
        subscriptions.set_state(sub, SubscriberState.UNSUBSCRIBED.value, datetime.now(UTC), "admin")
        return f"{sub.email} unsubscribed"


async def unsubscribe(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    sub_id = request.path_params["id"]
    message = await admin.site.db(_unsubscribe, admin, sub_id)
    return back(admin, session, f"/subscribers/{sub_id}", message)


def _csv(admin: Admin) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    with admin.site.factory() as session:
        writer.writerows(subscriptions.export_rows(subscribers.iter_subscribers(session)))
    return out.getvalue()


async def export(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    body = await admin.site.db(_csv, admin)
    return Response(body, media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="subscribers.csv"'})


ROUTES = [
    route("/subscribers", listing),
    route("/subscribers.csv", export),
    route("/subscribers/add", add, ["POST"]),
    route("/subscribers/{id:int}", detail),
    route("/subscribers/{id:int}/unsubscribe", unsubscribe, ["POST"]),
]
