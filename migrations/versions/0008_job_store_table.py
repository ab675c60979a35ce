"""the scheduler's job store table, created by the migrations rather than at start

APScheduler's SQLAlchemy job store creates its table when the scheduler starts,
if it is missing. Two ``digestbot run`` processes starting at once on a database
where the service never ran both found it missing and both created it; on
PostgreSQL the second failed ("duplicate key value violates unique constraint
pg_type_typname_nsp_index") and that process exited. Created here, once, the
store finds the table and runs no DDL. The definition is APScheduler's own, so
the two can never disagree; a database where the service already ran keeps
the table it has.

Revision ID: 0008
Revises: 0007
"""
from collections.abc import Sequence

from alembic import op
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JOBS_TABLE = "apscheduler_jobs"  # bot.jobstore.JOBS_TABLE (a migration must not change with the package)


def upgrade() -> None:
    bind = op.get_bind()
    SQLAlchemyJobStore(engine=bind.engine, tablename=JOBS_TABLE).jobs_t.create(bind, checkfirst=True)


def downgrade() -> None:
    # Before 0008 the job store created this table itself: leaving it is what 0007 had.
    pass
