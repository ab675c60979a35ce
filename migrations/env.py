"""Alembic environment: runs migrations on the engine digestbot hands over."""

from alembic import context
from sqlalchemy import create_engine

from bot.models import Base

config = context.config
target_metadata = Base.metadata


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # APScheduler keeps its job store in the same database; it owns that table.
    return not (type_ == "table" and name == "apscheduler_jobs")


def run_migrations() -> None:
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            compare_type=True,
            render_as_batch=connection.dialect.name == "sqlite",
            include_object=include_object,
        )
        context.run_migrations()


run_migrations()
