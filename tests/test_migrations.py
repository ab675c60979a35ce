"""The schema comes from Alembic, and the models agree with it, on SQLite and PostgreSQL."""

from __future__ import annotations

import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from helpers import any_db
from sqlalchemy import inspect

from bot import db
from bot.cli import cli
from bot.errors import DatabaseError
from bot.models import Base


@any_db
def test_migrations_from_nothing_give_the_models_schema(db_url):
    engine = db.make_engine(db_url)
    try:
        assert db.upgrade(engine) == (None, db.head_revision(engine))
        assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


@any_db
def test_migrations_create_every_table(fresh_db):
    tables = set(inspect(fresh_db.engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert db.current_revision(fresh_db.engine) == db.head_revision(fresh_db.engine)


@any_db
def test_models_match_migrations(fresh_db):
    with fresh_db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}; run scripts/new_migration.py"


@any_db
def test_upgrade_is_idempotent(fresh_db):
    before, after = db.upgrade(fresh_db.engine)
    assert before == after == db.head_revision(fresh_db.engine)


@any_db
def test_empty_database_gives_a_clear_message(db_url):
    engine = db.make_engine(db_url)
    try:
        db.check_current(engine)
    except DatabaseError as exc:
        assert "no digestbot schema" in exc.message and "digestbot db upgrade" in str(exc.hint)
    else:
        raise AssertionError("an unmigrated database was accepted")
    finally:
        engine.dispose()


@any_db
def test_database_behind_its_migrations(fresh_db):
    with fresh_db.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'old0'")
    try:
        db.check_current(fresh_db.engine)
    except DatabaseError as exc:
        assert "at revision old0" in exc.message
    else:
        raise AssertionError("a database behind its migrations was accepted")


@any_db
def test_downgrade_then_upgrade_round_trip(fresh_db):
    from alembic import command

    command.downgrade(db.alembic_config(fresh_db.engine), "base")
    assert "entries" not in inspect(fresh_db.engine).get_table_names()
    db.upgrade(fresh_db.engine)
    assert "entries" in inspect(fresh_db.engine).get_table_names()


@pytest.mark.parametrize("url", ["postgresql+psycopg://bot@db.example.org/digest",
                                 "postgresql://bot@db.example.org/digest"])
def test_a_missing_postgres_driver_says_how_to_install_it(monkeypatch, tmp_path, url):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["db", "upgrade"], env={"DIGESTBOT_DATABASE_URL": url})
    assert result.exit_code == 1, result.output
    assert "database driver for postgresql+psycopg:// is not installed" in result.output
    assert "pip install 'digestbot[postgres]'" in result.output
    assert "Traceback" not in result.output
