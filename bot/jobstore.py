"""APScheduler's persistent job store, in our own database: the store the
scheduler uses, and a read of its table that needs no scheduler (for
``digestbot status`` and tests), kept apart from the jobs (``bot.scheduler``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import Column, Engine, Float, MetaData, String, Table, select
from sqlalchemy.exc import SQLAlchemyError

from bot import db

JOBS_TABLE = "apscheduler_jobs"


def make_jobstore(database_url: str) -> SQLAlchemyJobStore:
    """The persistent job store, on an engine of its own (the store disposes it at shutdown)."""
    return SQLAlchemyJobStore(engine=db.make_engine(database_url), tablename=JOBS_TABLE)


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
