"""The long-running process behind `digestbot run`: web app + scheduler.

uvicorn serves ``bot.web.create_app`` in the main thread; APScheduler's
BackgroundScheduler runs the jobs of ``bot.scheduler`` in worker threads.

Stopping (SIGTERM from Docker, Ctrl-C at a terminal): the signal sets the
stop flag at once, so a running send ends after the message in flight (a
stalled server's is released to pending a second later), a running poll
abandons its fetches, the embedding and the grouping are not waited for
(``bot.stopping``); uvicorn finishes the requests in progress (for up to
GRACEFUL_SHUTDOWN_SECONDS); then the scheduler is shut down waiting for its
workers, which by then only record what they did, so nothing is left
half-recorded, and the process exits 0. docs/security-local.md, Stopping.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from apscheduler.jobstores.base import BaseJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from bot import scheduler as sched
from bot.config import Settings
from bot.errors import BotError, ThemesError
from bot.ingest.feeds import active_urls
from bot.themes import DEFAULT_THEMES_LABEL, load_themes, names_warning

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SECONDS = 1  # a stop is over within 2 s (docs/security-local.md)


class Service:
    """The scheduler side of the process: start, health, stop."""

    def __init__(self, settings: Settings, engine: Engine, factory: sessionmaker[Session], *,
                 jobstore: BaseJobStore | None = None, send: Callable[..., Any] | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self.factory = factory
        self.context = sched.JobContext(settings, factory, send=send)
        self.scheduler: BackgroundScheduler | None = None
        self._jobstore = jobstore
        self._stopped = threading.Event()

    def start(self) -> None:
        """Start the scheduler: read the stored jobs, (re)add ours, then run."""
        sched.set_context(self.context)
        jobstore = self._jobstore or sched.make_jobstore(self.settings.database_url)
        scheduler = sched.build_scheduler(self.settings, jobstore)
        scheduler.start(paused=True)
        self.scheduler = scheduler
        self.context.scheduler = scheduler
        try:
            sched.schedule_jobs(scheduler, self.settings, self.factory)
        except BaseException:
            scheduler.shutdown(wait=False)
            raise
        scheduler.resume()
        log.info("scheduler started: polling %d feed(s) every %d min, next send %s",
                 len(active_urls(self.factory)), self.settings.poll_interval, self.next_send_label())
        self._warn_about_theme_names()

    def _warn_about_theme_names(self) -> None:
        """Themes without a name in DIGESTBOT_LANGUAGE fall back to their own; say so once."""
        try:
            themes = load_themes(self.settings.themes_file)
        except ThemesError:
            return  # reported where the themes are used, with its hint
        warning = names_warning(themes, self.settings.language,
                                self.settings.themes_file or DEFAULT_THEMES_LABEL)
        if warning:
            log.warning(warning)

    def next_send_label(self) -> str:
        job = self.scheduler.get_job(sched.SEND_JOB_ID) if self.scheduler else None
        when = getattr(job, "next_run_time", None) or sched.next_send_time(self.settings)
        return str(when.astimezone(self.settings.tz).isoformat(timespec="minutes"))

    @property
    def stopping(self) -> bool:
        return self.context.stopping.is_set()

    def request_stop(self) -> None:
        """Ask running jobs to wind down; safe to call from a signal handler."""
        self.context.stopping.set()

    def stop(self) -> None:
        """Stop the scheduler, waiting for the job in flight to finish its current step."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.request_stop()
        if self.scheduler is not None and self.scheduler.running:
            log.info("stopping the scheduler")
            self.scheduler.shutdown(wait=True)
        sched.set_context(None)
        log.info("scheduler stopped")

    def is_running(self) -> bool:
        return sched.is_running(self.scheduler) and not self.stopping

    def health_check(self) -> str | bool:
        """For /healthz: "running", or False (which makes it answer 503)."""
        return "running" if self.is_running() else False


class _Server(uvicorn.Server):
    """uvicorn's server, telling the service to wind down as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def create_web_app(settings: Settings, factory: sessionmaker[Session], service: Service) -> Any:
    """``bot.web.create_app`` with the scheduler's state added to /healthz."""
    from bot import web
    from bot.ingest.alerts import feed_health

    # a failing feed is reported, never unhealthy: the bot still works (issue 11)
    return web.create_app(settings, factory, health_checks={
        "scheduler": service.health_check, "feeds": lambda: feed_health(factory)})


def listening_socket(host: str, port: int) -> socket.socket:
    """The web app's socket, bound before anything else starts: a port that is
    taken (a second `digestbot run`, another program) stops the command at
    once with a message, before it polls a feed or sends a digest."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)  # without create_server's addition
        raise BotError(f"cannot listen on {host}:{port}: {reason}",
                       hint="is digestbot already running? stop it, or choose another --port "
                            "(DIGESTBOT_PORT)") from None
    return sock


def run(settings: Settings, engine: Engine, factory: sessionmaker[Session], *,
        host: str | None = None, port: int | None = None) -> None:
    """Serve the web app and run the schedule until SIGTERM or SIGINT."""
    host = host or settings.host
    port = port or settings.port
    sock = listening_socket(host, port)
    service = Service(settings, engine, factory)
    server: _Server | None = None

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        # before uvicorn takes the signals over, and again when it hands them
        # back after its own graceful shutdown (it re-raises what it caught)
        service.request_stop()
        if server is not None:
            server.should_exit = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        service.start()
        app = create_web_app(settings, factory, service)
        config = uvicorn.Config(app, host=host, port=port, log_config=None,
                                access_log=logging.getLogger().level <= logging.DEBUG,
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                                # the app reads X-Forwarded-For itself, from
                                # DIGESTBOT_TRUSTED_PROXIES only (bot.web.security.client_ip)
                                proxy_headers=False, server_header=False)
        server = _Server(config, on_exit=service.request_stop)
        if not service.stopping:
            log.info("digestbot running on http://%s:%d (base URL %s)", host, port, settings.base_url)
            server.run(sockets=[sock])
    finally:
        sock.close()
        service.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("digestbot stopped")
