"""The schedule: what runs when inside `digestbot run`.

Three jobs, each a module-level function with no arguments, so APScheduler can
keep them in its SQLAlchemy job store (table ``apscheduler_jobs`` in our own
database) as plain references:

- ``poll-feeds``: every ``poll_interval`` minutes with a little jitter, and
  once right at start.
- ``weekly-send``: a cron on ``send_day`` at ``send_time`` in ``timezone``;
  sends the digest of the week just ended (``send.send_digest`` with
  ``week=None``).
- ``resume-send``: a one-off at start when a digest was left half-sent
  (status 'sending'), e.g. by a crash; it calls ``send_digest`` again for that
  week and the delivery ledger makes sure nobody gets a second copy. A send
  that fails (SMTP down, another run holds the digest's lock) schedules the
  same one-off ``RETRY_MINUTES`` later; one-offs live in a memory store, since
  every start looks for half-sent digests anyway.

The job functions find their settings and session factory in a module-level
context that the service sets at start (``set_context``), so jobs stored by
an earlier run pick up the settings of this one.

Why a restart neither loses nor duplicates a send: the job ids are fixed and
re-added with ``replace_existing=True`` at every start, but a send time missed
while the process was down is carried over into the replacement; on start
APScheduler runs it once (``coalesce=True`` folds several missed times into
one) if it is less than ``send_grace_hours`` late (``misfire_grace_time``),
and ``max_instances=1`` plus a single send worker keep sends one at a time.
The job store moves a job's next run time forward when the job is handed to
a worker, so a crash mid-send does not repeat the weekly job; the half-sent
digest is picked up by ``resume-send`` instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import BaseJobStore
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_RUNNING, STATE_STOPPED, BaseScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Column, Engine, Float, MetaData, String, Table, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from bot import db, ingest
from bot.config import Settings
from bot.digest import queries as digest_queries
from bot.errors import BotError
from bot.send import send_digest

log = logging.getLogger(__name__)

POLL_JOB_ID = "poll-feeds"
SEND_JOB_ID = "weekly-send"
RESUME_JOB_ID = "resume-send"
JOBS_TABLE = "apscheduler_jobs"
SEND_EXECUTOR = "send"  # one worker: sends never overlap inside the service
RETRY_MINUTES = 15  # a send that failed (SMTP down, locked) is tried again this much later


# --- the context the job functions run in -------------------------------------

@dataclass
class JobContext:
    """What the jobs of this process use; set once at start by the service."""

    settings: Settings
    factory: sessionmaker[Session]
    # set when the process is asked to stop: jobs not yet started return at
    # once, a running poll stops between feeds, a running send after the
    # message in flight (send_digest's ``stop``)
    stopping: threading.Event = field(default_factory=threading.Event)
    # the send function; tests may substitute a counting one
    send: Callable[..., Any] | None = None
    # the scheduler running the jobs, for a send to schedule its own retry
    scheduler: BaseScheduler | None = None

    def send_digest(self, week: str | None = None) -> Any:
        run = self.send or send_digest
        return run(self.settings, self.factory, week, stop=self.stopping)


_context: JobContext | None = None
_context_lock = threading.Lock()


def set_context(context: JobContext | None) -> None:
    global _context
    with _context_lock:
        _context = context


def get_context() -> JobContext:
    with _context_lock:
        if _context is None:
            raise RuntimeError("the scheduler's job context is not set: start jobs with `digestbot run`")
        return _context


# --- the jobs -----------------------------------------------------------------

def poll_job() -> None:
    """Poll every configured feed; one log line per feed (from the pipeline)."""
    ctx = get_context()
    for url in ctx.settings.feed_urls:
        if ctx.stopping.is_set():
            log.info("poll interrupted: the service is stopping")
            return
        try:
            ingest.poll_feeds(ctx.settings, ctx.factory, [url])
        except Exception:  # a bug or a database outage: log it, the next poll tries again
            log.exception("poll %s failed", url)


def send_job() -> None:
    """The weekly send: the digest of the latest complete week, then any older
    digest whose send is still unfinished."""
    ctx = get_context()
    report = _send(ctx, None)
    for week in getattr(report, "other_unfinished", ()):
        log.info("send %s: finishing an earlier send", week)
        _send(ctx, week)


def resume_job() -> None:
    """Finish every digest whose send was interrupted (status 'sending')."""
    ctx = get_context()
    try:
        with ctx.factory() as session:
            weeks = digest_queries.weeks_being_sent(session)
    except SQLAlchemyError as exc:
        log.error("send: cannot read the digests to resume: %s", exc)
        _retry_later(ctx)
        return
    for week in weeks:
        log.info("send %s: resuming an interrupted send", week)
        _send(ctx, week)


def _send(ctx: JobContext, week: str | None) -> Any:
    """One send run, one log line; never raises. Returns send_digest's report or None."""
    name = week or "of the week just ended"
    if ctx.stopping.is_set():
        log.info("send %s: not started, the service is stopping", name)
        return None
    try:
        report = ctx.send_digest(week)
    except BotError as exc:  # another send holds the lock, SMTP down, nothing to send, ...
        log.warning("send %s: %s", name, exc.message)
        _retry_later(ctx)
        return None
    except Exception:
        log.exception("send %s failed", name)
        _retry_later(ctx)
        return None
    summary = report.summary() if callable(getattr(report, "summary", None)) else f"{name}: {report}"
    if getattr(report, "outcome", None) == "incomplete" and ctx.stopping.is_set():
        log.warning("send %s; stopped after the message in flight, it resumes at the next start",
                    summary)
    elif getattr(report, "outcome", None) == "incomplete":
        log.warning("send %s", summary)
        _retry_later(ctx)
    else:
        log.info("send %s", summary)
    return report


