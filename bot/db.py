"""Engine, sessions and schema migrations.

The schema is owned by Alembic (``migrations/``, shipped inside the package as
``bot.migrations``). ``upgrade()`` brings a database to the newest revision;
``check_current()`` refuses to work on a database that is behind, with a
message that says which command fixes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from bot.config import sqlite_path
from bot.errors import DatabaseError

UPGRADE_HINT = "run `digestbot db upgrade` to create or update the schema"


def make_engine(url: str) -> Engine:
    """Create an engine; for SQLite, make the parent folder and set safe pragmas."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets the web app read while a send writes; foreign keys are off by
    # default in SQLite; busy_timeout makes writers wait instead of failing.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with factory() as session, session.begin():
        yield session


def alembic_config(engine: Engine) -> Config:
    """An Alembic config pointing at the packaged migrations, bound to engine."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("bot.migrations")))
    cfg.attributes["engine"] = engine
    return cfg


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        raise DatabaseError(f"cannot open the database: {exc.orig}",
                            hint="check DIGESTBOT_DATABASE_URL") from None


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate to ``revision``; returns (before, after) revisions."""
    before = current_revision(engine)
    command.upgrade(alembic_config(engine), revision)
    return before, current_revision(engine)


def check_current(engine: Engine) -> None:
    """Raise DatabaseError unless the database is at the newest migration."""
    current, head = current_revision(engine), head_revision(engine)
    if current == head:
        return
    if current is None:
        raise DatabaseError("the database has no digestbot schema yet", hint=UPGRADE_HINT)
    raise DatabaseError(
        f"the database schema is at revision {current}, this digestbot needs {head}",
        hint=UPGRADE_HINT,
    )
