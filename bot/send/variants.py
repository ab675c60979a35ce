"""A frozen digest's copies per theme choice (issue 36): which choices its
ledger rows carry, and the copy of each, rendered once per (digest, choice)
and kept in ``digest_variants``.

Kept, not rendered again per run, so that a send resumed after a kill -9
(maybe in another process, after the themes file or the code changed) mails
every reader the copy the send began with, under the Message-ID their row
was given. A choice first seen by a resumed run (a reader confirmed since)
is rendered then, from the digest's frozen entries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from bot import choices, digest, mailer, render
from bot.config import Settings
from bot.db import transaction
from bot.digest import DigestData
from bot.models import Delivery, DigestVariant
from bot.send.claims import UNFINISHED

log = logging.getLogger(__name__)

_VARIANTS = cast(Table, DigestVariant.__table__)
_UPSERT: dict[str, Callable[[Table], Any]] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def wanted_choices(session: Session, digest_id: int) -> list[str]:
    """The distinct theme choices of the digest's unfinished rows."""
    return sorted(session.scalars(
        select(Delivery.themes).distinct()
        .where(Delivery.digest_id == digest_id, Delivery.status.in_(UNFINISHED),
               Delivery.themes.is_not(None))))


def stored_variants(session: Session, digest_id: int) -> dict[str, DigestVariant]:
    rows = session.scalars(select(DigestVariant).where(DigestVariant.digest_id == digest_id))
    return {row.themes: row for row in rows}


# the copy of the choices none of whose themes has a section this week: the whole
# digest, saying so (no theme key holds "!", so no choice is spelt like this)
NONE_THIS_WEEK = "!none"


def week_keys(data: DigestData) -> frozenset[str]:
    """The keys of the week's sections a reader can choose (themes of the file)."""
    return frozenset(theme.key for theme in data.themes if not theme.derived and not theme.catch_all)


def effective(choice: str, keys: frozenset[str]) -> str:
    """The copy a choice gets this week: the one of its themes that have a section.
    Readers who chose {A, X} and {A} get the same copy when X has no entry."""
    return choices.encode(choices.decode(choice) & keys) or NONE_THIS_WEEK


def _store(session: Session, digest_id: int, choice: str, rendered: render.Rendered | None,
           copy_of: str | None = None) -> None:
    """Insert one row: a copy, or (``copy_of``) a pointer to another choice's
    copy. A row another worker stored meanwhile wins (both are made from the
    same frozen entries)."""
    values = {"digest_id": digest_id, "themes": choice, "copy_of": copy_of,
              "subject": rendered.subject if rendered else "", "html": rendered.html if rendered else "",
              "text": rendered.text if rendered else "", "created_at": datetime.now(UTC)}
    dialect = session.get_bind().dialect.name
    if dialect in _UPSERT:
        session.execute(_UPSERT[dialect](_VARIANTS).values(**values).on_conflict_do_nothing(
            index_elements=["digest_id", "themes"]))
    else:
        session.execute(insert(_VARIANTS).values(**values))


def ensure_variants(settings: Settings, factory: sessionmaker[Session], digest_id: int,
                    week: str, data: DigestData | None = None) -> dict[str, tuple[str, str, str]]:
    """(subject, html, text) of the copy for each choice the digest's unfinished
    rows carry, rendering and storing those not stored yet: one render per
    distinct copy (``effective``), however many readers and choices share it.
    ``data`` is the digest as it was frozen, if the caller has it; else it is
    built again from the frozen entries, once, only if a copy is missing."""
    with factory() as session:
        wanted = wanted_choices(session, digest_id)
        stored = stored_variants(session, digest_id)
    missing = [choice for choice in wanted if choice not in stored]
    if missing:
        if data is None:
            with factory() as session:
                data = digest.build_digest(session, digest.parse_week(week, settings.timezone),
                                           settings)
        keys = week_keys(data)
        plan = {choice: effective(choice, keys) for choice in missing}
        made = 0
        copies = render.ChoiceCopies(data, settings)  # one rendering, cut into every copy
        with transaction(factory) as session:
            for copy in sorted(set(plan.values())):
                if copy not in stored:
                    # "none this week" is rendered with any of its choices: none has a section
                    example = copy if copy != NONE_THIS_WEEK else next(c for c, e in plan.items() if e == copy)
                    _store(session, digest_id, copy, copies.render(choices.decode(example)))
                    made += 1
            for choice, copy in plan.items():
                if choice != copy:
                    _store(session, digest_id, choice, None, copy_of=copy)
        log.info("send %s: %d readers' theme choices, %d new copies rendered", week, len(missing), made)
        with factory() as session:
            stored = stored_variants(session, digest_id)
    found = {}
    for choice in wanted:
        row = stored[choice]
        if row.copy_of is not None:
            row = stored[row.copy_of]
        found[choice] = (row.subject, row.html, row.text)
    return found


class CopyBook:
    """The messages of one digest's copies per choice, built once per distinct
    copy and shared by every connection of a run (``DigestComposer`` asks it).

    A row may carry a choice this run has no copy for yet: another process
    sending the same digest gave a newly confirmed reader a row after this
    run started. Then the book looks again (``ensure_variants``: that other
    run's stored copy, or rendered here), once per such choice, under a lock,
    so that reader too gets their own copy and never the whole digest by mistake."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session], digest_id: int,
                 week: str, data: DigestData | None = None) -> None:
        self.settings, self.factory, self.digest_id, self.week = settings, factory, digest_id, week
        self._data = data
        self._messages: dict[str, mailer.DigestMessage] = {}
        self._by_copy: dict[tuple[str, str, str], mailer.DigestMessage] = {}
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        """Take every copy the digest's unfinished rows need (rendering any missing)."""
        parts = ensure_variants(self.settings, self.factory, self.digest_id, self.week, self._data)
        for choice, copy in parts.items():
            if choice not in self._messages:
                message = self._by_copy.get(copy)
                if message is None:  # choices that share a copy share its message
                    message = self._by_copy[copy] = mailer.DigestMessage(self.settings, *copy)
                self._messages[choice] = message

    def get(self, choice: str, default: mailer.DigestMessage) -> mailer.DigestMessage:
        found = self._messages.get(choice)
        if found is not None:
            return found
        with self._lock:
            if choice not in self._messages:
                log.info("send %s: a row with a theme choice this run has no copy for; "
                         "looking again", self.week)
                self.refresh()
            return self._messages.get(choice, default)

    def __len__(self) -> int:
        return len(self._messages)

