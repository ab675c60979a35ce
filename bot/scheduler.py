"""The schedule: what runs when inside `digestbot run`.

Three jobs, each a module-level function with no arguments, so APScheduler can
keep them in its SQLAlchemy job store (table ``apscheduler_jobs`` in our own
database) as plain references:

- ``poll-feeds``: every ``poll_interval`` minutes with a little jitter, and
  once right at start.
- ``weekly-send``: once a week on ``send_day`` at ``send_time`` in ``timezone``
  (``bot.digest.schedule.WeeklyTrigger``: once also across a DST change);
  sends the week the last scheduled send covers, if the database says it is
  still owed (``bot.digest.due``). ``owed-send``: the same, once at start.
- ``approval-watch`` (only with ``DIGESTBOT_REQUIRE_APPROVAL``): every minute,
  sends a week the weekly send held for approval once it is approved, and
  mails the admin one reminder before an unapproved send (``bot.send.reminder``).
- ``process-bounces`` (only with ``DIGESTBOT_BOUNCE_MAILBOX``): every
  ``bounce_interval`` minutes, and once at start, reads the bounce mailbox
  (``bounces.process_bounces``); kept in memory like the approval watch.
- ``resume-send``: a one-off at start when a digest was left half-sent
  (status 'sending'), e.g. by a crash; it calls ``send_digest`` again for that
  week and the delivery ledger makes sure nobody gets a second copy. A send
  that fails (SMTP down, another run holds the digest's lock) schedules the
  same one-off ``RETRY_MINUTES`` later; one-offs live in a memory store, since
  every start looks for half-sent digests anyway.
- ``watch-sends``: every ``SEND_WATCH_SECONDS``, in every instance: if the
  instance that held the scheduled send died with it (its lease left behind,
  run out or naming a process gone from this machine), ``take-over-send``
  finishes what it left -- the owed week, a half-sent digest -- without a
  restart, the ledger making sure nobody gets a second copy.

The job functions find their settings and session factory in a module-level
context that the service sets at start (``set_context``), so jobs stored by
an earlier run pick up the settings of this one.

Why a restart neither loses nor duplicates a send: the job store is not
trusted with it. APScheduler moves the weekly job's next run time forward when
it hands the job to a worker, before the digest is frozen, so a kill in that
instant would leave a store that says "next week". Instead, at start and at
every send time, ``bot.digest.due`` asks the database: the last scheduled send
time, the grace period, and whether that week's digest exists and is
finished. Not frozen yet and within ``send_grace_hours``: it is sent now
(once: down across two send times gives one send, of the latest). Frozen but
unfinished: ``resume-send`` finishes it from the ledger. Sent: nothing.
``send_digest`` itself never sends a week twice, and a single send worker
keeps sends one at a time.
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
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_RUNNING, STATE_STOPPED, BaseScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from bot import ingest, leases
from bot.bounces import process_bounces
from bot.config import Settings
from bot.digest import draft, due
from bot.digest import queries as digest_queries
from bot.digest.schedule import next_send_time as next_send_time  # re-exported: status, tests
from bot.digest.schedule import send_trigger
from bot.errors import BotError
from bot.ingest import feeds as ingest_feeds
from bot.jobstore import JOBS_TABLE as JOBS_TABLE  # re-exported: older callers
from bot.jobstore import make_jobstore as make_jobstore  # re-exported: service, tests
from bot.jobstore import stored_next_run_times as stored_next_run_times  # status, tests
from bot.send import send_digest

log = logging.getLogger(__name__)

POLL_JOB_ID = "poll-feeds"
SEND_JOB_ID = "weekly-send"
RESUME_JOB_ID = "resume-send"
CATCH_UP_JOB_ID = "owed-send"  # a one-off at start: the last weekly send is still owed
APPROVAL_JOB_ID = "approval-watch"
BOUNCE_JOB_ID = "process-bounces"
APPROVAL_WATCH_SECONDS = 60  # how soon an approval sends a held week (and the reminder goes)
SEND_EXECUTOR = "send"  # one worker: sends never overlap inside the service
SEND_LEASE_NAME = "scheduled-send"
SEND_LEASE = timedelta(minutes=30)  # renewed by nobody: a longer send may be joined, never repeated
RETRY_MINUTES = 15  # a send that failed (SMTP down, locked) is tried again this much later
WATCH_JOB_ID = "watch-sends"
TAKEOVER_JOB_ID = "take-over-send"
SEND_WATCH_SECONDS = 20  # how soon another instance's send is taken over once its holder is gone


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
    """Poll every active feed of the database, in parallel (one slow feed
    delays no other, each fetch has a total deadline); a stop request
    abandons the fetches in flight at once. One log line per feed (from the pipeline)."""
    ctx = get_context()
    try:
        urls = ingest_feeds.active_urls(ctx.factory)
    except SQLAlchemyError as exc:
        log.error("poll: cannot read the feeds: %s", exc)
        return
    if ctx.stopping.is_set() or not urls:
        return
    try:
        results = ingest.poll_feeds(ctx.settings, ctx.factory, urls, stop=ctx.stopping)
    except Exception:  # a bug or a database outage: log it, the next poll tries again
        log.exception("poll failed")
        return
    if any(result.status == "stopped" for result in results):
        log.info("poll interrupted: the service is stopping")
        return
    _read_with_llm(ctx)


def _read_with_llm(ctx: Any) -> None:
    """The language model reads the new entries (bot.llm.reading; nothing when it is off)."""
    from bot.llm.reading import read_new_entries
    from bot.stopping import Stopped, until_stopped

    try:
        # a call in flight may take DIGESTBOT_LLM_TIMEOUT: a stop does not wait for it (each
        # answer is stored in its own transaction; what is not stored is read at the next poll)
        read = until_stopped(lambda: read_new_entries(ctx.settings, ctx.factory, stop=ctx.stopping),
                             ctx.stopping, name="llm-reading")
    except Stopped:
        log.info("poll: the language model's reading stopped: the service is stopping")
        return
    except SQLAlchemyError as exc:  # a database outage: the next poll reads them
        log.error("poll: cannot store the language model's readings: %s", exc)
        return
    if read.status != "off":
        log.info("poll: %s", read.summary())


def send_job() -> None:
    """The weekly send, at its time and once at start: the week the last
    scheduled send covers if the database says it is still owed
    (``bot.digest.due``), then any older digest whose send is unfinished."""
    ctx = get_context()
    try:
        with ctx.factory() as session:
            owed = due.weekly_send(session, ctx.settings)
    except SQLAlchemyError as exc:
        log.error("send: cannot read whether the weekly send is due: %s", exc)
        _retry_later(ctx)
        return
    if owed.state not in (due.DUE, due.SENDING):  # sent already, or missed by more than the grace
        log.info("send %s: nothing to do, its digest is %s", owed.week.label, owed.state)
        return
    report = _send(ctx, owed.week.label)
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


def watch_job() -> None:
    """Cheap, and quiet unless it acts: one read of the scheduled send's lease.
    A lease still there whose holder is gone means an instance died holding
    the send (mid-send, or before the digest was frozen): it is removed (by
    one instance) and the take-over runs the send here, on the send worker;
    if nothing is owed any more, that is all. A send that ended normally,
    even unfinished, released its lease: its own retry covers it."""
    ctx = get_context()
    if ctx.stopping.is_set() or ctx.scheduler is None:
        return
    try:
        if not leases.clear_abandoned(ctx.factory, SEND_LEASE_NAME):
            return
    except SQLAlchemyError as exc:
        log.error("send: cannot read the scheduled send's lease: %s", exc)
        return
    log.warning("send: the instance that held the scheduled send is gone; taking it over")
    ctx.scheduler.add_job(
        takeover_job, "date", run_date=datetime.now(UTC), id=TAKEOVER_JOB_ID,
        name="take over a send another instance left", replace_existing=True,
        jobstore="memory", executor=SEND_EXECUTOR, misfire_grace_time=None)


def takeover_job() -> None:
    """Whatever an instance that died holding the scheduled send left: the
    owed week (sent, or finished from its ledger) and any half-sent digest."""
    send_job()
    resume_job()


def _send(ctx: JobContext, week: str | None) -> Any:
    """One send run, one log line; never raises. Returns send_digest's report or None."""
    name = week or "of the week just ended"
    if ctx.stopping.is_set():
        log.info("send %s: not started, the service is stopping", name)
        return None
    try:
        # one instance at a time sends, however many `digestbot run` share the
        # database (rows are claimed one by one anyway: two would not repeat a message)
        with leases.held(ctx.factory, SEND_LEASE_NAME, SEND_LEASE) as mine:
            if not mine:
                log.info("send %s: another instance is sending; skipped here", name)
                return None
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
    if getattr(report, "outcome", None) == "awaiting-approval":
        # DIGESTBOT_REQUIRE_APPROVAL: held; approval_job sends it once it is approved
        draft.hold(ctx.factory, report.week)
        log.warning("send %s", summary)
    elif getattr(report, "outcome", None) == "incomplete" and ctx.stopping.is_set():
        log.warning("send %s; stopped after the message in flight, it resumes at the next start",
                    summary)
    elif getattr(report, "outcome", None) == "incomplete":
        log.warning("send %s", summary)
        _retry_later(ctx)
    else:
        log.info("send %s", summary)
    return report


