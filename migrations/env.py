"""Alembic environment: runs migrations on the engine digestbot hands over."""

from alembic import context
from sqlalchemy import create_engine

from bot.db import include_in_comparison
from bot.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # A batch migration rebuilds a table (copy, drop, rename). With foreign
            # keys on, dropping the old table would cascade-delete its children's
            # rows, so they are off while migrating (a no-op inside a transaction,
            # hence before it) and checked before they are turned on again.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                context.configure(
                    connection=connection,
                    target_metadata=target_metadata,
                    compare_type=True,
                    render_as_batch=sqlite,
                    include_object=include_in_comparison,
                )
                context.run_migrations()
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the migration broke {len(broken)} foreign key(s): {broken[:5]}")
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()

run_migrations()
