"""The language model's cache and usage in the database: ``llm_readings``,
``llm_usage`` and the editor's ``draft_intros`` (see ``bot.models``).
Functions take a Session and leave committing to the caller."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from bot.llm.answer import Reading
from bot.models import DigestEntry, DraftIntro, Entry, LlmReading, LlmUsage

ENTRY, INTRO = "entry", "intro"
READ_AT_MOST = 500  # entries one reading run looks at, newest first


def _chunks(keys: Sequence[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(keys), size):
        yield list(keys[start:start + size])


def rows(session: Session, keys: Iterable[str]) -> dict[str, LlmReading]:
    """The cached answers (valid or refused) under ``keys``."""
    found: dict[str, LlmReading] = {}
    for chunk in _chunks(sorted(set(keys))):
        found.update((row.key, row) for row in session.scalars(select(LlmReading).where(LlmReading.key.in_(chunk))))
    return found


def readings(session: Session, keys: Iterable[str]) -> dict[str, Reading]:
    """The valid entry readings under ``keys``."""
    return {key: Reading.from_json(row.answer) for key, row in rows(session, keys).items()
            if row.kind == ENTRY and row.answer is not None}


def intros(session: Session, keys: Iterable[str]) -> dict[str, str]:
    """The valid generated introductions under ``keys``."""
    return {key: str(row.answer.get("intro", "")) for key, row in rows(session, keys).items()
            if row.kind == INTRO and row.answer is not None and row.answer.get("intro")}


def save(session: Session, key: str, kind: str, model: str, now: datetime,
         answer: dict[str, object] | None = None, error: str | None = None) -> None:
    """Cache one answer (or why it was refused), replacing an older one under the same key."""
    row = session.get(LlmReading, key)
    if row is None:
        row = LlmReading(key=key)
        session.add(row)
    row.kind, row.model, row.answer, row.error, row.created_at = kind, model, answer, error, now


def forget(session: Session, keys: Iterable[str]) -> int:
    """Drop the cached answers under ``keys`` (``themes reread``); how many there were."""
    gone = 0
    for chunk in _chunks(sorted(set(keys))):
        gone += session.execute(delete(LlmReading).where(LlmReading.key.in_(chunk))).rowcount or 0  # type: ignore[attr-defined]
    return gone


def entries_to_read(session: Session, start: datetime | None = None, end: datetime | None = None,
                    limit: int = READ_AT_MOST) -> Sequence[Entry]:
    """Entries a digest may still show (not yet frozen into one), newest first; within
    [start, end) when given."""
    frozen = select(DigestEntry.entry_id)
    query = select(Entry).where(Entry.id.not_in(frozen))
    if start is not None and end is not None:
        query = select(Entry).where(Entry.published_at >= start, Entry.published_at < end)
    return session.scalars(query.order_by(Entry.published_at.desc(), Entry.id.desc()).limit(limit)).all()


def usage(session: Session, day: str) -> LlmUsage:
    """One day's usage row, created (and flushed) if missing."""
    row = session.get(LlmUsage, day)
    if row is None:
        row = LlmUsage(day=day, calls=0, cache_hits=0)
        session.add(row)
        session.flush()
    return row


def calls_on(session: Session, day: str) -> int:
    row = session.get(LlmUsage, day)
    return row.calls if row is not None else 0


@dataclass(frozen=True)
class Health:
    """Whether the reader works, for `digestbot status` and /healthz."""

    calls_today: int
    cache_hits_today: int
    last_success_at: datetime | None
    last_failure_at: datetime | None
    last_failure: str | None
    readings: int
    refused: int


def health(session: Session, day: str) -> Health:
    today = session.get(LlmUsage, day)
    success = session.scalar(select(func.max(LlmUsage.last_success_at)))
    failed = session.scalars(select(LlmUsage).where(LlmUsage.last_failure_at.is_not(None))
                             .order_by(LlmUsage.last_failure_at.desc()).limit(1)).first()
    counts: dict[bool, int] = {bool(ok): int(n) for ok, n in session.execute(
        select(LlmReading.error.is_(None), func.count()).where(LlmReading.kind == ENTRY)
        .group_by(LlmReading.error.is_(None))).all()}
    return Health(
        calls_today=today.calls if today else 0, cache_hits_today=today.cache_hits if today else 0,
        last_success_at=success, last_failure_at=failed.last_failure_at if failed else None,
        last_failure=failed.last_failure if failed else None,
        readings=int(counts.get(True, 0)), refused=int(counts.get(False, 0)),
    )


def week_intros(session: Session, week: str) -> dict[str, str]:
    """The editor's introductions of a week by section key (an empty text: no introduction)."""
    return {row.section: row.text for row in session.scalars(select(DraftIntro).where(DraftIntro.week == week))}


def set_intro(session: Session, week: str, section: str, text: str | None, now: datetime) -> None:
    """Set a section's introduction for a week; None drops the edit (the generated one shows again)."""
    row = session.get(DraftIntro, (week, section))
    if text is None:
        if row is not None:
            session.delete(row)
        return
    if row is None:
        row = DraftIntro(week=week, section=section)
        session.add(row)
    row.text, row.updated_at = text, now
