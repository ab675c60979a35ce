"""After a poll: ask the model about each entry not read yet, and about the
sections of the weeks still to be sent, and cache the answers.

This is the only place the bot calls the model for a digest, and it runs after
the poll (CLI and service), never while a digest is built or sent: building
reads the cache (``bot.llm.reader.load_readings``, ``section_intros``), so a
slow or dead endpoint costs a poll some seconds and never holds up a send.

An answer that is not what was asked for (malformed JSON, a theme the themes
file does not have) is cached as refused, with its reason, so it is not asked
for again at every poll; a failed call (timeout, 5xx after the retries, an open
circuit, a spent budget) is not cached, and the next poll tries again.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings
from bot.db import transaction
from bot.llm import store
from bot.llm.answer import AnswerError, parse_intro, parse_reading
from bot.llm.client import Breaker, Budget, Caller, CallError
from bot.llm.prompt import body_hash
from bot.llm.reader import entry_text_of, request_for, tldr_languages
from bot.models import Entry
from bot.themes import ThemeSet, load_themes

log = logging.getLogger(__name__)
T = TypeVar("T")

CallerFactory = Callable[[Settings, Budget], Caller]
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class ReadResult:
    """What a reading run did: ``off`` (no model set) or ``done``."""

    status: str
    read: int = 0  # entries read now
    refused: int = 0  # answers refused (cached with their reason)
    failed: int = 0  # calls that failed (tried again at the next poll)
    cached: int = 0  # entries whose reading was in the cache
    intros: int = 0  # section introductions written now
    last_failure: str = ""

    def summary(self) -> str:
        if self.status == "off":
            return "entries not read by a language model (DIGESTBOT_LLM_BASE_URL is not set)"
        failed = f", {self.failed} failed ({self.last_failure}); tried again at the next poll" if self.failed else ""
        refused = f", {self.refused} answers refused" if self.refused else ""
        intros = f", {self.intros} section introductions" if self.intros else ""
        return f"language model: {self.read} entries read, {self.cached} from the cache{refused}{intros}{failed}"


def _today(now: datetime) -> str:
    return now.astimezone(UTC).date().isoformat()


class _Run:
    """One run's caller, budget and usage bookkeeping (written to the database as it goes)."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session], make: CallerFactory | None) -> None:
        self.settings, self.factory = settings, factory
        self.model = settings.llm_model or ""
        with factory() as session:
            used = store.calls_on(session, _today(datetime.now(UTC)))
        self.budget = Budget(settings.llm_daily_calls, used)
        self.caller = (make or _caller)(settings, self.budget)
        self.lock = threading.Lock()
        self.last_failure = ""

    def record(self, now: datetime, ok: bool | None, reason: str = "", hits: int = 0) -> None:
        """Write today's calls (the budget's count), a success or failure, and cache hits."""
        with self.lock, transaction(self.factory) as session:
            row = store.usage(session, _today(now))
            row.calls = max(row.calls, self.budget.used)
            row.cache_hits += hits
            if ok:
                row.last_success_at = now
            elif ok is False:
                row.last_failure_at, row.last_failure = now, reason[:300]
                self.last_failure = reason


_breakers: dict[str, Breaker] = {}


def _caller(settings: Settings, budget: Budget) -> Caller:
    """A caller sharing this process's circuit breaker for the endpoint."""
    breaker = _breakers.setdefault(settings.llm_base_url or "", Breaker())
    return Caller(settings, budget, breaker)


def read_new_entries(settings: Settings, factory: sessionmaker[Session], *, entries: Sequence[int] | None = None,
                     stop: threading.Event | None = None, make_caller: CallerFactory | None = None) -> ReadResult:
    """Read every entry a digest may still show that has no cached answer (or only ``entries``),
    then write the introductions of the sections of the weeks still to be sent."""
    if not settings.llm_enabled:
        return ReadResult("off")
    themes = load_themes(settings.themes_file)
    run = _Run(settings, factory, make_caller)
    with factory() as session:
        chosen = (session.query(Entry).filter(Entry.id.in_(entries)).all() if entries is not None
                  else store.entries_to_read(session))
        todo = [(entry.id, *entry_text_of(entry.title, entry.summary_text)) for entry in chosen]
        keyed = [(entry_id, title, summary, _key(run.model, themes, title, summary))
                 for entry_id, title, summary in todo]
        known = store.rows(session, (key for *_, key in keyed)).keys()
    fresh = [item for item in keyed if item[3] not in known]
    if len(keyed) > len(fresh):
        run.record(datetime.now(UTC), None, hits=len(keyed) - len(fresh))
    counts = {"read": 0, "refused": 0, "failed": 0}

    def one(item: tuple[int, str, str, str]) -> None:
        if stop is not None and stop.is_set():
            return
        _, title, summary, key = item
        outcome = _read_one(run, themes, title, summary, key)
        with run.lock:
            counts[outcome] += 1

    _in_parallel(one, fresh, settings.llm_concurrency)
    intros = 0 if stop is not None and stop.is_set() else write_intros(settings, factory, run=run)
    return ReadResult("done", counts["read"], counts["refused"], counts["failed"], len(keyed) - len(fresh),
                      intros, run.last_failure)


