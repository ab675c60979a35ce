"""The schema comes from Alembic, and the models agree with it."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from bot import db
from bot.errors import DatabaseError
from bot.models import Base


def test_migrations_create_every_table(fresh_db):
    tables = set(inspect(fresh_db.engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert db.current_revision(fresh_db.engine) == db.head_revision(fresh_db.engine)


def test_models_match_migrations(fresh_db):
    with fresh_db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}; run scripts/new_migration.py"


def test_upgrade_is_idempotent(fresh_db):
    before, after = db.upgrade(fresh_db.engine)
    assert before == after == db.head_revision(fresh_db.engine)


def test_empty_database_gives_a_clear_message(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'new.sqlite3'}")
    try:
        db.check_current(engine)
    except DatabaseError as exc:
        assert "no digestbot schema" in exc.message and "digestbot db upgrade" in str(exc.hint)
    else:
        raise AssertionError("an unmigrated database was accepted")


def test_database_behind_its_migrations(fresh_db):
    with fresh_db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'old0'")
    try:
        db.check_current(fresh_db.engine)
    except DatabaseError as exc:
        assert "at revision old0" in exc.message
    else:
        raise AssertionError("a database behind its migrations was accepted")


def test_downgrade_then_upgrade_round_trip(fresh_db):
    from alembic import command

    command.downgrade(db.alembic_config(fresh_db.engine), "base")
    assert "entries" not in inspect(fresh_db.engine).get_table_names()
    db.upgrade(fresh_db.engine)
    assert "entries" in inspect(fresh_db.engine).get_table_names()