def _retry_later(ctx: JobContext) -> None:
    """After a send that failed or stopped early: look again for unfinished
    digests in RETRY_MINUTES (a restart does the same at once)."""
    if ctx.scheduler is None or ctx.stopping.is_set():
        return
    when = datetime.now(UTC) + timedelta(minutes=RETRY_MINUTES)
    ctx.scheduler.add_job(
        resume_job, "date", run_date=when, id=RESUME_JOB_ID, name="resume unfinished sends",
        replace_existing=True, jobstore="memory", executor=SEND_EXECUTOR, misfire_grace_time=None)
    log.info("send: unfinished sends are tried again at %s",
             when.astimezone(ctx.settings.tz).isoformat(timespec="minutes"))


# --- triggers -----------------------------------------------------------------

def send_trigger(settings: Settings) -> CronTrigger:
    """The weekly send: ``send_day`` at ``send_time`` in ``timezone``."""
    at = settings.send_time
    return CronTrigger(day_of_week=settings.send_day.lower()[:3], hour=at.hour, minute=at.minute,
                       second=at.second, timezone=settings.tz)


def poll_jitter(settings: Settings) -> int:
    """A little jitter so many bots don't hit a feed on the same second: 5%, 1 s to 2 min."""
    return max(1, min(120, settings.poll_interval * 3))


def poll_trigger(settings: Settings) -> IntervalTrigger:
    return IntervalTrigger(minutes=settings.poll_interval, jitter=poll_jitter(settings),
                           timezone=settings.tz)


def next_send_time(settings: Settings, now: datetime | None = None) -> datetime:
    """When the weekly send fires next after ``now``, in the configured time zone."""
    now = (now or datetime.now(UTC)).astimezone(settings.tz)
    fire = send_trigger(settings).get_next_fire_time(None, now)
    assert fire is not None  # a weekly cron always fires again
    return fire


# --- the scheduler ------------------------------------------------------------

def make_jobstore(database_url: str) -> SQLAlchemyJobStore:
    """The persistent job store, on an engine of its own (the store disposes it at shutdown)."""
    return SQLAlchemyJobStore(engine=db.make_engine(database_url), tablename=JOBS_TABLE)


class Scheduler(BackgroundScheduler):
    """APScheduler's BackgroundScheduler, minus one last look for due jobs after
    shutdown: its loop wakes once more when stopped, and a job due right then
    would be moved on to its next time while the executors refuse it, losing a send."""

    def _process_jobs(self) -> float | None:
        if self.state == STATE_STOPPED:
            return None
        return super()._process_jobs()  # type: ignore[no-any-return]

    def shutdown(self, wait: bool = True) -> None:
        """Pause, let a look for due jobs in progress finish, then shut down.

        Stopping in the middle of that look makes APScheduler fail to remove
        a one-off job it has just handed out (it then searches the pending list).
        """
        if self.state == STATE_RUNNING:
            self.pause()
        with self._jobstores_lock:
            pass
        super().shutdown(wait)