def _in_parallel(work: Callable[[T], None], items: Sequence[T], workers: int) -> None:
    """``work(item)`` for every item, ``workers`` at a time, in daemon threads: a call in
    flight never keeps the process from exiting once the service stopped waiting for it
    (``bot.stopping``). The first error any item raised is raised here, after the others ran."""
    pending = iter(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                item = next(pending, _DONE)
            if item is _DONE:
                return
            try:
                work(item)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the caller below
                with lock:
                    errors.append(exc)

    threads = [threading.Thread(target=worker, name=f"llm-{n}", daemon=True) for n in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


_DONE = object()


def _key(model: str, themes: ThemeSet, title: str, summary: str) -> str:
    return body_hash(request_for(model, themes, title, summary, tldr_languages()))


def _read_one(run: _Run, themes: ThemeSet, title: str, summary: str, key: str) -> str:
    """Ask about one entry and cache the answer; "read", "refused" or "failed"."""
    languages = tldr_languages()
    body = request_for(run.model, themes, title, summary, languages)
    plain_body = request_for(run.model, themes, title, summary, languages, structured=False)
    try:
        content = run.caller.complete(body, plain_body)
    except CallError as exc:
        now = datetime.now(UTC)
        run.record(now, False, exc.reason)
        if exc.transient:
            return "failed"
        with run.lock, transaction(run.factory) as session:
            store.save(session, key, store.ENTRY, run.model, now, error=exc.reason[:300])
        return "refused"
    now = datetime.now(UTC)
    try:
        reading = parse_reading(content, run.model, [t.key for t in themes.themes], languages,
                                f"{title}\n{summary}")
    except AnswerError as exc:
        log.warning("the language model's answer about %r was refused: %s", title[:60], exc)
        run.record(now, False, f"answer refused: {exc}")
        with run.lock, transaction(run.factory) as session:
            store.save(session, key, store.ENTRY, run.model, now, error=str(exc)[:300])
        return "refused"
    run.record(now, True)
    with run.lock, transaction(run.factory) as session:
        store.save(session, key, store.ENTRY, run.model, now, answer=reading.to_json())
    return "read"


def numbers_in_text(intro: str, text: str) -> bool:
    """Every number the introduction writes is written in ``text`` too."""
    written = set(_NUMBER.findall(text))
    return all(number in written for number in _NUMBER.findall(intro))


def write_intros(settings: Settings, factory: sessionmaker[Session], *, run: _Run | None = None,
                 make_caller: CallerFactory | None = None) -> int:
    """Write the introductions of the sections of the weeks still to be sent (the last
    complete one and the current one) that have none cached; how many were written."""
    from bot.digest.build import build_digest, latest_complete_week
    from bot.digest.queries import digest_for_week
    from bot.digest.week import week_of
    from bot.llm.present import section_requests

    if not settings.llm_enabled:
        return 0
    run = run or _Run(settings, factory, make_caller)
    with factory() as session:
        weeks = {week_of(datetime.now(UTC), settings.tz)}
        latest = latest_complete_week(session, settings)
        if latest is not None:
            weeks.add(latest)
        wanted = []
        for week in sorted(weeks):
            if digest_for_week(session, week.label) is not None:
                continue  # frozen: its introductions were fixed before its send
            wanted += section_requests(settings, build_digest(session, week, settings))
        known = store.rows(session, (body_hash(body) for _, body, _ in wanted)).keys()
    written = 0
    for _, body, text in wanted:
        key = body_hash(body)
        if key in known:
            continue
        plain_body = {**body, "response_format": {"type": "json_object"}}
        try:
            intro = parse_intro(run.caller.complete(body, plain_body))
            if not numbers_in_text(intro, text):
                raise AnswerError("the introduction writes a number its entries do not")
        except (CallError, AnswerError) as exc:
            reason = exc.reason if isinstance(exc, CallError) else f"introduction refused: {exc}"
            run.record(datetime.now(UTC), False, reason)
            if isinstance(exc, CallError) and exc.transient:
                continue
            with transaction(factory) as session:
                store.save(session, key, store.INTRO, run.model, datetime.now(UTC), error=reason[:300])
            continue
        now = datetime.now(UTC)
        run.record(now, True)
        with transaction(factory) as session:
            store.save(session, key, store.INTRO, run.model, now, answer={"intro": intro})
        written += 1
    return written


def reread(settings: Settings, factory: sessionmaker[Session], week: Any | None = None,
           make_caller: CallerFactory | None = None) -> ReadResult:
    """Forget the cached readings of a week's entries (or of every entry a digest may still
    show) and read them again (``digestbot themes reread``)."""
    if not settings.llm_enabled:
        return ReadResult("off")
    themes = load_themes(settings.themes_file)
    model = settings.llm_model or ""
    with transaction(factory) as session:
        chosen = (store.entries_to_read(session, week.start, week.end) if week is not None
                  else store.entries_to_read(session))
        ids = [entry.id for entry in chosen]
        store.forget(session, (_key(model, themes, *entry_text_of(e.title, e.summary_text)) for e in chosen))
    return read_new_entries(settings, factory, entries=ids, make_caller=make_caller)
