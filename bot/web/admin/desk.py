"""This week's draft: the digest as it would be sent, the editor's changes to
it, a test send and the approval. Every change is a POST form (it works
without JavaScript) calling the same function as `digestbot draft ...`,
then a redirect back to the draft with what happened."""

from __future__ import annotations

import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot import render
from bot.digest import draft as drafts
from bot.digest import queries
from bot.digest.note import MAX_NOTE
from bot.digest.schedule import next_send_time
from bot.digest.week import WeekError, parse_week
from bot.errors import BotError
from bot.mailer import public_links
from bot.send import send_digest
from bot.templating import language
from bot.web.admin.auth import Admin, Session, admin_of
from bot.web.admin.base import back, field, page, route, texts, when


def _week(admin: Admin, text: str | None) -> str | None:
    """A valid week label from a form or query, or None for "the scheduled week"."""
    if not text:
        return None
    try:
        return parse_week(text, admin.site.settings.timezone).label
    except WeekError:
        raise HTTPException(400) from None


def _load(admin: Admin, week: str | None) -> drafts.Draft:
    settings = admin.site.settings
    with admin.site.factory() as session:
        found = week and parse_week(week, settings.timezone)
        return drafts.load_draft(session, settings, found or None)


async def draft_page(request: Request, session: Session) -> Response:
    admin = admin_of(request)
    draft = await admin.site.db(_load, admin, _week(admin, request.query_params.get("week")))
    settings = admin.site.settings
    shown = render.sections(draft.data, language(settings.language))
    return page(request, admin, session, "draft.html", draft=draft, max_note=MAX_NOTE,
                sections=list(zip(draft.data.themes, shown, strict=True)),
                next_send=when(next_send_time(settings), admin), timezone=settings.timezone,
                require_approval=settings.require_approval,
                approved_at=when(draft.edits.approved_at, admin),
                previous=draft.week.previous().label, following=draft.week.next().label)


def _preview_html(admin: Admin, week: str | None) -> str:
    draft = _load(admin, week)
    if draft.frozen is not None:  # what was (or is being) sent
        with admin.site.factory() as session:
            frozen = queries.digest_for_week(session, draft.week.label)
            html = frozen.html if frozen else ""
    else:
        html = render.render_digest(draft.data, admin.site.settings).html
    return public_links(html, admin.site.home)


async def preview(request: Request, session: Session) -> Response:
    """The email's HTML alone, for the draft page's frames (600 px and phone width)."""
    admin = admin_of(request)
    html = await admin.site.db(_preview_html, admin, _week(admin, request.query_params.get("week")))
    return HTMLResponse(html)


def _action(kind: str):  # type: ignore[no-untyped-def]
    """A POST handler for one change of the draft (see ACTIONS)."""

    async def handler(request: Request, session: Session) -> Response:
        admin = admin_of(request)
        form = await request.form()
        week = _week(admin, field(form, "week", 20))
        try:
            message = _worded(admin, kind, await admin.site.db(_apply, admin, kind, week, form), form)
        except BotError as exc:
            message = texts(admin).gettext("Not done: %(problem)s", problem=exc.message) \
                + (f" ({exc.hint})" if exc.hint else "")
        suffix = f"?week={week}" if week else ""
        return back(admin, session, f"/draft{suffix}", message)

    return handler


def _worded(admin: Admin, kind: str, done: str, form: Any) -> str:
    """What an edit did, in the console's language.

    The library says it in English, with the entry's title and the section's
    name (the CLI prints it so, and so does the English console); in another
    language the console words it from the catalogue, from the week, the form
    and the withdrawn approval."""
    lang = texts(admin)
    if lang.code == "en" or kind == "test":
        return done
    week = done.split(": ", 1)[0]
    tail = lang.gettext("; its approval was withdrawn (approve it again)") \
        if done.endswith(drafts.WITHDRAWN) else ""
    entry = field(form, "entry", 40).lstrip("#")
    moved_to = re.search(r"moved to “(.*)”", done.removesuffix(drafts.WITHDRAWN))
    words = {
        "exclude": lambda: lang.gettext("%(week)s: entry %(entry)s left out of the digest",
                                        week=week, entry=entry),
        "include": lambda: lang.gettext("%(week)s: entry %(entry)s put back into the digest",
                                        week=week, entry=entry),
        "move": lambda: lang.gettext("%(week)s: entry %(entry)s moved to “%(section)s”", week=week,
                                     entry=entry, section=moved_to[1] if moved_to else ""),
        "rename": lambda: lang.gettext("%(week)s: section renamed to “%(name)s”", week=week,
                                       name=field(form, "name", 300).strip())
        if field(form, "name", 300).strip() else
        lang.gettext("%(week)s: the section has its own name again", week=week),
        "describe": lambda: lang.gettext("%(week)s: the section's description saved", week=week)
        if field(form, "description", 2000).strip() else
        lang.gettext("%(week)s: the section has no description", week=week),
        "order": lambda: lang.gettext("%(week)s: sections reordered", week=week),
        "note": lambda: lang.gettext("%(week)s: note saved", week=week)
        if field(form, "note", MAX_NOTE + 500).strip() else
        lang.gettext("%(week)s: note removed", week=week),
        "approve": lambda: lang.gettext("%(week)s: approved", week=week),
        "withdraw": lambda: lang.gettext("%(week)s: approval withdrawn", week=week),
        "intro": lambda: lang.gettext("%(week)s: the section's introduction saved", week=week)
        if field(form, "intro", 1000).strip() else
        lang.gettext("%(week)s: the section has its generated introduction again", week=week),
    }
    return words[kind]() + tail


def _apply(admin: Admin, kind: str, week: str | None, form: Any) -> str:
    settings, factory = admin.site.settings, admin.site.factory
    entry, section = field(form, "entry", 2000), field(form, "section", 300)
    if kind == "exclude":
        return drafts.exclude(factory, settings, entry, week=week)
    if kind == "include":
        return drafts.include(factory, settings, entry, week=week)
    if kind == "move":
        return drafts.move(factory, settings, entry, section, week=week)
    if kind == "rename":
        return drafts.rename(factory, settings, section, field(form, "name", 300), week=week,
                             keep_description=field(form, "keep") == "yes")
    if kind == "describe":
        return drafts.describe(factory, settings, section, field(form, "description", 2000), week=week)
    if kind == "intro":  # the section's introduction for the week; empty gives back the model's
        return drafts.set_intro(factory, settings, section, field(form, "intro", 1000).strip() or None, week=week)
    if kind == "order":
        return drafts.reorder(factory, settings, [s for s in form.getlist("order") if isinstance(s, str)],
                              week=week)
    if kind == "note":
        return drafts.set_note(factory, settings, field(form, "note", MAX_NOTE + 500), week=week)
    if kind == "approve":
        return drafts.approve(factory, settings, week=week, by="admin")
    if kind == "withdraw":
        return drafts.withdraw_approval(factory, settings, week=week)
    if kind == "test":
        week = week or _load(admin, None).week.label  # the draft shown: the scheduled week
        sender = admin.site.make_sender()
        try:
            report = send_digest(settings, factory, week, to=field(form, "to", 320), sender=sender)
        finally:
            sender.close()
        return report.summary()
    raise AssertionError(kind)


ACTIONS = ("exclude", "include", "move", "rename", "describe", "order", "note", "approve", "withdraw",
           "test", "intro")

ROUTES = [
    route("/draft", draft_page),
    route("/draft/preview", preview, frame=True),
    *(route(f"/draft/{kind}", _action(kind), ["POST"]) for kind in ACTIONS),
]
