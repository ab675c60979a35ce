"""Subscribers: search by address or name, one subscriber's state and history,
add, unsubscribe, the CSV import (``subscriptions.import_csv``, as
`subscribers import`) and the CSV export (the columns of `subscribers export`)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from functools import partial
from typing import Any

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from bot import choices, subscribers, subscriptions
from bot.db import transaction
from bot.errors import BotError
from bot.models import SUBSCRIBER_STATES, Subscriber, SubscriberState
from bot.web.admin.auth import Admin, Session, admin_of
from bot.web.admin.base import back, field, page, route, texts, when

SHOWN = 200  # rows on one page of search results
MAX_UPLOAD = 5_000_000  # bytes of one CSV import: some 100,000 addresses


def _search(admin: Admin, text: str, state: str | None) -> dict[str, Any]:
    with admin.site.factory() as session:
        rows = subscribers.search_subscribers(session, text, state, SHOWN + 1)
        counts = subscribers.subscriber_counts(session)
        chosen = choices.choice_counts(session)  # readers per chosen theme (issue 36)
    return {"rows": [_row(sub, admin) for sub in rows[:SHOWN]], "more": len(rows) > SHOWN,
            "counts": counts, "theme_counts": {k: n for k, n in chosen.items() if k != "everything"},
            "everything": chosen.get("everything", 0)}


def _row(sub: Subscriber, admin: Admin) -> dict[str, Any]:
    return {"id": sub.id, "email": sub.email, "name": sub.name or "", "status": sub.status,
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
        lang = texts(admin)
        events = [(sub.created_at, lang.gettext("subscribed") if sub.confirmed_at
                   else lang.gettext("asked to subscribe"))]
        for moment, what in ((sub.confirmed_at, lang.gettext("confirmed")),
                             (sub.unsubscribed_at, lang.gettext("unsubscribed")),
                             (sub.bounced_at, lang.gettext("bounced")),
                             (sub.complained_at, lang.gettext("complained"))):
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
    lang = texts(admin)
    try:
        address = subscriptions.normalize_address(field(form, "email", 320))
        change = await admin.site.db(partial(subscriptions.subscribe, admin.site.factory, address,
                                             confirmed=confirmed, name=field(form, "name", 200) or None))
    except BotError as exc:
        return back(admin, session, "/subscribers", lang.gettext("Not added: %(problem)s",
                                                                 problem=exc.message))
    message = {"created": lang.gettext("%(address)s added", address=address) if confirmed else
               lang.gettext("%(address)s added: a confirmation mail goes out", address=address),
               "confirmed": lang.gettext("%(address)s confirmed", address=address),
               "pending": lang.gettext("%(address)s asked again to confirm", address=address),
               "already": lang.gettext("%(address)s is subscribed already", address=address),
               "kept": lang.gettext("%(address)s unsubscribed or bounced before: left as it is",
                                    address=address)}[change.action]
    if change.confirm_mail:
        await admin.site.db(admin.site.send_confirmation, change.subscriber)
    return back(admin, session, "/subscribers?q=" + address, message)


def _unsubscribe(admin: Admin, sub_id: int) -> str:
    with transaction(admin.site.factory) as db:
        sub = db.get(Subscriber, sub_id)
        if sub is None:
            raise HTTPException(404)
        lang = texts(admin)
        if sub.status == SubscriberState.UNSUBSCRIBED:
            return lang.gettext("%(address)s was unsubscribed already", address=sub.email)
        subscriptions.set_state(sub, SubscriberState.UNSUBSCRIBED.value, datetime.now(UTC), "admin")
        return lang.gettext("%(address)s unsubscribed", address=sub.email)


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


async def import_file(request: Request, session: Session) -> Response:
    """A CSV file of addresses (and names): every line's verdict, on a page of its own."""
    admin = admin_of(request)
    lang = texts(admin)
    form = await request.form()
    upload = form.get("file")
    data = await upload.read(MAX_UPLOAD + 1) if isinstance(upload, UploadFile) else b""
    if not data.strip() or len(data) > MAX_UPLOAD:
        problem = (lang.gettext("the file is larger than %(num)s MB", num=MAX_UPLOAD // 1_000_000)
                   if data.strip() else lang.gettext("no file, or an empty one"))
        return back(admin, session, "/subscribers", lang.gettext("Not done: %(problem)s", problem=problem))
    confirmed = field(form, "confirmed") == "yes"
    report = await admin.site.db(_import, admin, data, confirmed)
    return page(request, admin, session, "imported.html", report=report, confirmed=confirmed,
                filename=getattr(upload, "filename", "") or "")


def _import(admin: Admin, data: bytes, confirmed: bool) -> subscriptions.ImportReport:
    """The import, its confirmation mails over one connection (a failed one is its line's note)."""
    site = admin.site
    sender = site.make_sender()
    try:
        return subscriptions.import_csv(
            site.factory, data, confirmed=confirmed,
            send_confirmation=lambda sub: subscriptions.send_confirmation(site.settings, site.tokens,
                                                                          sender, sub))
    finally:
        sender.close()


ROUTES = [
    route("/subscribers", listing),
    route("/subscribers.csv", export),
    route("/subscribers/add", add, ["POST"]),
    route("/subscribers/import", import_file, ["POST"], files=1),
    route("/subscribers/{id:int}", detail),
    route("/subscribers/{id:int}/unsubscribe", unsubscribe, ["POST"]),
]