def bounce_job() -> None:
    """Read the bounce mailbox once; never raises (the next run tries again)."""
    ctx = get_context()
    if ctx.stopping.is_set():
        return
    try:
        process_bounces(ctx.settings, ctx.factory)
    except BotError as exc:  # mailbox down, password changed, ...
        log.warning("bounces: %s", exc.message)
    except Exception:
        log.exception("bounces: reading the mailbox failed")


def approval_job() -> None:
    """With DIGESTBOT_REQUIRE_APPROVAL, every minute: send each week a scheduled
    send held that has been approved since (once: it is frozen then), and mail
    the admin the approval reminder when it is due (``bot.send.reminder``)."""
    from bot.send.reminder import remind_if_due

    ctx = get_context()
    if ctx.stopping.is_set():
        return
    try:
        with ctx.factory() as session:
            weeks = draft.sendable_held_weeks(session)
    except SQLAlchemyError as exc:
        log.error("send: cannot read the weeks held for approval: %s", exc)
        return
    for week in weeks:
        log.info("send %s: approved, sending the send that waited for it", week)
        _send(ctx, week)
    try:
        remind_if_due(ctx.settings, ctx.factory)
    except Exception:  # a bug or a database outage: log it, the next minute tries again
        log.exception("the approval reminder failed")


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