def build_scheduler(settings: Settings, jobstore: BaseJobStore) -> Scheduler:
    """A scheduler with the persistent store for the recurring jobs, a memory
    store for one-offs, and a single-worker executor for sends."""
    return Scheduler(
        jobstores={"default": jobstore, "memory": MemoryJobStore()},
        executors={"default": ThreadPoolExecutor(2), SEND_EXECUTOR: ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1},
        timezone=settings.tz,
    )


def schedule_jobs(scheduler: BackgroundScheduler, settings: Settings,
                  factory: sessionmaker[Session]) -> None:
    """Add (or replace) the service's jobs on a scheduler started paused.

    Call between ``scheduler.start(paused=True)`` and ``scheduler.resume()``,
    so the stored jobs can be read before they are replaced.
    """
    now = datetime.now(settings.tz)
    scheduler.add_job(
        poll_job, poll_trigger(settings), id=POLL_JOB_ID, name="poll feeds",
        replace_existing=True, next_run_time=now,  # once at start, then every interval
        misfire_grace_time=settings.poll_interval * 60,
    )
    extra: dict[str, Any] = {}
    missed = _stored_next_run_time(scheduler, SEND_JOB_ID)
    if missed is not None and missed <= now:
        # down at send time: keep the missed time, so it runs once now if within the grace period
        extra["next_run_time"] = missed
        latest = _latest_fire_time(send_trigger(settings), missed, now)  # what coalescing keeps
        due = latest.astimezone(settings.tz).isoformat(timespec="minutes")
        if now - latest <= timedelta(hours=settings.send_grace_hours):
            log.info("the weekly send due at %s was missed while stopped: sending it now", due)
        else:
            log.warning("the weekly send due at %s was missed while stopped, more than "
                        "DIGESTBOT_SEND_GRACE_HOURS=%d ago: skipped (`digestbot send` sends it by hand)",
                        due, settings.send_grace_hours)
    scheduler.add_job(
        send_job, send_trigger(settings), id=SEND_JOB_ID, name="weekly send",
        replace_existing=True, executor=SEND_EXECUTOR,
        misfire_grace_time=settings.send_grace_hours * 3600, **extra,
    )
    with factory() as session:
        interrupted = digest_queries.weeks_being_sent(session)
    if interrupted:
        log.info("interrupted send(s) found for %s: resuming now", ", ".join(interrupted))
        scheduler.add_job(
            resume_job, "date", run_date=now, id=RESUME_JOB_ID, name="resume interrupted send",
            replace_existing=True, jobstore="memory", executor=SEND_EXECUTOR,
            misfire_grace_time=None,
        )


def _latest_fire_time(trigger: CronTrigger, since: datetime, now: datetime) -> datetime:
    """The last time ``trigger`` fires from ``since`` up to ``now``."""
    latest = since
    while (following := trigger.get_next_fire_time(latest, now)) is not None and following <= now:
        latest = following
    return latest


def _stored_next_run_time(scheduler: BackgroundScheduler, job_id: str) -> datetime | None:
    try:
        job = scheduler.get_job(job_id, jobstore="default")
    except Exception as exc:  # stored by a digestbot whose job functions moved: replaced below
        log.warning("the stored %s job cannot be read (%s); it is replaced", job_id, exc)
        return None
    return getattr(job, "next_run_time", None) if job else None


# --- reading the job store without APScheduler (for `digestbot status`) ------

def stored_next_run_times(engine: Engine) -> dict[str, datetime | None]:
    """Job id -> next run time (UTC) as kept in the job store; {} if there is none.

    Reads the table directly (no unpickling), so it works while the service
    runs and without starting a scheduler.
    """
    table = Table(JOBS_TABLE, MetaData(), Column("id", String(191), primary_key=True),
                  Column("next_run_time", Float(25)))
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(table.c.id, table.c.next_run_time)).all()
    except SQLAlchemyError:  # no table yet: the service never ran on this database
        return {}
    return {job_id: (datetime.fromtimestamp(ts, UTC) if ts is not None else None)
            for job_id, ts in rows}


def is_running(scheduler: BackgroundScheduler | None) -> bool:
    """True when the scheduler is started, not paused, and its thread is alive."""
    if scheduler is None or scheduler.state != STATE_RUNNING:
        return False
    thread = getattr(scheduler, "_thread", None)
    return thread is None or thread.is_alive()
