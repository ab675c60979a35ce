"""Engine, sessions and schema migrations.

The schema is owned by Alembic (``migrations/``, shipped inside the package as
``bot.migrations``). ``upgrade()`` brings a database to the newest revision;
``check_current()`` refuses to work on a database that is behind, with a
message that says which command fixes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from bot.config import sqlite_path
from bot.errors import DatabaseError

if TYPE_CHECKING:  # Alembic is imported where a migration is read or run, not at every command
    from alembic.config import Config

UPGRADE_HINT = "run `digestbot db upgrade` to create or update the schema"
POSTGRES_HINT = "pip install 'digestbot[postgres]' (psycopg), and use a postgresql+psycopg:// URL"


def make_engine(url: str) -> Engine:
    """Create an engine; for SQLite, make the parent folder and set safe pragmas."""
    path = sqlite_path(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(f"cannot create the folder of the SQLite database {path}: {exc.strerror or exc}",
                                hint="check DIGESTBOT_DATABASE_URL, and that you may write there") from None
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    try:
        return create_engine(url, pool_pre_ping=True)
    except ImportError as exc:
        # SQLAlchemy imports the driver here; PostgreSQL's is an optional extra.
        scheme = url.split("://", 1)[0]
        hint = POSTGRES_HINT if scheme.startswith("postgres") else f"install the Python driver for {scheme}"
        raise DatabaseError(f"the database driver for {scheme}:// is not installed ({exc})",
                            hint=hint) from None


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


# Tables in digestbot's database that the models do not describe: APScheduler's job store
# (``bot.jobstore.JOBS_TABLE``), which migration 0008 creates from APScheduler's own definition.
UNMODELLED_TABLES = frozenset({"apscheduler_jobs"})


def include_in_comparison(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's ``include_object`` hook: compare the models with every table but ``UNMODELLED_TABLES``."""
    table = obj.table.name if type_ in ("index", "column", "unique_constraint", "foreign_key_constraint") else name
    return table not in UNMODELLED_TABLES


def alembic_config(engine: Engine) -> Config:
    """An Alembic config pointing at the packaged migrations, bound to engine."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("bot.migrations")))
    cfg.attributes["engine"] = engine
    return cfg


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        raise explain(exc) from None


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate to ``revision``; returns (before, after) revisions.

    Refuses, with a message, a database whose revision record is missing while
    the tables are there (Alembic would try to create them again) or names a
    revision this digestbot does not know (a newer digestbot migrated it)."""
    before = current_revision(engine)
    _check_known(engine, before)
    if before is None and _has_tables(engine):
        raise DatabaseError(
            "the database has digestbot's tables but no record of their schema revision "
            "(the alembic_version table is missing or empty)",
            hint="restore the database from a backup; or, if you know its tables are at "
                 f"revision {head_revision(engine)}, put that in alembic_version "
                 "(CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY); "
                 f"INSERT INTO alembic_version VALUES ('{head_revision(engine)}'))")
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), revision)
    except SQLAlchemyError as exc:
        raise explain(exc) from None
    return before, current_revision(engine)


_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def file_head() -> str | None:
    """The newest migration, read from the migration files' ``revision`` and
    ``down_revision`` lines (what Alembic finds, without loading Alembic);
    None unless there is exactly one head."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in resources.files("bot.migrations").joinpath("versions").iterdir():
        if not path.name.endswith(".py") or path.name.startswith("__"):
            continue
        for key, value in _REVISION.findall(path.read_text(encoding="utf-8")):
            (revisions if key == "revision" else parents).add(value)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _stored_revision(engine: Engine) -> str | None:
    """The revision alembic_version records, by plain SQL; None when that
    cannot be read simply (no table yet, several rows): Alembic decides then."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except SQLAlchemyError:
        return None
    return rows[0] if len(rows) == 1 else None


def check_current(engine: Engine) -> None:
    """Raise DatabaseError unless the database is at the newest migration.

    The usual case (at the head) is answered from the migration files and one
    query; Alembic is loaded only to explain a database that is not."""
    stored = _stored_revision(engine)
    if stored is not None and stored == file_head():
        return
    current, head = current_revision(engine), head_revision(engine)
    if current == head:
        return
    _check_known(engine, current)
    if current is None:
        raise DatabaseError("the database has no digestbot schema yet", hint=UPGRADE_HINT)
    raise DatabaseError(
        f"the database schema is at revision {current}, this digestbot needs {head}",
        hint=UPGRADE_HINT,
    )


def _check_known(engine: Engine, current: str | None) -> None:
    """A revision this digestbot's migrations do not contain is refused: no
    upgrade path leads from it."""
    if current is None:
        return
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        known = ScriptDirectory.from_config(alembic_config(engine)).get_revision(current)
    except CommandError:
        known = None
    if known is None:
        raise DatabaseError(
            f"the database's schema is at revision {current}, which this digestbot does not know",
            hint="a newer digestbot may have migrated it: run that version, or restore the "
                 "database from a backup made before the upgrade")


def _has_tables(engine: Engine) -> bool:
    try:
        return bool({"feeds", "entries", "digests"} & set(inspect(engine).get_table_names()))
    except SQLAlchemyError as exc:
        raise explain(exc) from None


# --- database failures, in words ------------------------------------------------

_FAILURES = (
    # (words in the driver's message, what it means, what to do)
    (("readonly", "read-only"), "the database is read-only for this user",
     "digestbot writes to it (polls, subscribers, sends): make the database file and its folder "
     "writable by the user running digestbot"),
    (("file is not a database", "malformed", "corrupt"), "the database file is damaged or is not a "
     "digestbot database", "check that DIGESTBOT_DATABASE_URL names the right file; restore a damaged "
     "one from a backup (`sqlite3 FILE .recover` may save its data)"),
    (("unable to open",), "the database file cannot be opened",
     "check that DIGESTBOT_DATABASE_URL names a file in a folder that exists and that this user may "
     "read and write"),
    (("locked",), "the database is locked by another process",
     "another digestbot holds a long write lock; try again in a minute"),
    (("disk i/o", "disk is full", "no space"), "the disk holding the database failed or is full",
     "check the free space and the health of the disk"),
)


def explain(exc: BaseException) -> DatabaseError:
    """A DatabaseError with a hint for a failure of the database itself (a
    read-only, damaged or unreachable database): never a traceback."""
    if isinstance(exc, DatabaseError):
        return exc
    if isinstance(exc, NoSuchModuleError):
        return DatabaseError(f"unknown kind of database: {exc}",
                             hint="use a sqlite:/// or postgresql+psycopg:// URL")
    detail = str(exc.orig if isinstance(exc, DBAPIError) else exc).strip().splitlines()
    text = detail[0] if detail else type(exc).__name__
    lowered = text.lower()
    for words, meaning, hint in _FAILURES:
        if any(word in lowered for word in words):
            return DatabaseError(f"{meaning}: {text}", hint=hint)
    if isinstance(exc, OperationalError):
        return DatabaseError(f"cannot use the database: {text}",
                             hint="check DIGESTBOT_DATABASE_URL and that the database server is running")
    return DatabaseError(f"the database refused an operation: {text}",
                         hint="if this persists, check the database with its own tools "
                              "(sqlite3 FILE 'PRAGMA integrity_check')")