def poll_jitter(settings: Settings) -> int:
    """A little jitter so many bots don't hit a feed on the same second: 5%, 1 s to 2 min."""
    return max(1, min(120, settings.poll_interval * 3))


def poll_trigger(settings: Settings) -> IntervalTrigger:
    return IntervalTrigger(minutes=settings.poll_interval, jitter=poll_jitter(settings),
                           timezone=settings.tz)


# --- the scheduler ------------------------------------------------------------

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
    ingest_feeds.add_configured(settings, factory)  # DIGESTBOT_FEED_URLS only ever adds
    scheduler.add_job(
        poll_job, poll_trigger(settings), id=POLL_JOB_ID, name="poll feeds",
        replace_existing=True, next_run_time=now,  # once at start, then every interval
        misfire_grace_time=settings.poll_interval * 60,
    )
    # whether the last send is still owed is read from the database, not from
    # the stored job: the store moves on before the digest is frozen (bot.digest.due).
    # Only a send time this database was already scheduled for is made up: a
    # first start does not freeze last week's digest for nobody.
    scheduled_before = _has_stored_job(scheduler, SEND_JOB_ID)
    scheduler.add_job(
        send_job, send_trigger(settings), id=SEND_JOB_ID, name="weekly send",
        replace_existing=True, executor=SEND_EXECUTOR,
        misfire_grace_time=settings.send_grace_hours * 3600,
    )
    with factory() as session:
        owed = due.weekly_send(session, settings, now)
    when = owed.fire.isoformat(timespec="minutes")
    if not scheduled_before:
        log.info("first start on this database: the weekly send is scheduled from now on")
    elif owed.due:
        log.info("the weekly send due at %s (%s) has not gone out: sending it now", when,
                 owed.week.label)
        scheduler.add_job(
            send_job, "date", run_date=now, id=CATCH_UP_JOB_ID, name="owed weekly send",
            replace_existing=True, jobstore="memory", executor=SEND_EXECUTOR,
            misfire_grace_time=None)
    elif owed.state == due.MISSED:
        log.warning("the weekly send due at %s (%s) was missed while stopped, more than "
                    "DIGESTBOT_SEND_GRACE_HOURS=%d ago: skipped (`digestbot send` sends it by hand)",
                    when, owed.week.label, settings.send_grace_hours)
    scheduler.add_job(
        watch_job, IntervalTrigger(seconds=SEND_WATCH_SECONDS, timezone=settings.tz),
        id=WATCH_JOB_ID, name="take over a send another instance left", replace_existing=True,
        jobstore="memory", misfire_grace_time=SEND_WATCH_SECONDS)
    if settings.require_approval:
        scheduler.add_job(
            approval_job, IntervalTrigger(seconds=APPROVAL_WATCH_SECONDS, timezone=settings.tz),
            id=APPROVAL_JOB_ID, name="send approved weeks, remind of unapproved ones",
            replace_existing=True, jobstore="memory", executor=SEND_EXECUTOR, next_run_time=now)
    if settings.bounce_mailbox:
        scheduler.add_job(
            bounce_job, IntervalTrigger(minutes=settings.bounce_interval, timezone=settings.tz),
            id=BOUNCE_JOB_ID, name="read the bounce mailbox", replace_existing=True,
            jobstore="memory", next_run_time=now, misfire_grace_time=settings.bounce_interval * 60)
    with factory() as session:
        interrupted = digest_queries.weeks_being_sent(session)
    if interrupted:
        log.info("interrupted send(s) found for %s: resuming now", ", ".join(interrupted))
        scheduler.add_job(
            resume_job, "date", run_date=now, id=RESUME_JOB_ID, name="resume interrupted send",
            replace_existing=True, jobstore="memory", executor=SEND_EXECUTOR,
            misfire_grace_time=None,
        )


def _has_stored_job(scheduler: BackgroundScheduler, job_id: str) -> bool:
    """Did an earlier start store this job (this database has been scheduled)?"""
    try:
        return scheduler.get_job(job_id, jobstore="default") is not None
    except Exception:  # stored by a digestbot whose job functions moved: it was there
        return True


def is_running(scheduler: BackgroundScheduler | None) -> bool:
    """True when the scheduler is started, not paused, and its thread is alive."""
    if scheduler is None or scheduler.state != STATE_RUNNING:
        return False
    thread = getattr(scheduler, "_thread", None)
    return thread is None or thread.is_alive()
